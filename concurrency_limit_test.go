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

// runUnderLimit starts three workers of 4 slots with limit, waits for n
// jobs to report to done, and fails if more than the limit ran at once by
// g.
func runUnderLimit(t *testing.T, c *errand.Client[*sql.Tx], done <-chan string, n int, g *gauge, limit errand.ConcurrencyLimit) {
	t.Helper()
	for range 3 {
		startConcWorker(t, c, 4, time.Hour, limit)
	}
	for i := range n {
		select {
		case <-done:
		case <-time.After(clockWait):
			t.Fatalf("only %d of %d jobs ran", i, n)
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.most > limit.Limit {
		t.Fatalf("%d jobs ran at once under %s", g.most, limit)
	}
	t.Logf("at most %d jobs ran at once under %s", g.most, limit)
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
		runUnderLimit(t, c, done, 30, &exports, errand.ConcurrencyLimit{Kind: "export", Limit: 3})
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

// TestWorkerDependencyConcurrencyLimit: a dependency's limit counts every
// kind that declares it together: three workers of 4 slots never run more
// than 3 charges and refunds at once between them, and run them all; a
// kind that declares no dependency runs beside them. The limit's row keeps
// the kinds it counts.
func TestWorkerDependencyConcurrencyLimit(t *testing.T) {
	eachJobStore(t, func(t *testing.T, s errandstore.TxStore[*sql.Tx], clock *errandtest.Clock) {
		var payments gauge
		done := make(chan string, 100)
		pay := errand.HandlerFunc(func(ctx context.Context, j *errandtype.Job) error {
			payments.enter()
			defer payments.leave()
			time.Sleep(10 * time.Millisecond) // overlap, so that a missing limit shows
			done <- j.ID
			return nil
		})
		kinds := errand.NewKinds()
		kinds.HandleRaw("charge", pay, &errand.KindOpts{Dependency: "payments"})
		kinds.HandleRaw("refund", pay, &errand.KindOpts{Dependency: "payments"})
		kinds.HandleRaw("email", errand.HandlerFunc(func(ctx context.Context, j *errandtype.Job) error { done <- j.ID; return nil }), nil)
		c := newClient(t, s, &errand.Config{Clock: clock, Kinds: kinds})
		enqueueN(t, c, "charge", 12)
		enqueueN(t, c, "refund", 12)
		enqueueN(t, c, "email", 6)
		runUnderLimit(t, c, done, 30, &payments, errand.ConcurrencyLimit{Dependency: "payments", Limit: 3})
		r := waitLimit(t, c, "concurrency:dependency:payments", func(r *errandtype.LimiterRecord) bool { return r.Running != nil && *r.Running == 0 })
		if r.Tokens != 3 || r.Spec.Rate != 3 || strings.Join(r.Counts, ",") != "charge,refund" {
			t.Fatalf("the limit after: %+v; want 3 free slots of 3, counting charge and refund", r)
		}
	})
}

// TestWorkerDependencyConcurrencyLimitRefusals: a dependency's limit that
// no kind of the worker declares, one that names a kind too, and a kind
// under its own limit and its dependency's are refused with an
// *InputError, before anything is written.
func TestWorkerDependencyConcurrencyLimitRefusals(t *testing.T) {
	kinds := errand.NewKinds()
	kinds.HandleRaw("charge", errand.HandlerFunc(func(context.Context, *errandtype.Job) error { return nil }), &errand.KindOpts{Dependency: "payments"})
	c := newClient(t, openStore(t, nil), &errand.Config{Kinds: kinds})
	for _, ls := range [][]errand.ConcurrencyLimit{
		{{Dependency: "nope", Limit: 1}},
		{{Kind: "charge", Dependency: "payments", Limit: 1}},
		{{Kind: "charge", Limit: 1}, {Dependency: "payments", Limit: 2}},
		{{Kind: "dependency:payments", Limit: 1}},
	} {
		var ie *errandtype.InputError
		if _, err := c.NewWorker(&errand.WorkerConfig{ConcurrencyLimits: ls}); !errors.As(err, &ie) || !strings.HasPrefix(ie.Field, "ConcurrencyLimits") {
			t.Errorf("NewWorker with %+v = %v, want an *InputError about ConcurrencyLimits", ls, err)
		}
	}
	if rs, err := c.Limits(context.Background()); err != nil || len(rs) != 0 {
		t.Fatalf("refused workers left limits: %v, %v", rs, err)
	}
}

// TestRemoteOutcomesMoveConcurrencyLimit: a remote worker's claims pass a
// dependency's concurrency limit, counting the running jobs of every kind
// it counts, and the remote worker's throttle lowers the adaptive limit as
// a Worker's would (4 to 3.6, so 3 at once).
func TestRemoteOutcomesMoveConcurrencyLimit(t *testing.T) {
	eachJobStore(t, func(t *testing.T, s errandstore.TxStore[*sql.Tx], clock *errandtest.Clock) {
		ctx := context.Background()
		kinds := errand.NewKinds()
		kinds.HandleRaw("charge", nil, &errand.KindOpts{Dependency: "payments"})
		kinds.HandleRaw("refund", nil, &errand.KindOpts{Dependency: "payments"})
		c := newClient(t, s, &errand.Config{Clock: clock, Kinds: kinds})
		enqueueN(t, c, "charge", 8)
		enqueueN(t, c, "refund", 1)
		limit := errand.ConcurrencyLimit{Dependency: "payments", Limit: 4, Floor: 1, Ceiling: 16}
		spec, err := limit.Spec()
		if err != nil {
			t.Fatal(err)
		}
		// A Worker with the limit claims a refund under it, which records
		// the rule and the kinds it counts.
		r, err := s.(errandstore.ConcurrencyClaimer).JobClaimLimited(ctx, &errandstore.JobClaimLimitedParams{Name: limit.Name(), Spec: spec,
			Counts: []string{"charge", "refund"}, Claim: errandstore.JobClaimParams{Queues: []string{errand.DefaultQueue}, Kinds: []string{"refund"},
				Owner: "worker-1", Lease: time.Minute, Limit: 5}})
		if err != nil || len(r.Jobs) != 1 {
			t.Fatalf("the Worker's limited claim: %+v, %v; want the refund", r, err)
		}
		js, err := c.Claim(ctx, &errand.ClaimOpts{Kinds: []string{"charge"}, Owner: "node-7", Lease: time.Minute, Limit: 8})
		if err != nil || len(js) != 3 {
			t.Fatalf("a remote claim of charges beside a running refund took %d, %v; want 3 of the limit's 4", len(js), err)
		}
		if _, err := c.Fail(ctx, js[0].ID, *js[0].LeaseToken, &errand.FailOpts{Class: "http_429", Message: "429 Too Many Requests"}); err != nil {
			t.Fatal(err)
		}
		got := waitLimit(t, c, limit.Name(), func(r *errandtype.LimiterRecord) bool { return r.Spec.Rate != 4 })
		if a := got.Adaptive; got.Spec.Rate != 4*errandtype.AdaptiveDecrease || a == nil || !strings.HasPrefix(a.Reason, errandtype.AdaptiveThrottled) {
			t.Fatalf("after a remote 429: limit %g, %+v; want 0.9 of 4, throttled", got.Spec.Rate, got.Adaptive)
		}
	})
}

// TestRemoteSlowSuccessLowersAdaptiveLimit: the latency target kept with an
// adaptive limit's rule judges a remote worker's success by the time from
// its claim to its acknowledgment: one slower than the target lowers the
// limit as a Worker's slow success would (4 to 3.6), one within it does not.
func TestRemoteSlowSuccessLowersAdaptiveLimit(t *testing.T) {
	eachJobStore(t, func(t *testing.T, s errandstore.TxStore[*sql.Tx], clock *errandtest.Clock) {
		ctx := context.Background()
		c := remoteClient(t, s, clock)
		enqueueN(t, c, "task", 3)
		limit := errand.ConcurrencyLimit{Kind: "task", Limit: 4, Floor: 1, Ceiling: 16, Target: time.Second}
		spec, err := limit.Spec()
		if err != nil {
			t.Fatal(err)
		}
		// A Worker with the limit claims under it, which records the rule.
		if _, err := s.(errandstore.ConcurrencyClaimer).JobClaimLimited(ctx, &errandstore.JobClaimLimitedParams{Name: limit.Name(), Spec: spec,
			Claim: errandstore.JobClaimParams{Queues: []string{errand.DefaultQueue}, Kinds: []string{"task"}, Owner: "worker-1", Lease: time.Minute, Limit: 1}}); err != nil {
			t.Fatal(err)
		}
		ack := func(took time.Duration) {
			t.Helper()
			j := claimOne(t, c, "node-7")
			clock.Advance(took)
			if _, err := c.Ack(ctx, j.ID, *j.LeaseToken); err != nil {
				t.Fatal(err)
			}
		}
		ack(500 * time.Millisecond) // within the target: reported, not slow
		if r := waitLimit(t, c, limit.Name(), func(*errandtype.LimiterRecord) bool { return true }); r.Spec.Rate != 4 || r.Spec.Target != time.Second {
			t.Fatalf("after a success within the target: limit %g, target %s; want 4, 1s", r.Spec.Rate, r.Spec.Target)
		}
		clock.Advance(errandtype.AdaptiveInterval)
		ack(2 * time.Second)
		r := waitLimit(t, c, limit.Name(), func(r *errandtype.LimiterRecord) bool { return r.Spec.Rate != 4 })
		if a := r.Adaptive; r.Spec.Rate != 4*errandtype.AdaptiveDecrease || a == nil || !strings.HasPrefix(a.Reason, errandtype.AdaptiveSlow) {
			t.Fatalf("after a remote success slower than the target: limit %g, %+v; want 0.9 of 4, slow", r.Spec.Rate, r.Adaptive)
		}
	})
}

// TestWorkerAdaptiveDependencyConcurrencyLimit: a throttle met by any kind
// that declares a dependency lowers the dependency's adaptive concurrency
// limit, the one collector of all its kinds (4 to 3.6).
func TestWorkerAdaptiveDependencyConcurrencyLimit(t *testing.T) {
	eachJobStore(t, func(t *testing.T, s errandstore.TxStore[*sql.Tx], clock *errandtest.Clock) {
		ran := make(chan string, 20)
		ok := attempts(ran, func(*errandtype.Job) error { return nil })
		kinds := errand.NewKinds()
		kinds.HandleRaw("charge", ok, &errand.KindOpts{Dependency: "payments"})
		kinds.HandleRaw("refund", attempts(ran, func(j *errandtype.Job) error {
			if j.Attempt == 1 {
				return errand.WithClass("http_429", errors.New("429 Too Many Requests"))
			}
			return nil
		}), &errand.KindOpts{Dependency: "payments", RetryPolicy: &errand.RetryPolicy{Base: time.Hour, Max: time.Hour}})
		c := newClient(t, s, &errand.Config{Clock: clock, Kinds: kinds})
		enqueue(t, c, "refund", &errand.EnqueueOpts{ID: "r1"})
		startConcWorker(t, c, 5, time.Hour, errand.ConcurrencyLimit{Dependency: "payments", Limit: 4, Floor: 1, Ceiling: 16})
		waitAttempt(t, ran, "r1", "the refund")
		r := waitLimit(t, c, "concurrency:dependency:payments", func(r *errandtype.LimiterRecord) bool { return r.Spec.Rate != 4 })
		if a := r.Adaptive; r.Spec.Rate != 4*errandtype.AdaptiveDecrease || a == nil || !strings.HasPrefix(a.Reason, errandtype.AdaptiveThrottled) {
			t.Fatalf("after a refund's 429: limit %g, %+v; want 0.9 of 4, throttled", r.Spec.Rate, r.Adaptive)
		}
	})
}
