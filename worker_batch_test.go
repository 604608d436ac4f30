package errand_test

import (
	"context"
	"database/sql"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
)

// TestWorkerBatchesOutcomes checks that outcomes finishing together share a
// transaction, that every one is still recorded, and that Stats counts what
// the worker did.
func TestWorkerBatchesOutcomes(t *testing.T) {
	ctx := context.Background()
	clock := newTestClock()
	s := openStore(t, clock)
	const n = 40
	// Every handler waits until all n are running, so that their outcomes
	// reach the batcher together.
	var all sync.WaitGroup
	all.Add(n)
	c, err := errand.NewClient(s, &errand.Config{Clock: clock, Kinds: kindsOf([]testKind{{
		Name: "together",
		Handler: errand.HandlerFunc(func(ctx context.Context, j *errandtype.Job) error {
			all.Done()
			all.Wait()
			return nil
		}),
	}})})
	if err != nil {
		t.Fatal(err)
	}
	enqueueN(t, c, "together", n)
	w, err := c.NewWorker(&errand.WorkerConfig{Queues: map[string]int{errand.DefaultQueue: n}, PollInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	workerWaitFor(t, 20*time.Second, func() bool { return w.Stats().JobsCompleted == n })
	// Idle now: the poll keeps looking and finds nothing.
	blockUntilAt(t, clock, clock.Now().Add(time.Hour), 1)
	clock.Advance(time.Hour)
	workerWaitFor(t, clockWait, func() bool { return w.Stats().IdleClaims >= 2 })
	if err := w.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	st := w.Stats()
	if st.JobsCompleted != n || st.JobsRunning != 0 || st.LeasesLost != 0 || st.JobsGivenBack != 0 {
		t.Errorf("stats %+v, want %d completed, none running, lost or given back", st, n)
	}
	if st.OutcomeWrites >= n {
		t.Errorf("%d outcome writes for %d jobs that finished together, want fewer", st.OutcomeWrites, n)
	}
	if st.Claims <= st.IdleClaims {
		t.Errorf("claims %d, idle claims %d: want some claims to have found jobs", st.Claims, st.IdleClaims)
	}
	js, err := c.List(ctx, &errand.ListOpts{Limit: n + 1})
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range js {
		if j.State != errandtype.StateSucceeded || j.Attempt != 1 {
			t.Errorf("job %s: %s attempt %d, want succeeded attempt 1", j.ID, j.State, j.Attempt)
		}
	}
}

// TestWorkerStopWritesOutcomesOfDrainingJobs checks that outcomes arriving
// during a drain, after claiming stopped, are still written: the batcher
// stops only after the last job has returned.
func TestWorkerStopWritesOutcomesOfDrainingJobs(t *testing.T) {
	ctx := context.Background()
	clock := newTestClock()
	s := openStore(t, clock)
	started := make(chan struct{}, 5)
	release := make(chan struct{})
	c, err := errand.NewClient(s, &errand.Config{Clock: clock, Kinds: kindsOf([]testKind{{
		Name: "held",
		Handler: errand.HandlerFunc(func(ctx context.Context, j *errandtype.Job) error {
			started <- struct{}{}
			<-release
			return nil
		}),
	}})})
	if err != nil {
		t.Fatal(err)
	}
	for range 5 {
		if _, err := c.Enqueue(ctx, errand.RawArgs{KindName: "held"}, nil); err != nil {
			t.Fatal(err)
		}
	}
	w, err := c.NewWorker(&errand.WorkerConfig{Queues: map[string]int{errand.DefaultQueue: 5}})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		<-started
	}
	stopped := make(chan error, 1)
	go func() { stopped <- w.Stop(ctx) }()
	// The registry shows the worker draining once Stop has stopped
	// claiming: Stop is now waiting for the jobs.
	workerWaitFor(t, clockWait, func() bool { return registryRecord(t, c, w.ID()).Status == errandstore.WorkerDraining })
	close(release)
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
	js, err := c.List(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range js {
		if j.State != errandtype.StateSucceeded {
			t.Errorf("job %s: %s, want succeeded", j.ID, j.State)
		}
	}
	if got := w.Stats().JobsCompleted; got != 5 {
		t.Errorf("JobsCompleted %d, want 5", got)
	}
}

// heartbeatCounter records each JobHeartbeatMany call's job ids.
type heartbeatCounter struct {
	errandstore.TxStore[*sql.Tx]
	mu    sync.Mutex
	calls [][]string
}

func (s *heartbeatCounter) JobHeartbeatMany(ctx context.Context, p *errandstore.JobHeartbeatParams) ([]errandstore.HeartbeatResult, error) {
	ids := make([]string, len(p.Leases))
	for i, l := range p.Leases {
		ids[i] = l.ID
	}
	s.mu.Lock()
	s.calls = append(s.calls, ids)
	s.mu.Unlock()
	return s.TxStore.JobHeartbeatMany(ctx, p)
}

func (s *heartbeatCounter) snapshot() [][]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.calls)
}

// TestWorkerBatchesHeartbeats checks that a worker renews the leases of all
// its running jobs with one heartbeat call per tick, every lease in it, and
// that each renewal moves each job's lease in the store.
func TestWorkerBatchesHeartbeats(t *testing.T) {
	ctx := context.Background()
	clock := newTestClock()
	st := &heartbeatCounter{TxStore: openStore(t, clock)}
	const n = 25
	const lease = 90 * time.Second // a heartbeat every 30s, unlike any other timer here
	var started sync.WaitGroup
	started.Add(n)
	release := make(chan struct{})
	var releaseOnce sync.Once
	releaseAll := func() { releaseOnce.Do(func() { close(release) }) }
	c := clockClient(t, st, clock, func(ctx context.Context, j *errandtype.Job) error {
		started.Done()
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	rs := enqueueN(t, c, "task", n)
	w, err := c.NewWorker(&errand.WorkerConfig{Queues: map[string]int{errand.DefaultQueue: n},
		Lease: lease, PollInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() {
		releaseAll() // a failed check must not leave Stop waiting on the handlers
		w.Stop(ctx)
	}()
	started.Wait()
	t0 := clock.Now()
	blockUntilAt(t, clock, t0.Add(lease/3), 1) // the heartbeat ticker
	for tick := 1; tick <= 2; tick++ {
		now := clock.Advance(lease / 3)
		// Renewed: the worker watches for the lease's new end.
		blockUntilAt(t, clock, now.Add(lease), 1)
		calls := st.snapshot()
		if len(calls) != tick {
			t.Fatalf("after %d ticks, %d heartbeat calls (%v); want one per tick", tick, len(calls), calls)
		}
		got := slices.Sorted(slices.Values(calls[tick-1]))
		var want []string
		for _, r := range rs {
			want = append(want, r.Job.ID)
		}
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Fatalf("tick %d renewed %v; want all %d running jobs %v", tick, got, n, want)
		}
		for _, r := range rs {
			if j := getJob(t, c, r.Job.ID); j.State != errandtype.StateRunning || !j.LeaseUntil.Equal(now.Add(lease)) {
				t.Fatalf("tick %d: job %s %s until %v; want running until %v", tick, j.ID, j.State, j.LeaseUntil, now.Add(lease))
			}
		}
	}
	releaseAll()
	workerWaitFor(t, clockWait, func() bool { return w.Stats().JobsCompleted == n })
	if err := w.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if s := w.Stats(); s.LeasesLost != 0 || s.JobsCompleted != n {
		t.Fatalf("stats %+v; want %d completed, no lease lost", s, n)
	}
}
