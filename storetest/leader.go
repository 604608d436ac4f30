package storetest

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
)

var leaderCases = []testCase{
	{"ElectRenewExpire", testLeaderElectRenewExpire},
	{"Resign", testLeaderResign},
	{"Names", testLeaderNames},
	{"InvalidParams", testLeaderInvalidParams},
	{"OneLeaderAcrossStores", testLeaderAcrossStores},
}

const leaderTTL = 15 * time.Second

func (e *env) elect(name, holder string) *errandtype.Leader {
	e.t.Helper()
	l, err := e.s.LeaderElect(e.ctx, &errandstore.LeaderElectParams{Name: name, Holder: holder, TTL: leaderTTL})
	if err != nil {
		e.t.Fatalf("LeaderElect(%s, %s): %v", name, holder, err)
	}
	return l
}

func wantLeader(t *testing.T, got *errandtype.Leader, holder string, leading bool, elected, until time.Time) {
	t.Helper()
	if got.Holder != holder || got.Leading != leading || !got.Elected.Equal(elected) || !got.Until.Equal(until) {
		t.Fatalf("leader = {holder %s leading %v elected %s until %s}, want {holder %s leading %v elected %s until %s}",
			got.Holder, got.Leading, got.Elected, got.Until, holder, leading, elected, until)
	}
}

func testLeaderElectRenewExpire(t *testing.T, h harness) {
	e := open(t, h)
	t0 := e.now()
	if _, err := e.s.LeaderGet(e.ctx, &errandstore.LeaderGetParams{Name: "errand"}); !errors.Is(err, errandtype.ErrNotFound) {
		t.Fatalf("LeaderGet with no leader: %v, want ErrNotFound", err)
	}
	wantLeader(t, e.elect("errand", "a"), "a", true, t0, t0.Add(leaderTTL))

	// Another candidate loses while the lease is live, even at its last
	// microsecond.
	e.clock.Advance(leaderTTL - time.Microsecond)
	wantLeader(t, e.elect("errand", "b"), "a", false, t0, t0.Add(leaderTTL))

	// The holder renews: same election time, later end.
	t1 := e.now()
	wantLeader(t, e.elect("errand", "a"), "a", true, t0, t1.Add(leaderTTL))
	got, err := e.s.LeaderGet(e.ctx, &errandstore.LeaderGetParams{Name: "errand"})
	if err != nil {
		t.Fatal(err)
	}
	wantLeader(t, got, "a", false, t0, t1.Add(leaderTTL))

	// At exactly the lease's end it is expired: another candidate takes it.
	e.clock.Set(t1.Add(leaderTTL))
	if _, err := e.s.LeaderGet(e.ctx, &errandstore.LeaderGetParams{Name: "errand"}); !errors.Is(err, errandtype.ErrNotFound) {
		t.Fatalf("LeaderGet at expiry: %v, want ErrNotFound", err)
	}
	t2 := e.now()
	wantLeader(t, e.elect("errand", "b"), "b", true, t2, t2.Add(leaderTTL))
	// The old holder cannot renew what it lost.
	wantLeader(t, e.elect("errand", "a"), "b", false, t2, t2.Add(leaderTTL))
}

func testLeaderResign(t *testing.T, h harness) {
	e := open(t, h)
	e.elect("errand", "a")
	// Resigning someone else's lease changes nothing.
	if err := e.s.LeaderResign(e.ctx, &errandstore.LeaderResignParams{Name: "errand", Holder: "b"}); err != nil {
		t.Fatal(err)
	}
	if l := e.elect("errand", "b"); l.Leading {
		t.Fatal("b leads after resigning a lease it did not hold")
	}
	if err := e.s.LeaderResign(e.ctx, &errandstore.LeaderResignParams{Name: "errand", Holder: "a"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.s.LeaderGet(e.ctx, &errandstore.LeaderGetParams{Name: "errand"}); !errors.Is(err, errandtype.ErrNotFound) {
		t.Fatalf("LeaderGet after resign: %v, want ErrNotFound", err)
	}
	t0 := e.now()
	wantLeader(t, e.elect("errand", "b"), "b", true, t0, t0.Add(leaderTTL))
	// Resigning twice is not an error.
	for range 2 {
		if err := e.s.LeaderResign(e.ctx, &errandstore.LeaderResignParams{Name: "errand", Holder: "b"}); err != nil {
			t.Fatal(err)
		}
	}
}

func testLeaderNames(t *testing.T, h harness) {
	e := open(t, h)
	t0 := e.now()
	wantLeader(t, e.elect("errand", "a"), "a", true, t0, t0.Add(leaderTTL))
	wantLeader(t, e.elect("cron", "b"), "b", true, t0, t0.Add(leaderTTL))
}

func testLeaderInvalidParams(t *testing.T, h harness) {
	e := open(t, h)
	for _, p := range []*errandstore.LeaderElectParams{
		{Name: "", Holder: "a", TTL: leaderTTL},
		{Name: "errand", Holder: "", TTL: leaderTTL},
		{Name: "errand", Holder: "a", TTL: 0},
	} {
		if _, err := e.s.LeaderElect(e.ctx, p); !errors.Is(err, errandtype.ErrInvalid) {
			t.Errorf("LeaderElect(%+v): %v, want ErrInvalid", p, err)
		}
	}
	if _, err := e.s.LeaderGet(e.ctx, &errandstore.LeaderGetParams{Name: "errand"}); !errors.Is(err, errandtype.ErrNotFound) {
		t.Fatalf("an invalid election left a leader: %v", err)
	}
}

// testLeaderAcrossStores races candidates on two stores: exactly one leads.
func testLeaderAcrossStores(t *testing.T, h harness) {
	e := open(t, h)
	stores := []errandstore.Store{e.s, e.second()}
	var (
		mu      sync.Mutex
		leaders []string
		wg      sync.WaitGroup
		start   = make(chan struct{})
	)
	for i := range 8 {
		holder := string(rune('a' + i))
		wg.Go(func() {
			<-start
			l, err := stores[i%2].LeaderElect(e.ctx, &errandstore.LeaderElectParams{Name: "errand", Holder: holder, TTL: leaderTTL})
			if err != nil {
				t.Errorf("LeaderElect(%s): %v", holder, err)
				return
			}
			if l.Leading {
				mu.Lock()
				leaders = append(leaders, holder)
				mu.Unlock()
			}
		})
	}
	close(start)
	wg.Wait()
	if len(leaders) != 1 {
		t.Fatalf("leaders %v, want exactly one", leaders)
	}
	got, err := e.s.LeaderGet(e.ctx, &errandstore.LeaderGetParams{Name: "errand"})
	if err != nil {
		t.Fatal(err)
	}
	if got.Holder != leaders[0] {
		t.Fatalf("LeaderGet holder %s, but %s was told it leads", got.Holder, leaders[0])
	}
}
