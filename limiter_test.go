package errand_test

import (
	"encoding/json"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandtype"
)

func TestParseRateLimit(t *testing.T) {
	for _, c := range []struct {
		in   string
		want errand.RateLimit
	}{
		{"queue:emails=20/s", errand.RateLimit{Queue: "emails", Limit: 20, Per: time.Second}},
		{"kind:charge=100/m", errand.RateLimit{Kind: "charge", Limit: 100, Per: time.Minute}},
		{"kind:sync=5/30s,burst=5", errand.RateLimit{Kind: "sync", Limit: 5, Per: 30 * time.Second, Burst: 5}},
		{"queue:q=1/h", errand.RateLimit{Queue: "q", Limit: 1, Per: time.Hour}},
	} {
		got, err := errand.ParseRateLimit(c.in)
		if err != nil || got != c.want {
			t.Errorf("ParseRateLimit(%q) = %+v, %v; want %+v", c.in, got, err, c.want)
			continue
		}
		if back, err := errand.ParseRateLimit(got.String()); err != nil || back != got {
			t.Errorf("ParseRateLimit(%q.String() = %q) = %+v, %v", c.in, got.String(), back, err)
		}
	}
	for _, in := range []string{"", "emails=20/s", "topic:x=1/s", "queue:=1/s", "queue:q=0/s", "queue:q=-1/s", "queue:q=1",
		"queue:q=1/0s", "queue:q=1/week", "queue:q=1/s,burst=0", "queue:q=1/s,bust=2", "queue:a b=1/s"} {
		var ie *errandtype.InputError
		if _, err := errand.ParseRateLimit(in); !errors.As(err, &ie) {
			t.Errorf("ParseRateLimit(%q) = %v, want an *InputError", in, err)
		}
	}
}

func TestParseRetryBudget(t *testing.T) {
	for _, c := range []struct {
		in   string
		want errand.RetryBudget
	}{
		{"charge=0.1", errand.RetryBudget{Kind: "charge", Ratio: 0.1}},
		{"charge=10%/5m,min=3", errand.RetryBudget{Kind: "charge", Ratio: 0.1, Window: 5 * time.Minute, Min: 3}},
		{"charge=0.2,min=0", errand.RetryBudget{Kind: "charge", Ratio: 0.2, Min: -1}},
	} {
		got, err := errand.ParseRetryBudget(c.in)
		if err != nil || got != c.want {
			t.Errorf("ParseRetryBudget(%q) = %+v, %v; want %+v", c.in, got, err, c.want)
			continue
		}
		if back, err := errand.ParseRetryBudget(got.String()); err != nil || back != got {
			t.Errorf("ParseRetryBudget(%q.String() = %q) = %+v, %v", c.in, got.String(), back, err)
		}
	}
	for _, in := range []string{"", "=0.1", "k", "k=x", "k=-0.1", "k=NaN", "k=0.1/0s", "k=0.1/1ms", "k=0.1,min=-2", "k=0.1,max=2", "k=2000"} {
		var ie *errandtype.InputError
		if _, err := errand.ParseRetryBudget(in); !errors.As(err, &ie) {
			t.Errorf("ParseRetryBudget(%q) = %v, want an *InputError", in, err)
		}
	}
}

// TestLimiterSpecArithmetic pins the one rule every store applies.
func TestLimiterSpecArithmetic(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	rate := errandtype.LimiterSpec{Mode: errandtype.LimiterModeRate, Rate: 20, Burst: 2}
	st := errandtype.LimiterState{Tokens: rate.Full(), At: t0}
	st, g, wait := rate.Take(st, t0, 5)
	if g != 2 || st.Tokens != 0 || wait != 50*time.Millisecond {
		t.Fatalf("full bucket: granted %d, left %v, wait %s; want 2, 0, 50ms", g, st.Tokens, wait)
	}
	// 100 starts at 20/s with a burst of 2 take 4.9s: 98 tokens to refill.
	now, started := t0, 2
	for started < 100 {
		now = now.Add(wait)
		st, g, wait = rate.Take(st, now, 10)
		started += g
	}
	if d := now.Sub(t0); d < 4890*time.Millisecond || d > 4910*time.Millisecond {
		t.Fatalf("100 starts took %s, want 4.9s", d)
	}
	budget := errandtype.LimiterSpec{Mode: errandtype.LimiterModeRetryBudget, Ratio: 0.1, Min: 3, Window: time.Minute}
	st = errandtype.LimiterState{Tokens: budget.Full(), At: t0}
	st, g, _ = budget.Take(st, t0, 10)
	if g != 3 || st.Tokens != 0 {
		t.Fatalf("new budget: granted %d, left %v; want Min (3), 0", g, st.Tokens)
	}
	// Half a token grants nothing: a retry takes a whole token, and the
	// level climbs (as if towards Min+1) until it holds one.
	st = budget.Give(st, t0, 0.5)
	st, g, wait = budget.Take(st, t0, 10)
	if g != 0 || st.Tokens != 0.5 {
		t.Fatalf("half a token: granted %d, left %v; want 0, 0.5", g, st.Tokens)
	}
	if want := time.Minute.Seconds() * math.Log(3.5/3); math.Abs(wait.Seconds()-want) > 1e-5 {
		t.Fatalf("wait %s, want %.6fs", wait, want)
	}
	if st, g, _ = budget.Take(st, t0.Add(wait), 2); g != 1 || st.Tokens < 0 || st.Tokens > 1e-6 {
		t.Fatalf("after the wait: granted %d, left %v; want 1, 0", g, st.Tokens)
	}
	if _, g, _ = budget.Take(st, t0.Add(wait-time.Millisecond), 1); g != 0 {
		t.Fatalf("a moment before the wait: granted %d, want 0", g)
	}
	// A spent budget of Min 1 regains its token: in Window·ln 2.
	one := errandtype.LimiterSpec{Mode: errandtype.LimiterModeRetryBudget, Min: 1, Window: time.Minute}
	st, g, wait = one.Take(errandtype.LimiterState{Tokens: one.Full(), At: t0}, t0, 5)
	if want := time.Minute.Seconds() * math.Ln2; g != 1 || math.Abs(wait.Seconds()-want) > 1e-5 {
		t.Fatalf("budget of Min 1: granted %d, wait %s; want 1, %.6fs", g, wait, want)
	}
	if _, g, _ = one.Take(st, t0.Add(wait), 5); g != 1 {
		t.Fatalf("budget of Min 1 after its wait: granted %d, want 1", g)
	}
	// It never holds more than Min, however long it rests.
	if l := one.Level(errandtype.LimiterState{At: t0}, t0.Add(time.Hour)); l != 1 {
		t.Fatalf("budget of Min 1 an hour after it was spent holds %v, want 1", l)
	}
	// With no minimum, only a deposit can refill it.
	none := errandtype.LimiterSpec{Mode: errandtype.LimiterModeRetryBudget, Ratio: 0.1, Window: time.Minute}
	if _, g, wait = none.Take(errandtype.LimiterState{At: t0}, t0.Add(time.Hour), 1); g != 0 || wait >= 0 {
		t.Fatalf("empty budget without minimum: granted %d, wait %s; want 0 and a negative wait", g, wait)
	}
}

// TestRateLimitDefaultBurst: the default burst is a tenth of a second's
// worth of starts, at least one.
func TestRateLimitDefaultBurst(t *testing.T) {
	for _, c := range []struct {
		limit errand.RateLimit
		want  errandtype.LimiterSpec
	}{
		{errand.RateLimit{Queue: "q", Limit: 20, Per: time.Second}, errandtype.LimiterSpec{Mode: errandtype.LimiterModeRate, Rate: 20, Burst: 2}},
		{errand.RateLimit{Queue: "q", Limit: 1000, Per: time.Second}, errandtype.LimiterSpec{Mode: errandtype.LimiterModeRate, Rate: 1000, Burst: 100}},
		{errand.RateLimit{Kind: "k", Limit: 120, Per: time.Minute}, errandtype.LimiterSpec{Mode: errandtype.LimiterModeRate, Rate: 2, Burst: 1}},
		{errand.RateLimit{Kind: "k", Limit: 120, Per: time.Minute, Burst: 7}, errandtype.LimiterSpec{Mode: errandtype.LimiterModeRate, Rate: 2, Burst: 7}},
	} {
		if got, err := errand.RateLimitSpec(c.limit); err != nil || got != c.want {
			t.Errorf("spec of %s = %+v, %v; want %+v", c.limit, got, err, c.want)
		}
	}
}

// A limiter's spec as JSON holds null for what its mode does not use, and
// reads back as it was.
func TestLimiterSpecJSON(t *testing.T) {
	for _, tc := range []struct {
		spec errandtype.LimiterSpec
		want string
	}{
		{errandtype.LimiterSpec{Mode: errandtype.LimiterModeRate, Rate: 20, Burst: 5},
			`{"mode":"rate","rate":20,"burst":5,"min":null,"ratio":null,"window_seconds":null}`},
		{errandtype.LimiterSpec{Mode: errandtype.LimiterModeRetryBudget, Min: 10, Ratio: 0.1, Window: time.Minute},
			`{"mode":"retry_budget","rate":null,"burst":null,"min":10,"ratio":0.1,"window_seconds":60}`},
	} {
		b, err := json.Marshal(tc.spec)
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != tc.want {
			t.Errorf("%+v as JSON: %s, want %s", tc.spec, b, tc.want)
		}
		var back errandtype.LimiterSpec
		if err := json.Unmarshal(b, &back); err != nil || back != tc.spec {
			t.Errorf("%s read back as %+v (%v), want %+v", b, back, err, tc.spec)
		}
	}
}
