package errand_test

import (
	"context"
	"database/sql"
	"errors"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandtest"
	"github.com/errandhq/errand/errandtype"
)

// wantCap computes min(max, base*2^(attempt-1)) in floating point, a
// different route from the policy's doubling loop. Every value below max is
// an integer times a power of two under 2^63, so float64 holds it exactly.
func wantCap(base, max time.Duration, attempt int) time.Duration {
	c := float64(base) * math.Pow(2, float64(attempt-1))
	if c >= float64(max) {
		return max
	}
	return time.Duration(c)
}

func TestRetryPolicyDelayWithinEqualJitterBounds(t *testing.T) {
	tests := []struct {
		name      string
		base, max time.Duration
	}{
		{"defaults", errand.DefaultBackoffBase, errand.DefaultBackoffMax},
		{"sub-second", 100 * time.Millisecond, 30 * time.Second},
		{"odd base", 7 * time.Millisecond, 1000 * time.Hour},
		{"base equals max", 3 * time.Second, 3 * time.Second},
		{"huge max", time.Second, 1 << 62},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &errand.RetryPolicy{Base: tt.base, Max: tt.max, Rand: rand.New(rand.NewPCG(1, 2))}
			for attempt := 1; attempt <= 40; attempt++ {
				c := wantCap(tt.base, tt.max, attempt)
				if got := p.Cap(attempt); got != c {
					t.Fatalf("attempt %d: Cap = %v, want %v", attempt, got, c)
				}
				// Several draws per attempt, so a delay that only sometimes
				// leaves the range is caught too.
				for range 50 {
					d := p.Delay(attempt)
					if d < c/2 || d >= c {
						t.Fatalf("attempt %d: delay %v outside [%v, %v)", attempt, d, c/2, c)
					}
				}
			}
		})
	}
}

func TestRetryPolicyDelayIsJitteredAndDeterministic(t *testing.T) {
	draw := func() []time.Duration {
		p := &errand.RetryPolicy{Base: time.Second, Max: time.Hour, Rand: rand.New(rand.NewPCG(1, 2))}
		var ds []time.Duration
		for range 100 {
			ds = append(ds, p.Delay(10))
		}
		return ds
	}
	a, b := draw(), draw()
	distinct := map[time.Duration]bool{}
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("draw %d: %v then %v from the same seed; the policy must use its Rand", i, a[i], b[i])
		}
		distinct[a[i]] = true
	}
	// Equal jitter: half the cap is random, so 100 draws over a 256s span
	// must not collapse onto a few values.
	if len(distinct) < 90 {
		t.Fatalf("100 delays took only %d distinct values; the delay is not jittered", len(distinct))
	}
}

func TestRetryPolicyDefaults(t *testing.T) {
	if errand.DefaultMaxAttempts != 20 || errand.DefaultBackoffBase != time.Second || errand.DefaultBackoffMax != time.Hour {
		t.Fatalf("defaults changed: max attempts %d, base %v, max %v; update the docs and this test together",
			errand.DefaultMaxAttempts, errand.DefaultBackoffBase, errand.DefaultBackoffMax)
	}
	var zero errand.RetryPolicy
	var nilPolicy *errand.RetryPolicy
	for attempt, want := range map[int]time.Duration{
		0: time.Second, 1: time.Second, 2: 2 * time.Second, 12: 2048 * time.Second,
		13: time.Hour, 20: time.Hour, 1000: time.Hour,
	} {
		if got := zero.Cap(attempt); got != want {
			t.Errorf("zero policy: Cap(%d) = %v, want %v", attempt, got, want)
		}
		if got := nilPolicy.Cap(attempt); got != want {
			t.Errorf("nil policy: Cap(%d) = %v, want %v", attempt, got, want)
		}
	}
	// The docs say the default retries last 4h04m to 8h08m, 6h06m on
	// average: the 19 delays between 20 attempts are each in [cap/2, cap).
	var caps time.Duration
	for attempt := 1; attempt < errand.DefaultMaxAttempts; attempt++ {
		caps += zero.Cap(attempt)
	}
	if want := 8*time.Hour + 8*time.Minute + 15*time.Second; caps != want {
		t.Errorf("the default delays' caps sum to %v, want %v; update the docs and this test together", caps, want)
	}
	// Used on its own (NewClient refuses it), a policy's Max below Base is
	// raised to Base rather than producing a delay below the base.
	p := errand.RetryPolicy{Base: time.Minute, Max: time.Second}
	if got := p.Cap(5); got != time.Minute {
		t.Errorf("Base 1m, Max 1s: Cap(5) = %v, want 1m", got)
	}

	// New jobs get the Config's, then the kind's, then their own budget.
	st := openStore(t, newTestClock())
	c := newClient(t, st, &errand.Config{Kinds: kindsOf([]testKind{{Name: "budgeted", MaxAttempts: 4}}), AllowUnknownKinds: true})
	if j := enqueue(t, c, "plain", nil); j.MaxAttempts != errand.DefaultMaxAttempts {
		t.Errorf("default max attempts = %d, want %d", j.MaxAttempts, errand.DefaultMaxAttempts)
	}
	if j := enqueue(t, c, "budgeted", nil); j.MaxAttempts != 4 {
		t.Errorf("kind max attempts = %d, want 4", j.MaxAttempts)
	}
	if j := enqueue(t, c, "budgeted", &errand.EnqueueOpts{MaxAttempts: 2}); j.MaxAttempts != 2 {
		t.Errorf("job max attempts = %d, want 2", j.MaxAttempts)
	}
	c2 := newClient(t, st, &errand.Config{MaxAttempts: 7})
	if j := enqueue(t, c2, "plain", nil); j.MaxAttempts != 7 {
		t.Errorf("config max attempts = %d, want 7", j.MaxAttempts)
	}
}

// failAndCheckDelay runs one attempt of the only claimable job, which fails,
// and checks that the job waits within [cap/2, cap) of the clock.
func failAndCheckDelay(t *testing.T, c *errand.Client[*sql.Tx], clock *errandtest.Clock, id string, limit time.Duration) {
	t.Helper()
	r := workOne(t, c, &errand.WorkOneOpts{})
	if r.Result != errand.ResultRetrying || *r.JobID != id {
		t.Fatalf("work one: %+v, want job %s retrying", r, id)
	}
	j := getJob(t, c, id)
	wait := j.AvailableAt.Sub(clock.Now())
	if wait < limit/2 || wait >= limit {
		t.Fatalf("attempt %d: job waits %v, want within [%v, %v)", j.Attempt, wait, limit/2, limit)
	}
	if !r.AvailableAt.Equal(j.AvailableAt) {
		t.Fatalf("result says available at %v, job says %v", r.AvailableAt, j.AvailableAt)
	}
	clock.Set(j.AvailableAt)
}

func TestPerJobBackoffOverridesPolicy(t *testing.T) {
	clock := newTestClock()
	st := openStore(t, clock)
	failing := func(context.Context, *errandtype.Job) error { return errors.New("upstream down") }
	c := newClient(t, st, &errand.Config{Kinds: kindsOf([]testKind{{
		Name: "task", Handler: errand.HandlerFunc(failing),
		// The kind's policy would wait hours; the job's own settings win.
		RetryPolicy: &errand.RetryPolicy{Base: time.Hour, Max: 10 * time.Hour},
	}})})
	j := enqueue(t, c, "task", &errand.EnqueueOpts{BackoffBase: 10 * time.Second, BackoffMax: 40 * time.Second, MaxAttempts: 10})
	if time.Duration(j.BackoffBase) != 10*time.Second || time.Duration(j.BackoffMax) != 40*time.Second {
		t.Fatalf("job backoff = %v/%v, want 10s/40s", j.BackoffBase, j.BackoffMax)
	}
	for _, limit := range []time.Duration{10 * time.Second, 20 * time.Second, 40 * time.Second, 40 * time.Second, 40 * time.Second} {
		failAndCheckDelay(t, c, clock, j.ID, limit)
	}
}

func TestPerKindRetryPolicy(t *testing.T) {
	clock := newTestClock()
	st := openStore(t, clock)
	failing := errand.HandlerFunc(func(context.Context, *errandtype.Job) error { return errors.New("nope") })
	c := newClient(t, st, &errand.Config{
		RetryPolicy: &errand.RetryPolicy{Base: time.Millisecond, Max: time.Millisecond},
		Kinds: kindsOf([]testKind{
			{Name: "slow", Handler: failing, RetryPolicy: &errand.RetryPolicy{Base: time.Minute, Max: 3 * time.Minute}},
			{Name: "fast", Handler: failing},
		}),
	})
	slow := enqueue(t, c, "slow", nil)
	for _, limit := range []time.Duration{time.Minute, 2 * time.Minute, 3 * time.Minute, 3 * time.Minute} {
		failAndCheckDelay(t, c, clock, slow.ID, limit)
	}
	if _, err := c.Cancel(context.Background(), slow.ID, &errand.CancelOpts{Operator: "ana", Reason: "not needed"}); err != nil {
		t.Fatal(err)
	}
	// A kind without a policy uses the Config's.
	fast := enqueue(t, c, "fast", nil)
	failAndCheckDelay(t, c, clock, fast.ID, time.Millisecond)
}
