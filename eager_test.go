package errand_test

import (
	"context"
	"database/sql"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtest"
	"github.com/errandhq/errand/errandtype"
)

// eagerClient is a client on clock whose "task" jobs record a step, tell
// ran, and wait for release; "other" has no handler.
func eagerClient(t *testing.T, st errandstore.TxStore[*sql.Tx], clock *errandtest.Clock, ran chan<- string, release <-chan struct{}) *errand.Client[*sql.Tx] {
	t.Helper()
	return newClient(t, st, &errand.Config{Clock: clock, Kinds: kindsOf([]testKind{{Name: "task", Handler: errand.HandlerFunc(
		func(ctx context.Context, j *errandtype.Job) error {
			n, err := errand.Step(ctx, "one", func(context.Context) (int, error) { return 1, nil })
			if err != nil {
				return err
			}
			ran <- j.ID
			<-release
			return errand.SetOutput(ctx, n)
		})}, {Name: "other"}})})
}

// enqueueEager enqueues a job of kind with Eager and opts, and returns it
// as Enqueue did.
func enqueueEager(t *testing.T, c *errand.Client[*sql.Tx], kind string, opts errand.EnqueueOpts) *errandtype.Job {
	t.Helper()
	opts.Eager = true
	return enqueue(t, c, kind, &opts)
}

// TestEagerStart: a job enqueued with Eager into an idle queue of a worker
// of the process is claimed by the enqueue itself and runs at once, though
// the worker polls hourly on a clock that never moves and is not woken.
// A job that queue cannot take now (its slot busy, a kind it does not
// handle, a job not yet due, a stopped worker) is enqueued as usual.
func TestEagerStart(t *testing.T) {
	onBothStores(t, func(t *testing.T, clock *errandtest.Clock, st errandstore.TxStore[*sql.Tx]) {
		ctx := context.Background()
		ran, release := make(chan string, 4), make(chan struct{})
		var releaseOnce sync.Once
		free := func() { releaseOnce.Do(func() { close(release) }) }
		c := eagerClient(t, st, clock, ran, release)
		w := idleWorker(t, c, clock, errand.WorkerConfig{Queues: map[string]int{errand.DefaultQueue: 1}, Owner: "eager-worker"})
		t.Cleanup(free) // before the worker's Stop, should the test fail first

		j := enqueueEager(t, c, "task", errand.EnqueueOpts{})
		if j.State != errandtype.StateRunning || j.Attempt != 1 || j.LeaseOwner == nil || *j.LeaseOwner != "eager-worker" {
			t.Fatalf("eager job: %s, attempt %d, owner %v; want running, attempt 1, claimed by eager-worker", j.State, j.Attempt, j.LeaseOwner)
		}
		waitRan(t, ran, j.ID, clockWait)

		busy := enqueueEager(t, c, "task", errand.EnqueueOpts{})
		other := enqueueEager(t, c, "other", errand.EnqueueOpts{})
		later := enqueueEager(t, c, "task", errand.EnqueueOpts{Delay: time.Hour})
		for _, q := range []*errandtype.Job{busy, other, later} {
			if q.State == errandtype.StateRunning || q.Attempt != 0 {
				t.Errorf("job %s, which the worker cannot take now: %s, attempt %d; want it waiting", q.ID, q.State, q.Attempt)
			}
		}
		free()
		if r, err := c.Result(ctx, j.ID, clockWait); err != nil || r.State != errandtype.StateSucceeded || string(r.Output) != "1" {
			t.Fatalf("eager job's result: %+v, %v; want succeeded with output 1", r, err)
		}
		// The busy one was enqueued as usual: its wake-up starts it once the slot frees.
		waitRan(t, ran, busy.ID, clockWait)
		if _, err := c.Result(ctx, busy.ID, clockWait); err != nil {
			t.Fatal(err)
		}

		if err := w.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		if j := enqueueEager(t, c, "task", errand.EnqueueOpts{}); j.State == errandtype.StateRunning {
			t.Errorf("eager job after the worker stopped: %s; want it waiting", j.State)
		}
	})
}

// TestEagerNotPastGates: a worker whose claims pass a rate limit takes no
// eager job, which would pass the limit by.
func TestEagerNotPastGates(t *testing.T) {
	onBothStores(t, func(t *testing.T, clock *errandtest.Clock, st errandstore.TxStore[*sql.Tx]) {
		ran, release := make(chan string, 1), make(chan struct{})
		defer close(release)
		c := eagerClient(t, st, clock, ran, release)
		idleWorker(t, c, clock, errand.WorkerConfig{RateLimits: []errand.RateLimit{{Kind: "task", Limit: 1, Per: time.Hour}}})
		if j := enqueueEager(t, c, "task", errand.EnqueueOpts{}); j.State == errandtype.StateRunning {
			t.Errorf("eager job on a rate-limited worker: %s; want it waiting for a claim", j.State)
		}
	})
}

// TestEagerRefusedWhereItCannotApply: Eager in the caller's transaction or
// on one of several jobs is refused, and nothing is written.
func TestEagerRefusedWhereItCannotApply(t *testing.T) {
	ctx := context.Background()
	st := openStore(t, nil)
	c := newClient(t, st, &errand.Config{})
	eager := &errand.EnqueueOpts{Eager: true}
	var ie *errandtype.InputError
	err := c.InTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
		_, err := c.EnqueueTx(ctx, tx, errand.RawArgs{KindName: "task"}, eager)
		return err
	})
	if !errors.As(err, &ie) || ie.Field != "Eager" {
		t.Errorf("EnqueueTx with Eager: %v, want an *InputError on Eager", err)
	}
	_, err = c.EnqueueMany(ctx, []errand.EnqueueParams{{Args: errand.RawArgs{KindName: "task"}, Opts: eager}, {Args: errand.RawArgs{KindName: "task"}}})
	if !errors.As(err, &ie) || ie.Field != "Eager" {
		t.Errorf("EnqueueMany of two with Eager: %v, want an *InputError on Eager", err)
	}
	if n := count(t, st.DB(), "SELECT count(*) FROM errand_jobs"); n != 0 {
		t.Errorf("%d jobs written, want none", n)
	}
	if err := errand.CheckEnqueue(errand.RawArgs{KindName: "task"}, eager); err != nil {
		t.Errorf("CheckEnqueue with Eager: %v; Enqueue takes it", err)
	}
}

// TestResultOfEagerJob: a wait on a job that this process started eagerly
// reads nothing while the job runs, and is handed its result once it
// succeeds; a look without a wait reads it, running.
func TestResultOfEagerJob(t *testing.T) {
	defer errand.SetPollPause(time.Hour)() // only a wake ends a wait
	onBothStores(t, func(t *testing.T, clock *errandtest.Clock, inner errandstore.TxStore[*sql.Tx]) {
		ctx := context.Background()
		st := newReadCounter(inner)
		ran, release := make(chan string, 1), make(chan struct{})
		var releaseOnce sync.Once
		free := func() { releaseOnce.Do(func() { close(release) }) }
		c := newClient(t, st, &errand.Config{Clock: clock, Kinds: kindsOf([]testKind{{Name: "task", Handler: errand.HandlerFunc(
			func(ctx context.Context, j *errandtype.Job) error {
				ran <- j.ID
				<-release
				return errand.SetOutput(ctx, "done")
			})}})})
		w := idleWorker(t, c, clock, errand.WorkerConfig{Queues: map[string]int{errand.DefaultQueue: 1}})
		t.Cleanup(free) // before the worker's Stop, should the test fail first
		j := enqueueEager(t, c, "task", errand.EnqueueOpts{})
		waitRan(t, ran, j.ID, clockWait)
		if _, err := c.Result(ctx, j.ID, 0); !errors.Is(err, errand.ErrNotFinished) || st.reads.Load() != 1 {
			t.Fatalf("a look at the running job: %v after %d reads; want not finished, read", err, st.reads.Load())
		}
		st.reads.Store(0)
		type answer struct {
			r   *errand.JobResult
			err error
		}
		got := make(chan answer, 1)
		go func() {
			r, err := c.Result(ctx, j.ID, time.Minute)
			got <- answer{r, err}
		}()
		for errand.Watching(c) == 0 {
			time.Sleep(time.Millisecond)
		}
		time.Sleep(20 * time.Millisecond) // room for a read, were one made
		if n := st.reads.Load(); n != 0 {
			t.Errorf("the wait read the running job %d times; want none", n)
		}
		free()
		a := <-got
		if a.err != nil || a.r.State != errandtype.StateSucceeded || string(a.r.Output) != `"done"` || st.reads.Load() != 0 {
			t.Errorf("the wait's result: %+v, %v, after %d reads; want succeeded with its output, handed over", a.r, a.err, st.reads.Load())
		}
		// Its attempt returned: a wait reads the job at once.
		if err := w.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		bounded, cancel := context.WithTimeout(ctx, clockWait)
		defer cancel()
		if r, err := c.Result(bounded, j.ID, time.Minute); err != nil || r.State != errandtype.StateSucceeded {
			t.Errorf("a wait after the attempt: %+v, %v; want succeeded at once", r, err)
		}
	})
}
