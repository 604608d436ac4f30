package errand_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
	"github.com/errandhq/errand/postgres"
	"github.com/errandhq/errand/postgres/pgtest"
)

// offsetClock is a wall clock off by d: a host whose clock is wrong.
type offsetClock time.Duration

func (d offsetClock) Now() time.Time { return time.Now().Add(time.Duration(d)) }

// TestPostgresWorkerClockSkew: a worker whose wall clock is an hour ahead
// keeps its live lease on PostgreSQL, and the registry reports its skew.
//
// errand's PostgreSQL store takes every lease decision on the database's
// now() (Options.Clock nil), so a worker's own clock cannot matter, and the
// test must show both halves of that. A Go process cannot shift its own
// clock, so the skew is injected where each side would read it:
//
//   - The counterfactual: a store that took its time from the worker's clock
//     is a store with Options.Clock an hour ahead. Its claim, on the same
//     schema, sweeps a live lease (renewed seconds ago on the database's
//     clock) as expired and claims the job: it would steal live leases.
//   - The real thing: the worker runs on a store with Options.Clock nil, and
//     the one place a Worker reads its own wall clock, the registry
//     heartbeat's SentAt (errand.SetWallClock, from worker_export_test.go),
//     is an hour ahead. A second, honest store competing for the same job
//     claims nothing while the worker's lease is live, the job succeeds on
//     attempt 1, and Client.Workers shows clock_skew_ms of about -3,600,000
//     (the database's clock minus the worker's). A second worker an hour
//     behind shows about +3,600,000.
func TestPostgresWorkerClockSkew(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	ctx := context.Background()
	schema := pgtest.Schema(t, url)
	open := func(clock errandstore.Clock) *postgres.Store {
		t.Helper()
		s, err := postgres.Open(ctx, url, &postgres.Options{Schema: schema, Clock: clock, MaxConns: 4})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	real := open(nil)

	var mu sync.Mutex
	started := map[string]chan struct{}{}
	release := make(chan struct{})
	startedChan := func(id string) chan struct{} {
		mu.Lock()
		defer mu.Unlock()
		if started[id] == nil {
			started[id] = make(chan struct{})
		}
		return started[id]
	}
	c, err := errand.NewClient(real, &errand.Config{Kinds: kindsOf([]testKind{{
		Name: "hold",
		Handler: errand.HandlerFunc(func(ctx context.Context, j *errandtype.Job) error {
			select {
			case <-startedChan(j.ID):
			default:
				close(startedChan(j.ID))
			}
			select {
			case <-release:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}),
	}})})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })

	// Renewed every third of it, the lease survives a renewal delayed by
	// two seconds on a busy machine: losing it would fail the test although
	// the worker's clock played no part.
	const lease = 3 * time.Second
	newWorker := func(queue string, offset time.Duration) *errand.Worker {
		t.Helper()
		w, err := c.NewWorker(&errand.WorkerConfig{Queues: map[string]int{queue: 1}, Lease: lease,
			PollInterval: 100 * time.Millisecond, HeartbeatInterval: 100 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		errand.SetWallClock(w, offsetClock(offset).Now)
		if err := w.Start(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			stopCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			_ = w.Stop(stopCtx)
		})
		return w
	}
	ahead := newWorker("default", time.Hour)
	behind := newWorker("other", -time.Hour)

	enqueue := func() string {
		t.Helper()
		r, err := c.Enqueue(ctx, errand.RawArgs{KindName: "hold"}, &errand.EnqueueOpts{BackoffBase: time.Millisecond, BackoffMax: time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		return r.Job.ID
	}
	waitStarted := func(id string) {
		t.Helper()
		select {
		case <-startedChan(id):
		case <-time.After(20 * time.Second):
			t.Fatalf("job %s did not start", id)
		}
	}
	claim := func(s *postgres.Store) []*errandtype.Job {
		t.Helper()
		js, err := s.JobClaimMany(ctx, &errandstore.JobClaimParams{Queues: []string{errand.DefaultQueue},
			Limit: 10, Lease: time.Minute, Owner: "competitor"})
		if err != nil {
			t.Fatal(err)
		}
		return js
	}

	// The real store: the skewed worker holds its job past the first lease,
	// renewing it on the database's clock; an honest competitor claims
	// nothing, and the job succeeds on attempt 1.
	first := enqueue()
	waitStarted(first)
	time.Sleep(lease + lease/4) // past the first lease: only renewals keep it
	if js := claim(open(nil)); len(js) != 0 {
		t.Fatalf("an honest store claimed %v from a live lease", js)
	}
	// The registry shows each worker's skew: the database's clock minus its
	// own, about -1h for the one ahead and +1h for the one behind.
	ws, err := c.Workers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	skews := map[string]int64{}
	for _, w := range ws {
		skews[w.ID] = w.ClockSkewMS
	}
	for _, want := range []struct {
		w  *errand.Worker
		ms int64
	}{{ahead, -3_600_000}, {behind, 3_600_000}} {
		got, ok := skews[want.w.ID()]
		if !ok || got < want.ms-5000 || got > want.ms+5000 {
			t.Errorf("worker %s: clock_skew_ms %d (listed %v), want about %d", want.w.ID(), got, ok, want.ms)
		}
	}
	release <- struct{}{}
	waitFor(t, 20*time.Second, "the first job to succeed", func() bool {
		j, err := c.Get(ctx, first)
		return err == nil && j.State == errandtype.StateSucceeded
	})
	if j, _ := c.Get(ctx, first); j.Attempt != 1 || len(j.Errors) != 0 {
		t.Errorf("first job: attempt %d, history %+v; want succeeded on attempt 1 with no history", j.Attempt, j.Errors)
	}

	// The counterfactual: a store reading a clock an hour ahead, on the same
	// schema, sweeps the same kind of live lease as expired and takes the
	// job. (The sweep schedules the retry after a millisecond of backoff on
	// its clock, so a second claim may be needed to take it.)
	second := enqueue()
	waitStarted(second)
	skewed := open(offsetClock(time.Hour))
	if j, err := c.Get(ctx, second); err != nil || j.State != errandtype.StateRunning || j.LeaseUntil == nil {
		t.Fatalf("second job before the skewed claim: %+v, %v; want running under the worker's lease", j, err)
	}
	var stolen []*errandtype.Job
	for range 2 {
		if stolen = claim(skewed); len(stolen) > 0 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if len(stolen) != 1 || stolen[0].ID != second || stolen[0].Attempt != 2 {
		t.Fatalf("the skewed store claimed %+v; want it to steal job %s on attempt 2", stolen, second)
	}
	if h := stolen[0].Errors; len(h) != 1 || h[0].Class != errandstore.ClassLeaseExpired || h[0].Attempt != 1 {
		t.Errorf("stolen job's history %+v; want the live attempt 1 swept as lease_expired", h)
	}
	close(release)
}

// waitFor polls cond every 20ms until it holds, failing after limit.
func waitFor(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", limit, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
