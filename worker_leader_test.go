package errand_test

import (
	"context"
	"errors"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/sqlite"
)

// testLeaderTTL is long enough that a leader stalled for a while on a busy
// machine (the race detector, shared cores) still renews in time: a shorter
// TTL lets leadership move between workers in the middle of a test.
const testLeaderTTL = 1500 * time.Millisecond

// flakyLeaderStore is a real SQLite store whose leadership renewals fail
// once failing is set, as when a leader is cut off from its database.
type flakyLeaderStore struct {
	*sqlite.Store
	failing atomic.Bool
}

func (s *flakyLeaderStore) LeaderElect(ctx context.Context, p *errand.LeaderElectParams) (*errand.Leader, error) {
	if s.failing.Load() {
		return nil, errors.New("elect leader: connection reset")
	}
	return s.Store.LeaderElect(ctx, p)
}

// leaderProcess opens the SQLite file at path as a separate worker process
// would, and starts a worker that serves queue "work", polls once an hour
// (so that no claim sweeps behind the leader's back) and competes for
// leadership with cfg's TTL (default testLeaderTTL).
func leaderProcess(t *testing.T, path string, cfg errand.WorkerConfig) (*errand.Worker, *flakyLeaderStore) {
	t.Helper()
	s, err := sqlite.Open(context.Background(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	fs := &flakyLeaderStore{Store: s}
	c, err := errand.NewClient(fs, errand.Config{Kinds: kindsOf([]testKind{{
		Name:    "noop",
		Handler: errand.HandlerFunc(func(context.Context, *errand.Job) error { return nil }),
	}})})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Queues = map[string]int{"work": 1}
	cfg.PollInterval = time.Hour
	if cfg.LeaderTTL == 0 {
		cfg.LeaderTTL = testLeaderTTL
	}
	if cfg.SweepInterval == 0 {
		cfg.SweepInterval = 50 * time.Millisecond
	}
	w, err := c.NewWorker(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Stop(context.Background()) })
	return w, fs
}

func leaders(ws ...*errand.Worker) []*errand.Worker {
	var ls []*errand.Worker
	for _, w := range ws {
		if w.Leading() {
			ls = append(ls, w)
		}
	}
	return ls
}

func TestLeadershipOneAtATimeAndHandover(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "errand.db")
	a, _ := leaderProcess(t, path, errand.WorkerConfig{})
	b, _ := leaderProcess(t, path, errand.WorkerConfig{})
	observer := newClient(t, openStoreAt(t, path, nil), errand.Config{})

	// Over two TTLs (six renewals), never two leaders; and one as soon as
	// the first election is through.
	var first *errand.Worker
	for end := time.Now().Add(2 * testLeaderTTL); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		ls := leaders(a, b)
		if len(ls) > 1 {
			t.Fatal("both workers lead at once")
		}
		if len(ls) == 1 && first == nil {
			first = ls[0]
		}
		if first != nil && len(ls) == 1 && ls[0] != first {
			t.Fatal("leadership moved although the leader kept renewing")
		}
	}
	if first == nil {
		t.Fatalf("no worker led within %s", 2*testLeaderTTL)
	}
	l, err := observer.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if l.Holder != first.ID() || l.Name != errand.LeaderName {
		t.Errorf("store's leader %+v, want %s", l, first.ID())
	}

	other := b
	if first == b {
		other = a
	}
	if err := first.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	if first.Leading() {
		t.Error("a stopped worker still leads")
	}
	// A clean stop resigns: the other worker takes over at its next
	// election, not when the lease would have expired.
	workerWaitFor(t, 10*time.Second, other.Leading)
	t.Logf("handover took %s", time.Since(stopped).Round(time.Millisecond))
	if l, err := observer.Leader(ctx); err != nil || l.Holder != other.ID() {
		t.Errorf("store's leader %+v (%v), want %s", l, err, other.ID())
	}
}

// TestLeaderStopsBeforeLeaseEndsWhenRenewalFails: a leader that cannot
// renew gives up while the store still shows its lease, so no other worker
// can be elected while it still believes it leads.
func TestLeaderStopsBeforeLeaseEndsWhenRenewalFails(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "errand.db")
	// The worker stops leading a third of the TTL before the store's lease
	// ends: the TTL is long enough that this margin outlasts a stall of
	// the test between seeing the worker stop and reading the lease.
	const ttl = 1500 * time.Millisecond
	w, fs := leaderProcess(t, path, errand.WorkerConfig{LeaderTTL: ttl})
	observer := openStoreAt(t, path, nil)
	workerWaitFor(t, 10*time.Second, w.Leading)

	fs.failing.Store(true)
	cut := time.Now()
	for {
		// The time is read before Leading, so that a stall between the two
		// cannot make a worker that stopped in time look late.
		now := time.Now()
		if !w.Leading() {
			break
		}
		if now.Sub(cut) > ttl {
			t.Fatalf("still leading %s after renewals began to fail, a whole TTL", now.Sub(cut))
		}
		time.Sleep(2 * time.Millisecond)
	}
	l, err := observer.LeaderGet(ctx, &errand.LeaderGetParams{Name: errand.LeaderName})
	if err != nil {
		t.Fatalf("the lease ended before the leader stopped leading: %v", err)
	}
	if l.Holder != w.ID() {
		t.Fatalf("store's leader is %s, want the cut-off worker %s", l.Holder, w.ID())
	}
	margin := time.Until(l.Until)
	t.Logf("stopped leading %s before the lease's end", margin.Round(time.Millisecond))

	// The lease then expires in the store, and the worker never claimed to
	// lead meanwhile.
	for {
		if w.Leading() {
			t.Fatal("the worker leads again while its renewals fail")
		}
		_, err := observer.LeaderGet(ctx, &errand.LeaderGetParams{Name: errand.LeaderName})
		if errors.Is(err, errand.ErrNotFound) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if time.Since(cut) > 5*ttl {
			t.Fatal("the lease never expired")
		}
		time.Sleep(5 * time.Millisecond)
	}

	// Once the store answers again, the worker is elected again.
	fs.failing.Store(false)
	workerWaitFor(t, 10*time.Second, w.Leading)
}

// TestLeaderSweepsQueueNobodyClaims: the leader recovers an expired lease
// in a queue no worker serves, with no claim to sweep it.
func TestLeaderSweepsQueueNobodyClaims(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "errand.db")
	w, _ := leaderProcess(t, path, errand.WorkerConfig{})
	workerWaitFor(t, 10*time.Second, func() bool { return w.Leading() && w.Stats().IdleClaims == 1 })

	// Another process enqueues into "orphans" and claims two jobs there
	// under a short lease, then dies.
	st := openStoreAt(t, path, nil)
	producer := newClient(t, st, errand.Config{})
	retried := enqueue(t, producer, "noop", &errand.EnqueueOpts{Queue: "orphans", MaxAttempts: 3})
	final := enqueue(t, producer, "noop", &errand.EnqueueOpts{Queue: "orphans", MaxAttempts: 1})
	claimed, err := st.JobClaimMany(ctx, &errand.JobClaimParams{Queues: []string{"orphans"}, Limit: 2, Lease: 100 * time.Millisecond, Owner: "dead-process"})
	if err != nil || len(claimed) != 2 {
		t.Fatalf("claim: %d jobs, %v", len(claimed), err)
	}
	claims := w.Stats().Claims

	workerWaitFor(t, 10*time.Second, func() bool {
		return getJob(t, producer, retried.ID).State == errand.StateRetrying && getJob(t, producer, final.ID).State == errand.StateDead
	})
	if got := w.Stats().Claims; got != claims {
		t.Fatalf("the worker claimed %d times meanwhile; the sweep must not depend on a claim", got-claims)
	}
	for _, id := range []string{retried.ID, final.ID} {
		j := getJob(t, producer, id)
		if cs := classes(j.Errors); len(cs) != 1 || cs[0] != errand.ClassLeaseExpired {
			t.Errorf("job %s history %v, want one lease_expired entry", id, cs)
		}
	}
}

// TestLeaderPrunesStoppedWorkers: the leader deletes registry rows of
// workers stopped longer than WorkerPruneAfter, and keeps the rest.
func TestLeaderPrunesStoppedWorkers(t *testing.T) {
	ctx := context.Background()
	clock := newTestClock()
	path := filepath.Join(t.TempDir(), "errand.db")
	st := openStoreAt(t, path, clock)
	for _, id := range []string{"old", "recent"} {
		if _, err := st.WorkerRegister(ctx, &errand.WorkerRegisterParams{ID: id, HeartbeatInterval: time.Second}); err != nil {
			t.Fatal(err)
		}
		if err := st.WorkerStop(ctx, &errand.WorkerStopParams{ID: id}); err != nil {
			t.Fatal(err)
		}
		clock.Advance(2 * time.Hour)
	}
	clock.Advance(errand.WorkerPruneAfter - 3*time.Hour) // old: stopped 24h+1h ago; recent: 24h-1h ago

	c := handlerClient(t, st, func(context.Context, *errand.Job) error { return nil })
	// A long TTL: the store's clock stands still, and the check below that
	// the worker leads must not catch it between a late renewal and the next.
	w, err := c.NewWorker(errand.WorkerConfig{PollInterval: time.Hour, LeaderTTL: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer w.Stop(ctx)
	workerWaitFor(t, 10*time.Second, func() bool { return registryRecord(t, c, "old") == nil })
	if registryRecord(t, c, "recent") == nil || registryRecord(t, c, w.ID()) == nil {
		t.Error("the leader pruned a worker it should have kept")
	}
	if !w.Leading() {
		t.Error("a worker pruned without leading")
	}
}

func TestWorkerConfigLeadership(t *testing.T) {
	c := handlerClient(t, openStore(t, nil), func(context.Context, *errand.Job) error { return nil })
	for _, cfg := range []errand.WorkerConfig{
		{LeaderTTL: -time.Second},
		{LeaderTTL: 10 * time.Millisecond},
		{SweepInterval: -time.Second},
	} {
		_, err := c.NewWorker(cfg)
		var ie *errand.InputError
		if !errors.As(err, &ie) {
			t.Errorf("NewWorker(%+v): %v, want an InputError", cfg, err)
		}
	}
}
