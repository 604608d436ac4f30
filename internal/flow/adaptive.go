package flow

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
)

// A worker's part in adaptive rate limits (see errandtype's adaptive.go):
// it counts what its attempts of each adaptively limited kind did, and
// reports the counts to the bucket at most once an AdaptiveInterval, and
// at once on the first throttle of an interval, so that a provider's
// reset time holds every process before many more attempts are turned
// away. A report is one transaction on the bucket's row: about one a
// second per kind and worker, whatever the rate of jobs.

// Adaptive is the collector of one adaptive limit, a kind's or a
// dependency's.
type Adaptive struct {
	Name   string        // its bucket: "kind:NAME", "dependency:NAME" or "concurrency:..."
	Target time.Duration // a success slower than it is slow; 0: none; under mu once shared

	mu           sync.Mutex
	sig          errandtype.LimiterSignal
	last         time.Time // the last report
	lastThrottle time.Time // the last report of a throttle
}

// Outcome is what one attempt says to its kind's adaptive limit.
type Outcome struct {
	Succeeded  bool
	Took       time.Duration
	Throttled  bool
	Class      string
	RetryAfter time.Duration
}

// Adapts reports whether an adaptive limit follows kind's outcomes: its
// own or its dependency's. Nil-safe.
func (f *Limits) Adapts(kind string) bool {
	return f != nil && (f.Adaptive[kind] != nil || f.DepAdaptive[f.DepOf[kind]] != nil ||
		f.ConcAdaptive[kind] != nil || f.DepConcAdaptive[f.DepOf[kind]] != nil)
}

// Observe counts o for the adaptive limits that follow kind's outcomes:
// its own rate and concurrency limits and its dependency's; and
// reports the counts when they are due, in the caller's goroutine.
func (f *Limits) Observe(ctx context.Context, logger *slog.Logger, kind string, o Outcome, now time.Time) {
	for _, a := range []*Adaptive{f.Adaptive[kind], f.DepAdaptive[f.DepOf[kind]], f.ConcAdaptive[kind], f.DepConcAdaptive[f.DepOf[kind]]} {
		if a == nil {
			continue
		}
		if sig, due := a.add(o, now); due {
			f.report(ctx, logger, a, sig)
		}
	}
}

// report applies sig to a's bucket.
func (f *Limits) report(ctx context.Context, logger *slog.Logger, a *Adaptive, sig errandtype.LimiterSignal) {
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), limitTimeout)
	defer cancel()
	r, err := f.Store.LimiterAdjust(actx, &errandstore.LimiterAdjustParams{Name: a.Name, Signal: sig})
	switch {
	case err != nil:
		logger.Warn("report to an adaptive rate limit failed", "limit", a.Name, "err", err)
	case r.Moved:
		logger.Debug("adaptive rate limit moved", "limit", a.Name, "rate", r.Limiter.Spec.Rate, "reason", r.Limiter.Adaptive.Reason)
	}
}

// add counts o and returns the counts to report, when due, resetting them.
func (a *Adaptive) add(o Outcome, now time.Time) (errandtype.LimiterSignal, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	switch {
	case o.Throttled:
		a.sig.Throttled++
		a.sig.Class = o.Class
		a.sig.RetryAfter = max(a.sig.RetryAfter, o.RetryAfter)
	case o.Succeeded && a.Target > 0 && o.Took > a.Target:
		a.sig.Slow++
	case o.Succeeded:
		a.sig.Succeeded++
	default:
		return errandtype.LimiterSignal{}, false
	}
	due := now.Sub(a.last) >= errandtype.AdaptiveInterval ||
		o.Throttled && now.Sub(a.lastThrottle) >= errandtype.AdaptiveInterval
	if !due {
		return errandtype.LimiterSignal{}, false
	}
	sig := a.sig
	a.sig = errandtype.LimiterSignal{}
	a.last = now
	if sig.Throttled > 0 {
		a.lastThrottle = now
	}
	return sig, true
}

// noteLimited notes that a's limit held back a claim that used all it
// granted: there are more jobs than the limit lets start. Nil-safe.
func (a *Adaptive) noteLimited() {
	if a != nil {
		a.mu.Lock()
		a.sig.Limited = true
		a.mu.Unlock()
	}
}
