package errandtype

import "time"

// TimeSource is a clock that also makes timers and tickers: all the time a
// Client and its Workers use. Its timers behave as the time package's do
// since Go 1.23: after Stop or Reset returns, no value from before is
// received. It lives here, below the root, so that the worker engine's
// internal packages can take one; the root aliases it.
type TimeSource interface {
	// Now returns the current time.
	Now() time.Time
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
