package errand

import (
	"slices"
	"sync"
	"sync/atomic"

	"github.com/errandhq/errand/errandtype"
)

// Event reports one attempt this client recorded, or whose lease it lost:
// what [Client.Subscribe] delivers.
type Event struct {
	// WorkResult is what became of the attempt.
	WorkResult
	// Job is the job as its attempt was claimed: its state then was
	// running; Result says what it is now.
	Job *errandtype.Job
}

// subscribeBuffer is how many events a subscriber may fall behind before
// further events are dropped for it.
const subscribeBuffer = 1000

// subscribers fans events out to every subscription of a client.
type subscribers struct {
	mu      sync.Mutex
	subs    map[*subscription]struct{}
	dropped atomic.Int64
}

type subscription struct {
	ch      chan Event
	results []Result // empty: every result
}

// Subscribe delivers an event for every attempt this client's workers
// (Worker or WorkOne) finish from now on, or only for attempts with one of
// results when any are given: a program or a test can wait for outcomes
// without polling Get. Events come in the order outcomes were recorded. A
// subscriber that falls more than 1000 events behind misses the ones that
// do not fit; [Client.DroppedEvents] counts them. Call cancel when done: it
// closes the channel.
func (c *Client[TTx]) Subscribe(results ...Result) (events <-chan Event, cancel func()) {
	s := &subscription{ch: make(chan Event, subscribeBuffer), results: slices.Clone(results)}
	c.subs.mu.Lock()
	if c.subs.subs == nil {
		c.subs.subs = map[*subscription]struct{}{}
	}
	c.subs.subs[s] = struct{}{}
	c.subs.mu.Unlock()
	var once sync.Once
	return s.ch, func() {
		once.Do(func() {
			c.subs.mu.Lock()
			delete(c.subs.subs, s)
			c.subs.mu.Unlock()
			close(s.ch)
		})
	}
}

// DroppedEvents counts the events subscribers missed because they fell
// behind.
func (c *Client[TTx]) DroppedEvents() int64 { return c.subs.dropped.Load() }

// publish sends one event to every subscriber that wants it, never
// blocking the worker.
func (c *engine) publish(job *errandtype.Job, res *WorkResult) {
	c.subs.mu.Lock()
	defer c.subs.mu.Unlock()
	for s := range c.subs.subs {
		if len(s.results) > 0 && !slices.Contains(s.results, res.Result) {
			continue
		}
		select {
		case s.ch <- Event{WorkResult: *res, Job: job}:
		default:
			c.subs.dropped.Add(1)
		}
	}
}
