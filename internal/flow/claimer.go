package flow

import (
	"context"
	"slices"
	"sync/atomic"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
)

// A worker claims a queue fairly (errandstore.FairClaimer) while it sees
// jobs with a fairness key in it: a claim that returns one switches the
// queue's loop to fair claims, and a fair claim that returns none switches
// it back. A queue whose jobs carry no key is claimed exactly as it always
// was, with no query added; a queue with keys costs one plain claim each
// time keys appear in it again (which is when a burst may be taken in
// enqueue order: at most one claim's worth). A store without FairClaimer
// claims every queue in plain order.

// Claimer claims for one queue loop, remembering whether the queue is
// being claimed fairly.
type Claimer struct {
	Fair errandstore.FairClaimer    // nil: the store has no fair claims
	Due  errandstore.NextDueClaimer // nil: the store answers JobNextDue on its own only
	fair atomic.Bool                // claims made outside a Worker share one per queue
}

// Fairly reports whether the queue is being claimed fairly now.
func (qc *Claimer) Fairly() bool { return qc.fair.Load() }

// AsksDue reports whether a claim can also answer when the queue's next job
// comes due, in its own round trip: a plain claim, on a store that can.
func (qc *Claimer) AsksDue() bool {
	return qc.Due != nil && !qc.fair.Load()
}

// ClaimNextDue is Claim's plain claim, answering next as well; call it only
// when AsksDue.
func (qc *Claimer) ClaimNextDue(ctx context.Context, p *errandstore.JobClaimParams, next *errandstore.JobNextDueParams) ([]*errandtype.Job, errandstore.JobNextDueResult, error) {
	jobs, due, err := qc.Due.JobClaimManyNextDue(ctx, p, next)
	if err == nil && qc.Fair != nil && hasFairnessKey(jobs) {
		qc.fair.Store(true)
	}
	return jobs, due, err
}

// Claim claims p from s, fairly while the queue has fairness keys.
func (qc *Claimer) Claim(ctx context.Context, s errandstore.JobStore, p *errandstore.JobClaimParams) ([]*errandtype.Job, error) {
	if !qc.fair.Load() || qc.Fair == nil {
		jobs, err := s.JobClaimMany(ctx, p)
		if err == nil && qc.Fair != nil && hasFairnessKey(jobs) {
			qc.fair.Store(true)
		}
		return jobs, err
	}
	jobs, err := qc.Fair.JobClaimFair(ctx, p)
	if err == nil && !hasFairnessKey(jobs) {
		qc.fair.Store(false)
	}
	return jobs, err
}

func hasFairnessKey(jobs []*errandtype.Job) bool {
	return slices.ContainsFunc(jobs, func(j *errandtype.Job) bool { return j.FairnessKey != nil })
}
