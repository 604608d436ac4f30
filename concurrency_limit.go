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
// whose kinds include limited ones claims the kinds of each limit first,
// in a store transaction of its own that locks the limit's row and counts
// the running jobs of the kinds it counts (errandstore.ConcurrencyClaimer):
// its kind, or every kind that declares its dependency. It claims no more
// than the room the limit leaves and the claim's slots; then the other
// kinds with the slots left. A limit's jobs thus never run more than the
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
	rules map[string]flow.Rule // kind -> its limit, its own or its dependency's
	adapt *flow.Limits         // the collectors of adaptive limits, by kind (ConcAdaptive)
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
		counts, limited, err := e.concurrencyKinds(l, kinds)
		if err != nil {
			return nil, err
		}
		rule := flow.Rule{Name: l.Name(), Spec: spec, Counts: counts}
		var a *flow.Adaptive
		if l.Adaptive() {
			a = &flow.Adaptive{Name: l.Name(), Target: l.Target}
		}
		for _, k := range limited {
			if r, dup := g.rules[k]; dup {
				return nil, &errandtype.InputError{Field: "ConcurrencyLimits", Message: fmt.Sprintf("kind %s is under %s and %s; give each kind one concurrency limit, its own or its dependency's", k, r.Name, l.Name())}
			}
			g.rules[k] = rule
			if a != nil {
				g.adapt.ConcAdaptive[k] = a
			}
		}
	}
	return g, nil
}

// concurrencyKinds returns the kinds limit l counts, every kind this
// client knows to declare its dependency or its one kind, and those of
// them that a worker of kinds claims under it. A limit that binds none of
// kinds is a mistake.
func (e *engine) concurrencyKinds(l ConcurrencyLimit, kinds []string) (counts, limited []string, err error) {
	if l.Dependency == "" {
		if !slices.Contains(kinds, l.Kind) {
			return nil, nil, &errandtype.InputError{Field: "ConcurrencyLimits", Message: fmt.Sprintf("%s limits a kind this worker has no handler for; drop the limit or handle the kind", l.Name())}
		}
		return []string{l.Kind}, []string{l.Kind}, nil
	}
	for k := range e.kinds {
		if e.dependencyOf(k) == l.Dependency {
			counts = append(counts, k)
		}
	}
	slices.Sort(counts)
	for _, k := range kinds {
		if slices.Contains(counts, k) {
			limited = append(limited, k)
		}
	}
	if len(limited) == 0 {
		return nil, nil, &errandtype.InputError{Field: "ConcurrencyLimits", Message: fmt.Sprintf("%s limits a dependency no kind of this worker declares; declare it on the kinds that call it with KindOpts.Dependency, or drop the limit", l.Name())}
	}
	return counts, limited, nil
}

// storedConcGate returns the gate of the concurrency limits that the store
// holds for a claim outside a Worker (see storedFlowLimits), or nil when
// none binds it. Their adaptive limits move with every claimer's outcomes,
// counted in f's collectors.
func (e *engine) storedConcGate(f *flow.Limits) *concGate {
	if f == nil || len(f.Concurrency) == 0 || e.caps.concurrency == nil {
		return nil
	}
	return &concGate{store: e.caps.concurrency, rules: f.Concurrency, adapt: f, e: e}
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

// claim claims p: its limited kinds under their limits, each limit's
// kinds together and first, then the others through next with the slots
// left. Jobs claimed before a failing part are returned, not lost to their
// leases; the failure is logged, and returned only when nothing was
// claimed.
func (g *concGate) claim(ctx context.Context, p *errandstore.JobClaimParams, next claimFunc) ([]*errandtype.Job, error) {
	var jobs []*errandtype.Job
	var failed error
	room := p.Limit
	var free []string
	var limits []string            // in the order of p.Kinds
	under := map[string][]string{} // limit -> the kinds of p under it
	for _, k := range p.Kinds {
		rule, ok := g.rules[k]
		if !ok {
			free = append(free, k)
			continue
		}
		if under[rule.Name] == nil {
			limits = append(limits, rule.Name)
		}
		under[rule.Name] = append(under[rule.Name], k)
	}
	for _, name := range limits {
		if room == 0 {
			break
		}
		ks := under[name]
		rule := g.rules[ks[0]]
		c := *p
		c.Kinds, c.Limit, c.SkipRetryKinds = ks, room, nil
		for _, k := range ks {
			if slices.Contains(p.SkipRetryKinds, k) {
				c.SkipRetryKinds = append(c.SkipRetryKinds, k)
			}
		}
		r, err := g.store.JobClaimLimited(ctx, &errandstore.JobClaimLimitedParams{Name: rule.Name, Spec: rule.Spec, Counts: rule.Counts, Claim: c})
		if err != nil {
			failed = err
			continue
		}
		if r.Room > 0 && r.Room < c.Limit && len(r.Jobs) == r.Room {
			g.adapt.NoteLimited(ks[0])
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

// observe reports a's outcome, recorded as res, to the adaptive
// concurrency limit of its kind (its own or its dependency's), as
// observeAdaptive does to an adaptive rate limit. Nil-safe.
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
