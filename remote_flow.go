package errand

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
	"github.com/errandhq/errand/internal/breaker"
	"github.com/errandhq/errand/internal/flow"
)

// Claims made outside a Worker, a remote worker's through the HTTP API
// ([Client.Claim]) and [Client.WorkOne]'s, follow a Worker's rules: the
// cluster's rate limits and retry budgets (see remote_limits.go), the
// circuit breakers of the dependencies that this client's kinds name
// ([KindOpts].Dependency, with the policies of [Config].Breakers), and fair
// claims of a queue while jobs with fairness keys wait in it. They go
// through the Worker's own claim gates (see claim_gates.go); what a Worker
// keeps per queue loop (fair mode) and per process (probes in flight) the
// client keeps here, shared by all its callers. Their outcomes count toward
// the breakers as a Worker's do. A client whose kinds name no dependency
// claims a queue without fairness keys exactly as it did without these
// rules: one claim, no read added.

// outsideGate returns the client's circuit breakers for claims outside a
// Worker, over every kind it knows, or nil when none names a dependency.
// Its first call records the kinds' dependencies, as a Worker's Start
// does.
func (c *engine) outsideGate(ctx context.Context) *breakerGate {
	o := &c.outside
	o.gateOnce.Do(func() {
		kinds := make([]string, 0, len(c.kinds))
		for k := range c.kinds {
			kinds = append(kinds, k)
		}
		slices.Sort(kinds)
		g, err := newBreakerGate(c, kinds)
		if err != nil {
			c.logger.Warn("circuit breakers do not apply to claims outside a worker", "err", err)
			return
		}
		if g != nil && len(g.Deps()) > 0 {
			o.gate = g
			c.declareDependencies(context.WithoutCancel(ctx), g)
		}
	})
	return o.gate
}

// outsideClaimer returns the fair-mode memory of queue.
func (c *engine) outsideClaimer(queue string) *flow.Claimer {
	f := c.caps.fair
	if f == nil {
		return &flow.Claimer{}
	}
	o := &c.outside
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.queues == nil || len(o.queues) >= maxOutsideQueues {
		o.queues = map[string]*flow.Claimer{}
	}
	qc := o.queues[queue]
	if qc == nil {
		qc = &flow.Claimer{Fair: f}
		o.queues[queue] = qc
	}
	return qc
}

// claimOutside claims the jobs p asks for from its one queue, as a Worker
// would: through the same gates, the stored rate limits and retry budgets
// and the circuit breakers, fairly while the queue has fairness keys.
func (c *engine) claimOutside(ctx context.Context, p *errandstore.JobClaimParams) ([]*errandtype.Job, error) {
	queue := p.Queues[0]
	kinds, paused := c.paused.filter(ctx, queue, p.Kinds)
	if paused {
		return []*errandtype.Job{}, nil
	}
	flow, err := storedFlowLimits(ctx, c.caps.limiter, queue, kinds, c.dependencyOf, &c.outside.adaptive)
	if err != nil {
		return nil, fmt.Errorf("read rate limits: %w", err)
	}
	gates := c.outsideGates(ctx, flow)
	t := &claimTicket{queue: queue, kinds: kinds, limit: p.Limit}
	switch gates.admit(ctx, t) {
	case admitHeld:
		return []*errandtype.Job{}, nil // over a limit: nothing is ready for now
	case admitStop:
		return nil, context.Cause(ctx)
	}
	q := *p
	q.Kinds, q.Limit, q.SkipRetryKinds = t.kinds, t.limit, t.skipRetry
	qc := c.outsideClaimer(queue)
	jobs, err := gates.through(t, func(ctx context.Context, p *errandstore.JobClaimParams) ([]*errandtype.Job, error) {
		return qc.Claim(ctx, c.store, p)
	})(ctx, &q)
	gates.settle(ctx, t, jobs, err)
	if jobs == nil && err == nil {
		jobs = []*errandtype.Job{}
	}
	return jobs, err
}

// outsideGates returns the gates of a claim outside a Worker: flow, the
// stored limits that bind it (nil: none), and the client's breakers.
func (c *engine) outsideGates(ctx context.Context, flow *flow.Limits) claimGates {
	var gates claimGates
	if flow != nil {
		gates = append(gates, flowGate{flow, c})
	}
	if g := c.outsideGate(ctx); g != nil {
		gates = append(gates, g)
	}
	if g := c.storedConcGate(flow); g != nil {
		gates = append(gates, g)
	}
	return gates
}

// observeRemote reports a remote worker's outcome of a's job to its
// dependency's breaker, as a Worker reports its own: r and err are what
// recording outcome o returned. Nil-safe.
func (g *breakerGate) observeRemote(ctx context.Context, a *attempt, o *errandstore.JobOutcome, r errandstore.OutcomeResult, err error) {
	if g != nil {
		g.report(ctx, g.remoteEvent(ctx, a, o, r, err), nil)
	}
}

// remoteEvent is what a remote outcome tells its breaker (see
// observeRemote).
func (g *breakerGate) remoteEvent(ctx context.Context, a *attempt, o *errandstore.JobOutcome, r errandstore.OutcomeResult, err error) breaker.Report {
	res := &WorkResult{Kind: a.job.Kind}
	if o.Error != nil {
		res.Error = o.Error.Message
	}
	switch {
	case errors.Is(err, errandtype.ErrLeaseLost):
		res.Result = ResultLeaseLost
	case err != nil:
		res = nil // not recorded
	default:
		res.Result = resultOfState(r.State, o.Kind)
	}
	if a.cancelled {
		// An operator's cancel says nothing about the dependency; a
		// probe's slot is given back.
		a = &attempt{job: a.job}
	}
	return g.eventOf(ctx, a, res)
}

// ackedJob is the job of an acknowledged lease as far as its breaker
// needs it: its kind comes with the outcome's result r, or, from a store
// that does not report it, from a read of the job.
func (c *engine) ackedJob(ctx context.Context, g *breakerGate, id string, r errandstore.OutcomeResult) *errandtype.Job {
	if g != nil && r.Kind == "" && r.State == errandtype.StateSucceeded {
		if j, err := c.store.JobGet(ctx, &errandstore.JobGetParams{ID: id}); err == nil {
			return j
		}
	}
	return &errandtype.Job{ID: id, Kind: r.Kind}
}
