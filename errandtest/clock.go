// Package errandtest helps test programs that use errand without waiting on
// the real clock: [Clock] is a fake time that a test moves by hand, for the
// store, the client and its workers at once.
package errandtest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/errandhq/errand"
)

// Clock is an [errand.TimeSource] whose time moves only when a test moves it,
// with Advance or Set. Its timers and tickers fire then, in the order they
// are due. Give the same Clock to the store (the Clock of sqlite.Options or
// postgres.Options) and to the client ([errand.Config].Clock), so that the
// store's leases and the workers' timers agree.
//
// A test waits for the code under test to be blocked on the clock with
// BlockUntil or BlockUntilAt before it moves the clock, instead of sleeping:
// an idle worker, for instance, has armed its poll timer.
//
// A function given to AfterFunc runs in the goroutine that moves the clock
// past its time, before Advance or Set returns; one whose time has already
// come when AfterFunc is called runs in a goroutine of its own. A deadline
// the client takes from the clock is such a function: it has been cancelled
// when Advance returns. Clock is safe for concurrent use.
type Clock struct {
	mu      sync.Mutex
	now     time.Time
	armed   []*timer      // timers and tickers that will fire
	seq     uint64        // orders timers due at the same time by creation
	changed chan struct{} // closed and replaced when armed or now changes
}

var _ errand.TimeSource = (*Clock)(nil)

// NewClock returns a clock standing at now.
func NewClock(now time.Time) *Clock {
	return &Clock{now: now, changed: make(chan struct{})}
}

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d, fires what comes due, and returns
// the new time.
func (c *Clock) Advance(d time.Duration) time.Time {
	c.mu.Lock()
	t := c.now.Add(d) // read and moved under one lock: concurrent advances add up
	funcs := c.setLocked(t)
	c.mu.Unlock()
	for _, f := range funcs {
		f()
	}
	return t
}

// setLocked moves the clock to t and fires what is due, returning the
// AfterFunc functions to run once c.mu is released. c.mu is held.
func (c *Clock) setLocked(t time.Time) []func() {
	c.now = t
	var funcs []func()
	for {
		tm := c.earliestDue()
		if tm == nil {
			break
		}
		if f := tm.fire(); f != nil {
			funcs = append(funcs, f)
		}
	}
	c.notify()
	return funcs
}

// Set moves the clock to t. Moving forward fires the timers and tickers due
// by t, earliest first; a ticker more than one period behind ticks once, as
// a real one drops ticks for a slow receiver. Moving backward fires
// nothing, and the timers then fire when the clock reaches their time
// again.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	funcs := c.setLocked(t)
	c.mu.Unlock()
	for _, f := range funcs {
		f()
	}
}

// earliestDue returns the armed timer due first by now, or nil.
func (c *Clock) earliestDue() *timer {
	var first *timer
	for _, tm := range c.armed {
		if tm.when.After(c.now) {
			continue
		}
		if first == nil || tm.when.Before(first.when) || tm.when.Equal(first.when) && tm.seq < first.seq {
			first = tm
		}
	}
	return first
}

// Armed returns the times at which the armed timers and tickers fire next,
// earliest first, for a test's failure message. Functions of AfterFunc are
// left out, as BlockUntil leaves them out.
func (c *Clock) Armed() []time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.armedTimes()
}

func (c *Clock) armedTimes() []time.Time {
	var ts []time.Time
	for _, tm := range c.armed {
		if tm.f == nil {
			ts = append(ts, tm.when)
		}
	}
	slices.SortFunc(ts, func(a, b time.Time) int { return a.Compare(b) })
	return ts
}

// BlockUntil waits until at least n timers and tickers are armed, or ctx
// ends. A timer is armed from its creation or Reset until it fires or is
// stopped; a ticker until it is stopped. Only timers with a channel count,
// which a goroutine waits on: a function of AfterFunc, such as the deadline
// of a call in flight, is not a goroutine blocked on the clock.
func (c *Clock) BlockUntil(ctx context.Context, n int) error {
	return c.blockUntil(ctx, fmt.Sprintf("%d armed", n), func() bool { return len(c.armedTimes()) >= n })
}

// BlockUntilAt waits until at least n timers and tickers are armed to fire
// at t, or ctx ends; functions of AfterFunc do not count. With distinct
// intervals a test can tell what it waits for: a worker polling hourly has
// gone idle once a timer is armed for an hour from now.
func (c *Clock) BlockUntilAt(ctx context.Context, t time.Time, n int) error {
	return c.blockUntil(ctx, fmt.Sprintf("%d armed at %s", n, t.Format(time.RFC3339Nano)), func() bool {
		k := 0
		for _, at := range c.armedTimes() {
			if at.Equal(t) {
				k++
			}
		}
		return k >= n
	})
}

// blockUntil waits until cond, called with c.mu held, holds.
func (c *Clock) blockUntil(ctx context.Context, want string, cond func() bool) error {
	for {
		c.mu.Lock()
		ok, changed := cond(), c.changed
		c.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			c.mu.Lock()
			defer c.mu.Unlock()
			return fmt.Errorf("clock at %s: waiting for %s, armed: %v: %w",
				c.now.Format(time.RFC3339Nano), want, c.armedTimes(), context.Cause(ctx))
		}
	}
}

// notify wakes the goroutines in blockUntil. c.mu must be held.
func (c *Clock) notify() {
	close(c.changed)
	c.changed = make(chan struct{})
}

// NewTimer returns a timer that fires when the clock has moved d on.
func (c *Clock) NewTimer(d time.Duration) errand.Timer {
	tm := &timer{clock: c, ch: make(chan time.Time, 1)}
	tm.reset(d)
	return (*fakeTimer)(tm)
}

// AfterFunc returns a timer that calls f when the clock has moved d on.
func (c *Clock) AfterFunc(d time.Duration, f func()) errand.Timer {
	tm := &timer{clock: c, f: f}
	tm.reset(d)
	return (*fakeTimer)(tm)
}

// NewTicker returns a ticker that ticks every d of the clock's time. It
// panics when d is not positive, as time.NewTicker does.
func (c *Clock) NewTicker(d time.Duration) errand.Ticker {
	if d <= 0 {
		panic("errandtest: non-positive interval for NewTicker")
	}
	tm := &timer{clock: c, ch: make(chan time.Time, 1), period: d}
	tm.reset(d)
	return (*fakeTicker)(tm)
}

// timer is a timer, a ticker (period > 0) or a function to call (f != nil).
type timer struct {
	clock  *Clock
	ch     chan time.Time // nil for a function
	f      func()
	period time.Duration

	// Guarded by clock.mu.
	when  time.Time
	seq   uint64
	armed bool
}

// reset arms tm to fire d from now, discarding a tick not yet received,
// and reports whether it was armed. A timer due already fires at once.
func (tm *timer) reset(d time.Duration) bool {
	c := tm.clock
	c.mu.Lock()
	was := tm.disarm()
	c.seq++
	tm.when, tm.seq, tm.armed = c.now.Add(d), c.seq, true
	c.armed = append(c.armed, tm)
	var f func()
	if d <= 0 {
		f = tm.fire()
	}
	c.notify()
	c.mu.Unlock()
	if f != nil {
		go f()
	}
	return was
}

// stop disarms tm, discarding a tick not yet received, and reports whether
// it was armed.
func (tm *timer) stop() bool {
	c := tm.clock
	c.mu.Lock()
	defer c.mu.Unlock()
	was := tm.disarm()
	c.notify()
	return was
}

// disarm takes tm off the clock and empties its channel. c.mu must be held.
func (tm *timer) disarm() bool {
	if tm.ch != nil {
		select {
		case <-tm.ch:
		default:
		}
	}
	if !tm.armed {
		return false
	}
	tm.armed = false
	c := tm.clock
	c.armed = slices.DeleteFunc(c.armed, func(x *timer) bool { return x == tm })
	return true
}

// fire delivers tm's tick, or returns its function for the caller to run
// once c.mu is released. A ticker is armed again for its next tick after
// now. c.mu must be held.
func (tm *timer) fire() func() {
	c := tm.clock
	if tm.period > 0 {
		missed := c.now.Sub(tm.when) / tm.period
		tm.when = tm.when.Add((missed + 1) * tm.period)
	} else {
		tm.armed = false
		c.armed = slices.DeleteFunc(c.armed, func(x *timer) bool { return x == tm })
	}
	if tm.f != nil {
		return tm.f
	}
	select {
	case tm.ch <- c.now:
	default: // the last tick is still unreceived: drop this one
	}
	return nil
}

// fakeTimer is a Clock's errand.Timer.
type fakeTimer timer

func (t *fakeTimer) C() <-chan time.Time        { return t.ch }
func (t *fakeTimer) Reset(d time.Duration) bool { return (*timer)(t).reset(d) }
func (t *fakeTimer) Stop() bool                 { return (*timer)(t).stop() }

// fakeTicker is a Clock's errand.Ticker.
type fakeTicker timer

func (t *fakeTicker) C() <-chan time.Time { return t.ch }

func (t *fakeTicker) Reset(d time.Duration) {
	if d <= 0 {
		panic("errandtest: non-positive interval for Ticker.Reset")
	}
	(*timer)(t).reset(d)
}

func (t *fakeTicker) Stop() { (*timer)(t).stop() }
