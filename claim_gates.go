package errand

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
	"github.com/errandhq/errand/internal/breaker"
	"github.com/errandhq/errand/internal/flow"
)

// A queue loop's claim passes the worker's claim gates, the rules that
// decide at claim time how many jobs of which kinds it may take: the
// capacity shared by weight (internal/flow), rate limits and retry
// budgets (internal/flow), circuit breakers (internal/breaker). NewWorker
// builds the gates once from the config and what the store can do; a
// worker without them has none, and its claims go straight to the store.
// Claims made outside a Worker pass the same gates (see claimOutside).
// Fair claims (worker_fair.go) are not a gate but the store call at the end
// of the chain, chosen per queue.

// claimGate is one rule a queue's claims pass.
type claimGate interface {
	// admit readies claim t before it is sent: it may lower t.limit, take
	// kinds out, or hold the claim back (t.held, with t.wait). It reports
	// false when the loop is to end.
	admit(ctx context.Context, t *claimTicket) bool
	// through returns the claim made through the gate, next itself when
	// the gate leaves the claim to the store as it stands.
	through(t *claimTicket, next claimFunc) claimFunc
	// settle learns what the claim returned and gives back what it did
	// not use; for a claim a later gate held back or a stop ended, jobs
	// and err are nil.
	settle(ctx context.Context, t *claimTicket, jobs []*errandtype.Job, err error)
	// idleWait shortens an idle queue's sleep after t to when the gate
	// may let more through.
	idleWait(t *claimTicket, wait time.Duration) time.Duration
}

// claimFunc claims the jobs p asks for.
type claimFunc = breaker.ClaimFunc

// claimTicket is one claim of a queue loop on its way through the gates.
type claimTicket struct {
	queue     string
	kinds     []string // the kinds to claim
	limit     int      // the most jobs to claim
	skipRetry []string // kinds whose retries to leave out
	// held: claim nothing; sleep for wait (the poll interval when 0).
	held bool
	wait time.Duration
	// wrapped: a gate makes the claim itself (see through), so it cannot
	// ask when the next job comes due in its round trip.
	wrapped bool
	shared  int       // slots the capacity gate granted
	plan    flow.Plan // the rate limits' part
	sent    time.Time // the store's leases start no earlier than this
	// span is the claim's span, for its jobs' attempts to link to;
	// invalid with tracing off or no job claimed.
	span *trace.SpanContext
	// wake is the queue's wake-up as it stood before the claim was sent:
	// an idle queue sleeps on it after.
	wake <-chan struct{}
}

// more reports whether the queue may hold more work than t's claim took:
// it came back full, or gave a retry budget tokens it lacked.
func (t *claimTicket) more(jobs []*errandtype.Job, err error) bool {
	return err == nil && (len(jobs) == t.limit || t.plan.Again)
}

// claimGates returns the gates of a worker as configured, in the order a
// claim passes them.
func (w *Worker) claimGates() claimGates {
	var gates claimGates
	if w.share != nil {
		gates = append(gates, shareGate{w.share})
	}
	if w.flow != nil {
		gates = append(gates, flowGate{w.flow, w.c})
	}
	if w.breakers != nil && len(w.breakers.Deps()) > 0 {
		gates = append(gates, w.breakers)
	}
	if w.conc != nil {
		gates = append(gates, w.conc)
	}
	return gates
}

// The verdicts of admit.
const (
	admitClaim = iota // send the claim
	admitHeld         // a gate holds it back
	admitStop         // the loop ends
)

// claimGates are the gates of a claim, in the order it passes them.
type claimGates []claimGate

// admit passes t through every gate, and gives back what the gates before
// one that holds it back, or a stop, took.
func (gs claimGates) admit(ctx context.Context, t *claimTicket) int {
	for i, g := range gs {
		if ctx.Err() != nil || !g.admit(ctx, t) {
			gs[:i].settle(ctx, t, nil, nil)
			return admitStop
		}
		if t.held {
			gs[:i].settle(ctx, t, nil, nil)
			return admitHeld
		}
	}
	if ctx.Err() != nil {
		gs.settle(ctx, t, nil, nil)
		return admitStop
	}
	return admitClaim
}

// through returns claim made through every gate, the first outermost.
func (gs claimGates) through(t *claimTicket, claim claimFunc) claimFunc {
	for i := len(gs) - 1; i >= 0; i-- {
		claim = gs[i].through(t, claim)
	}
	return claim
}

// settle settles the gates, last first, with what t's claim returned.
func (gs claimGates) settle(ctx context.Context, t *claimTicket, jobs []*errandtype.Job, err error) {
	for i := len(gs) - 1; i >= 0; i-- {
		gs[i].settle(ctx, t, jobs, err)
	}
}

// idleWait shortens an idle queue's sleep after t by every gate's rule.
func (gs claimGates) idleWait(t *claimTicket, wait time.Duration) time.Duration {
	for _, g := range gs {
		wait = g.idleWait(t, wait)
	}
	return wait
}

// claimThroughGates sends t's claim through the gates to qc, the store's
// claim for the queue, and settles the gates with what it returned. When
// idle, the queue asks when its next job comes due before it claims: a job
// that comes due meanwhile is then either taken by the claim or not
// earlier than the answer, so the sleep after never passes a due job. A
// store that can (NextDueClaimer) answers in the claim's own round trip.
func (w *Worker) claimThroughGates(loopCtx context.Context, t *claimTicket, qc *flow.Claimer, idle bool) ([]*errandtype.Job, time.Time, error) {
	claim := w.gates.through(t, func(ctx context.Context, p *errandstore.JobClaimParams) ([]*errandtype.Job, error) {
		return qc.Claim(ctx, w.c.store, p)
	})
	var due time.Time
	askDue := idle && !t.wrapped && qc.AsksDue()
	if idle && !askDue {
		due = w.nextDue(loopCtx, t.queue)
	}
	// A claim, once sent, is not cancelled by a stop: a cancelled commit
	// can succeed on the server while the client sees an error, stranding
	// the claimed jobs until their leases expire. The jobs it returns
	// run, and Stop waits for them.
	claimCtx, cancelClaim := context.WithTimeout(context.WithoutCancel(loopCtx), claimTimeout)
	t.sent = w.c.clock.Now()
	traced := w.c.tracing.now()
	params := &errandstore.JobClaimParams{Queues: []string{t.queue}, Kinds: t.kinds, Limit: t.limit,
		Lease: w.cfg.Lease, Owner: w.cfg.Owner, SkipRetryKinds: t.skipRetry}
	var jobs []*errandtype.Job
	var err error
	if askDue {
		var next errandstore.JobNextDueResult
		jobs, next, err = qc.ClaimNextDue(claimCtx, params, w.nextDueParams(t.queue))
		if err == nil { // a failed claim is logged by the loop; the poll covers it
			due = w.dueAt(loopCtx, t.queue, t.sent, next, nil)
		}
	} else {
		jobs, err = claim(claimCtx, params)
	}
	cancelClaim()
	t.span = w.c.claimSpan(traced, t.queue, w.cfg.Owner, len(jobs), err)
	w.c.wakes.ClaimReturned(t.queue)
	w.gates.settle(loopCtx, t, jobs, err)
	return jobs, due, err
}

// shareGate is the worker's capacity shared by weight among its queues:
// a claim waits for the queue's share, and gives back what it did not use.
type shareGate struct{ s *flow.Share }

func (g shareGate) admit(ctx context.Context, t *claimTicket) bool {
	t.shared = g.s.Acquire(ctx, t.queue, t.limit)
	t.limit = t.shared
	return t.shared > 0
}

func (g shareGate) through(_ *claimTicket, next claimFunc) claimFunc { return next }

func (g shareGate) settle(_ context.Context, t *claimTicket, jobs []*errandtype.Job, _ error) {
	// A queue held back or stopped lends its capacity to the others.
	if len(jobs) < t.shared {
		g.s.Rest(t.queue, t.shared-len(jobs))
	}
}

func (g shareGate) idleWait(_ *claimTicket, wait time.Duration) time.Duration { return wait }

// flowGate is the worker's rate limits and retry budgets (see
// internal/flow): a claim takes their tokens first.
type flowGate struct {
	f *flow.Limits
	e *engine
}

func (g flowGate) admit(ctx context.Context, t *claimTicket) bool {
	t.plan = g.f.Plan(ctx, g.e.logger, t.queue, t.kinds, t.limit)
	t.kinds, t.limit, t.skipRetry = t.plan.Kinds, t.plan.Limit, t.plan.SkipRetry
	t.held, t.wait = t.plan.Held, t.plan.Wait
	return true
}

func (g flowGate) through(t *claimTicket, next claimFunc) claimFunc {
	if !t.plan.Split() {
		return next
	}
	t.wrapped = true
	return func(ctx context.Context, p *errandstore.JobClaimParams) ([]*errandtype.Job, error) {
		return t.plan.Claim(ctx, g.e.logger, p, next)
	}
}

func (g flowGate) settle(ctx context.Context, t *claimTicket, jobs []*errandtype.Job, err error) {
	if !t.plan.Held { // a held plan gave its tokens back already
		g.f.Settle(ctx, g.e.logger, &t.plan, jobs, err)
	}
}

func (g flowGate) idleWait(t *claimTicket, wait time.Duration) time.Duration {
	return t.plan.IdleWait(wait, minDueWait)
}

// The circuit breakers are a gate when the worker's kinds name
// dependencies: a claim leaves out the kinds whose breaker is open and
// claims probes for those whose cool-down is over (see breaker.Gate.Claim).

func (g *breakerGate) admit(context.Context, *claimTicket) bool { return true }

func (g *breakerGate) through(t *claimTicket, next claimFunc) claimFunc {
	t.wrapped = true
	return func(ctx context.Context, p *errandstore.JobClaimParams) ([]*errandtype.Job, error) {
		return g.Claim(ctx, p, next)
	}
}

func (g *breakerGate) settle(context.Context, *claimTicket, []*errandtype.Job, error) {}

func (g *breakerGate) idleWait(_ *claimTicket, wait time.Duration) time.Duration {
	return g.CapWait(wait, minDueWait)
}
