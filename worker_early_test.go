package errand_test

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
	"github.com/errandhq/errand/postgres"
	"github.com/errandhq/errand/postgres/pgtest"
)

// gatedOutcomes is a store whose outcome writes the test can hold at a
// gate, and which says whether it writes in parallel
// (errandstore.ParallelWriter). While holding, each JobRecordOutcomes is
// reported on arrived with its jobs' ids and waits for its release (or its
// error) before it writes to the real store.
type gatedOutcomes struct {
	errandstore.TxStore[*sql.Tx]
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

func (g *gatedOutcomes) JobRecordOutcomes(ctx context.Context, p *errandstore.JobRecordOutcomesParams) ([]errandstore.OutcomeResult, error) {
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
		Handler: errand.HandlerFunc(func(ctx context.Context, j *errandtype.Job) error {
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
			if j.State != errandtype.StateSucceeded {
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

// TestPostgresDrainRunsEachJobOnce: on PostgreSQL, where a job's slot frees
// when its outcome is handed over, a worker stopped in the middle of a
// drain records every outcome it handed over before Stop returns, and a
// second worker finishes the rest: every job runs exactly once and ends
// succeeded.
func TestPostgresDrainRunsEachJobOnce(t *testing.T) {
	url := pgtest.URL(t)
	s, err := postgres.Open(t.Context(), url, &postgres.Options{Schema: pgtest.Schema(t, url), MaxConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	v := s.SQL(nil)
	t.Cleanup(func() { v.Close() })
	if pw, ok := errandstore.TxStore[*sql.Tx](v).(errandstore.ParallelWriter); !ok || !pw.WritesInParallel() {
		t.Fatal("the PostgreSQL store does not say that it writes in parallel")
	}
	const jobs = 3000
	var mu sync.Mutex
	runs := make(map[string]int, jobs)
	var ran atomic.Int64
	// Closed when a third of the jobs have run, and when all have.
	third, all := make(chan struct{}), make(chan struct{})
	c := handlerClient(t, v, func(ctx context.Context, j *errandtype.Job) error {
		mu.Lock()
		runs[j.ID]++
		mu.Unlock()
		switch ran.Add(1) {
		case jobs / 3:
			close(third)
		case jobs:
			close(all)
		}
		return nil
	})
	params := make([]errand.EnqueueParams, jobs)
	for i := range params {
		params[i] = errand.EnqueueParams{Args: errand.RawArgs{KindName: "task"}}
	}
	enqueued, err := c.EnqueueMany(context.Background(), params)
	if err != nil {
		t.Fatal(err)
	}

	work := func(until <-chan struct{}) errand.WorkerRunStats {
		t.Helper()
		w, err := c.NewWorker(&errand.WorkerConfig{Queues: map[string]int{errand.DefaultQueue: 100}, PollInterval: 50 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		select {
		case <-until:
		case <-time.After(2 * time.Minute):
			t.Fatalf("%d of %d jobs ran within 2m", ran.Load(), jobs)
		}
		if err := w.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
		return w.Stats()
	}
	// Stopped with jobs still waiting, and outcomes in flight.
	first := work(third)
	if first.JobsCompleted >= jobs {
		t.Fatalf("the first worker ran all %d jobs before its Stop", jobs)
	}
	if first.JobsRunning != 0 {
		t.Errorf("the stopped worker holds %d jobs, want none", first.JobsRunning)
	}
	if first.JobsCompleted != ran.Load() {
		t.Errorf("the stopped worker recorded %d outcomes of the %d jobs it ran", first.JobsCompleted, ran.Load())
	}
	second := work(all)
	if lost := first.LeasesLost + second.LeasesLost; lost != 0 {
		t.Errorf("%d leases lost", lost)
	}
	js, err := c.List(context.Background(), &errand.ListOpts{States: []errandtype.JobState{errandtype.StateSucceeded}, Limit: jobs + 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(js) != jobs {
		t.Errorf("%d jobs succeeded, want %d", len(js), jobs)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, r := range enqueued {
		if n := runs[r.Job.ID]; n != 1 {
			t.Errorf("job %s ran %d times, want once", r.Job.ID, n)
		}
	}
}
