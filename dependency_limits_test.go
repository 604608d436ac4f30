package errand_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtest"
	"github.com/errandhq/errand/errandtype"
)

// dependencyKinds declares kinds a and b, which call dependency "api",
// and c, which calls nothing, each handled by handler.
func dependencyKinds(handler errand.Handler) *errand.Kinds {
	kinds := errand.NewKinds()
	kinds.HandleRaw("a", handler, &errand.KindOpts{Dependency: "api"})
	kinds.HandleRaw("b", handler, &errand.KindOpts{Dependency: "api"})
	kinds.HandleRaw("c", handler, nil)
	return kinds
}

// TestDependencyRateLimitShared: two kinds that call one dependency share
// its rate: with a's jobs in one queue and b's in another, claimed by
// separate loops, no more than the dependency's burst and 2 a second
// start in all, while a kind that calls nothing runs unlimited.
func TestDependencyRateLimitShared(t *testing.T) {
	t.Parallel()
	eachJobStore(t, func(t *testing.T, s errandstore.TxStore[*sql.Tx], clock *errandtest.Clock) {
		ran := make(chan string, 30)
		c := newClient(t, s, &errand.Config{Clock: clock, Kinds: dependencyKinds(attempts(ran, func(*errandtype.Job) error { return nil }))})
		for i := range 4 {
			enqueue(t, c, "a", &errand.EnqueueOpts{ID: fmt.Sprintf("a%d", i), Queue: "qa"})
			enqueue(t, c, "b", &errand.EnqueueOpts{ID: fmt.Sprintf("b%d", i), Queue: "qb"})
			enqueue(t, c, "c", &errand.EnqueueOpts{ID: fmt.Sprintf("c%d", i), Queue: "qc"})
		}
		w, err := c.NewWorker(&errand.WorkerConfig{
			Queues:       map[string]int{"qa": 5, "qb": 5, "qc": 5},
			PollInterval: time.Hour,
			PollOnly:     true,
			RateLimits:   []errand.RateLimit{{Dependency: "api", Limit: 2, Per: time.Second, Burst: 2}},
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { w.Stop(context.Background()) })
		// Every 100ms of the clock, the starts so far of the dependency's
		// kinds stay within its burst and rate: 2 + 2 a second, in all.
		start, api, other := clock.Now(), 0, 0
		for api < 8 {
			for _, id := range ranSoFar(ran, 100*time.Millisecond) {
				if strings.HasPrefix(id, "c") {
					other++
				} else {
					api++
				}
			}
			elapsed := clock.Now().Sub(start)
			if most := 2 + int(2*elapsed.Seconds()); api > most {
				t.Fatalf("after %s: %d jobs of the dependency's kinds started; want at most %d across both kinds", elapsed, api, most)
			}
			if elapsed > 10*time.Second {
				t.Fatalf("after %s: only %d of the dependency's 8 jobs started", elapsed, api)
			}
			clock.Advance(100 * time.Millisecond)
		}
		if other != 4 {
			t.Fatalf("%d jobs of the kind without a dependency started; want all 4", other)
		}
		r := waitLimit(t, c, "dependency:api", func(*errandtype.LimiterRecord) bool { return true })
		if r.Spec.Rate != 2 || r.Spec.Burst != 2 {
			t.Fatalf("the dependency's bucket: %+v", r)
		}
	})
}

// TestDependencyThrottleHoldsItsKinds: a provider's reset time met by one
// kind holds every kind of its dependency, through the dependency's
// adaptive limit, until it passes; nothing else is held.
func TestDependencyThrottleHoldsItsKinds(t *testing.T) {
	eachJobStore(t, func(t *testing.T, s errandstore.TxStore[*sql.Tx], clock *errandtest.Clock) {
		ran := make(chan string, 10)
		c := newClient(t, s, &errand.Config{Clock: clock, Kinds: dependencyKinds(attempts(ran, func(j *errandtype.Job) error {
			if j.ID == "a0" && j.Attempt == 1 {
				return errand.RetryAfter(3*time.Second, errand.WithClass("http_429", errors.New("429 Too Many Requests")))
			}
			return nil
		}))})
		enqueue(t, c, "a", &errand.EnqueueOpts{ID: "a0"})
		enqueue(t, c, "b", &errand.EnqueueOpts{ID: "b0", Priority: 1})
		enqueue(t, c, "c", &errand.EnqueueOpts{ID: "c0", Priority: 2})
		startLimitedWorker(t, c, 1, []errand.RateLimit{{Dependency: "api", Limit: 100, Per: time.Second, Floor: 1, Ceiling: 1000}}, nil)
		waitAttempt(t, ran, "a0", "first attempt")
		held := clock.Now().Add(3 * time.Second)
		r := waitLimit(t, c, "dependency:api", func(r *errandtype.LimiterRecord) bool { return r.Adaptive != nil && !r.Adaptive.HeldUntil.IsZero() })
		if !r.Adaptive.HeldUntil.Equal(held.Truncate(time.Microsecond)) || r.Spec.Rate != 100*errandtype.AdaptiveDecrease {
			t.Fatalf("after a's 429 with a reset time of 3s: rate %g, %+v", r.Spec.Rate, *r.Adaptive)
		}
		waitAttempt(t, ran, "c0", "a kind of no dependency, during the hold")
		notYet(t, ran, "while the provider's reset time holds the dependency")
		wantJob(t, c, "b0", errandtype.StateQueued, 0)
		blockUntilAt(t, clock, held, 1)
		clock.Advance(3 * time.Second)
		got := map[string]bool{}
		for step := 0; len(got) < 2; step++ {
			if step == 300 {
				t.Fatalf("after the reset time, ran only %v", got)
			}
			clock.Advance(10 * time.Millisecond)
			select {
			case id := <-ran:
				got[id] = true
			case <-time.After(50 * time.Millisecond):
			}
		}
		if !got["a0"] || !got["b0"] {
			t.Fatalf("after the reset time, ran %v; want a0's retry and b0", got)
		}
	})
}

// TestDependencyLimitNeedsADeclaringKind: a dependency's limit that no
// registered kind declares is refused, saying how to declare it; so is a
// dependency limited twice, or a limit naming two scopes.
func TestDependencyLimitNeedsADeclaringKind(t *testing.T) {
	c := newClient(t, openStore(t, nil), &errand.Config{Kinds: dependencyKinds(errand.HandlerFunc(func(context.Context, *errandtype.Job) error { return nil }))})
	for _, c2 := range []struct {
		rates []errand.RateLimit
		says  string
	}{
		{[]errand.RateLimit{{Dependency: "smtp", Limit: 1, Per: time.Second}}, "KindOpts.Dependency"},
		{[]errand.RateLimit{{Dependency: "api", Limit: 1, Per: time.Second}, {Dependency: "api", Limit: 2, Per: time.Second}}, "limited twice"},
		{[]errand.RateLimit{{Dependency: "api", Kind: "a", Limit: 1, Per: time.Second}}, "exactly one"},
		{[]errand.RateLimit{{Dependency: "api", Limit: 1, Per: time.Second, Floor: 2, Ceiling: 5}}, "floor"},
	} {
		var ie *errandtype.InputError
		_, err := c.NewWorker(&errand.WorkerConfig{RateLimits: c2.rates})
		if !errors.As(err, &ie) || !strings.Contains(err.Error(), c2.says) {
			t.Errorf("NewWorker(%+v) = %v; want an *InputError that says %q", c2.rates, err, c2.says)
		}
	}
	if _, err := c.NewWorker(&errand.WorkerConfig{RateLimits: []errand.RateLimit{{Dependency: "api", Limit: 1, Per: time.Second, Floor: 1, Ceiling: 5}}}); err != nil {
		t.Fatalf("an adaptive dependency limit: %v", err)
	}
}

func TestParseDependencyRateLimit(t *testing.T) {
	for in, want := range map[string]errand.RateLimit{
		"dependency:payments-api=100/s":                     {Dependency: "payments-api", Limit: 100, Per: time.Second},
		"dependency:smtp=5/m,burst=2":                       {Dependency: "smtp", Limit: 5, Per: time.Minute, Burst: 2},
		"dependency:api=50/s,floor=5,ceiling=500,target=2s": {Dependency: "api", Limit: 50, Per: time.Second, Floor: 5, Ceiling: 500, Target: 2 * time.Second},
	} {
		got, err := errand.ParseRateLimit(in)
		if err != nil || got != want || got.Name() != "dependency:"+want.Dependency {
			t.Errorf("ParseRateLimit(%q) = %+v, %v; want %+v", in, got, err, want)
			continue
		}
		if back, err := errand.ParseRateLimit(got.String()); err != nil || back != got {
			t.Errorf("ParseRateLimit(%q.String() = %q) = %+v, %v", in, got.String(), back, err)
		}
	}
	for _, in := range []string{"dependency:=1/s", "dependency:a b=1/s", "dependency:api=0/s", "dependencies:api=1/s"} {
		var ie *errandtype.InputError
		if _, err := errand.ParseRateLimit(in); !errors.As(err, &ie) {
			t.Errorf("ParseRateLimit(%q) = %v, want an *InputError", in, err)
		}
	}
}
