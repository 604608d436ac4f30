package storetest

import (
	"time"

	"github.com/errandhq/errand/errandtest"
)

// Clock is an [errandstore.Clock] that moves only when told to: the fake clock
// of package errandtest, which a store's tests may share with a client's.
// It is safe for concurrent use, so a store's goroutines may read it while
// a test moves it.
type Clock = errandtest.Clock

// NewClock returns a clock standing at now.
func NewClock(now time.Time) *Clock { return errandtest.NewClock(now) }
