package errand

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/errandhq/errand/errandtype"
	"github.com/errandhq/errand/internal/flow"
)

// A worker's rate limits and retry budgets gate its claims. Before a claim
// it takes tokens, in one transaction, from every bucket that applies to
// the queue: the queue's limit, the limits and budgets of the kinds it
// handles, the limits of the dependencies they declare (once each), each
// wanting as many tokens as the claim has slots. Then:
//
//   - a queue limit with no token holds the claim back;
//   - a kind limit with no token takes that kind out of the claim, a
//     dependency's limit every kind that declares it;
//   - a retry budget with no token takes that kind's retries out of the
//     claim (first attempts still run);
//   - otherwise the claim claims at most the smallest grant of a rate
//     limit, so that no kind or queue starts more jobs than it got tokens
//     for;
//   - a retry budget that granted fewer tokens than the claim has room for
//     splits it in two: a first claim of no more jobs than that grant,
//     retries included, then the rest of the room with that kind's retries
//     left out. A budget bounds retries, never first attempts.
//
// After the claim it gives back, in one transaction, the tokens it did not
// use, and a retry budget's deposits for the first attempts it claimed. A
// job held back this way stays queued: no attempt is used. A held-back
// queue sleeps until the first of its buckets holds a token again.
//
// A worker without limits has no flow.Limits (nil) and makes no call here.
// The mechanics are in internal/flow.

// newFlowLimits checks a worker's limits against what it works: a limit
// on a queue it does not work, or a kind it has no handler for, is a
// mistake (it would limit nothing). It returns nil without limits.
func newFlowLimits(e *engine, cfg *WorkerConfig, kinds []string) (*flow.Limits, error) {
	if len(cfg.RateLimits) == 0 && len(cfg.RetryBudgets) == 0 {
		return nil, nil
	}
	ls := e.caps.limiter
	if ls == nil {
		return nil, &errandtype.InputError{Field: "RateLimits", Message: fmt.Sprintf("the store (%T) keeps no limits: it is not an errandstore.LimiterStore; drop RateLimits and RetryBudgets", e.store)}
	}
	f := flow.NewLimits(ls)
	for _, l := range cfg.RateLimits {
		spec, err := l.Spec()
		if err != nil {
			return nil, err
		}
		if l.Dependency != "" {
			if err := addDependencyLimit(e, f, l, spec, kinds); err != nil {
				return nil, err
			}
			continue
		}
		m, key := f.Kinds, l.Kind
		if l.Queue != "" {
			m, key = f.Queues, l.Queue
			if _, ok := cfg.Queues[l.Queue]; !ok {
				return nil, &errandtype.InputError{Field: "RateLimits", Message: fmt.Sprintf("%s limits a queue this worker does not work; add it to Queues or drop the limit", l.Name())}
			}
		} else if !slices.Contains(kinds, l.Kind) {
			return nil, &errandtype.InputError{Field: "RateLimits", Message: fmt.Sprintf("%s limits a kind this worker has no handler for; drop the limit or handle the kind", l.Name())}
		}
		if _, dup := m[key]; dup {
			return nil, &errandtype.InputError{Field: "RateLimits", Message: fmt.Sprintf("%s is limited twice; give each queue or kind one limit", l.Name())}
		}
		m[key] = flow.Rule{Name: l.Name(), Spec: spec}
		if spec.Adaptive() {
			f.Adaptive[l.Kind] = &flow.Adaptive{Name: l.Name(), Target: l.Target}
		}
	}
	for _, b := range cfg.RetryBudgets {
		spec, err := b.Spec()
		if err != nil {
			return nil, err
		}
		if !slices.Contains(kinds, b.Kind) {
			return nil, &errandtype.InputError{Field: "RetryBudgets", Message: fmt.Sprintf("retry budget of %s: this worker has no handler for the kind; drop the budget or handle the kind", b.Kind)}
		}
		if _, dup := f.Budgets[b.Kind]; dup {
			return nil, &errandtype.InputError{Field: "RetryBudgets", Message: fmt.Sprintf("kind %s has two retry budgets; give it one", b.Kind)}
		}
		f.Budgets[b.Kind] = flow.Rule{Name: b.Name(), Spec: spec}
	}
	return f, nil
}

// waitForTokens sleeps a held-back queue until its buckets hold a token,
// and no longer than the poll interval, so that tokens other workers give
// back, or a changed rule, are seen within a poll. It reports false when
// the loop should end. Wake-ups are not waited for: a held-back queue
// cannot claim before then whatever is enqueued.
func (w *Worker) waitForTokens(loopCtx context.Context, poll Timer, until time.Duration) bool {
	wait := w.cfg.PollInterval
	if until > 0 {
		wait = min(wait, max(until, minDueWait))
	}
	poll.Reset(wait)
	select {
	case <-loopCtx.Done():
		return false
	case <-poll.C():
		return true
	}
}

// adaptiveOutcome is what attempt a, recorded as res (nil: not recorded),
// tells its kind's adaptive limit (see internal/flow's adaptive.go), and
// whether it tells anything: a success and how long it took, or a
// throttle (see throttleOf). A lost lease, a snooze or a drain say
// nothing of the service's capacity.
func adaptiveOutcome(a *attempt, res *WorkResult) (flow.Outcome, bool) {
	switch {
	case res == nil || res.Result == ResultLeaseLost || res.Result == ResultInterrupted || res.Result == ResultSnoozed:
		return flow.Outcome{}, false
	case res.Result == ResultSucceeded:
		return flow.Outcome{Succeeded: true, Took: a.took}, true
	}
	return throttleOf(a.err, a.timedOut)
}

// throttleOf says whether a failed attempt, which returned err or ran out
// of time (timedOut), was throttled, and how: a failure with a provider's
// reset time, an HTTP 429 or 503, a timeout. Other failures say nothing
// of the service's capacity; a service that is down is the circuit
// breaker's. Local and remote attempts alike are judged here.
func throttleOf(err error, timedOut bool) (flow.Outcome, bool) {
	if timedOut {
		return flow.Outcome{Throttled: true, Class: ClassTimeout}, true
	}
	if err == nil {
		return flow.Outcome{}, false
	}
	je := classified(err)
	if je.retryAfter > 0 || je.class == "http_429" || je.class == "http_503" {
		return flow.Outcome{Throttled: true, Class: je.class, RetryAfter: je.retryAfter}, true
	}
	return flow.Outcome{}, false
}

// observeAdaptive reports a's outcome to its kind's adaptive limit, and
// marks a provider's throttle (not a timeout), which the limit answers,
// as no failure of the kind's circuit breaker.
func (w *Worker) observeAdaptive(ctx context.Context, a *attempt, res *WorkResult) {
	if !w.flow.Adapts(a.job.Kind) {
		return
	}
	o, ok := adaptiveOutcome(a, res)
	if !ok {
		return
	}
	a.throttled = o.Throttled && !a.timedOut
	w.flow.Observe(ctx, w.c.logger, a.job.Kind, o, w.c.clock.Now())
}
