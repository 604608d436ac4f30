package errand_test

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/errandhq/errand"
)

// gatedOutcomes is a store whose outcome writes the test can hold at a
// gate, and which says whether it writes in parallel
// (errand.ParallelWriter). While holding, each JobRecordOutcomes is
// reported on arrived with its jobs' ids and waits for its release (or its
// error) before it writes to the real store.
type gatedOutcomes struct {
	errand.TxStore[*sql.Tx]
	parallel bool
	holding  atomic.Bool
	arrived  chan *gatedWrite
	over     chan struct{} // closed when the test ends: held writes fail
}

type gatedWrite struct {
	ids     []string
	release chan error // nil: write; an error: fail with it
}

func (g *gatedOutcomes) WritesInParallel() bool { return g.parallel }

func (g *gatedOutcomes) JobRecordOutcomes(ctx context.Context, p *errand.JobRecordOutcomesParams) ([]errand.OutcomeResult, error) {
	if g.holding.Load() {
		w := &gatedWrite{release: make(chan error, 1)}
		for _, o := range p.Outcomes {
			w.ids = append(w.ids, o.ID)
		}
		g.arrived <- w
		select {
		case err := <-w.release:
			if err != nil {
				return nil, err
			}
		case <-g.over:
			return nil, errors.New("the test is over")
		}
	}
	return g.TxStore.JobRecordOutcomes(ctx, p)
}

// earlyTest is a worker of one queue of one slot whose jobs report their
// start and return when the test lets them, on a store whose outcome
// writes are held.
type earlyTest struct {
	t       *testing.T
	gate    *gatedOutcomes
	c       *errand.Client[*sql.Tx]
	w       *errand.Worker
	started chan string
	finish  chan struct{}
	quit    chan struct{}
}

func newEarlyTest(t *testing.T, parallel bool, jobs int) (*earlyTest, []string) {
	e := &earlyTest{t: t, started: make(chan string, 16), finish: make(chan struct{}), quit: make(chan struct{})}
	e.gate = &gatedOutcomes{TxStore: openStore(t, nil), parallel: parallel, arrived: make(chan *gatedWrite, 16), over: make(chan struct{})}
	e.gate.holding.Store(true)
	e.c = newClient(t, e.gate, &errand.Config{Kinds: kindsOf([]testKind{{Name: "step",
		Handler: errand.HandlerFunc(func(ctx context.Context, j *errand.Job) error {
			e.started <- j.ID
			select {
			case <-e.finish:
			case <-e.quit:
			}
			return nil
		})}})})
	ids := e.enqueue(jobs)
	w, err := e.c.NewWorker(&errand.WorkerConfig{Queues: map[string]int{errand.DefaultQueue: 1}, PollInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	e.w = w
	t.Cleanup(func() {
		// A test that failed holding writes does not hang its Stop: the
		// held writes fail, and the retries go through.
		e.gate.holding.Store(false)
		close(e.gate.over)
		close(e.quit)
		ctx, cancel := context.WithTimeout(context.Background(), clockWait)
		defer cancel()
		w.Stop(ctx)
	})
	return e, ids
}

func (e *earlyTest) enqueue(n int) []string {
	var ids []string
	for range n {
		ids = append(ids, enqueue(e.t, e.c, "step", nil).ID)
	}
	return ids
}

// run waits for the job id to start, and lets it return.
func (e *earlyTest) run(id, when string) {
	e.t.Helper()
	select {
	case got := <-e.started:
		if got != id {
			e.t.Fatalf("%s: job %s started, want %s", when, got, id)
		}
	case <-time.After(clockWait):
		e.t.Fatalf("%s: job %s did not start within %s", when, id, clockWait)
	}
	e.finish <- struct{}{}
}

// noStart checks that no job starts for a while: a job that a slot let
// start would do so within milliseconds.
func (e *earlyTest) noStart(when string) {
	e.t.Helper()
	select {
	case got := <-e.started:
		e.t.Fatalf("%s: job %s started", when, got)
	case <-time.After(200 * time.Millisecond):
	}
}

// write waits for the next outcome write to arrive at the gate, and
// checks that it records ids.
func (e *earlyTest) write(when string, ids ...string) *gatedWrite {
	e.t.Helper()
	select {
	case w := <-e.gate.arrived:
		if !slices.Equal(w.ids, ids) {
			e.t.Fatalf("%s: a write of %v, want %v", when, w.ids, ids)
		}
		return w
	case <-time.After(clockWait):
		e.t.Fatalf("%s: no outcome write within %s", when, clockWait)
		return nil
	}
}

// succeeded waits for every job of ids to have succeeded in the store, and
// for the worker to hold none.
func (e *earlyTest) succeeded(ids []string) {
	e.t.Helper()
	waitFor(e.t, clockWait, "every job succeeded", func() bool {
		for _, id := range ids {
			j, err := e.c.Get(context.Background(), id)
			if err != nil {
				e.t.Fatal(err)
			}
			if j.State != errand.StateSucceeded {
				return false
			}
		}
		return e.w.Stats().JobsRunning == 0
	})
}

// TestParallelWriterFreesSlotAtHandover: on a store that writes in
// parallel, a job's slot frees as soon as its outcome is handed over, so
// the next job runs while the outcome is written; at most one outcome per
// slot is written with its slot freed, so a queue of one slot holds at most
// two jobs.
func TestParallelWriterFreesSlotAtHandover(t *testing.T) {
	e, ids := newEarlyTest(t, true, 3)
	e.run(ids[0], "first")
	w1 := e.write("the first job's outcome", ids[0])
	e.run(ids[1], "while the first job's outcome is written")
	// The second job's outcome waits behind the write in flight and keeps
	// its slot: the third job must wait.
	e.noStart("with one outcome written and one waiting")
	w1.release <- nil
	w2 := e.write("the second job's outcome", ids[1])
	e.noStart("while the second job's outcome, which kept its slot, is written")
	w2.release <- nil
	e.run(ids[2], "once the second job's outcome is written")
	e.write("the third job's outcome", ids[2]).release <- nil
	e.succeeded(ids)
}

// TestSerialWriterFreesSlotOnceWritten: on a store that writes one at a
// time, a job's slot frees only once its outcome is written.
func TestSerialWriterFreesSlotOnceWritten(t *testing.T) {
	e, ids := newEarlyTest(t, false, 2)
	e.run(ids[0], "first")
	w1 := e.write("the first job's outcome", ids[0])
	e.noStart("while the first job's outcome is written")
	w1.release <- nil
	e.run(ids[1], "once the first job's outcome is written")
	e.write("the second job's outcome", ids[1]).release <- nil
	e.succeeded(ids)
}

// TestParallelWriterFailedWriteKeepsAccounts: an outcome whose slot freed
// at its handover and whose write then fails is recorded again, and gives
// back what it held exactly once: afterwards every job succeeds, the worker
// holds none, and the next job's slot still frees at its handover.
func TestParallelWriterFailedWriteKeepsAccounts(t *testing.T) {
	e, ids := newEarlyTest(t, true, 2)
	e.run(ids[0], "first")
	w1 := e.write("the first job's outcome", ids[0])
	e.run(ids[1], "while the first job's outcome is written")
	w1.release <- errors.New("connection reset by peer")
	// The first job's outcome is written again, and the second's: in one
	// write or two, in either order.
	var written []string
	for !slices.Contains(written, ids[0]) || !slices.Contains(written, ids[1]) {
		select {
		case w := <-e.gate.arrived:
			written = append(written, w.ids...)
			w.release <- nil
		case <-time.After(clockWait):
			t.Fatalf("after a failed write, only %v were written again", written)
		}
	}
	e.succeeded(ids)

	more := e.enqueue(2)
	e.c.Wake(errand.DefaultQueue)
	e.run(more[0], "after the failed write")
	w3 := e.write("the next job's outcome", more[0])
	e.run(more[1], "while the next job's outcome is written")
	w3.release <- nil
	e.write("the last job's outcome", more[1]).release <- nil
	e.succeeded(append(ids, more...))
}
