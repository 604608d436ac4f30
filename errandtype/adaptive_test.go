package errandtype

import (
	"strings"
	"testing"
	"time"
)

func TestAdapt(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	spec := LimiterSpec{Mode: LimiterModeRate, Rate: 100, Burst: 10, Floor: 10, Ceiling: 1000}
	st := LimiterState{Tokens: 10, At: t0, Rate: 100}
	grow := LimiterSignal{Succeeded: 50, Limited: true}
	throttle := LimiterSignal{Throttled: 1, Class: "http_429"}
	step := func(st LimiterState, a AdaptiveState, sig LimiterSignal, at time.Duration) (LimiterState, AdaptiveState, bool) {
		t.Helper()
		return spec.Adapt(st, a, sig, t0.Add(at))
	}

	// Until the first throttle it doubles, an interval apart, and only
	// while the limit holds claims back and jobs succeed.
	st1, a, moved := step(st, AdaptiveState{}, grow, time.Second)
	if !moved || st1.Rate != 200 || !strings.HasPrefix(a.Reason, AdaptiveProbing) {
		t.Fatalf("first growth: moved %v, rate %g, %q; want doubled", moved, st1.Rate, a.Reason)
	}
	if _, _, moved := step(st1, a, grow, 1500*time.Millisecond); moved {
		t.Fatal("moved again within an interval")
	}
	if _, _, moved := step(st1, a, LimiterSignal{Succeeded: 50}, 3*time.Second); moved {
		t.Fatal("grew while the limit held nothing back")
	}
	// A throttle: 0.9, the rate kept as the peak; a second one at once is
	// the same overshoot; one an interval later, with no increase between,
	// cuts 0.85.
	st2, a, _ := step(st1, a, throttle, 2*time.Second)
	if st2.Rate != 180 || a.Peak != 200 || a.Decreases != 1 || !strings.HasPrefix(a.Reason, "throttled: 1 attempt turned away (last http_429)") {
		t.Fatalf("after a throttle: rate %g, %+v; want 180 with peak 200", st2.Rate, a)
	}
	if _, _, moved := step(st2, a, throttle, 2500*time.Millisecond); moved {
		t.Fatal("a throttle within the interval of the last decrease moved the rate again")
	}
	st3, a, _ := step(st2, a, throttle, 3*time.Second)
	if st3.Rate != 180*0.85 || a.Peak != 180 || a.Cuts != 2 {
		t.Fatalf("a second decrease in a row: rate %g, %+v; want %g with peak 180", st3.Rate, a, 180*0.85)
	}
	// Back up: halfway to the peak, then past it by 2%.
	st4, a, _ := step(st3, a, grow, 4*time.Second)
	if want := 153 + (180-153)/2.0; st4.Rate != want || a.Cuts != 0 {
		t.Fatalf("growth below the peak: rate %g, want %g", st4.Rate, want)
	}
	st5 := st4
	st5.Rate = 180
	st6, _, _ := step(st5, a, grow, 5*time.Second)
	if st6.Rate != 180*1.02 {
		t.Fatalf("growth at the peak: rate %g, want %g", st6.Rate, 180*1.02)
	}
	// Bounds.
	low := st
	low.Rate = 11
	if st, _, _ := step(low, AdaptiveState{Decreases: 1}, throttle, time.Second); st.Rate != 10 {
		t.Fatalf("a decrease below the floor: rate %g, want 10", st.Rate)
	}
	high := st
	high.Rate = 900
	if st, _, _ := step(high, AdaptiveState{}, grow, time.Second); st.Rate != 1000 {
		t.Fatalf("growth past the ceiling: rate %g, want 1000", st.Rate)
	}
	// Slow successes count as a throttle, without a target nothing is slow.
	if st, a, _ := step(st, AdaptiveState{}, LimiterSignal{Succeeded: 1, Slow: 3, Limited: true}, time.Second); st.Rate != 90 || !strings.HasPrefix(a.Reason, AdaptiveSlow) {
		t.Fatalf("mostly slow: rate %g, %q; want 90, slow", st.Rate, a.Reason)
	}
}

func TestAdaptHold(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	spec := LimiterSpec{Mode: LimiterModeRate, Rate: 100, Burst: 10, Floor: 10, Ceiling: 1000}
	st := LimiterState{Tokens: 10, At: t0, Rate: 100}
	sig := LimiterSignal{Throttled: 1, Class: "http_429", RetryAfter: 2 * time.Second}
	held, a, _ := spec.Adapt(st, AdaptiveState{}, sig, t0)
	if !a.HeldUntil.Equal(t0.Add(2*time.Second)) || !held.HeldUntil.Equal(a.HeldUntil) || !strings.Contains(a.Reason, "held 2s") {
		t.Fatalf("held %+v, %+v; want held until +2s", held, a)
	}
	cur := spec.Current(held.Rate)
	if _, got, wait := cur.Take(held, t0.Add(time.Second), 5); got != 0 || wait != time.Second {
		t.Fatalf("a take during the hold got %d, wait %s; want 0, 1s", got, wait)
	}
	// Empty when the hold ends, then refilled at the rate (90/s).
	if _, got, _ := cur.Take(held, t0.Add(2*time.Second), 5); got != 0 {
		t.Fatalf("a take as the hold ends got %d; want 0: the bucket refills from nothing", got)
	}
	if _, got, _ := cur.Take(held, t0.Add(2*time.Second+50*time.Millisecond), 5); got != 4 {
		t.Fatalf("a take 50ms after the hold got %d; want 4 (90/s)", got)
	}
	// No growth within an interval of the hold's end.
	if _, _, moved := spec.Adapt(held, a, LimiterSignal{Succeeded: 9, Limited: true}, t0.Add(2500*time.Millisecond)); moved {
		t.Fatal("grew on the burst that ended the hold")
	}
	// A longer reset time is bounded.
	_, a, _ = spec.Adapt(st, AdaptiveState{}, LimiterSignal{Throttled: 1, RetryAfter: 48 * time.Hour}, t0)
	if !a.HeldUntil.Equal(t0.Add(MaxAdaptiveHold)) {
		t.Fatalf("a 48h reset time held until %s; want %s", a.HeldUntil, t0.Add(MaxAdaptiveHold))
	}
}

func TestAdaptiveSpecRefusals(t *testing.T) {
	for _, l := range []RateLimit{
		{Queue: "q", Limit: 10, Per: time.Second, Floor: 1, Ceiling: 100},
		{Kind: "k", Limit: 10, Per: time.Second, Floor: 0, Ceiling: 100},
		{Kind: "k", Limit: 10, Per: time.Second, Floor: 20, Ceiling: 100},
		{Kind: "k", Limit: 10, Per: time.Second, Floor: 1, Ceiling: 5},
		{Kind: "k", Limit: 10, Per: time.Second, Floor: 1, Ceiling: 100, Burst: 3},
		{Kind: "k", Limit: 10, Per: time.Second, Target: -time.Second, Floor: 1, Ceiling: 100},
	} {
		if _, err := l.Spec(); err == nil {
			t.Errorf("%+v: no error", l)
		}
	}
	l, err := ParseRateLimit("kind:hook=50/s,floor=5,ceiling=500,target=2s")
	if err != nil || !l.Adaptive() || l.Floor != 5 || l.Ceiling != 500 || l.Target != 2*time.Second {
		t.Fatalf("parse: %+v, %v", l, err)
	}
	if l.String() != "kind:hook=50/s,floor=5,ceiling=500,target=2s" {
		t.Fatalf("String: %q", l.String())
	}
	for _, s := range []string{"kind:hook=50/s,floor=5", "kind:hook=50/s,ceiling=x", "kind:hook=50/s,floor=5,floor=6,ceiling=500", "queue:q=5/s,floor=1,ceiling=10"} {
		if _, err := ParseRateLimit(s); err == nil {
			t.Errorf("%q: no error", s)
		}
	}
}
