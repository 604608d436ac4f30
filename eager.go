package errand

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
)

// An eager start (EnqueueOpts.Eager) hands a job to an idle queue of a
// Worker of this process in the enqueue's own transaction: the store
// inserts and claims it at once (errandstore.InsertClaimer), and the queue
// runs it as one of its claims. A queue takes eager jobs only while its
// loop sleeps idle, between claims: the loop counts its free slots only
// when awake, so a slot taken while it sleeps is never counted twice.
// Queues whose claims pass gates (weights, rate limits, retry budgets,
// breakers) take none: the gates decide at claim time, and an eager job
// would pass them by.

// eagerQueues are the queues of this client's workers that may take eager
// jobs, by queue name, and the jobs they started eagerly whose attempts
// have not returned.
type eagerQueues struct {
	mu   sync.Mutex
	m    map[string][]*queueSlots
	runs map[string]int
}

// running reports whether an attempt of this process started job id
// eagerly and has not returned: the job is not finished, unless its lease
// ran out meanwhile, and this process will learn when it is (see Result).
func (e *eagerQueues) running(id string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.runs[id] > 0
}

// run counts an eager attempt of job id as running (by 1) or returned
// (by -1).
func (e *eagerQueues) run(id string, by int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.runs == nil {
		e.runs = map[string]int{}
	}
	if e.runs[id] += by; e.runs[id] <= 0 {
		delete(e.runs, id)
	}
}

func (e *eagerQueues) add(s *queueSlots) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.m == nil {
		e.m = map[string][]*queueSlots{}
	}
	e.m[s.queue] = append(e.m[s.queue], s)
}

func (e *eagerQueues) remove(s *queueSlots) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.m[s.queue] = slices.DeleteFunc(e.m[s.queue], func(o *queueSlots) bool { return o == s })
}

// reserve takes a slot of an idle queue whose worker handles kind, and
// returns it, or nil.
func (e *eagerQueues) reserve(queue, kind string) *queueSlots {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, s := range e.m[queue] {
		if _, ok := slices.BinarySearch(s.w.kinds, kind); ok && s.reserveEager() {
			return s
		}
	}
	return nil
}

// eagerGate is a queue's part of eager starts: whether its loop sleeps
// idle, so that its slots may be taken.
type eagerGate struct {
	mu   sync.Mutex
	open bool
}

// setEager lets eager jobs take the queue's free slots (open) while its
// loop sleeps, or stops them as it wakes.
func (s *queueSlots) setEager(open bool) {
	if s.eager == nil {
		return
	}
	s.eager.mu.Lock()
	s.eager.open = open
	s.eager.mu.Unlock()
}

// reserveEager takes a free slot for an eager job if the loop sleeps idle.
// The job counts as running, for Stop to wait for, from here: the loop is
// alive, so Stop has not begun to wait.
func (s *queueSlots) reserveEager() bool {
	s.eager.mu.Lock()
	defer s.eager.mu.Unlock()
	if !s.eager.open {
		return false
	}
	select {
	case s.tokens <- struct{}{}:
	default:
		return false
	}
	s.w.running.Add(1)
	s.w.stats.running.Add(1)
	return true
}

// unreserve gives back a slot reserveEager took for a job not claimed.
func (s *queueSlots) unreserve() {
	s.Free()
	s.w.running.Done()
}

// startEager runs job, claimed into s's reserved slot.
func (s *queueSlots) startEager(job *errandtype.Job, claimSent time.Time) {
	eager := &s.w.c.eager
	eager.run(job.ID, 1) // before the enqueue returns, for a Result that follows it
	go func() {
		defer s.w.running.Done()
		defer eager.run(job.ID, -1)
		s.w.runJob(s.runCtx, s, job, claimSent, true, nil) // no claim: the enqueue's span is its parent
	}()
}

// enqueueEager inserts p claiming it for an idle queue of this process's
// workers, and starts it there. tried is false when no queue could take it
// or the store cannot claim as it inserts, and nothing was written: the
// caller then enqueues p as without Eager. started reports that the job
// was claimed and runs.
func (c *engine) enqueueEager(ctx context.Context, p *errandstore.JobInsertParams) (r errandstore.JobInsertResult, tried, started bool, err error) {
	if c.caps.insertClaim == nil {
		return r, false, false, nil
	}
	s := c.eager.reserve(p.Queue, p.Kind)
	if s == nil {
		return r, false, false, nil
	}
	// Asked only with a slot in hand: a stale view of the pauses costs a
	// read, which an enqueue no idle worker could take need not pay.
	if c.paused.paused(ctx, p.Queue, p.Kind) {
		s.unreserve()
		return r, false, false, nil
	}
	w := s.w
	sent := c.clock.Now()
	r, claimed, err := c.caps.insertClaim.JobInsertClaim(ctx, &errandstore.JobInsertClaimParams{Job: p, Claim: errandstore.JobClaimParams{
		Queues: []string{p.Queue}, Kinds: w.kinds, Limit: 1, Lease: w.cfg.Lease, Owner: w.cfg.Owner}})
	if err != nil || !claimed {
		s.unreserve()
		return r, true, false, err
	}
	w.stats.claims.Add(1)
	s.startEager(r.Job, sent)
	return r, true, true, nil
}
