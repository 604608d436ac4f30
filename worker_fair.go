package errand

import (
	"context"
	"slices"
	"sync/atomic"
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
	store FairClaimer // nil: the store has no fair claims
	fair  atomic.Bool // claims made outside a Worker share one per queue
}

func (w *Worker) newQueueClaimer() *queueClaimer {
	f, _ := w.c.store.(FairClaimer)
	return &queueClaimer{store: f}
}

// claim claims p's jobs, fairly when the queue is in fair mode, and updates
// the mode from what it got.
func (qc *queueClaimer) claim(ctx context.Context, s JobStore, p *JobClaimParams) ([]*Job, error) {
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

func hasFairnessKey(jobs []*Job) bool {
	return slices.ContainsFunc(jobs, func(j *Job) bool { return j.FairnessKey != nil })
}
