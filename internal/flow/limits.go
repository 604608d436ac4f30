// The mechanics of a worker's rate limits and retry budgets: the tokens a
// claim takes, how their grants shape it, and what it gives back.

package flow

import (
	"context"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
)

// limitTimeout bounds one take or give. Like claimTimeout it stands for a
// connection that may hang, not for a rule of errand's.
const limitTimeout = 30 * time.Second

// limitRetry is how long a queue whose take failed waits before it tries
// again. A take that fails holds the claim back: limits protect what the
// jobs call, so they fail closed.
const limitRetry = time.Second

// Limits are one worker's limits, by what they apply to.
type Limits struct {
	Store   errandstore.LimiterStore
	Queues  map[string]Rule // queue -> its rate limit
	Kinds   map[string]Rule // kind -> its rate limit
	Budgets map[string]Rule // kind -> its retry budget
	// Adaptive: kind -> the collector of its adaptive limit (in Kinds too).
	Adaptive map[string]*Adaptive
	// Concurrency: kind -> its concurrency limit, its own or its
	// dependency's, as the store holds it, for a claim outside a Worker
	// (the root package's concurrency gate applies it; Plan and Take
	// leave it alone).
	Concurrency map[string]Rule
	// ConcAdaptive: kind -> the collector of its adaptive concurrency
	// limit, shared by every kind the limit counts.
	ConcAdaptive map[string]*Adaptive
	dependencyLimits
}

// Rule is one bucket: its stored name and its rule.
type Rule struct {
	Name string
	Spec errandtype.LimiterSpec
	// Counts are a concurrency limit's counted kinds (see
	// errandstore.JobClaimLimitedParams).
	Counts []string
}

// NewLimits returns empty limits kept in store.
func NewLimits(store errandstore.LimiterStore) *Limits {
	return &Limits{Store: store, Queues: map[string]Rule{}, Kinds: map[string]Rule{}, Budgets: map[string]Rule{}, Adaptive: map[string]*Adaptive{}, Concurrency: map[string]Rule{}, ConcAdaptive: map[string]*Adaptive{},
		dependencyLimits: newDependencyLimits()}
}

// Plan is what the limits allow one claim.
type Plan struct {
	Kinds     []string // the kinds to claim
	Limit     int      // the most jobs to claim
	SkipRetry []string // kinds whose retries to leave out
	// Held: claim nothing; sleep for Wait (or the poll interval when Wait
	// is 0) and take again.
	Held bool
	// Wait, when positive, is how long until a bucket that held back the
	// queue, a kind or a kind's retries holds a token again.
	Wait time.Duration
	// Again: the claim's first attempts gave tokens to a retry budget
	// that had none, whose retries the claim left out: claim again at
	// once rather than wait for a poll.
	Again bool
	// retryRoom, when positive, is less than limit: the fewest tokens a
	// retry budget granted. Then the claim is split (see Claim): its
	// first part claims at most retryRoom jobs, retries included; the
	// rest leaves out the retries of the kinds in retryCapped.
	retryRoom   int
	retryCapped []string
	// takes and grants, for Settle.
	takes  []errandstore.LimiterTake
	grants []errandstore.LimiterGrant
	// depKinds: a dependency's bucket -> the claim's kinds that call it.
	depKinds map[string][]string
}

// Plan takes the tokens of a claim of up to free jobs of kinds from queue.
// Without limits it returns at once, with the claim unchanged.
func (f *Limits) Plan(ctx context.Context, logger *slog.Logger, queue string, kinds []string, free int) Plan {
	p := Plan{Kinds: kinds, Limit: free}
	if f == nil {
		return p
	}
	takes, queueLimited := f.takesFor(queue, kinds, free)
	if len(takes) == 0 {
		return p
	}
	tctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), limitTimeout)
	grants, err := f.Store.LimiterTake(tctx, &errandstore.LimiterTakeParams{Takes: takes})
	cancel()
	if err != nil {
		if ctx.Err() == nil {
			logger.Warn("take rate limit tokens failed; holding the claim back", "queue", queue, "err", err)
		}
		return Plan{Held: true, Wait: limitRetry}
	}
	p.takes, p.grants, p.depKinds = takes, grants, f.kindsByDependency(kinds)
	p.apply(queueLimited)
	if p.Held {
		// Give back what the other buckets granted.
		f.Settle(ctx, logger, &p, nil, nil)
		return p
	}
	p.capRetries()
	return p
}

// takesFor returns the takes of a claim of up to free jobs of kinds from
// queue: the queue's limit first, when it has one (queueLimited), then
// the limits and budgets of the kinds.
func (f *Limits) takesFor(queue string, kinds []string, free int) (takes []errandstore.LimiterTake, queueLimited bool) {
	queueRule, queueLimited := f.Queues[queue]
	if queueLimited {
		takes = append(takes, errandstore.LimiterTake{Name: queueRule.Name, Spec: queueRule.Spec, Want: free})
	}
	for _, k := range kinds {
		if r, ok := f.Kinds[k]; ok {
			takes = append(takes, errandstore.LimiterTake{Name: r.Name, Spec: r.Spec, Want: free})
		}
		if r, ok := f.Budgets[k]; ok {
			takes = append(takes, errandstore.LimiterTake{Name: r.Name, Spec: r.Spec, Want: free})
		}
	}
	takes = append(takes, f.dependencyTakes(kinds, free)...)
	return takes, queueLimited
}

// apply shapes the claim by its grants: a rate limit's grant bounds the
// claim, a queue limit without a token holds it back, a kind limit without
// one takes the kind out, a retry budget without one its retries.
func (p *Plan) apply(queueLimited bool) {
	var out map[string]bool // kinds taken out of the claim
	for i, t := range p.takes {
		g := p.grants[i]
		switch {
		case g.Granted > 0 && t.Spec.Mode == errandtype.LimiterModeRetryBudget:
			// Bounds the kind's retries only; see capRetries.
		case g.Granted > 0:
			p.Limit = min(p.Limit, g.Granted)
		case queueLimited && i == 0:
			p.Held = true
		case t.Spec.Mode == errandtype.LimiterModeRetryBudget:
			p.SkipRetry = append(p.SkipRetry, strings.TrimPrefix(t.Name, "retry:"))
			p.noteWait(g.Wait)
		default:
			if out == nil {
				out = map[string]bool{}
			}
			for _, k := range p.limitedKinds(t.Name) {
				out[k] = true
			}
			p.noteWait(g.Wait)
		}
	}
	if queueLimited && p.grants[0].Granted == 0 {
		// Only the queue's own tokens end the hold.
		p.Wait = max(p.grants[0].Wait, 0)
	} else if out != nil {
		p.Kinds = slices.DeleteFunc(slices.Clone(p.Kinds), func(k string) bool { return out[k] })
		p.Held = len(p.Kinds) == 0
	}
}

// noteWait keeps the shortest positive wait of the buckets that held part
// of the claim back.
func (p *Plan) noteWait(w time.Duration) {
	if w > 0 && (p.Wait == 0 || w < p.Wait) {
		p.Wait = w
	}
}

// capRetries notes the retry budgets that granted fewer tokens than the
// claim has room for: the claim is then split (see Claim).
func (p *Plan) capRetries() {
	for i, t := range p.takes {
		k := strings.TrimPrefix(t.Name, "retry:")
		if g := p.grants[i].Granted; t.Spec.Mode == errandtype.LimiterModeRetryBudget && g > 0 && g < p.Limit && slices.Contains(p.Kinds, k) {
			if p.retryRoom == 0 || g < p.retryRoom {
				p.retryRoom = g
			}
			p.retryCapped = append(p.retryCapped, k)
		}
	}
}

// Claim claims the jobs params ask for (params.Limit is p.Limit) with
// claim, split in two when a retry budget granted fewer tokens than the
// claim has room for: first at most retryRoom jobs, retries included, then,
// when that part came back full, the rest with the retries of the budgets'
// kinds left out, so that no kind claims more retries than its grant
// while its first attempts fill the claim. A failure of the second part
// returns the first's jobs without the error (logged): they are claimed,
// their attempts counted.
func (p *Plan) Claim(ctx context.Context, logger *slog.Logger, params *errandstore.JobClaimParams, claim func(context.Context, *errandstore.JobClaimParams) ([]*errandtype.Job, error)) ([]*errandtype.Job, error) {
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

// Split reports whether the claim is made in two parts (see Claim).
func (p *Plan) Split() bool { return p.retryRoom > 0 }

// Settle gives back what a claim did not use, and deposits a retry
// budget's tokens for the first attempts it claimed. A failed claim gives
// nothing back: it may have claimed jobs the worker never saw, and a lost
// token only slows the queue.
func (f *Limits) Settle(ctx context.Context, logger *slog.Logger, p *Plan, jobs []*errandtype.Job, claimErr error) {
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
		case strings.HasPrefix(t.Name, "kind:") || strings.HasPrefix(t.Name, errandtype.DependencyLimitPrefix):
			for _, k := range p.limitedKinds(t.Name) {
				used += perKind[k]
			}
			if g := p.grants[i].Granted; g < t.Want && used == g {
				f.collector(t.Name).noteLimited()
			}
		default:
			used = len(jobs)
		}
		if deposit > 0 && p.grants[i].Granted == 0 {
			p.Again = true
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
	if err := f.Store.LimiterGive(gctx, &errandstore.LimiterGiveParams{Gives: gives}); err != nil {
		logger.Warn("give back unused rate limit tokens failed", "err", err)
	}
}

// IdleWait shortens an idle queue's sleep to when a bucket that held back
// part of its claim holds a token again, and no shorter than floor.
func (p *Plan) IdleWait(wait, floor time.Duration) time.Duration {
	if p.Wait > 0 && p.Wait < wait {
		return max(p.Wait, floor)
	}
	return wait
}
