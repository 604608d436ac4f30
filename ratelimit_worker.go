package errand

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
)

// A worker's rate limits and retry budgets gate its claims. Before a claim
// it takes tokens, in one transaction, from every bucket that applies to
// the queue: the queue's limit, the limits and budgets of the kinds it
// handles, each wanting as many tokens as the claim has slots. Then:
//
//   - a queue limit with no token holds the claim back;
//   - a kind limit with no token takes that kind out of the claim;
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
// A worker without limits has no flowLimits (nil) and makes no call here.

// limitTimeout bounds one take or give. Like claimTimeout it stands for a
// connection that may hang, not for a rule of errand's.
const limitTimeout = 30 * time.Second

// limitRetry is how long a queue whose take failed waits before it tries
// again. A take that fails holds the claim back: limits protect what the
// jobs call, so they fail closed.
const limitRetry = time.Second

// flowLimits are one worker's limits, by what they apply to.
type flowLimits struct {
	store   errandstore.LimiterStore
	queues  map[string]flowRule // queue -> its rate limit
	kinds   map[string]flowRule // kind -> its rate limit
	budgets map[string]flowRule // kind -> its retry budget
}

type flowRule struct {
	name string
	spec errandtype.LimiterSpec
}

// newFlowLimits checks a worker's limits against what it works: a limit
// on a queue it does not work, or a kind it has no handler for, is a
// mistake (it would limit nothing). It returns nil without limits.
func newFlowLimits(store errandstore.Store, cfg *WorkerConfig, kinds []string) (*flowLimits, error) {
	if len(cfg.RateLimits) == 0 && len(cfg.RetryBudgets) == 0 {
		return nil, nil
	}
	ls, ok := store.(errandstore.LimiterStore)
	if !ok {
		return nil, &errandtype.InputError{Field: "RateLimits", Message: fmt.Sprintf("the store (%T) keeps no limits: it is not an errandstore.LimiterStore; drop RateLimits and RetryBudgets", store)}
	}
	f := &flowLimits{store: ls, queues: map[string]flowRule{}, kinds: map[string]flowRule{}, budgets: map[string]flowRule{}}
	for _, l := range cfg.RateLimits {
		spec, err := l.spec()
		if err != nil {
			return nil, err
		}
		m, key := f.kinds, l.Kind
		if l.Queue != "" {
			m, key = f.queues, l.Queue
			if _, ok := cfg.Queues[l.Queue]; !ok {
				return nil, &errandtype.InputError{Field: "RateLimits", Message: fmt.Sprintf("%s limits a queue this worker does not work; add it to Queues or drop the limit", l.Name())}
			}
		} else if !slices.Contains(kinds, l.Kind) {
			return nil, &errandtype.InputError{Field: "RateLimits", Message: fmt.Sprintf("%s limits a kind this worker has no handler for; drop the limit or handle the kind", l.Name())}
		}
		if _, dup := m[key]; dup {
			return nil, &errandtype.InputError{Field: "RateLimits", Message: fmt.Sprintf("%s is limited twice; give each queue or kind one limit", l.Name())}
		}
		m[key] = flowRule{l.Name(), spec}
	}
	for _, b := range cfg.RetryBudgets {
		spec, err := b.spec()
		if err != nil {
			return nil, err
		}
		if !slices.Contains(kinds, b.Kind) {
			return nil, &errandtype.InputError{Field: "RetryBudgets", Message: fmt.Sprintf("retry budget of %s: this worker has no handler for the kind; drop the budget or handle the kind", b.Kind)}
		}
		if _, dup := f.budgets[b.Kind]; dup {
			return nil, &errandtype.InputError{Field: "RetryBudgets", Message: fmt.Sprintf("kind %s has two retry budgets; give it one", b.Kind)}
		}
		f.budgets[b.Kind] = flowRule{b.Name(), spec}
	}
	return f, nil
}

// claimPlan is what the limits allow one claim.
type claimPlan struct {
	kinds     []string // the kinds to claim
	limit     int      // the most jobs to claim
	skipRetry []string // kinds whose retries to leave out
	// held: claim nothing; sleep for wait (or the poll interval when wait
	// is 0) and take again.
	held bool
	// wait, when positive, is how long until a bucket that held back the
	// queue, a kind or a kind's retries holds a token again.
	wait time.Duration
	// again: the claim's first attempts gave tokens to a retry budget
	// that had none, whose retries the claim left out: claim again at
	// once rather than wait for a poll.
	again bool
	// retryRoom, when positive, is less than limit: the fewest tokens a
	// retry budget granted. Then the claim is split (see claim): its
	// first part claims at most retryRoom jobs, retries included; the
	// rest leaves out the retries of the kinds in retryCapped.
	retryRoom   int
	retryCapped []string
	// takes and grants, for settle.
	takes  []errandstore.LimiterTake
	grants []errandstore.LimiterGrant
}

// plan takes the tokens of a claim of up to free jobs of kinds from queue.
// Without limits it returns at once, with the claim unchanged.
func (f *flowLimits) plan(ctx context.Context, logger *slog.Logger, queue string, kinds []string, free int) claimPlan {
	p := claimPlan{kinds: kinds, limit: free}
	if f == nil {
		return p
	}
	takes, queueLimited := f.takesFor(queue, kinds, free)
	if len(takes) == 0 {
		return p
	}
	tctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), limitTimeout)
	grants, err := f.store.LimiterTake(tctx, &errandstore.LimiterTakeParams{Takes: takes})
	cancel()
	if err != nil {
		if ctx.Err() == nil {
			logger.Warn("take rate limit tokens failed; holding the claim back", "queue", queue, "err", err)
		}
		return claimPlan{held: true, wait: limitRetry}
	}
	p.takes, p.grants = takes, grants
	p.apply(queueLimited)
	if p.held {
		// Give back what the other buckets granted.
		f.settle(ctx, logger, &p, nil, nil)
		return p
	}
	p.capRetries()
	return p
}

// takesFor returns the takes of a claim of up to free jobs of kinds from
// queue: the queue's limit first, when it has one (queueLimited), then
// the limits and budgets of the kinds.
func (f *flowLimits) takesFor(queue string, kinds []string, free int) (takes []errandstore.LimiterTake, queueLimited bool) {
	queueRule, queueLimited := f.queues[queue]
	if queueLimited {
		takes = append(takes, errandstore.LimiterTake{Name: queueRule.name, Spec: queueRule.spec, Want: free})
	}
	for _, k := range kinds {
		if r, ok := f.kinds[k]; ok {
			takes = append(takes, errandstore.LimiterTake{Name: r.name, Spec: r.spec, Want: free})
		}
		if r, ok := f.budgets[k]; ok {
			takes = append(takes, errandstore.LimiterTake{Name: r.name, Spec: r.spec, Want: free})
		}
	}
	return takes, queueLimited
}

// apply shapes the claim by its grants: a rate limit's grant bounds the
// claim, a queue limit without a token holds it back, a kind limit without
// one takes the kind out, a retry budget without one its retries.
func (p *claimPlan) apply(queueLimited bool) {
	var out map[string]bool // kinds taken out of the claim
	for i, t := range p.takes {
		g := p.grants[i]
		switch {
		case g.Granted > 0 && t.Spec.Mode == errandtype.LimiterModeRetryBudget:
			// Bounds the kind's retries only; see capRetries.
		case g.Granted > 0:
			p.limit = min(p.limit, g.Granted)
		case queueLimited && i == 0:
			p.held = true
		case t.Spec.Mode == errandtype.LimiterModeRetryBudget:
			p.skipRetry = append(p.skipRetry, strings.TrimPrefix(t.Name, "retry:"))
			p.noteWait(g.Wait)
		default:
			if out == nil {
				out = map[string]bool{}
			}
			out[strings.TrimPrefix(t.Name, "kind:")] = true
			p.noteWait(g.Wait)
		}
	}
	if queueLimited && p.grants[0].Granted == 0 {
		// Only the queue's own tokens end the hold.
		p.wait = max(p.grants[0].Wait, 0)
	} else if out != nil {
		p.kinds = slices.DeleteFunc(slices.Clone(p.kinds), func(k string) bool { return out[k] })
		p.held = len(p.kinds) == 0
	}
}

// noteWait keeps the shortest positive wait of the buckets that held part
// of the claim back.
func (p *claimPlan) noteWait(w time.Duration) {
	if w > 0 && (p.wait == 0 || w < p.wait) {
		p.wait = w
	}
}

// capRetries notes the retry budgets that granted fewer tokens than the
// claim has room for: the claim is then split (see claim).
func (p *claimPlan) capRetries() {
	for i, t := range p.takes {
		k := strings.TrimPrefix(t.Name, "retry:")
		if g := p.grants[i].Granted; t.Spec.Mode == errandtype.LimiterModeRetryBudget && g > 0 && g < p.limit && slices.Contains(p.kinds, k) {
			if p.retryRoom == 0 || g < p.retryRoom {
				p.retryRoom = g
			}
			p.retryCapped = append(p.retryCapped, k)
		}
	}
}

// claim claims the jobs params ask for (params.Limit is p.limit) with
// claim, split in two when a retry budget granted fewer tokens than the
// claim has room for: first at most retryRoom jobs, retries included, then,
// when that part came back full, the rest with the retries of the budgets'
// kinds left out, so that no kind claims more retries than its grant
// while its first attempts fill the claim. A failure of the second part
// returns the first's jobs without the error (logged): they are claimed,
// their attempts counted.
func (p *claimPlan) claim(ctx context.Context, logger *slog.Logger, params *errandstore.JobClaimParams, claim claimFunc) ([]*errandtype.Job, error) {
	if p.retryRoom == 0 {
		return claim(ctx, params)
	}
	first := *params
	first.Limit = min(params.Limit, p.retryRoom)
	jobs, err := claim(ctx, &first)
	if err != nil || len(jobs) < first.Limit {
		return jobs, err
	}
	rest := *params
	rest.Limit = params.Limit - len(jobs)
	rest.SkipRetryKinds = append(slices.Clone(params.SkipRetryKinds), p.retryCapped...)
	more, err := claim(ctx, &rest)
	if err != nil {
		logger.Warn("claim of first attempts failed after a claim within a retry budget; returning that claim's jobs", "jobs", len(jobs), "err", err)
		return jobs, nil
	}
	return append(jobs, more...), nil
}

// split reports whether the claim is made in two parts (see claim).
func (p *claimPlan) split() bool { return p.retryRoom > 0 }

// settle gives back what a claim did not use, and deposits a retry
// budget's tokens for the first attempts it claimed. A failed claim gives
// nothing back: it may have claimed jobs the worker never saw, and a lost
// token only slows the queue.
func (f *flowLimits) settle(ctx context.Context, logger *slog.Logger, p *claimPlan, jobs []*errandtype.Job, claimErr error) {
	if f == nil || len(p.takes) == 0 || claimErr != nil {
		return
	}
	perKind := map[string]int{}
	retries, firsts := map[string]int{}, map[string]int{}
	for _, j := range jobs {
		perKind[j.Kind]++
		if j.Attempt > 1 {
			retries[j.Kind]++
		} else {
			firsts[j.Kind]++
		}
	}
	var gives []errandstore.LimiterGive
	for i, t := range p.takes {
		var used int
		var deposit float64
		switch {
		case t.Spec.Mode == errandtype.LimiterModeRetryBudget:
			k := strings.TrimPrefix(t.Name, "retry:")
			used, deposit = retries[k], t.Spec.Ratio*float64(firsts[k])
		case strings.HasPrefix(t.Name, "kind:"):
			used = perKind[strings.TrimPrefix(t.Name, "kind:")]
		default:
			used = len(jobs)
		}
		if deposit > 0 && p.grants[i].Granted == 0 {
			p.again = true
		}
		if amount := float64(p.grants[i].Granted-used) + deposit; amount > 0 {
			gives = append(gives, errandstore.LimiterGive{Name: t.Name, Amount: amount})
		}
	}
	if len(gives) == 0 {
		return
	}
	sort.Slice(gives, func(a, b int) bool { return gives[a].Name < gives[b].Name })
	gctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), limitTimeout)
	defer cancel()
	if err := f.store.LimiterGive(gctx, &errandstore.LimiterGiveParams{Gives: gives}); err != nil {
		logger.Warn("give back unused rate limit tokens failed", "err", err)
	}
}

// idleWait shortens an idle queue's sleep to when a bucket that held back
// part of its claim holds a token again.
func (p *claimPlan) idleWait(wait time.Duration) time.Duration {
	if p.wait > 0 && p.wait < wait {
		return max(p.wait, minDueWait)
	}
	return wait
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
