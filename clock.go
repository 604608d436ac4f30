package errand

import (
	"context"
	"time"

	"github.com/errandhq/errand/errandstore"
)

// Time. A Client and its Workers take all their time from one [TimeSource]
// ([Config].Clock): the current time, and the timers and tickers that pace
// polls, lease renewals, leadership, registry heartbeats, retries of a
// failed outcome write, and the deadlines of a kind's Timeout and of calls
// that are worthless once a lease has ended. A test gives the client and
// the store the same fake clock (package
// [github.com/errandhq/errand/errandtest]) and moves it, so that it
// neither sleeps nor races the real clock.
//
// Two bounds stay on real time because they stand for no rule of errand's,
// only for a connection that may hang: the bound of one claim
// (claimTimeout) and of one wake-up announcement (notifyTimeout), and the
// bounds of the last writes of a stopping worker (resigning, marking itself
// stopped). A fake clock that stands still says nothing about whether a
// database answers.

// TimeSource is a [Clock] that also makes timers and tickers: all the time a
// Client and its Workers use. Its timers behave as the time package's do
// since Go 1.23: after Stop or Reset returns, no value from before is
// received.
type TimeSource interface {
	errandstore.Clock
	// NewTimer returns a timer that sends the time on its channel once d
	// has passed.
	NewTimer(d time.Duration) Timer
	// NewTicker returns a ticker that sends the time on its channel every
	// d, dropping ticks for a slow receiver. d must be positive.
	NewTicker(d time.Duration) Ticker
	// AfterFunc calls f once d has passed. The returned Timer's C is nil.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a [time.Timer] of a TimeSource.
type Timer interface {
	C() <-chan time.Time
	// Reset makes the timer fire d from now, and reports whether it was
	// active.
	Reset(d time.Duration) bool
	// Stop keeps the timer from firing, and reports whether it was active.
	Stop() bool
}

// Ticker is a [time.Ticker] of a TimeSource.
type Ticker interface {
	C() <-chan time.Time
	// Reset makes the ticker tick every d from now. d must be positive.
	Reset(d time.Duration)
	Stop()
}

// systemTime is the TimeSource of a Config without a Clock: the time
// package.
type systemTime struct{}

func (systemTime) Now() time.Time { return time.Now() }

func (systemTime) NewTimer(d time.Duration) Timer { return systemTimer{time.NewTimer(d)} }

func (systemTime) NewTicker(d time.Duration) Ticker { return systemTicker{time.NewTicker(d)} }

func (systemTime) AfterFunc(d time.Duration, f func()) Timer {
	return systemTimer{time.AfterFunc(d, f)}
}

type systemTimer struct{ t *time.Timer }

func (t systemTimer) C() <-chan time.Time        { return t.t.C }
func (t systemTimer) Reset(d time.Duration) bool { return t.t.Reset(d) }
func (t systemTimer) Stop() bool                 { return t.t.Stop() }

type systemTicker struct{ t *time.Ticker }

func (t systemTicker) C() <-chan time.Time   { return t.t.C }
func (t systemTicker) Reset(d time.Duration) { t.t.Reset(d) }
func (t systemTicker) Stop()                 { t.t.Stop() }

// sleep waits for d on clock.
func sleep(clock TimeSource, d time.Duration) {
	t := clock.NewTimer(d)
	defer t.Stop()
	<-t.C()
}

// withDeadline returns a copy of parent that is cancelled with cause (nil:
// context.DeadlineExceeded) when clock reaches deadline. On the system
// clock it is context.WithDeadlineCause, whose deadline database drivers
// and handlers can read. On any other clock the deadline is a timer of
// that clock: the context reports no Deadline, since a fake time means
// nothing to a driver, and when it passes its Err is context.Canceled and
// its [context.Cause] is cause.
func withDeadline(parent context.Context, clock TimeSource, deadline time.Time, cause error) (context.Context, context.CancelFunc) {
	if _, ok := clock.(systemTime); ok {
		return context.WithDeadlineCause(parent, deadline, cause)
	}
	if cause == nil {
		cause = context.DeadlineExceeded
	}
	ctx, cancel := context.WithCancelCause(parent)
	d := deadline.Sub(clock.Now())
	if d <= 0 {
		cancel(cause)
		return ctx, func() {}
	}
	t := clock.AfterFunc(d, func() { cancel(cause) })
	return ctx, func() {
		t.Stop()
		cancel(context.Canceled)
	}
}

// withTimeout is withDeadline d from now.
func withTimeout(parent context.Context, clock TimeSource, d time.Duration, cause error) (context.Context, context.CancelFunc) {
	return withDeadline(parent, clock, clock.Now().Add(d), cause)
}
