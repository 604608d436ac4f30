package errand

import (
	"context"
	"slices"
	"sync/atomic"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
)

// A worker claims a queue fairly ([FairClaimer]) while it sees jobs with a
// fairness key in it: a claim that returns one switches the queue's loop to
// fair claims, and a fair claim that returns none switches it back. A queue
// whose jobs carry no key is claimed exactly as it always was, with no
// query added; a queue with keys costs one plain claim each time keys
// appear in it again (which is when a burst may be taken in enqueue order:
// at most one claim's worth). The store's FairClaimer is found by type
// assertion; a store without it claims every queue in plain order.

// queueClaimer claims for one queue loop, remembering whether the queue is
// being claimed fairly.
type queueClaimer struct {
	store errandstore.FairClaimer    // nil: the store has no fair claims
	fair  atomic.Bool                // claims made outside a Worker share one per queue
	due   errandstore.NextDueClaimer // nil: the store answers JobNextDue on its own only
}

func (w *Worker) newQueueClaimer() *queueClaimer {
	return &queueClaimer{store: w.c.caps.fair, due: w.c.caps.nextDue}
}

// claimAsksDue reports whether the queue's next claim can answer when its
// next job comes due (see NextDueClaimer): a plain claim, not a fair one.
// A gate that makes the claim itself rules it out too (claimTicket.wrapped).
func (w *Worker) claimAsksDue(qc *queueClaimer) bool {
	return qc.due != nil && !qc.fair.Load()
}

// claimNextDue is claim's plain claim, answering next as well; the worker
// calls it only when claimAsksDue.
func (qc *queueClaimer) claimNextDue(ctx context.Context, p *errandstore.JobClaimParams, next *errandstore.JobNextDueParams) ([]*errandtype.Job, errandstore.JobNextDueResult, error) {
	jobs, due, err := qc.due.JobClaimManyNextDue(ctx, p, next)
	if err == nil && qc.store != nil && hasFairnessKey(jobs) {
		qc.fair.Store(true)
	}
	return jobs, due, err
}

// claim claims p's jobs, fairly when the queue is in fair mode, and updates
// the mode from what it got.
func (qc *queueClaimer) claim(ctx context.Context, s errandstore.JobStore, p *errandstore.JobClaimParams) ([]*errandtype.Job, error) {
	if !qc.fair.Load() || qc.store == nil {
		jobs, err := s.JobClaimMany(ctx, p)
		if err == nil && qc.store != nil && hasFairnessKey(jobs) {
			qc.fair.Store(true)
		}
		return jobs, err
	}
	jobs, err := qc.store.JobClaimFair(ctx, p)
	if err == nil && !hasFairnessKey(jobs) {
		qc.fair.Store(false)
	}
	return jobs, err
}

func hasFairnessKey(jobs []*errandtype.Job) bool {
	return slices.ContainsFunc(jobs, func(j *errandtype.Job) bool { return j.FairnessKey != nil })
}
