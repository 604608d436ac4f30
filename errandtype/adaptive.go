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
// service they call. Workers report, about once an AdaptiveInterval and
// at once on the first throttle of an interval, what their attempts of
// the kind did ([LimiterSignal]); [LimiterSpec.Adapt], in the store's
// transaction on the bucket's row, moves the rate, at most once an
// interval in each direction:
//
//   - down when an attempt was throttled (a [RetryAfter] failure, an HTTP
//     429 or 503 answer, a timeout) or most successes took longer than the
//     target: to 0.9 of itself, then 0.85, 0.8... for each decrease in a
//     row with no increase between (at least 0.5), so that a capacity that
//     fell far is found in a few steps; never below Floor. The rate it
//     came down from is kept as Peak: the provider pushed back there;
//   - up when claims were held back by the limit and attempts succeeded
//     within the target, an interval after the last move and after the
//     last hold ended: doubled until the first decrease (a fast start from
//     a low first guess); then halfway back to Peak (at least 1%); then
//     past Peak by 2% of itself, then by as much as it is already past
//     Peak (2%, 4%, 8%..., at most doubling), so that it lingers where the provider last
//     pushed back and speeds up once past it, to find a capacity that
//     grew; never past Ceiling;
//   - a provider's reset time (Retry-After) holds the bucket, granting no
//     token until then, for every process: the kind's jobs wait queued
//     without using attempts. The bucket is empty when the hold ends, and
//     refills at its rate from there.
//
// A kind's concurrency limit given a Floor and a Ceiling
// ([ConcurrencyLimit]) moves by the same rule, its limit (the jobs that
// may run at once) in place of the rate.
//
// Multiplicative rather than additive: the bucket is one for the whole
// cluster, so there is no fairness between flows for additive increase to
// buy, and a change of the provider's capacity is found in a number of
// intervals that does not depend on the scale of the rate.
// TestAdaptiveLimitFollowsCapacity and bench/cmd/adaptive measure it.

// Constants of the adaptive rule.
const (
	// AdaptiveInterval is the least time between two moves of an adaptive
	// rate in one direction, and how often a worker reports its signals.
	AdaptiveInterval = time.Second
	// AdaptiveDecrease multiplies the rate on a throttle that follows an
	// increase.
	AdaptiveDecrease = 0.9
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
	// Decreases counts the rate's decreases, Cuts those since the last
	// increase; Peak is the rate the last one came from.
	Decreases int64   `json:"decreases"`
	Cuts      int64   `json:"cuts"`
	Peak      float64 `json:"peak"`
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

// Adaptive reports whether the spec is an adaptive limit's.
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
	if s.Mode == LimiterModeRate {
		s.Burst = adaptiveBurst(s.Rate)
	}
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
	held := false
	if sig.RetryAfter > 0 {
		if until := now.Add(min(sig.RetryAfter, MaxAdaptiveHold)); until.After(a.HeldUntil) {
			a.HeldUntil, moved, held = until, true, true
			why = fmt.Sprintf("; held %s by the provider's reset time", min(sig.RetryAfter, MaxAdaptiveHold))
		}
	}
	// A little under the interval, so that reports an interval apart,
	// each made a moment after its attempts, move the rate each time.
	const gap = AdaptiveInterval * 9 / 10
	since := now.Sub(a.MovedAt)
	switch {
	case sig.Throttled > 0 || sig.Slow > sig.Succeeded:
		if a.down() && since < gap {
			break // the same overshoot, already answered
		}
		a.Peak = rate
		rate = max(cur.Floor, rate*max(0.5, AdaptiveDecrease-0.05*float64(min(a.Cuts, 8))))
		a.Decreases++
		a.Cuts++
		if sig.Throttled > 0 {
			a.Reason = fmt.Sprintf("%s: %s turned away (last %s)", AdaptiveThrottled, attempts(sig.Throttled), sig.Class)
		} else {
			a.Reason = fmt.Sprintf("%s: %d of %d successes over the target", AdaptiveSlow, sig.Slow, sig.Slow+sig.Succeeded)
		}
		moved = true
	case sig.Limited && sig.Succeeded > 0 && since >= gap && now.Sub(a.HeldUntil) >= gap && rate < cur.Ceiling:
		// An interval after the last move and after the last hold ended:
		// the successes of the burst that ends a hold say nothing yet.
		if a.Decreases == 0 {
			rate = min(cur.Ceiling, rate*2)
			a.Reason = fmt.Sprintf("%s: %d succeeded within the target while the limit held claims back; doubled", AdaptiveProbing, sig.Succeeded)
		} else if rate < a.Peak {
			rate = min(cur.Ceiling, a.Peak, rate+max((a.Peak-rate)/2, rate*0.01))
			a.Reason = fmt.Sprintf("%s: %d succeeded within the target while the limit held claims back; back towards %.4g%s", AdaptiveGrowing, sig.Succeeded, a.Peak, s.unit())
		} else {
			rate = min(cur.Ceiling, rate*min(2, max(1.02, rate/a.Peak)))
			a.Reason = fmt.Sprintf("%s: %d succeeded within the target while the limit held claims back; past %.4g%s, where it was last throttled", AdaptiveGrowing, sig.Succeeded, a.Peak, s.unit())
		}
		a.Cuts = 0
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
	if held {
		// Empty until the hold ends, then refilled from nothing: the
		// tokens of the hold, spent at once when it ended, would be
		// turned away again and hold the kind again.
		next.Tokens, next.At = 0, a.HeldUntil
	}
	return next, a, true
}

// unit is what an adaptive limit's number counts, as its reasons write it.
func (s LimiterSpec) unit() string {
	if s.Mode == LimiterModeConcurrency {
		return " at once"
	}
	return "/s"
}

// attempts is n attempts in English.
func attempts(n int) string {
	if n == 1 {
		return "1 attempt"
	}
	return fmt.Sprintf("%d attempts", n)
}
