package errand

import "time"

// UnbatchOutcomes makes w write each outcome in a transaction of its own, as
// workers did before outcome batching, so that a benchmark can compare the
// two in one run. Call it before Start.
func UnbatchOutcomes(w *Worker) { w.unbatched = true }

// SetNotifyCoalesce sets how long c's notifier gathers queue names between
// notifications. Call it before the first enqueue.
func SetNotifyCoalesce[TTx any](c *Client[TTx], d time.Duration) {
	if c.notifier != nil {
		c.notifier.window = d
	}
}

// SetWallClock makes w read now as its wall clock when it reports its
// clock to the registry, so that a test can play a host whose clock is off.
// Call it before Start.
func SetWallClock(w *Worker, now func() time.Time) { w.reg.wallClock = now }

// EchoesSkipped returns how many of the store's notifications w skipped as
// echoes of its own client's announcements.
func EchoesSkipped(w *Worker) int64 { return w.echoesSkipped.Load() }
