package errand_test

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtest"
	"github.com/errandhq/errand/errandtype"
	"github.com/errandhq/errand/sqlite"
)

func openWorkerStore(t *testing.T) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "worker.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// The workers here run on a fake clock that the store shares. Where a test
// does not move it, no timer of the worker ever fires: what the worker does
// it does without polling.

// TestWorkerRunsEveryJobOnce: a worker runs a backlog across its queues,
// each job once, claiming as slots free up rather than at its polls.
func TestWorkerRunsEveryJobOnce(t *testing.T) {
	ctx := context.Background()
	clock := newTestClock()
	s := openStore(t, clock)
	var runs atomic.Int64
	c, err := errand.NewClient(s, &errand.Config{Clock: clock, Kinds: kindsOf([]testKind{{
		Name: "count",
		Handler: errand.HandlerFunc(func(ctx context.Context, j *errandtype.Job) error {
			runs.Add(1)
			return nil
		}),
	}})})
	if err != nil {
		t.Fatal(err)
	}
	const n = 100
	var ps []errand.EnqueueParams
	for i := range n {
		q := "a"
		if i%2 == 1 {
			q = "b"
		}
		ps = append(ps, errand.EnqueueParams{Args: errand.RawArgs{KindName: "count"}, Opts: &errand.EnqueueOpts{Queue: q}})
	}
	if _, err := c.EnqueueMany(ctx, ps); err != nil {
		t.Fatal(err)
	}
	w, err := c.NewWorker(&errand.WorkerConfig{Queues: map[string]int{"a": 3, "b": 2}, PollInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	workerWaitFor(t, time.Minute, func() bool { // a bound for a loaded machine, not a speed check
		js, err := c.List(ctx, &errand.ListOpts{States: []errandtype.JobState{errandtype.StateSucceeded}, Limit: n})
		return err == nil && len(js) == n
	})
	if err := w.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if got := runs.Load(); got != n {
		t.Fatalf("handler ran %d times, want %d", got, n)
	}
	js, err := c.List(ctx, &errand.ListOpts{Limit: n})
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range js {
		if j.State != errandtype.StateSucceeded || j.Attempt != 1 {
			t.Fatalf("job %s: state %s attempt %d, want succeeded attempt 1", j.ID, j.State, j.Attempt)
		}
	}
}

func TestWorkerDrainGivesBackUnfinishedJobs(t *testing.T) {
	ctx := context.Background()
	clock := newTestClock()
	s := openStore(t, clock)
	started := make(chan string, 10)
	c, err := errand.NewClient(s, &errand.Config{Clock: clock, Kinds: kindsOf([]testKind{{
		Name: "slow",
		Handler: errand.HandlerFunc(func(ctx context.Context, j *errandtype.Job) error {
			started <- j.ID
			<-ctx.Done()
			return ctx.Err()
		}),
	}})})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := c.Enqueue(ctx, errand.RawArgs{KindName: "slow"}, nil); err != nil {
			t.Fatal(err)
		}
	}
	w, err := c.NewWorker(&errand.WorkerConfig{Queues: map[string]int{errand.DefaultQueue: 3}})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		<-started
	}
	// A grace period that is over already: the handlers, which run until
	// cancelled, are cancelled at once. Every job given back is the drain
	// Stop promises: no error.
	grace, cancel := context.WithCancel(ctx)
	cancel()
	if err := w.Stop(grace); err != nil {
		t.Fatalf("Stop after giving every job back = %v, want nil", err)
	}
	js, err := c.List(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(js) != 3 {
		t.Fatalf("%d jobs, want 3", len(js))
	}
	for _, j := range js {
		if j.State != errandtype.StateQueued || j.Attempt != 0 {
			t.Errorf("job %s: state %s attempt %d, want queued attempt 0", j.ID, j.State, j.Attempt)
		}
		if len(j.Errors) != 1 || j.Errors[0].Class != errand.ClassInterrupted {
			t.Errorf("job %s: history %+v, want one interrupted entry", j.ID, j.Errors)
		}
	}
	// Stop is idempotent.
	if err := w.Stop(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestWorkerStopPastDeadline: a drain whose deadline passes while a job
// runs gives the job back and returns nil; one that cannot give it back
// (every outcome write fails, as with the store unreachable) leaves the job
// to its lease and returns an error that says so.
func TestWorkerStopPastDeadline(t *testing.T) {
	eachJobStore(t, func(t *testing.T, s errandstore.TxStore[*sql.Tx], clock *errandtest.Clock) {
		ts := &troubledStore{TxStore: s}
		started := make(chan string, 2)
		c := clockClient(t, ts, clock, func(ctx context.Context, j *errandtype.Job) error {
			started <- j.ID
			<-ctx.Done()
			return ctx.Err()
		})
		stop := func(id string, unreachable bool) error {
			t.Helper()
			enqueue(t, c, "task", &errand.EnqueueOpts{ID: id, Queue: id})
			w, err := c.NewWorker(&errand.WorkerConfig{Queues: map[string]int{id: 1}, Lease: 5 * time.Second, PollInterval: time.Hour})
			if err != nil {
				t.Fatal(err)
			}
			if err := w.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
			<-started
			const fail = 1 << 30
			if unreachable {
				ts.failOutcomes.Store(fail)
				defer ts.failOutcomes.Store(0)
			}
			past, cancel := context.WithDeadline(context.Background(), time.Now())
			defer cancel()
			stopped := make(chan error, 1)
			go func() { stopped <- w.Stop(past) }()
			// A failed hand-back is written again, on the clock, until the
			// lease ends: once one has failed (the handler has returned and
			// its lease is no longer renewed), move the clock on.
			for deadline := time.Now().Add(clockWait); ; {
				select {
				case err := <-stopped:
					return err
				case <-time.After(10 * time.Millisecond):
				}
				if time.Now().After(deadline) {
					t.Fatalf("Stop did not return within %s", clockWait)
				}
				if unreachable && ts.failOutcomes.Load() < fail {
					clock.Advance(time.Second)
				}
			}
		}
		if err := stop("handed-back", false); err != nil {
			t.Fatalf("Stop past its deadline that gave its job back = %v, want nil", err)
		}
		if j := getJob(t, c, "handed-back"); j.State != errandtype.StateQueued || len(j.Errors) != 1 || j.Errors[0].Class != errand.ClassInterrupted {
			t.Fatalf("job given back: %s, history %+v; want queued with one interrupted entry", j.State, j.Errors)
		}
		err := stop("left", true)
		if err == nil || !errors.Is(err, context.DeadlineExceeded) || err.Error() != "stop: 1 job left to its lease: context deadline exceeded" {
			t.Fatalf("Stop that could not give its job back = %v, want \"stop: 1 job left to its lease: context deadline exceeded\"", err)
		}
		if j := getJob(t, c, "left"); j.State != errandtype.StateRunning || len(j.Errors) != 0 {
			t.Fatalf("job left to its lease: %s, history %+v; want running, none", j.State, j.Errors)
		}
	})
}

func TestWorkerWakesOnEnqueue(t *testing.T) {
	ctx := context.Background()
	clock := newTestClock()
	s := openStore(t, clock)
	ran := make(chan struct{}, 1)
	c, err := errand.NewClient(s, &errand.Config{Clock: clock, Kinds: kindsOf([]testKind{{
		Name: "ping",
		Handler: errand.HandlerFunc(func(ctx context.Context, j *errandtype.Job) error {
			ran <- struct{}{}
			return nil
		}),
	}})})
	if err != nil {
		t.Fatal(err)
	}
	// The worker polls hourly on a clock that never moves: only the
	// wake-up can start the job.
	w, err := c.NewWorker(&errand.WorkerConfig{PollInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer w.Stop(ctx)
	// Idle: its first claim found nothing, and it waits on its poll.
	blockUntilAt(t, clock, clock.Now().Add(time.Hour), 1)
	if _, err := c.Enqueue(ctx, errand.RawArgs{KindName: "ping"}, nil); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ran:
	case <-time.After(clockWait):
		t.Fatal("enqueue did not wake the idle worker")
	}
}

func workerWaitFor(t *testing.T, limit time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %s", limit)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestWorkerAbandonRecordsNothing(t *testing.T) {
	ctx := context.Background()
	clock := newTestClock()
	s := openStore(t, clock)
	started := make(chan struct{}, 1)
	c, err := errand.NewClient(s, &errand.Config{Clock: clock, Kinds: kindsOf([]testKind{{
		Name: "slow",
		Handler: errand.HandlerFunc(func(ctx context.Context, j *errandtype.Job) error {
			started <- struct{}{}
			<-ctx.Done()
			return ctx.Err()
		}),
	}})})
	if err != nil {
		t.Fatal(err)
	}
	r, err := c.Enqueue(ctx, errand.RawArgs{KindName: "slow"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	w, err := c.NewWorker(&errand.WorkerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	<-started
	w.Abandon()
	grace, cancel := context.WithCancel(ctx)
	cancel()
	// No grace: the handler is cancelled, and its job, abandoned, is left
	// to its lease.
	if err := w.Stop(grace); err == nil || err.Error() != "stop: 1 job left to its lease: context canceled" {
		t.Fatalf("Stop after Abandon = %v, want \"stop: 1 job left to its lease: context canceled\"", err)
	}
	j, err := c.Get(ctx, r.Job.ID)
	if err != nil {
		t.Fatal(err)
	}
	// Without Abandon the cancelled handler's job would be given back
	// (queued, an interrupted entry); abandoned, it stays as a dead
	// process would leave it: running until its lease expires.
	if j.State != errandtype.StateRunning || j.Attempt != 1 || len(j.Errors) != 0 {
		t.Fatalf("job %s attempt %d errors %+v; want running, attempt 1, no history", j.State, j.Attempt, j.Errors)
	}
}

// TestWorkerNeverHoldsMoreJobsThanSlots: a worker claims only as many jobs
// as it has free slots, so that at no moment does the store show more of
// its jobs running than it has slots. A claim of the whole concurrency
// would leave the extra jobs claimed, waiting for a slot, their leases
// unrenewed.
func TestWorkerNeverHoldsMoreJobsThanSlots(t *testing.T) {
	ctx := context.Background()
	clock := newTestClock()
	s := openStore(t, clock)
	started, release := make(chan string, 10), make(chan struct{})
	quit := make(chan struct{}) // ends every handler, for Stop to return after a failure
	c := newClient(t, s, &errand.Config{Clock: clock, Kinds: kindsOf([]testKind{{Name: "hold",
		Handler: errand.HandlerFunc(func(ctx context.Context, j *errandtype.Job) error {
			started <- j.ID
			select {
			case <-release:
			case <-quit:
			}
			return nil
		})}})})
	const slots, n = 2, 6
	for range n {
		enqueue(t, c, "hold", nil)
	}
	w, err := c.NewWorker(&errand.WorkerConfig{Queues: map[string]int{errand.DefaultQueue: slots}, PollInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer w.Stop(ctx)
	defer close(quit)
	// held counts the jobs running in the store under the worker's leases.
	held := func() int {
		js, err := c.List(ctx, &errand.ListOpts{States: []errandtype.JobState{errandtype.StateRunning}})
		if err != nil {
			t.Fatal(err)
		}
		k := 0
		for _, j := range js {
			if j.LeaseOwner != nil && *j.LeaseOwner == w.ID() {
				k++
			}
		}
		return k
	}
	waitStarted := func() {
		t.Helper()
		select {
		case <-started:
		case <-time.After(clockWait):
			t.Fatal("no job started")
		}
	}
	for range slots {
		waitStarted()
	}
	if got := held(); got != slots {
		t.Fatalf("%d jobs running with every slot busy, want %d", got, slots)
	}
	// Each finished job frees one slot: the worker claims one job for it,
	// and the job starts once claimed.
	for i := slots; i < n; i++ {
		release <- struct{}{}
		waitStarted()
		if got := held(); got > slots {
			t.Fatalf("after %d jobs finished: %d jobs running for a worker of %d slots", i-slots+1, got, slots)
		}
	}
	for range slots {
		release <- struct{}{}
	}
	workerWaitFor(t, clockWait, func() bool { return w.Stats().JobsCompleted == n })
}

// TestWorkerLeavesUnhandledKindsQueued: a worker claims only the kinds it
// has handlers for. A job of a kind no worker handles (a new kind, during
// a rolling deploy that has not reached this worker) stays queued with
// none of its attempts used, while the worker runs the jobs around it.
func TestWorkerLeavesUnhandledKindsQueued(t *testing.T) {
	ctx := context.Background()
	clock := newTestClock()
	s := openStore(t, clock)
	c := newClient(t, s, &errand.Config{Clock: clock, Kinds: kindsOf([]testKind{{Name: "task",
		Handler: errand.HandlerFunc(func(context.Context, *errandtype.Job) error { return nil })}})})
	producer := newClient(t, s, &errand.Config{})
	// Enqueued first: a claim that ignored kinds would take it first.
	unhandled := enqueue(t, producer, "new_kind", nil)
	handled := enqueue(t, c, "task", nil)
	w, err := c.NewWorker(&errand.WorkerConfig{PollInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer w.Stop(ctx)
	workerWaitFor(t, clockWait, func() bool { return getJob(t, c, handled.ID).State == errandtype.StateSucceeded })
	// Idle, and then idle again after a poll: two claims found nothing.
	for range 2 {
		blockUntilAt(t, clock, clock.Now().Add(time.Hour), 1)
		clock.Advance(time.Hour)
	}
	blockUntilAt(t, clock, clock.Now().Add(time.Hour), 1)
	j := getJob(t, c, unhandled.ID)
	if j.State != errandtype.StateQueued || j.Attempt != 0 || len(j.Errors) != 0 || j.LeaseOwner != nil {
		t.Fatalf("job of a kind without a handler: %s, attempt %d, history %v, owner %v; want queued, attempt 0, untouched",
			j.State, j.Attempt, classes(j.Errors), j.LeaseOwner)
	}
	if st := w.Stats(); st.JobsCompleted != 1 {
		t.Errorf("worker completed %d jobs, want only the handled one", st.JobsCompleted)
	}
}
