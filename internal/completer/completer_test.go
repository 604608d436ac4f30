package completer

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
	"github.com/errandhq/errand/internal/clock"
)

// heldOutcomes is a store whose JobRecordOutcomes waits until the test
// releases it, reporting each call on started.
type heldOutcomes struct {
	started chan heldCall
}

// testSlots are the slots of no queue.
type testSlots struct{}

func (*testSlots) Free() {}
func (*testSlots) Wake() {}

type heldCall struct {
	size    int
	release chan struct{}
}

func (s *heldOutcomes) JobRecordOutcomes(ctx context.Context, p *errandstore.JobRecordOutcomesParams) ([]errandstore.OutcomeResult, error) {
	c := heldCall{size: len(p.Outcomes), release: make(chan struct{})}
	s.started <- c
	<-c.release
	rs := make([]errandstore.OutcomeResult, len(p.Outcomes))
	for i := range rs {
		rs[i] = errandstore.OutcomeResult{State: errandtype.StateSucceeded}
	}
	return rs, nil
}

// TestBatcherOverlapsFullBatches checks that a lone outcome is
// written at once, that while a write is in flight another starts only with
// a full batch, that no more than maxOutcomeWrites run at once, and that
// every outcome is written exactly once.
func TestBatcherOverlapsFullBatches(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const later = 2*maxOutcomeBatch + 50
		store := &heldOutcomes{started: make(chan heldCall, later+1)}
		b := New[*testSlots](Config{Store: store, Running: new(atomic.Int64), Writes: new(atomic.Int64), Timeout: time.Hour, Clock: clock.System{}})
		b.Start(t.Context())

		var senders sync.WaitGroup
		send := func(i int) {
			senders.Go(func() {
				o := &errandstore.JobOutcome{JobLease: errandstore.JobLease{ID: fmt.Sprintf("j%03d", i), LeaseToken: "t"}, Kind: errandstore.OutcomeSucceeded}
				if _, err := b.Write(t.Context(), o, time.Now().Add(time.Hour)); err != nil {
					t.Errorf("write: %v", err)
				}
			})
		}
		// started returns the writes begun since it was last called, once
		// every goroutine waits.
		started := func() []heldCall {
			synctest.Wait()
			var cs []heldCall
			for len(store.started) > 0 {
				cs = append(cs, <-store.started)
			}
			return cs
		}

		send(0)
		inFlight := started()
		if len(inFlight) != 1 || inFlight[0].size != 1 {
			t.Fatalf("writes for a lone outcome: %+v, want one of it alone", inFlight)
		}
		for i := 1; i <= later; i++ {
			send(i)
		}
		written := 0
		for len(inFlight) > 0 {
			for _, c := range started() {
				if len(inFlight) > 0 && c.size != maxOutcomeBatch {
					t.Fatalf("a write of %d outcomes started beside another; want only full batches of %d to", c.size, maxOutcomeBatch)
				}
				inFlight = append(inFlight, c)
			}
			if len(inFlight) > maxOutcomeWrites {
				t.Fatalf("%d writes in flight, want at most %d", len(inFlight), maxOutcomeWrites)
			}
			if written == 0 && len(inFlight) != maxOutcomeWrites {
				t.Fatalf("%d writes in flight with %d outcomes waiting, want %d", len(inFlight), later, maxOutcomeWrites)
			}
			written += inFlight[0].size
			close(inFlight[0].release)
			inFlight = inFlight[1:]
			if len(inFlight) == 0 {
				inFlight = started()
			}
		}
		senders.Wait()
		b.Stop()
		if written != later+1 {
			t.Errorf("wrote %d outcomes, want %d", written, later+1)
		}
	})
}

// TestBatcherWaitEndsWithLease checks that an outcome the batcher
// cannot take yet (every write in flight and a full batch waiting) is given
// up at its lease's end, and that one it can take is written whatever its
// deadline.
func TestBatcherWaitEndsWithLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &heldOutcomes{started: make(chan heldCall, 4*maxOutcomeBatch)}
		b := New[*testSlots](Config{Store: store, Running: new(atomic.Int64), Writes: new(atomic.Int64), Timeout: time.Hour, Clock: clock.System{}})
		b.Start(t.Context())
		var senders sync.WaitGroup
		send := func(i int) {
			senders.Go(func() {
				o := &errandstore.JobOutcome{JobLease: errandstore.JobLease{ID: fmt.Sprintf("j%04d", i), LeaseToken: "t"}, Kind: errandstore.OutcomeSucceeded}
				if _, err := b.Write(t.Context(), o, time.Now().Add(time.Hour)); err != nil {
					t.Errorf("write: %v", err)
				}
			})
		}
		// A lone write in flight, then a full batch beside it, then a full
		// batch waiting and outcomeQueue more waiting to be taken: the
		// batcher takes nothing more.
		send(0)
		synctest.Wait()
		queued := 1 + maxOutcomeWrites*maxOutcomeBatch + outcomeQueue
		for i := 1; i < queued; i++ {
			send(i)
		}
		synctest.Wait()

		start := time.Now()
		o := &errandstore.JobOutcome{JobLease: errandstore.JobLease{ID: "late", LeaseToken: "t"}, Kind: errandstore.OutcomeSucceeded}
		_, err := b.Write(t.Context(), o, start.Add(time.Minute))
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("write to a busy batcher: %v, want %v", err, context.DeadlineExceeded)
		}
		if waited := time.Since(start); waited != time.Minute {
			t.Errorf("gave up after %s, want the lease's minute", waited)
		}

		written := 0
		for written < queued {
			c := <-store.started
			written += c.size
			close(c.release)
		}
		senders.Wait()
		// With room again, an outcome is taken even at its deadline; the
		// store, which fences by lease, decides.
		done := make(chan error, 1)
		go func() {
			_, err := b.Write(t.Context(), &errandstore.JobOutcome{JobLease: errandstore.JobLease{ID: "last", LeaseToken: "t"}, Kind: errandstore.OutcomeSucceeded}, time.Now())
			done <- err
		}()
		c := <-store.started
		close(c.release)
		if err := <-done; err != nil {
			t.Errorf("write with room at its deadline: %v", err)
		}
		b.Stop()
	})
}

// TestBatcherLingersForRunningJobs checks that a lone outcome waits
// for the outcomes of the worker's other running jobs, is written with them
// as soon as the last arrives, and waits no longer than outcomeLinger for a
// job that is still running.
func TestBatcherLingersForRunningJobs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &heldOutcomes{started: make(chan heldCall, 8)}
		running := new(atomic.Int64)
		b := New[*testSlots](Config{Store: store, Running: running, Writes: new(atomic.Int64), Timeout: time.Hour, Clock: clock.System{}})
		b.Start(t.Context())
		var senders sync.WaitGroup
		send := func(id string) {
			senders.Go(func() {
				o := &errandstore.JobOutcome{JobLease: errandstore.JobLease{ID: id, LeaseToken: "t"}, Kind: errandstore.OutcomeSucceeded}
				if _, err := b.Write(t.Context(), o, time.Now().Add(time.Hour)); err != nil {
					t.Errorf("write: %v", err)
				}
			})
		}
		write := func() heldCall {
			t.Helper()
			synctest.Wait()
			select {
			case c := <-store.started:
				return c
			default:
				t.Fatal("no write started")
				return heldCall{}
			}
		}
		noWrite := func(when string) {
			t.Helper()
			synctest.Wait()
			if len(store.started) > 0 {
				t.Fatalf("%s: a write of %d outcomes started", when, (<-store.started).size)
			}
		}

		// Three jobs held: the first outcome waits for the other two, and
		// the three go in one write the moment the last arrives.
		running.Store(3)
		start := time.Now()
		send("a")
		noWrite("one outcome of three running jobs")
		send("b")
		noWrite("two outcomes of three running jobs")
		send("c")
		if c := write(); c.size != 3 {
			t.Fatalf("wrote %d outcomes, want the three together", c.size)
		} else {
			if waited := time.Since(start); waited != 0 {
				t.Errorf("the batch waited %v with every job's outcome in it, want no wait", waited)
			}
			close(c.release)
		}
		senders.Wait()

		// Two jobs held, one of them still running: the other's outcome
		// is written after outcomeLinger, alone.
		running.Store(2)
		start = time.Now()
		send("d")
		noWrite("one outcome of two running jobs")
		time.Sleep(outcomeLinger - time.Microsecond)
		noWrite("just before the linger's end")
		time.Sleep(time.Microsecond)
		c := write()
		if c.size != 1 {
			t.Fatalf("wrote %d outcomes, want the lone one", c.size)
		}
		if waited := time.Since(start); waited != outcomeLinger {
			t.Errorf("the lone outcome waited %v, want %v", waited, outcomeLinger)
		}
		close(c.release)
		senders.Wait()

		// No other job held: written at once.
		running.Store(1)
		start = time.Now()
		send("e")
		c = write()
		if waited := time.Since(start); c.size != 1 || waited != 0 {
			t.Errorf("a lone outcome with no other job running: a write of %d after %v, want one at once", c.size, waited)
		}
		close(c.release)
		senders.Wait()
		b.Stop()
	})
}

// TestBatcherTakesEveryHandedOutcome: the outcomes of jobs held
// that have been handed over all go in one write, even when the batcher
// finds them already waiting as it starts. A batcher that counted an
// outcome as seen once it was handed over, not once it had taken it,
// wrote the first alone (no other job seemed to be running) and the rest
// after it: at concurrency 10 a busy worker's claims then split into one
// job and nine for as long as it stayed busy.
func TestBatcherTakesEveryHandedOutcome(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 3
		store := &heldOutcomes{started: make(chan heldCall, n)}
		running := new(atomic.Int64)
		running.Store(n) // the n jobs whose outcomes these are
		b := New[*testSlots](Config{Store: store, Running: running, Writes: new(atomic.Int64), Timeout: time.Hour, Clock: clock.System{}})
		answered := make(chan struct{}, n)
		for i := range n {
			o := &errandstore.JobOutcome{JobLease: errandstore.JobLease{ID: fmt.Sprintf("j%d", i), LeaseToken: "t"}, Kind: errandstore.OutcomeSucceeded}
			err := b.Submit(t.Context(), o, time.Now().Add(time.Hour), false, func(errandstore.OutcomeResult, error) bool {
				answered <- struct{}{}
				return false
			}, nil)
			if err != nil {
				t.Fatal(err)
			}
		}
		b.Start(t.Context())
		synctest.Wait()
		var sizes []int
		for len(store.started) > 0 {
			c := <-store.started
			sizes = append(sizes, c.size)
			close(c.release)
		}
		if len(sizes) != 1 || sizes[0] != n {
			t.Fatalf("writes began: %v outcomes each, want one of %d", sizes, n)
		}
		for range n {
			<-answered
		}
		b.Stop()
	})
}
