// Package flow holds the mechanics behind a worker's flow-control gates:
// how its shared capacity is split among its queues by weight (Share), and
// what its rate limits and retry budgets allow a claim (Limits, Plan).
//
// Weighted queues: a worker with MaxWorkers set runs at most that many jobs
// at once over all its queues, each queue still within its own slots
// (WorkerConfig.Queues). Freed capacity goes to the queues that want it by
// stride scheduling: each queue has a pass that every slot granted to it
// advances by 1/weight, and a freed slot goes to the waiting queue with the
// lowest pass. While every queue has more ready work than the capacity,
// starts therefore follow the weights exactly, and the lowest weight still
// gets its share (weight 1 of 100 gets one start in 101): no queue
// starves. A queue that has no work does not wait, so its share goes to the
// others; when it has work again it rejoins at the others' pass, with no
// credit saved up from its idle time, so it cannot take the whole capacity
// in a burst.
package flow

import (
	"context"
	"math"
	"sync"
)

// Share hands out a worker's shared capacity to its queues by
// weight (see the package comment). Queue loops ask for slots before they claim
// (Acquire), give back what the claim did not use (Rest), and give back a
// slot when a job ends (Release).
//
// A queue's demand stands from its acquire until its claim comes up short
// (rest), including while its loop claims: a slot freed meanwhile is
// granted to it by pass like any other, kept for it (pending), and taken by
// its next acquire at once. Were the demand registered only while the loop
// waits in acquire, a queue whose loop happens to be claiming when a slot
// frees would lose that slot to whichever queue waits, and with jobs of
// equal length, whose slots free together, the shares would drift toward
// even whatever the weights.
type Share struct {
	mu     sync.Mutex
	free   int // capacity granted to no queue
	queues map[string]*shareQueue
	vtime  float64 // the pass of the latest grant
}

// shareQueue is one queue's standing in a Share.
type shareQueue struct {
	name   string
	weight int
	slots  int     // the queue's own bound (the worker's Queues)
	pass   float64 // advanced by 1/weight per slot granted
	// active: the queue wants slots, from its acquire until it rests.
	active bool
	// held: slots granted to the queue and not yet given back: its running
	// jobs, those its loop took to claim with, and pending.
	held int
	// pending: granted, not yet taken by the loop's acquire.
	pending int
	waiting bool          // the loop waits in acquire
	ready   chan struct{} // buffered 1: a grant to a waiting loop
}

// NewShare shares capacity among queues of the given weights, each
// queue within slots[queue] (no bound when absent).
func NewShare(capacity int, weights map[string]int, slots map[string]int) *Share {
	s := &Share{free: capacity, queues: make(map[string]*shareQueue, len(weights))}
	for q, w := range weights {
		n, ok := slots[q]
		if !ok || n <= 0 {
			n = capacity
		}
		s.queues[q] = &shareQueue{name: q, weight: w, slots: n, ready: make(chan struct{}, 1)}
	}
	return s
}

// Acquire waits until queue is granted at least one slot and returns how
// many it takes, at most want; 0 when ctx ended first.
func (s *Share) Acquire(ctx context.Context, queue string, want int) int {
	s.mu.Lock()
	q := s.queues[queue]
	if !q.active {
		// Back from idle: no credit for the time it wanted nothing.
		q.pass = math.Max(q.pass, s.vtime)
		q.active = true
		s.dispatch()
	}
	for q.pending == 0 {
		q.waiting = true
		s.mu.Unlock()
		select {
		case <-q.ready:
		case <-ctx.Done():
		}
		s.mu.Lock()
		q.waiting = false
		if ctx.Err() != nil {
			// The loop stops: its demand goes with it.
			q.active = false
			if q.pending > 0 {
				s.returnLocked(q, q.pending)
				q.pending = 0
				s.dispatch()
			}
			s.mu.Unlock()
			return 0
		}
	}
	n := min(q.pending, want)
	q.pending -= n
	s.mu.Unlock()
	return n
}

// returnLocked takes n slots back from q. Called with mu held.
func (s *Share) returnLocked(q *shareQueue, n int) {
	q.pass -= float64(n) / float64(q.weight)
	q.held -= n
	s.free += n
}

// Release returns the slot of a job of queue that ended.
func (s *Share) Release(queue string) {
	s.mu.Lock()
	s.queues[queue].held--
	s.free++
	s.dispatch()
	s.mu.Unlock()
}

// Rest records that queue's claim came up short, or was not sent: it has
// no more ready work, or may not claim it now. It gives back the unused
// slots it took for the claim and what was kept for it meanwhile, with the
// pass they cost, and wants nothing until its next acquire, where it
// rejoins without credit.
func (s *Share) Rest(queue string, unused int) {
	s.mu.Lock()
	q := s.queues[queue]
	q.active = false
	if n := unused + q.pending; n > 0 {
		s.returnLocked(q, n)
		q.pending = 0
		s.dispatch()
	}
	s.mu.Unlock()
}

// dispatch grants free slots one at a time to the active queue with room
// and the lowest pass (ties: the higher weight, then the name). Called
// with mu held.
func (s *Share) dispatch() {
	for s.free > 0 {
		var best *shareQueue
		for _, q := range s.queues {
			if !q.active || q.held >= q.slots {
				continue
			}
			if best == nil || before(q, best) {
				best = q
			}
		}
		if best == nil {
			return
		}
		s.vtime = best.pass
		best.pass += 1 / float64(best.weight)
		best.held++
		best.pending++
		s.free--
		if best.waiting {
			select {
			case best.ready <- struct{}{}:
			default:
			}
		}
	}
}

func before(a, b *shareQueue) bool {
	if a.pass != b.pass {
		return a.pass < b.pass
	}
	if a.weight != b.weight {
		return a.weight > b.weight
	}
	return a.name < b.name
}

// Waiting returns how many queue loops wait for capacity.
func (s *Share) Waiting() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, q := range s.queues {
		if q.waiting {
			n++
		}
	}
	return n
}

// Free returns the capacity granted to no queue.
func (s *Share) Free() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.free
}
