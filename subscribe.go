package errand

import (
	"slices"
	"sync"
)

// subscribeBuffer is how many events a subscriber may fall behind before
// further events are dropped for it.
const subscribeBuffer = 1000

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
