package errand_test

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtest"
	"github.com/errandhq/errand/errandtype"
)

// TestAdaptiveLimitOrBreaker: a Worker's failed attempt of a kind that calls
// a dependency moves the kind's adaptive limit when the provider is slow
// or throttles (a 503 without a reset time, a timeout) and counts for the
// dependency's breaker when it is down (a server error, a refused
// connection, a timeout): a timeout says both. A throttle is no failure
// of the breaker, a failure no signal to the limit.
func TestAdaptiveLimitOrBreaker(t *testing.T) {
	t.Parallel()
	const timeout = 2 * time.Second
	for _, c := range []struct {
		name     string
		err      error // nil: the handler runs past its timeout
		lowered  bool  // the limit moves down
		failures int   // the breaker's failures after
	}{
		{"503 without a reset time", errand.WithClass("http_503", errors.New("503 Service Unavailable")), true, 0},
		{"server error", errand.WithClass("http_500", errors.New("500 Internal Server Error")), false, 1},
		{"connection refused", errors.New("dial provider: connection refused"), false, 1},
		{"timeout", nil, true, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			eachJobStore(t, func(t *testing.T, s errandstore.TxStore[*sql.Tx], clock *errandtest.Clock) {
				ran := make(chan string, 10)
				kinds := errand.NewKinds()
				kinds.HandleRaw("hook", errand.HandlerFunc(func(ctx context.Context, j *errandtype.Job) error {
					ran <- j.ID
					if c.err != nil {
						return c.err
					}
					<-ctx.Done()
					return ctx.Err()
				}), &errand.KindOpts{Dependency: "provider", Timeout: timeout,
					RetryPolicy: &errand.RetryPolicy{Base: time.Hour, Max: time.Hour}})
				cl := newClient(t, s, &errand.Config{Clock: clock, Kinds: kinds,
					Breakers: map[string]*errandtype.BreakerPolicy{"provider": {Threshold: 5, Window: time.Minute, Cooldown: 47 * time.Second}}})
				enqueue(t, cl, "hook", &errand.EnqueueOpts{ID: "j0"})
				start := clock.Now()
				startLimitedWorker(t, cl, 1, []errand.RateLimit{{Kind: "hook", Limit: 100, Per: time.Second, Floor: 1, Ceiling: 1000}}, nil)
				waitAttempt(t, ran, "j0", "the attempt")
				if c.err == nil {
					blockUntilAt(t, clock, start.Add(timeout), 1)
					clock.Advance(timeout)
				}
				waitState(t, cl, "j0", errandtype.StateRetrying)
				// The breaker hears of the attempt once it is recorded; a
				// count that should stay 0 is watched a moment longer.
				settled, deadline := time.Now().Add(200*time.Millisecond), time.Now().Add(clockWait)
				for {
					bs, err := cl.Breakers(context.Background())
					if err != nil {
						t.Fatal(err)
					}
					n := 0
					for _, b := range bs {
						n += b.Failures
					}
					if n > c.failures || n < c.failures && time.Now().After(deadline) {
						t.Fatalf("the breaker counted %d failures; want %d", n, c.failures)
					}
					if n == c.failures && (n > 0 || time.Now().After(settled)) {
						break
					}
					time.Sleep(10 * time.Millisecond)
				}
				r := waitLimit(t, cl, "kind:hook", func(r *errandtype.LimiterRecord) bool { return !c.lowered || r.Spec.Rate != 100 })
				if lowered := r.Spec.Rate < 100; lowered != c.lowered || c.lowered && !strings.HasPrefix(r.Adaptive.Reason, errandtype.AdaptiveThrottled) {
					t.Errorf("the adaptive limit after the attempt: %g/s, %+v; want lowered %v", r.Spec.Rate, r.Adaptive, c.lowered)
				}
			})
		})
	}
}

// waitState polls job id until it is in state.
func waitState(t *testing.T, c *errand.Client[*sql.Tx], id string, state errandtype.JobState) {
	t.Helper()
	deadline := time.Now().Add(clockWait)
	for {
		j, err := c.Store().JobGet(context.Background(), &errandstore.JobGetParams{ID: id})
		if err != nil {
			t.Fatal(err)
		}
		if j.State == state {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s is %s; want %s", id, j.State, state)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
