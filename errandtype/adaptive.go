package errandtype

import (
	"fmt"
	"math"
	"strings"
	"time"
)

// Adaptive rate limits. A kind's rate limit given a Floor and a Ceiling
// ([RateLimit]) is adaptive: its bucket's rate, kept in the database and
// shared by every process, follows what the jobs' outcomes say of the
// service they call. Workers report, at most once an AdaptiveInterval and
// at once on a provider's reset time, what their attempts of the kind did
// ([LimiterSignal]); [LimiterSpec.Adapt], in the store's transaction on
// the bucket's row, moves the rate:
//
//   - down, to AdaptiveDecrease times the rate (not below Floor), when an
//     attempt was throttled (a [RetryAfter] failure, an HTTP 429 or 503
//     answer, a timeout) or most successes took longer than the target:
//     at most once an interval, since attempts that overshot together are
//     one signal, not many;
//   - up, when claims were held back by the limit and attempts succeeded
//     within the target, at most once an interval: doubled until the
//     first decrease (a fast start from a low first guess); then, below
//     the rate of the last decrease (Peak), by AdaptiveIncrease of itself
//     but not past Peak; at Peak and above, by 1%, 2%, 4%... of itself,
//     doubling with each increase in a row, so that it lingers where the
//     provider last pushed back and speeds up once past it, to find a
//     capacity that grew; never past Ceiling;
//   - a provider's reset time (Retry-After) holds the bucket, granting no
//     token until then, for every process: the kind's jobs wait queued
//     without using attempts.
//
// Proportional rather than additive increase: the bucket is one for the
// whole cluster, so there is no fairness between flows for additive
// increase to buy, and a rise in the provider's capacity is found in a
// number of intervals that does not depend on the scale of the rate.
// TestAdaptiveLimitFollowsCapacity and bench/cmd/adaptive measure it.

// Constants of the adaptive rule.
const (
	// AdaptiveInterval is the least time between two moves of an adaptive
	// rate in one direction, and how often a worker reports its signals.
	AdaptiveInterval = time.Second
	// AdaptiveDecrease multiplies the rate on a throttle.
	AdaptiveDecrease = 0.9
	// AdaptiveIncrease is the share of itself the rate grows by an
	// interval once it has been throttled.
	AdaptiveIncrease = 0.05
	// MaxAdaptiveHold bounds how long a provider's reset time holds a
	// bucket: a longer one holds this long, and the next throttle again.
	MaxAdaptiveHold = time.Hour
)

// Reasons an adaptive rate last moved, the first word of
// [AdaptiveState].Reason.
const (
	AdaptiveStart     = "start"
	AdaptiveProbing   = "probing"
	AdaptiveGrowing   = "growing"
	AdaptiveThrottled = "throttled"
	AdaptiveSlow      = "slow"
)

// AdaptiveState is what an adaptive limit's bucket keeps beside its
// tokens and its rate.
type AdaptiveState struct {
	// HeldUntil: no token is granted before it (a provider's reset time).
	HeldUntil time.Time `json:"held_until,omitzero"`
	// MovedAt is when the rate or the hold last changed, and Reason why.
	MovedAt time.Time `json:"moved_at,omitzero"`
	Reason  string    `json:"reason"`
	// Decreases counts the rate's decreases; Peak is the rate the last
	// one came from, and Increases counts the increases at or above it
	// since.
	Decreases int64   `json:"decreases"`
	Peak      float64 `json:"peak"`
	Increases int64   `json:"increases"`
}

// down reports whether the last move was a decrease.
func (a AdaptiveState) down() bool {
	return strings.HasPrefix(a.Reason, AdaptiveThrottled) || strings.HasPrefix(a.Reason, AdaptiveSlow)
}

// LimiterSignal is what one worker's attempts of an adaptively limited
// kind did since its last report.
type LimiterSignal struct {
	// Succeeded and Slow count successes within the target and over it.
	Succeeded int `json:"succeeded"`
	Slow      int `json:"slow"`
	// Throttled counts attempts the service turned away or that timed out,
	// and Class names the last one's class (e.g. "http_429").
	Throttled int    `json:"throttled"`
	Class     string `json:"class,omitempty"`
	// RetryAfter is the longest reset time a throttled attempt was given.
	RetryAfter time.Duration `json:"retry_after"`
	// Limited: the limit held back claims of the kind (it granted fewer
	// tokens than claims had room for, and they were all used).
	Limited bool `json:"limited"`
}

// Validate checks a signal.
func (s LimiterSignal) Validate() error {
	if s.Succeeded < 0 || s.Slow < 0 || s.Throttled < 0 {
		return &InputError{Field: "signal", Message: "counts must be 0 or more"}
	}
	if s.RetryAfter < 0 {
		return &InputError{Field: "retry_after", Message: "must be 0 or more"}
	}
	if s.Class != "" {
		return CheckName("class", s.Class)
	}
	return nil
}

// Adaptive reports whether the spec is an adaptive rate limit's.
func (s LimiterSpec) Adaptive() bool { return s.Ceiling > 0 }

// adaptiveBurst is an adaptive limit's burst: a tenth of a second's worth
// of its rate, at least 1, as a fixed limit's default.
func adaptiveBurst(rate float64) float64 { return max(1, math.Floor(rate/10)) }

// Current is the spec a take applies to a bucket whose stored rate is
// stored: a fixed limit's own (the last writer's), an adaptive limit's
// stored rate within its bounds, with a burst that follows it.
func (s LimiterSpec) Current(stored float64) LimiterSpec {
	if !s.Adaptive() {
		return s
	}
	if stored > 0 {
		s.Rate = min(max(stored, s.Floor), s.Ceiling)
	}
	s.Burst = adaptiveBurst(s.Rate)
	return s
}

// Adapt moves an adaptive bucket, stored as st and a, by sig at now (see
// the rules above): the new state, and whether anything moved. The
// tokens are brought to now at the old rate first, so that a change of
// rate applies only from now on.
func (s LimiterSpec) Adapt(st LimiterState, a AdaptiveState, sig LimiterSignal, now time.Time) (LimiterState, AdaptiveState, bool) {
	cur := s.Current(st.Rate)
	if !cur.Adaptive() {
		return st, a, false
	}
	level := cur.Level(st, now)
	rate, moved := cur.Rate, false
	var why string
	if sig.RetryAfter > 0 {
		if until := now.Add(min(sig.RetryAfter, MaxAdaptiveHold)); until.After(a.HeldUntil) {
			a.HeldUntil, moved = until, true
			why = fmt.Sprintf("; held %s by the provider's reset time", min(sig.RetryAfter, MaxAdaptiveHold))
		}
	}
	since := now.Sub(a.MovedAt)
	switch {
	case sig.Throttled > 0 || sig.Slow > sig.Succeeded:
		if a.down() && since < AdaptiveInterval {
			break // the same overshoot, already answered
		}
		a.Peak = rate
		rate = max(cur.Floor, rate*AdaptiveDecrease)
		a.Decreases++
		a.Increases = 0
		if sig.Throttled > 0 {
			a.Reason = fmt.Sprintf("%s: %d attempts throttled (last %s)", AdaptiveThrottled, sig.Throttled, sig.Class)
		} else {
			a.Reason = fmt.Sprintf("%s: %d of %d successes over the target", AdaptiveSlow, sig.Slow, sig.Slow+sig.Succeeded)
		}
		moved = true
	case sig.Limited && sig.Succeeded > 0 && since >= AdaptiveInterval && rate < cur.Ceiling:
		if a.Decreases == 0 {
			rate = min(cur.Ceiling, rate*2)
			a.Reason = fmt.Sprintf("%s: %d succeeded within the target while the limit held claims back; doubled", AdaptiveProbing, sig.Succeeded)
		} else if rate < a.Peak {
			rate = min(cur.Ceiling, a.Peak, rate*(1+AdaptiveIncrease))
			a.Reason = fmt.Sprintf("%s: %d succeeded within the target while the limit held claims back; back towards %.4g/s", AdaptiveGrowing, sig.Succeeded, a.Peak)
		} else {
			rate = min(cur.Ceiling, rate*(1+0.01*math.Pow(2, float64(min(a.Increases, 6)))))
			a.Increases++
			a.Reason = fmt.Sprintf("%s: %d succeeded within the target while the limit held claims back; past %.4g/s, where it was last throttled", AdaptiveGrowing, sig.Succeeded, a.Peak)
		}
		moved = true
	default:
		if why != "" {
			a.Reason = AdaptiveThrottled + ": the provider asked to wait"
		}
	}
	if !moved {
		return st, a, false
	}
	a.MovedAt = now
	a.Reason += why
	next := after(st, now, level)
	next.Rate, next.HeldUntil = rate, a.HeldUntil
	return next, a, true
}
