package flow

import (
	"context"
	"log/slog"
	"strings"
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

// Adaptive is one adaptively limited kind's collector.
type Adaptive struct {
	Name   string        // its bucket: "kind:NAME"
	Target time.Duration // a success slower than it is slow; 0: none

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

// Adapts reports whether kind's limit is adaptive. Nil-safe.
func (f *Limits) Adapts(kind string) bool {
	if f == nil {
		return false
	}
	_, ok := f.Adaptive[kind]
	return ok
}

// Observe counts o for kind's adaptive limit and reports the counts when
// they are due, in the caller's goroutine.
func (f *Limits) Observe(ctx context.Context, logger *slog.Logger, kind string, o Outcome, now time.Time) {
	a := f.Adaptive[kind]
	if a == nil {
		return
	}
	sig, due := a.add(o, now)
	if !due {
		return
	}
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), limitTimeout)
	defer cancel()
	r, err := f.Store.LimiterAdjust(actx, &errandstore.LimiterAdjustParams{Name: a.Name, Signal: sig})
	switch {
	case err != nil:
		logger.Warn("report to an adaptive rate limit failed", "limit", a.Name, "err", err)
	case r != nil && r.Adaptive != nil && r.Adaptive.MovedAt.Equal(now.UTC().Truncate(time.Microsecond)):
		logger.Debug("adaptive rate limit moved", "limit", a.Name, "rate", r.Spec.Rate, "reason", r.Adaptive.Reason)
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

// noteLimited notes that kind's limit held back a claim that used all it
// granted: there are more jobs than the limit lets start.
func (f *Limits) noteLimited(kind string) {
	if a := f.Adaptive[kind]; a != nil {
		a.mu.Lock()
		a.sig.Limited = true
		a.mu.Unlock()
	}
}

// kindOf is the kind a "kind:NAME" bucket limits, or "".
func kindOf(name string) string {
	k, _ := strings.CutPrefix(name, "kind:")
	return k
}
