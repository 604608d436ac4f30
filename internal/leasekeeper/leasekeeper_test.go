package leasekeeper

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
	"github.com/errandhq/errand/internal/clock"
)

// answers is a Heartbeater that answers each lease by its job id: lost,
// cancel requested, or renewed; fail makes every call fail.
type answers struct {
	mu        sync.Mutex
	lost      map[string]bool
	cancelled map[string]bool
	fail      bool
	calls     int
}

func (s *answers) JobHeartbeatMany(_ context.Context, p *errandstore.JobHeartbeatParams) ([]errandstore.HeartbeatResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	if s.fail {
		return nil, errors.New("store away")
	}
	rs := make([]errandstore.HeartbeatResult, len(p.Leases))
	for i, l := range p.Leases {
		switch {
		case s.lost[l.ID]:
			rs[i].Err = errandtype.ErrLeaseLost
		case s.cancelled[l.ID]:
			rs[i].CancelRequested = true
		}
	}
	return rs, nil
}

func (s *answers) callCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

// loss is where a lease's loss lands.
type loss struct {
	mu    sync.Mutex
	cause error
}

func (l *loss) err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.cause
}

// held returns a lease on job id, renewed now, and where its loss lands.
func held(id string) (*Lease, *loss) {
	token := "t-" + id
	lost := &loss{}
	l := &Lease{Job: &errandtype.Job{ID: id, LeaseToken: &token}, Renewed: time.Now()}
	l.Lose = func(err error) {
		lost.mu.Lock()
		defer lost.mu.Unlock()
		lost.cause = err
	}
	return l, lost
}

// TestKeeperRenewsAndReportsLoss: one call per tick renews every lease;
// a lease the store reports lost is dropped with ErrLeaseLost, a cancel
// request cancels with ErrJobCancelled and keeps the lease.
func TestKeeperRenewsAndReportsLoss(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &answers{lost: map[string]bool{"b": true}, cancelled: map[string]bool{"c": true}}
		k := New(s, clock.System{}, slog.New(slog.DiscardHandler), 30*time.Second)
		defer k.Stop()
		a, aErr := held("a")
		b, bErr := held("b")
		c, cErr := held("c")
		for _, l := range []*Lease{a, b, c} {
			k.Hold(l)
		}
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if s.callCount() != 1 {
			t.Fatalf("%d heartbeat calls after one tick, want 1", s.callCount())
		}
		if aErr.err() != nil || !k.Holds("a") {
			t.Errorf("renewed lease: lost with %v, held %v", aErr.err(), k.Holds("a"))
		}
		if !errors.Is(bErr.err(), errandtype.ErrLeaseLost) || k.Holds("b") {
			t.Errorf("lost lease: %v, held %v; want ErrLeaseLost and dropped", bErr.err(), k.Holds("b"))
		}
		if !errors.Is(cErr.err(), errandtype.ErrJobCancelled) || !k.Holds("c") {
			t.Errorf("cancelled job: %v, held %v; want ErrJobCancelled and still held", cErr.err(), k.Holds("c"))
		}
		if renewed := k.Release(a); !renewed.Equal(time.Now()) {
			t.Errorf("released lease last renewed %v, want the tick's %v", renewed, time.Now())
		}
	})
}

// TestKeeperEndsUnrenewedLease: a lease no heartbeat renewed for a whole
// lease is lost at its end, not a tick later.
func TestKeeperEndsUnrenewedLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &answers{fail: true}
		k := New(s, clock.System{}, slog.New(slog.DiscardHandler), 30*time.Second)
		defer k.Stop()
		a, aErr := held("a")
		start := time.Now()
		k.Hold(a)
		time.Sleep(30*time.Second - time.Millisecond)
		synctest.Wait()
		if aErr.err() != nil {
			t.Fatalf("lease lost with %v before its end", aErr.err())
		}
		time.Sleep(time.Millisecond)
		synctest.Wait()
		if !errors.Is(aErr.err(), errandtype.ErrLeaseLost) {
			t.Fatalf("lease at its end %v after the claim: %v, want ErrLeaseLost", time.Since(start), aErr.err())
		}
	})
}

// TestKeeperRetriesFailedRenewal: a renewal that failed is tried again
// within a second, not a tick later, so a store back within the lease (a
// database failover) keeps it: here the ticks at 20s and 30s fail, and the
// next, at 40s, would come as the lease renewed at 10s ends.
func TestKeeperRetriesFailedRenewal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &answers{}
		k := New(s, clock.System{}, slog.New(slog.DiscardHandler), 30*time.Second)
		defer k.Stop()
		a, aErr := held("a")
		k.Hold(a)
		time.Sleep(15 * time.Second) // renewed at 10s
		synctest.Wait()
		s.mu.Lock()
		s.fail = true // the store goes away at 15s
		s.mu.Unlock()
		time.Sleep(16 * time.Second)
		synctest.Wait()
		s.mu.Lock()
		s.fail = false // and is back at 31s
		failed := s.calls
		s.mu.Unlock()
		time.Sleep(1100 * time.Millisecond)
		synctest.Wait()
		if calls := s.callCount(); calls <= failed {
			t.Fatalf("no renewal within 1.1s of the store's return (%d calls)", calls)
		}
		time.Sleep(10 * time.Second) // past 40s
		synctest.Wait()
		if aErr.err() != nil || !k.Holds("a") {
			t.Fatalf("lease lost with %v after the store came back within it; held %v", aErr.err(), k.Holds("a"))
		}
	})
}

// TestKeeperRetryBacksOff: while the store stays away, the retries wait
// longer each time, up to a second.
func TestKeeperRetryBacksOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &answers{fail: true}
		k := New(s, clock.System{}, slog.New(slog.DiscardHandler), 30*time.Second)
		defer k.Stop()
		a, _ := held("a")
		k.Hold(a)
		// The tick at 10s fails; retries at 10.1, 10.3, 10.7, 11.5, 12.5,
		// then every second, and the 20s tick.
		time.Sleep(20*time.Second - time.Millisecond)
		synctest.Wait()
		if calls := s.callCount(); calls < 12 || calls > 16 {
			t.Fatalf("%d renewals in the 10s after the first failed, want a retry doubling from 100ms to 1s (about 14)", calls)
		}
	})
}
