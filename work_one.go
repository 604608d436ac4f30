package errand

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
	"github.com/errandhq/errand/internal/flow"
	"github.com/errandhq/errand/internal/leasekeeper"
)

// WorkOneOpts configure WorkOne.
type WorkOneOpts struct {
	// Queues to claim from. Default: DefaultQueue.
	Queues []string
	// Lease is the claim's lease, renewed every third of it while the
	// handler runs. Default: DefaultLease.
	Lease time.Duration
	// Owner names this worker in lease_owner. Default: a new DefaultOwner.
	Owner string
	// RateLimits and RetryBudgets are recorded in the store before the
	// claim, as a Worker's are (the last rule given for a bucket wins; a
	// new bucket starts full), so the claim stays within them as within
	// every stored limit. A limit on a queue not in Queues, or a kind
	// without a handler, is an *InputError and nothing is written.
	RateLimits   []RateLimit
	RetryBudgets []RetryBudget
}

// WorkOne claims one job of a kind this client has a handler for, runs it
// under its lease, records the outcome while it still owns the job, and
// returns what happened. With nothing to claim it returns result "idle".
// The claim honours what binds a Worker's: the cluster's rate limits and
// retry budgets kept in the store, and the circuit breakers of the
// dependencies this client's kinds name (the outcome counts toward them);
// a job held back by them is not claimed, and the result is "idle".
// Opts' RateLimits and RetryBudgets are recorded in the store first.
//
// A returned error means the claim or the outcome write failed; a job whose
// outcome could not be written keeps its lease until it expires, and is then
// claimed again.
func (c *Client[TTx]) WorkOne(ctx context.Context, o *WorkOneOpts) (*WorkResult, error) {
	var opts WorkOneOpts
	if o != nil {
		opts = *o
	}
	kinds := c.handlerKinds()
	if len(kinds) == 0 {
		return nil, &errandtype.InputError{Field: "Kinds", Message: "no kind has a handler; declare at least one Kind with a Handler"}
	}
	if len(opts.Queues) == 0 {
		opts.Queues = []string{DefaultQueue}
	}
	for _, q := range opts.Queues {
		if err := errandstore.CheckName("queue", q); err != nil {
			return nil, err
		}
	}
	if opts.Lease == 0 {
		opts.Lease = DefaultLease
	}
	if err := checkLease("lease", opts.Lease); err != nil {
		return nil, err
	}
	if opts.Owner == "" {
		opts.Owner = DefaultOwner()
	} else if err := errandstore.CheckIdentifier("owner", opts.Owner, errandstore.MaxIDBytes); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("claim job: %w", err)
	}
	if err := c.recordLimits(ctx, &opts, kinds); err != nil {
		return nil, err
	}
	// Once sent, the claim is not cancelled (see Worker.runQueue): its
	// jobs would be stranded until their leases expire.
	claimCtx, cancelClaim := context.WithTimeout(context.WithoutCancel(ctx), claimTimeout)
	claimSent := c.clock.Now() // the store's lease starts no earlier than this
	traced := c.tracing.now()
	defer cancelClaim()
	jobs, err := c.claimAcross(claimCtx, &errandstore.JobClaimParams{
		Queues: opts.Queues,
		Kinds:  kinds,
		Limit:  1,
		Lease:  opts.Lease,
		Owner:  opts.Owner,
	})
	span := c.claimSpan(traced, strings.Join(opts.Queues, ","), opts.Owner, len(jobs), err)
	if err != nil {
		return nil, fmt.Errorf("claim job: %w", err)
	}
	if len(jobs) == 0 {
		return &WorkResult{Result: ResultIdle}, nil
	}
	leases := leasekeeper.New(c.store, c.clock, c.logger, opts.Lease)
	a := c.runAttempt(ctx, leases, jobs[0], opts.Lease, claimSent, false, span)
	leases.Stop()
	defer a.waitHandler()
	res, err := c.record(ctx, a, nil)
	if out, ok := adaptiveOutcome(a, res); ok {
		c.observeOutsideAdaptive(ctx, a.job.Kind, out)
	}
	c.outsideGate(ctx).observe(ctx, a, res)
	return res, err
}

// recordLimits writes the rules of opts' rate limits and retry budgets to
// their buckets, taking no token, so that the claim that follows honours
// them. It checks them as a Worker's are checked, first.
func (c *engine) recordLimits(ctx context.Context, opts *WorkOneOpts, kinds []string) error {
	queues := make(map[string]int, len(opts.Queues))
	for _, q := range opts.Queues {
		queues[q] = 1
	}
	f, err := newFlowLimits(c, &WorkerConfig{Queues: queues, RateLimits: opts.RateLimits, RetryBudgets: opts.RetryBudgets}, kinds)
	if err != nil || f == nil {
		return err
	}
	var takes []errandstore.LimiterTake
	for _, m := range []map[string]flow.Rule{f.Queues, f.Kinds, f.Budgets, f.Deps} {
		for _, r := range m {
			takes = append(takes, errandstore.LimiterTake{Name: r.Name, Spec: r.Spec})
		}
	}
	// In name order, as every take is, so that two writers lock the
	// buckets in the same order.
	slices.SortFunc(takes, func(a, b errandstore.LimiterTake) int { return strings.Compare(a.Name, b.Name) })
	if _, err := f.Store.LimiterTake(ctx, &errandstore.LimiterTakeParams{Takes: takes}); err != nil {
		return fmt.Errorf("record rate limits: %w", err)
	}
	return nil
}

// claimAcross claims the jobs p asks for from its queues as a Worker would
// (see remote_flow.go): a single queue through claimOutside; several in one
// claim, through the circuit breakers, unless a stored rate limit or retry
// budget binds one of them, in which case each queue is claimed in turn,
// within its limits, until one gives a job; so are they while anything is
// paused, each queue's claim leaving out what is.
func (c *engine) claimAcross(ctx context.Context, p *errandstore.JobClaimParams) ([]*errandtype.Job, error) {
	if len(p.Queues) == 1 {
		return c.claimOutside(ctx, p)
	}
	oneByOne := c.paused.any(ctx)
	for _, q := range p.Queues {
		if oneByOne {
			break
		}
		flow, err := storedFlowLimits(ctx, c.caps.limiter, q, p.Kinds, c.dependencyOf, &c.outside.adaptive)
		if err != nil {
			return nil, fmt.Errorf("read rate limits: %w", err)
		}
		if flow != nil {
			oneByOne = true
			break
		}
	}
	if !oneByOne {
		claim := func(ctx context.Context, p *errandstore.JobClaimParams) ([]*errandtype.Job, error) {
			return c.store.JobClaimMany(ctx, p)
		}
		return c.outsideGates(ctx, nil).through(&claimTicket{}, claim)(ctx, p)
	}
	for _, q := range p.Queues {
		qp := *p
		qp.Queues = []string{q}
		jobs, err := c.claimOutside(ctx, &qp)
		if err != nil || len(jobs) > 0 {
			return jobs, err
		}
	}
	return []*errandtype.Job{}, nil
}
