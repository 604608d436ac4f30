package errand_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtest"
	"github.com/errandhq/errand/errandtype"
)

func startConcWorker(t *testing.T, c *errand.Client[*sql.Tx], slots int, poll time.Duration, limits ...errand.ConcurrencyLimit) {
	t.Helper()
	w, err := c.NewWorker(&errand.WorkerConfig{
		Queues:            map[string]int{errand.DefaultQueue: slots},
		PollInterval:      poll,
		PollOnly:          true,
		ConcurrencyLimits: limits,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Stop(context.Background()) })
}

// gauge counts the handlers running at once and keeps the most.
type gauge struct {
	mu        sync.Mutex
	now, most int
}

func (g *gauge) enter() {
	g.mu.Lock()
	g.now++
	g.most = max(g.most, g.now)
	g.mu.Unlock()
}

func (g *gauge) leave() {
	g.mu.Lock()
	g.now--
	g.mu.Unlock()
}

// TestWorkerConcurrencyLimit: three workers of 4 slots each, claiming at
// once, never run more than the limit's 3 export jobs at a time between
// them, counted inside the handlers, and run them all; an unlimited kind
// runs beside them.
func TestWorkerConcurrencyLimit(t *testing.T) {
	eachJobStore(t, func(t *testing.T, s errandstore.TxStore[*sql.Tx], clock *errandtest.Clock) {
		var exports gauge
		done := make(chan string, 100)
		kinds := errand.NewKinds()
		kinds.HandleRaw("export", errand.HandlerFunc(func(ctx context.Context, j *errandtype.Job) error {
			exports.enter()
			defer exports.leave()
			time.Sleep(10 * time.Millisecond) // overlap, so that a missing limit shows
			done <- j.ID
			return nil
		}), nil)
		kinds.HandleRaw("email", errand.HandlerFunc(func(ctx context.Context, j *errandtype.Job) error { done <- j.ID; return nil }), nil)
		c := newClient(t, s, &errand.Config{Clock: clock, Kinds: kinds})
		enqueueN(t, c, "export", 24)
		enqueueN(t, c, "email", 6)
		for range 3 {
			startConcWorker(t, c, 4, time.Hour, errand.ConcurrencyLimit{Kind: "export", Limit: 3})
		}
		for i := range 30 {
			select {
			case <-done:
			case <-time.After(clockWait):
				t.Fatalf("only %d of 30 jobs ran", i)
			}
		}
		if exports.most > 3 {
			t.Fatalf("%d export jobs ran at once under a limit of 3", exports.most)
		}
		t.Logf("at most %d export jobs ran at once", exports.most)
		r := waitLimit(t, c, "concurrency:export", func(r *errandtype.LimiterRecord) bool { return r.Running != nil && *r.Running == 0 })
		if r.Tokens != 3 || r.Spec.Mode != errandtype.LimiterModeConcurrency || r.Spec.Rate != 3 {
			t.Fatalf("the limit after: %+v; want 3 free slots of 3", r)
		}
	})
}

// TestWorkerConcurrencyLimitLeaseExpiry: the slots held by a worker that
// died with jobs running (claimed here straight from the store, never
// finished) come back when their leases expire: until then the kind's
// other jobs wait queued, attempts unused; then two jobs run.
func TestWorkerConcurrencyLimitLeaseExpiry(t *testing.T) {
	eachJobStore(t, func(t *testing.T, s errandstore.TxStore[*sql.Tx], clock *errandtest.Clock) {
		ran := make(chan string, 10)
		c := newClient(t, s, &errand.Config{Clock: clock, Kinds: kindsOf([]testKind{{Name: "export",
			Handler: attempts(ran, func(*errandtype.Job) error { return nil })}})})
		for i := range 4 {
			enqueue(t, c, "export", &errand.EnqueueOpts{ID: fmt.Sprintf("j%d", i), Priority: i})
		}
		const lease = 30 * time.Second
		limit := errand.ConcurrencyLimit{Kind: "export", Limit: 2}
		spec, err := limit.Spec()
		if err != nil {
			t.Fatal(err)
		}
		dead, err := s.(errandstore.ConcurrencyClaimer).JobClaimLimited(context.Background(), &errandstore.JobClaimLimitedParams{
			Name: limit.Name(), Spec: spec, Claim: errandstore.JobClaimParams{Queues: []string{errand.DefaultQueue},
				Kinds: []string{"export"}, Limit: 2, Lease: lease, Owner: "killed"}})
		if err != nil || len(dead.Jobs) != 2 {
			t.Fatalf("the killed worker's claim: %+v, %v", dead, err)
		}
		startConcWorker(t, c, 4, lease, limit)
		expired := clock.Now().Add(lease)
		blockUntilAt(t, clock, expired, 1) // the worker claimed nothing and sleeps a poll
		notYet(t, ran, "while the killed worker's leases hold the slots")
		wantJob(t, c, "j2", errandtype.StateQueued, 0)
		clock.Advance(lease)
		got := map[string]bool{}
		for range 2 {
			select {
			case id := <-ran:
				got[id] = true
			case <-time.After(clockWait):
				t.Fatalf("after the leases expired, ran only %v", got)
			}
		}
		// Which two: the waiting ones, or the killed worker's, swept back
		// to run again, whichever the claim meets first.
		if len(got) != 2 {
			t.Fatalf("after the leases expired, ran %v; want two jobs", got)
		}
	})
}

// TestWorkerAdaptiveConcurrencyLimit: an adaptive concurrency limit that
// holds claims back while jobs succeed fast doubles (2 to 4); a 429 an
// interval later lowers it (4 to 3.6, so 3 at once), by the adaptive
// rate limits' rule and collector.
func TestWorkerAdaptiveConcurrencyLimit(t *testing.T) {
	eachJobStore(t, func(t *testing.T, s errandstore.TxStore[*sql.Tx], clock *errandtest.Clock) {
		ran := make(chan string, 20)
		c := newClient(t, s, &errand.Config{Clock: clock, Kinds: kindsOf([]testKind{{Name: "hook",
			Handler: attempts(ran, func(j *errandtype.Job) error {
				if j.ID == "throttled" && j.Attempt == 1 {
					return errand.WithClass("http_429", errors.New("429 Too Many Requests"))
				}
				return nil
			})}})})
		enqueueN(t, c, "hook", 10)
		enqueue(t, c, "hook", &errand.EnqueueOpts{ID: "throttled", Delay: time.Second})
		startConcWorker(t, c, 5, time.Hour, errand.ConcurrencyLimit{Kind: "hook", Limit: 2, Floor: 1, Ceiling: 16, Target: time.Second})
		ranN(t, ran, 10)
		r := waitLimit(t, c, "concurrency:hook", func(r *errandtype.LimiterRecord) bool { return r.Spec.Rate != 2 })
		if r.Spec.Rate != 4 || r.Adaptive == nil || !strings.HasPrefix(r.Adaptive.Reason, errandtype.AdaptiveProbing) {
			t.Fatalf("after fast successes held back by the limit: limit %g, %+v; want 4, probing", r.Spec.Rate, r.Adaptive)
		}
		blockUntilAt(t, clock, clock.Now().Add(time.Second), 1) // the queue sleeps until the throttled job is due
		clock.Advance(time.Second)
		waitAttempt(t, ran, "throttled", "the job due in a second")
		// Successes recorded after the clock moved may double it once more
		// first (to 8): the throttle then lowers it from there.
		r = waitLimit(t, c, "concurrency:hook", func(r *errandtype.LimiterRecord) bool {
			return strings.HasPrefix(r.Adaptive.Reason, errandtype.AdaptiveThrottled)
		})
		if a := r.Adaptive; a.Peak != 4 && a.Peak != 8 || r.Spec.Rate != a.Peak*errandtype.AdaptiveDecrease ||
			!strings.HasPrefix(a.Reason, "throttled: 1 attempt turned away (last http_429)") || a.Decreases != 1 {
			t.Fatalf("after a 429: limit %g, %+v; want 0.9 of 4 (or 8), throttled", r.Spec.Rate, r.Adaptive)
		}
	})
}

// TestWorkerConcurrencyLimitRefusals: a limit on a kind the worker does
// not handle, twice on one kind, or out of range is refused with an
// *InputError, before anything is written.
func TestWorkerConcurrencyLimitRefusals(t *testing.T) {
	c := newClient(t, openStore(t, nil), &errand.Config{Kinds: kindsOf([]testKind{{Name: "k",
		Handler: errand.HandlerFunc(func(context.Context, *errandtype.Job) error { return nil })}})})
	for _, ls := range [][]errand.ConcurrencyLimit{
		{{Kind: "nope", Limit: 1}},
		{{Kind: "k", Limit: 1}, {Kind: "k", Limit: 2}},
		{{Kind: "k", Limit: 0}},
		{{Kind: "k", Limit: 5, Floor: 6, Ceiling: 10}},
		{{Kind: "k", Limit: 5, Floor: 1, Ceiling: 4}},
		{{Kind: "k", Limit: 5, Floor: 1, Ceiling: 10, Target: -time.Second}},
	} {
		var ie *errandtype.InputError
		if _, err := c.NewWorker(&errand.WorkerConfig{ConcurrencyLimits: ls}); !errors.As(err, &ie) || ie.Field != "ConcurrencyLimits" && ie.Field != "ConcurrencyLimits kind" {
			t.Errorf("NewWorker with %+v = %v, want an *InputError about ConcurrencyLimits", ls, err)
		}
	}
	if rs, err := c.Limits(context.Background()); err != nil || len(rs) != 0 {
		t.Fatalf("refused workers left limits: %v, %v", rs, err)
	}
}

// TestRemoteClaimsHonourConcurrencyLimit: a remote worker's claims (the
// HTTP API's) and WorkOne's count against the kind's concurrency limit
// that the Workers keep in the store: with the limit's 2 slots held, they
// claim nothing, and once the holders' leases expire they claim 2, not
// the 5 asked for.
func TestRemoteClaimsHonourConcurrencyLimit(t *testing.T) {
	eachJobStore(t, func(t *testing.T, s errandstore.TxStore[*sql.Tx], clock *errandtest.Clock) {
		ctx := context.Background()
		c := remoteClient(t, s, clock)
		enqueueN(t, c, "task", 8)
		limit := errand.ConcurrencyLimit{Kind: "task", Limit: 2}
		spec, err := limit.Spec()
		if err != nil {
			t.Fatal(err)
		}
		// A Worker with the limit claims under it, which records the rule.
		r, err := s.(errandstore.ConcurrencyClaimer).JobClaimLimited(ctx, &errandstore.JobClaimLimitedParams{Name: limit.Name(), Spec: spec,
			Claim: errandstore.JobClaimParams{Queues: []string{errand.DefaultQueue}, Kinds: []string{"task"}, Owner: "worker-1", Lease: time.Minute, Limit: 5}})
		if err != nil || len(r.Jobs) != 2 {
			t.Fatalf("the Worker's limited claim: %+v, %v; want 2 jobs", r, err)
		}
		claim := func() int {
			t.Helper()
			js, err := c.Claim(ctx, &errand.ClaimOpts{Kinds: []string{"task"}, Owner: "node-7", Lease: time.Minute, Limit: 5})
			if err != nil {
				t.Fatal(err)
			}
			return len(js)
		}
		if n := claim(); n != 0 {
			t.Fatalf("a remote claim with the limit's slots held took %d jobs; want none", n)
		}
		clock.Advance(2 * time.Minute) // the Worker's leases expire
		if n := claim(); n != 2 {
			t.Fatalf("a remote claim once the slots were free took %d jobs; want the limit, 2", n)
		}
		if n := claim(); n != 0 {
			t.Fatalf("a second remote claim took %d jobs; want none", n)
		}
	})
}
