package errand

import (
	"context"
	"fmt"
	"math"
	"sync"
)

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

// maxQueueWeight bounds a queue's weight: weights are shares, and a ratio
// past a million to one is a mistake rather than a policy.
const maxQueueWeight = 1_000_000

// checkWeights validates MaxWorkers and QueueWeights against the queues and
// returns each queue's weight (1 when not given). It returns nil weights
// when MaxWorkers is zero: the queues share nothing.
func checkWeights(cfg *WorkerConfig) (map[string]int, error) {
	if cfg.MaxWorkers < 0 {
		return nil, &InputError{Field: "MaxWorkers", Message: fmt.Sprintf("is %d; give at least 1, or 0 for no shared limit", cfg.MaxWorkers)}
	}
	if cfg.MaxWorkers == 0 {
		if len(cfg.QueueWeights) > 0 {
			return nil, &InputError{Field: "QueueWeights", Message: "weights share MaxWorkers; set MaxWorkers too, e.g. 10"}
		}
		return nil, nil
	}
	weights := make(map[string]int, len(cfg.Queues))
	for q := range cfg.Queues {
		weights[q] = 1
	}
	for q, wt := range cfg.QueueWeights {
		if _, ok := cfg.Queues[q]; !ok {
			return nil, &InputError{Field: "QueueWeights", Message: fmt.Sprintf("queue %q is not among the worker's Queues; add it there or remove its weight", q)}
		}
		if wt < 1 || wt > maxQueueWeight {
			return nil, &InputError{Field: "QueueWeights", Message: fmt.Sprintf("queue %q has weight %d; use 1 to %d", q, wt, maxQueueWeight)}
		}
		weights[q] = wt
	}
	return weights, nil
}

// capacityShare hands out a worker's shared capacity to its queues by
// weight (see above). Queue loops ask for slots before they claim
// (acquire), give back what the claim did not use, and give back a slot
// when a job ends (release).
type capacityShare struct {
	mu      sync.Mutex
	free    int // capacity not granted
	weight  map[string]int
	pass    map[string]float64
	rested  map[string]bool // the queue's last claim came up short
	vtime   float64         // the pass of the latest grant
	waiters []*shareWaiter
}

type shareWaiter struct {
	queue   string
	want    int
	granted int
	ready   chan struct{} // closed on the first grant
}

func newCapacityShare(capacity int, weights map[string]int) *capacityShare {
	s := &capacityShare{free: capacity, weight: weights, pass: map[string]float64{}, rested: map[string]bool{}}
	return s
}

// acquire waits until queue is granted at least one slot and returns how
// many it was granted, at most want; 0 when ctx ended first.
func (s *capacityShare) acquire(ctx context.Context, queue string, want int) int {
	s.mu.Lock()
	if s.rested[queue] {
		// Back from idle: no credit for the time it wanted nothing.
		s.pass[queue] = math.Max(s.pass[queue], s.vtime)
		s.rested[queue] = false
	}
	wt := &shareWaiter{queue: queue, want: want, ready: make(chan struct{})}
	s.waiters = append(s.waiters, wt)
	s.dispatch()
	s.mu.Unlock()

	var done bool
	select {
	case <-wt.ready:
	case <-ctx.Done():
		done = true
	}
	s.mu.Lock()
	s.remove(wt)
	n := wt.granted
	s.mu.Unlock()
	if done && n > 0 {
		s.giveBack(queue, n)
		return 0
	}
	return n
}

// giveBack returns n slots granted to queue that it did not use, and the
// pass they cost it.
func (s *capacityShare) giveBack(queue string, n int) {
	if n <= 0 {
		return
	}
	s.mu.Lock()
	s.pass[queue] -= float64(n) / float64(s.weight[queue])
	s.free += n
	s.dispatch()
	s.mu.Unlock()
}

// release returns the slot of a job of queue that ended.
func (s *capacityShare) release() {
	s.mu.Lock()
	s.free++
	s.dispatch()
	s.mu.Unlock()
}

// rest records that queue's last claim came up short: it has no more ready
// work, and rejoins without credit when it next asks.
func (s *capacityShare) rest(queue string) {
	s.mu.Lock()
	s.rested[queue] = true
	s.mu.Unlock()
}

// dispatch grants free slots one at a time to the waiting queue with the
// lowest pass (ties: the higher weight, then the name). Called with mu
// held.
func (s *capacityShare) dispatch() {
	for s.free > 0 {
		var best *shareWaiter
		for _, wt := range s.waiters {
			if wt.granted >= wt.want {
				continue
			}
			if best == nil || s.before(wt.queue, best.queue) {
				best = wt
			}
		}
		if best == nil {
			return
		}
		q := best.queue
		s.vtime = s.pass[q]
		s.pass[q] += 1 / float64(s.weight[q])
		s.free--
		best.granted++
		if best.granted == 1 {
			close(best.ready)
		}
	}
}

func (s *capacityShare) before(a, b string) bool {
	if s.pass[a] != s.pass[b] {
		return s.pass[a] < s.pass[b]
	}
	if s.weight[a] != s.weight[b] {
		return s.weight[a] > s.weight[b]
	}
	return a < b
}

func (s *capacityShare) remove(wt *shareWaiter) {
	for i, o := range s.waiters {
		if o == wt {
			s.waiters = append(s.waiters[:i], s.waiters[i+1:]...)
			return
		}
	}
}

// waiting returns how many queue loops wait for capacity.
func (s *capacityShare) waiting() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.waiters)
}
