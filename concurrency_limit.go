package errand

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
	"github.com/errandhq/errand/internal/flow"
)

// A worker's concurrency limits are the last of its claim gates. A claim
// whose kinds include limited ones claims each limited kind first, in a
// store transaction of its own that locks the limit's row and counts the
// kind's running jobs (errandstore.ConcurrencyClaimer), for no more than
// the room the limit leaves and the claim's slots; then the other kinds
// with the slots left. A limited kind's jobs thus never run more than the
// limit at once across every worker that gives it, and a job over the
// limit stays queued without using an attempt. The slots of a crashed
// worker's jobs come back as their leases expire, since only jobs under a
// live lease count. A kind held back this way is claimed again at the
// queue's next claim: when a limited job of this worker ends (which wakes
// the queue), or within a poll.
//
// An adaptive limit moves by the rule of adaptive rate limits
// (errandtype's LimiterSpec.Adapt), fed by the same collector
// (internal/flow's Adaptive) from the same outcomes.

// concGate is a worker's concurrency limits.
type concGate struct {
	store errandstore.ConcurrencyClaimer
	rules map[string]flow.Rule // kind -> its limit
	adapt *flow.Limits         // the collectors of adaptive limits, by kind
	e     *engine
}

// newConcGate checks a worker's concurrency limits against the kinds it
// handles and the store. It returns nil without limits.
func newConcGate(e *engine, cfg *WorkerConfig, kinds []string) (*concGate, error) {
	if len(cfg.ConcurrencyLimits) == 0 {
		return nil, nil
	}
	if e.caps.concurrency == nil || e.caps.limiter == nil {
		return nil, &errandtype.InputError{Field: "ConcurrencyLimits", Message: fmt.Sprintf("the store (%T) keeps no concurrency limits: it is not an errandstore.ConcurrencyClaimer and LimiterStore; drop ConcurrencyLimits", e.store)}
	}
	g := &concGate{store: e.caps.concurrency, rules: map[string]flow.Rule{}, adapt: flow.NewLimits(e.caps.limiter), e: e}
	for _, l := range cfg.ConcurrencyLimits {
		spec, err := l.Spec()
		if err != nil {
			return nil, err
		}
		if !slices.Contains(kinds, l.Kind) {
			return nil, &errandtype.InputError{Field: "ConcurrencyLimits", Message: fmt.Sprintf("%s limits a kind this worker has no handler for; drop the limit or handle the kind", l.Name())}
		}
		if _, dup := g.rules[l.Kind]; dup {
			return nil, &errandtype.InputError{Field: "ConcurrencyLimits", Message: fmt.Sprintf("%s is limited twice; give each kind one concurrency limit", l.Name())}
		}
		g.rules[l.Kind] = flow.Rule{Name: l.Name(), Spec: spec}
		if l.Adaptive() {
			g.adapt.Adaptive[l.Kind] = &flow.Adaptive{Name: l.Name(), Target: l.Target}
		}
	}
	return g, nil
}

// storedConcGate returns the gate of the concurrency limits that the store
// holds for a claim outside a Worker (see storedFlowLimits), or nil when
// none binds it. Their adaptive limits move with the Workers' outcomes.
func (e *engine) storedConcGate(f *flow.Limits) *concGate {
	if f == nil || len(f.Concurrency) == 0 || e.caps.concurrency == nil {
		return nil
	}
	return &concGate{store: e.caps.concurrency, rules: f.Concurrency, e: e}
}

// limitsKind reports whether kind has a concurrency limit, whose slot the
// end of its job frees: the queue loop is woken to claim again. Another
// process's job frees its slot for this one at its next poll. Nil-safe.
func (g *concGate) limitsKind(kind string) bool {
	if g == nil {
		return false
	}
	_, ok := g.rules[kind]
	return ok
}

// limits reports whether any of kinds is limited.
func (g *concGate) limits(kinds []string) bool {
	return slices.ContainsFunc(kinds, func(k string) bool { _, ok := g.rules[k]; return ok })
}

func (g *concGate) admit(_ context.Context, t *claimTicket) bool {
	if g.limits(t.kinds) {
		t.wrapped = true // the claim is several; none asks when the next job is due
	}
	return true
}

func (g *concGate) through(t *claimTicket, next claimFunc) claimFunc {
	if !g.limits(t.kinds) {
		return next
	}
	return func(ctx context.Context, p *errandstore.JobClaimParams) ([]*errandtype.Job, error) {
		return g.claim(ctx, p, next)
	}
}

// claim claims p: its limited kinds under their limits, each first, then
// the others through next with the slots left. Jobs claimed before a
// failing part are returned, not lost to their leases; the failure is
// logged, and returned only when nothing was claimed.
func (g *concGate) claim(ctx context.Context, p *errandstore.JobClaimParams, next claimFunc) ([]*errandtype.Job, error) {
	var jobs []*errandtype.Job
	var failed error
	room := p.Limit
	var free []string
	for _, k := range p.Kinds {
		rule, ok := g.rules[k]
		if !ok {
			free = append(free, k)
			continue
		}
		if room == 0 {
			continue
		}
		c := *p
		c.Kinds, c.Limit, c.SkipRetryKinds = []string{k}, room, nil
		if slices.Contains(p.SkipRetryKinds, k) {
			c.SkipRetryKinds = []string{k}
		}
		r, err := g.store.JobClaimLimited(ctx, &errandstore.JobClaimLimitedParams{Name: rule.Name, Spec: rule.Spec, Claim: c})
		if err != nil {
			failed = err
			continue
		}
		if r.Room > 0 && r.Room < c.Limit && len(r.Jobs) == r.Room {
			g.adapt.NoteLimited(k)
		}
		jobs = append(jobs, r.Jobs...)
		room -= len(r.Jobs)
	}
	if room > 0 && len(free) > 0 {
		c := *p
		c.Kinds, c.Limit = free, room
		more, err := next(ctx, &c)
		if err != nil {
			failed = err
		}
		jobs = append(jobs, more...)
	}
	if failed != nil && len(jobs) > 0 {
		g.e.logger.Warn("part of a claim failed; running what the rest claimed", "queue", p.Queues, "err", failed)
		failed = nil
	}
	errandstore.SortClaimOrder(jobs)
	return jobs, failed
}

func (g *concGate) settle(context.Context, *claimTicket, []*errandtype.Job, error) {}

func (g *concGate) idleWait(_ *claimTicket, wait time.Duration) time.Duration { return wait }

// observe reports a's outcome, recorded as res, to its kind's adaptive
// concurrency limit, as observeAdaptive does to an adaptive rate limit.
// Nil-safe.
func (g *concGate) observe(ctx context.Context, a *attempt, res *WorkResult) {
	if g == nil || !g.adapt.Adapts(a.job.Kind) {
		return
	}
	o, ok := adaptiveOutcome(a, res)
	if !ok {
		return
	}
	a.throttled = a.throttled || o.Throttled && !a.timedOut
	g.adapt.Observe(ctx, g.e.logger, a.job.Kind, o, g.e.clock.Now())
}
