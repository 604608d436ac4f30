package errand

import (
	"github.com/errandhq/errand/errandtype"
	"github.com/errandhq/errand/internal/clock"
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
type TimeSource = errandtype.TimeSource

// Timer is a [time.Timer] of a TimeSource.
type Timer = errandtype.Timer

// Ticker is a [time.Ticker] of a TimeSource.
type Ticker = errandtype.Ticker

// systemTime is the TimeSource of a Config without a Clock.
type systemTime = clock.System
