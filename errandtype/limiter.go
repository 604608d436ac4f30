package errandtype

import (
	"encoding/json"
	"fmt"
	"math"
	"time"
)

// Token buckets. Rate limits and retry budgets are both buckets of tokens
// held in the database, one row per name, so that every process of a
// cluster draws on the same tokens. The arithmetic below is the one rule
// for every store: a store locks the bucket's row, calls [LimiterSpec.Take]
// or [LimiterSpec.Give] with the row's tokens, its updated_at and now on
// the store's clock, and writes the result back.

// LimiterMode says how a bucket's tokens come back.
type LimiterMode string

const (
	// LimiterModeRate is a rate limit's bucket: it refills at Rate tokens a
	// second up to Burst, and every start of a job takes one token.
	LimiterModeRate LimiterMode = "rate"
	// LimiterModeRetryBudget is a retry budget's bucket: each first
	// attempt deposits Ratio tokens, each retry takes a whole one, and the
	// level relaxes exponentially, with time constant Window, towards Min.
	// The level is thus Min plus Ratio times the first attempts of about
	// the last Window, less the retries of about the last Window, and
	// never below zero. Below Min it climbs as if towards Min+1, stopping
	// at Min, so that a spent budget holds a whole token again in finite
	// time (Window·ln((Min+1)/Min) from empty) rather than only nearing it.
	LimiterModeRetryBudget LimiterMode = "retry_budget"
)

// limiterEpsilon absorbs the rounding of float arithmetic: a level within
// it of a whole token holds that token.
const limiterEpsilon = 1e-9

const (
	// MaxLimiterTokens bounds a rate's Burst, a budget's Min and the
	// tokens a Rate refills in a second.
	MaxLimiterTokens = 1e9
	// MaxRetryRatio bounds a retry budget's Ratio.
	MaxRetryRatio = 1000
	// MinLimiterWindow and MaxLimiterWindow bound a retry budget's Window.
	MinLimiterWindow = time.Second
	MaxLimiterWindow = 30 * 24 * time.Hour
)

// LimiterSpec is the rule of one bucket.
type LimiterSpec struct {
	Mode LimiterMode
	// Rate is how many tokens a rate bucket regains a second.
	Rate float64
	// Burst is the most tokens a rate bucket holds: the most jobs that may
	// start at once after a quiet spell.
	Burst float64
	// Min is the level a retry budget's tokens return to: the retries a
	// quiet kind may make in about a Window.
	Min float64
	// Ratio is the tokens a retry budget gains per first attempt.
	Ratio float64
	// Window is a retry budget's memory: first attempts and retries older
	// than it count less and less (by e^-age/Window).
	Window time.Duration
	// Floor and Ceiling bound an adaptive rate limit's Rate (see
	// adaptive.go); both 0 for a fixed one. Rate is then where it starts.
	Floor   float64
	Ceiling float64
	// Target, on an adaptive limit, is the latency a success should stay
	// within (0: latency does not count), kept with the rule so that
	// outcomes counted outside a Worker are judged by it too.
	Target time.Duration
}

// Validate checks that a spec is one every store keeps exactly.
func (s LimiterSpec) Validate() error {
	if s.Target < 0 || s.Target%time.Microsecond != 0 || s.Target != 0 && !s.Adaptive() {
		return &InputError{Field: "target", Message: fmt.Sprintf("target %s; only an adaptive limit has one, a whole number of microseconds, 0 for none", s.Target)}
	}
	switch s.Mode {
	case LimiterModeRate:
		return s.validateRate()
	case LimiterModeRetryBudget:
		return s.validateRetryBudget()
	case LimiterModeConcurrency:
		return s.validateConcurrency()
	default:
		return &InputError{Field: "mode", Message: fmt.Sprintf("unknown limiter mode %q; use %q, %q or %q", s.Mode, LimiterModeRate, LimiterModeRetryBudget, LimiterModeConcurrency)}
	}
}

// validateRate checks a rate bucket's spec.
func (s LimiterSpec) validateRate() error {
	if !finite(s.Rate) || s.Rate <= 0 || s.Rate > MaxLimiterTokens {
		return &InputError{Field: "rate", Message: fmt.Sprintf("must be above 0 and at most %g tokens a second, e.g. 20/s", float64(MaxLimiterTokens))}
	}
	if !finite(s.Burst) || s.Burst < 1 || s.Burst > MaxLimiterTokens {
		return &InputError{Field: "burst", Message: fmt.Sprintf("must be 1 to %g", float64(MaxLimiterTokens))}
	}
	if s.Min != 0 || s.Ratio != 0 || s.Window != 0 {
		return &InputError{Field: "rate", Message: "a rate bucket takes Rate and Burst only"}
	}
	if (s.Floor != 0 || s.Ceiling != 0) && !(finite(s.Floor) && finite(s.Ceiling) && s.Floor > 0 && s.Floor <= s.Rate && s.Rate <= s.Ceiling) {
		return &InputError{Field: "floor", Message: fmt.Sprintf("an adaptive rate's floor %g and ceiling %g must hold its starting rate %g, with the floor above 0", s.Floor, s.Ceiling, s.Rate)}
	}
	return nil
}

// validateRetryBudget checks a retry budget's spec.
func (s LimiterSpec) validateRetryBudget() error {
	if !finite(s.Ratio) || s.Ratio < 0 || s.Ratio > MaxRetryRatio {
		return &InputError{Field: "ratio", Message: fmt.Sprintf("must be 0 to %d retries per first attempt, e.g. 0.1", MaxRetryRatio)}
	}
	if !finite(s.Min) || s.Min < 0 || s.Min > MaxLimiterTokens {
		return &InputError{Field: "min", Message: fmt.Sprintf("must be 0 to %g", float64(MaxLimiterTokens))}
	}
	if s.Window < MinLimiterWindow || s.Window > MaxLimiterWindow || s.Window%time.Microsecond != 0 {
		return &InputError{Field: "window", Message: fmt.Sprintf("must be %s to %s in whole microseconds, e.g. 1m", MinLimiterWindow, MaxLimiterWindow)}
	}
	if s.Rate != 0 || s.Burst != 0 || s.Floor != 0 || s.Ceiling != 0 {
		return &InputError{Field: "ratio", Message: "a retry budget takes Ratio, Min and Window only"}
	}
	return nil
}

// finite reports whether f is a number: neither NaN nor infinite.
func finite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }

// Full is the tokens of a new bucket: a rate bucket starts full, a retry
// budget at Min, a concurrency limit (whose tokens count its running
// jobs as of its last claim) empty.
func (s LimiterSpec) Full() float64 {
	switch s.Mode {
	case LimiterModeRate:
		return s.Burst
	case LimiterModeConcurrency:
		return 0
	}
	return s.Min
}

// LimiterState is a bucket's stored state: its tokens at At, and for an
// adaptive limit its rate now and the end of a provider's hold.
type LimiterState struct {
	Tokens    float64
	At        time.Time
	Rate      float64
	HeldUntil time.Time
}

// Level returns the bucket's tokens at now. A clock that went back refills
// nothing.
func (s LimiterSpec) Level(st LimiterState, now time.Time) float64 {
	d := max(now.Sub(st.At), 0)
	switch s.Mode {
	case LimiterModeConcurrency:
		return st.Tokens // nothing refills: a count, not a level
	case LimiterModeRate:
		return min(s.Burst, st.Tokens+s.Rate*d.Seconds())
	}
	fade := math.Exp(-float64(d) / float64(s.Window))
	if st.Tokens >= s.Min {
		return s.Min + (st.Tokens-s.Min)*fade
	}
	return min(s.Min, s.Min+1-(s.Min+1-st.Tokens)*fade)
}

// after is the state of a bucket that holds level at now: At never moves
// back, so that a clock that went back cannot refill the same time twice.
func after(st LimiterState, now time.Time, level float64) LimiterState {
	if now.Before(st.At) {
		now = st.At
	}
	st.Tokens, st.At = level, now
	return st
}

// Take takes up to want whole tokens at now. It returns the bucket's new
// state, the grant, and how long until the bucket next holds a whole token
// (0 when it holds one now; negative when only a deposit can give it one:
// a retry budget with Min below 1). Every mode grants only the whole tokens
// it holds, so that takers racing for a bucket (each in the store's
// transaction) get together no more than it holds, and its level never
// goes below zero. A bucket held by a provider's reset time (HeldUntil)
// grants nothing until then.
func (s LimiterSpec) Take(st LimiterState, now time.Time, want int) (LimiterState, int, time.Duration) {
	level := s.Level(st, now)
	if now.Before(st.HeldUntil) {
		return after(st, now, level), 0, st.HeldUntil.Sub(now)
	}
	grant := 0
	if want > 0 {
		grant = int(min(float64(want), max(math.Floor(level+limiterEpsilon), 0)))
	}
	level = max(level-float64(grant), 0) // not -ε, for a level within ε of a whole token
	return after(st, now, level), grant, s.wait(level)
}

// wait is how long until a bucket at level next holds a whole token.
func (s LimiterSpec) wait(level float64) time.Duration {
	if level >= 1-limiterEpsilon {
		return 0
	}
	if s.Mode == LimiterModeRate {
		return ceilMicros((1 - level) / s.Rate)
	}
	if s.Min < 1-limiterEpsilon {
		return -1
	}
	// Min+1 - (Min+1-level)·e^(-t/W) = 1 (see Level), solved for t.
	return ceilMicros(s.Window.Seconds() * math.Log((s.Min+1-level)/s.Min))
}

// ceilMicros is sec seconds, rounded up to a whole microsecond, the
// precision stores keep.
func ceilMicros(sec float64) time.Duration {
	us := math.Ceil(sec * 1e6)
	if us > float64(math.MaxInt64/int64(time.Microsecond)) {
		return time.Duration(math.MaxInt64)
	}
	return time.Duration(us) * time.Microsecond
}

// Give adds amount tokens at now and returns the bucket's new state. A
// rate bucket holds no more than Burst; a retry budget's deposits fade
// with its Window instead.
func (s LimiterSpec) Give(st LimiterState, now time.Time, amount float64) LimiterState {
	level := s.Level(st, now) + amount
	if s.Mode == LimiterModeRate {
		level = min(level, s.Burst)
	}
	return after(st, now, level)
}

// LimiterRecord is one bucket as [github.com/errandhq/errand.Client.Limits],
// errand limits, the API and the dashboard show it.
type LimiterRecord struct {
	// Name is "queue:NAME", "kind:NAME", "dependency:NAME" (rate limits),
	// "retry:KIND" (retry budgets), "concurrency:KIND" or
	// "concurrency:dependency:NAME" (concurrency limits).
	Name string `json:"name"`
	// Spec is the rule the last worker to take from it gave.
	Spec LimiterSpec `json:"spec"`
	// Tokens is the bucket's level now: the starts a rate limit allows at
	// once, the retries a retry budget allows, the jobs a concurrency
	// limit lets start now (its free slots).
	Tokens float64 `json:"tokens"`
	// Running is, for a concurrency limit, the jobs it counts running now
	// under a live lease; nil for other buckets.
	Running *int `json:"running,omitempty"`
	// Counts are, for a concurrency limit, the kinds whose running jobs
	// it counts: its kind, or every kind that declares its dependency.
	Counts []string `json:"counts,omitempty"`
	// Denied counts the takes that got no token: claims a limit held
	// back, in every process.
	Denied int64 `json:"denied"`
	// UpdatedAt is when a worker last took from it or gave to it.
	UpdatedAt time.Time `json:"updated_at"`
	// Adaptive is an adaptive limit's state (Spec.Rate is its rate now);
	// nil for a fixed limit.
	Adaptive *AdaptiveState `json:"adaptive,omitempty"`
}

// specJSON is a spec as JSON: the window in seconds, and null for what
// the spec's mode does not use (a rate limit's min, ratio and window, a
// retry budget's rate and burst).
type specJSON struct {
	Mode          LimiterMode `json:"mode"`
	Rate          *float64    `json:"rate"`
	Burst         *float64    `json:"burst"`
	Min           *float64    `json:"min"`
	Ratio         *float64    `json:"ratio"`
	WindowSeconds *float64    `json:"window_seconds"`
	Floor         *float64    `json:"floor,omitempty"`
	Ceiling       *float64    `json:"ceiling,omitempty"`
	TargetSeconds *float64    `json:"target_seconds,omitempty"`
}

// MarshalJSON writes the spec with its window in seconds.
func (s LimiterSpec) MarshalJSON() ([]byte, error) {
	j := specJSON{Mode: s.Mode}
	set := func(v float64) *float64 { return &v }
	if s.Mode != LimiterModeRetryBudget || s.Rate != 0 || s.Burst != 0 {
		j.Rate, j.Burst = set(s.Rate), set(s.Burst)
	}
	if s.Mode == LimiterModeRetryBudget || s.Min != 0 || s.Ratio != 0 || s.Window != 0 {
		j.Min, j.Ratio, j.WindowSeconds = set(s.Min), set(s.Ratio), set(s.Window.Seconds())
	}
	if s.Adaptive() {
		j.Floor, j.Ceiling = set(s.Floor), set(s.Ceiling)
	}
	if s.Target > 0 {
		j.TargetSeconds = set(s.Target.Seconds())
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads what MarshalJSON writes.
func (s *LimiterSpec) UnmarshalJSON(b []byte) error {
	var j specJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	get := func(v *float64) float64 {
		if v == nil {
			return 0
		}
		return *v
	}
	*s = LimiterSpec{Mode: j.Mode, Rate: get(j.Rate), Burst: get(j.Burst), Min: get(j.Min), Ratio: get(j.Ratio),
		Window: time.Duration(math.Round(get(j.WindowSeconds)*1e6)) * time.Microsecond, Floor: get(j.Floor), Ceiling: get(j.Ceiling),
		Target: time.Duration(math.Round(get(j.TargetSeconds)*1e6)) * time.Microsecond}
	return nil
}
