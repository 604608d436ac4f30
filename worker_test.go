package errand_test

import (
	"context"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/errandhq/errand"
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

func TestWorkerRunsEveryJobOnce(t *testing.T) {
	ctx := context.Background()
	s := openWorkerStore(t)
	var runs atomic.Int64
	c, err := errand.NewClient(s, errand.Config{Kinds: kindsOf([]testKind{{
		Name: "count",
		Handler: errand.HandlerFunc(func(ctx context.Context, j *errand.Job) error {
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
	w, err := c.NewWorker(errand.WorkerConfig{Queues: map[string]int{"a": 3, "b": 2}, PollInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	workerWaitFor(t, 20*time.Second, func() bool {
		js, err := c.List(ctx, &errand.ListOpts{States: []errand.JobState{errand.StateSucceeded}, Limit: n})
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
		if j.State != errand.StateSucceeded || j.Attempt != 1 {
			t.Fatalf("job %s: state %s attempt %d, want succeeded attempt 1", j.ID, j.State, j.Attempt)
		}
	}
}

func TestWorkerDrainGivesBackUnfinishedJobs(t *testing.T) {
	ctx := context.Background()
	s := openWorkerStore(t)
	started := make(chan string, 10)
	c, err := errand.NewClient(s, errand.Config{Kinds: kindsOf([]testKind{{
		Name: "slow",
		Handler: errand.HandlerFunc(func(ctx context.Context, j *errand.Job) error {
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
	w, err := c.NewWorker(errand.WorkerConfig{Queues: map[string]int{errand.DefaultQueue: 3}})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		<-started
	}
	grace, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if err := w.Stop(grace); err == nil {
		t.Fatal("Stop returned nil after the grace period ran out; want an error saying so")
	}
	js, err := c.List(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(js) != 3 {
		t.Fatalf("%d jobs, want 3", len(js))
	}
	for _, j := range js {
		if j.State != errand.StateQueued || j.Attempt != 0 {
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

func TestWorkerWakesOnEnqueue(t *testing.T) {
	ctx := context.Background()
	s := openWorkerStore(t)
	ran := make(chan struct{}, 1)
	c, err := errand.NewClient(s, errand.Config{Kinds: kindsOf([]testKind{{
		Name: "ping",
		Handler: errand.HandlerFunc(func(ctx context.Context, j *errand.Job) error {
			ran <- struct{}{}
			return nil
		}),
	}})})
	if err != nil {
		t.Fatal(err)
	}
	// A poll interval far beyond the test's timeout: only the wake-up can
	// start the job in time.
	w, err := c.NewWorker(errand.WorkerConfig{PollInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer w.Stop(ctx)
	time.Sleep(50 * time.Millisecond) // let the worker go idle
	if _, err := c.Enqueue(ctx, errand.RawArgs{KindName: "ping"}, nil); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ran:
	case <-time.After(10 * time.Second):
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
	s := openWorkerStore(t)
	started := make(chan struct{}, 1)
	c, err := errand.NewClient(s, errand.Config{Kinds: kindsOf([]testKind{{
		Name: "slow",
		Handler: errand.HandlerFunc(func(ctx context.Context, j *errand.Job) error {
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
	w, err := c.NewWorker(errand.WorkerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	<-started
	w.Abandon()
	grace, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	_ = w.Stop(grace) // the grace runs out: the handler is cancelled
	j, err := c.Get(ctx, r.Job.ID)
	if err != nil {
		t.Fatal(err)
	}
	// Without Abandon the cancelled handler's job would be given back
	// (queued, an interrupted entry); abandoned, it stays as a dead
	// process would leave it: running until its lease expires.
	if j.State != errand.StateRunning || j.Attempt != 1 || len(j.Errors) != 0 {
		t.Fatalf("job %s attempt %d errors %+v; want running, attempt 1, no history", j.State, j.Attempt, j.Errors)
	}
}
