package storetest

import (
	"sync"
	"time"
)

// Clock is an [errand.Clock] that moves only when told to. It is safe for
// concurrent use, so a store's goroutines may read it while a test moves it.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock returns a clock standing at now.
func NewClock(now time.Time) *Clock { return &Clock{now: now} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Set moves the clock to t, forwards or backwards.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

// Advance moves the clock forward by d and returns the new time.
func (c *Clock) Advance(d time.Duration) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	return c.now
}
