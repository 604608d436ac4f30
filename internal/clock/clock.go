// Package clock holds the system TimeSource and the deadlines the worker
// engine sets on one, so that the root package and the engine's internal
// packages time things the same way.
package clock

import (
	"context"
	"time"

	"github.com/errandhq/errand/errandtype"
)

// System is the TimeSource of a Config without a Clock: the time package.
type System struct{}

func (System) Now() time.Time { return time.Now() }

func (System) NewTimer(d time.Duration) errandtype.Timer { return systemTimer{time.NewTimer(d)} }

func (System) NewTicker(d time.Duration) errandtype.Ticker { return systemTicker{time.NewTicker(d)} }

func (System) AfterFunc(d time.Duration, f func()) errandtype.Timer {
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

// Sleep waits for d on clock.
func Sleep(clock errandtype.TimeSource, d time.Duration) {
	t := clock.NewTimer(d)
	defer t.Stop()
	<-t.C()
}

// SleepCtx waits for d on clock, or until ctx ends, and returns ctx's error
// then.
func SleepCtx(ctx context.Context, clock errandtype.TimeSource, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C():
		return nil
	}
}

// WithDeadline returns a copy of parent that is cancelled with cause (nil:
// context.DeadlineExceeded) when clock reaches deadline. On the system
// clock it is context.WithDeadlineCause, whose deadline database drivers
// and handlers can read. On any other clock the deadline is a timer of
// that clock: the context reports no Deadline, since a fake time means
// nothing to a driver, and when it passes its Err is context.Canceled and
// its [context.Cause] is cause.
func WithDeadline(parent context.Context, clock errandtype.TimeSource, deadline time.Time, cause error) (context.Context, context.CancelFunc) {
	if _, ok := clock.(System); ok {
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

// WithTimeout is WithDeadline d from now.
func WithTimeout(parent context.Context, clock errandtype.TimeSource, d time.Duration, cause error) (context.Context, context.CancelFunc) {
	return WithDeadline(parent, clock, clock.Now().Add(d), cause)
}
