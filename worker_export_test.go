package errand

import "time"

// UnbatchOutcomes makes w write each outcome in a transaction of its own, as
// workers did before outcome batching, so that a benchmark can compare the
// two in one run. Call it before Start.
func UnbatchOutcomes(w *Worker) { w.unbatched = true }

// SetWallClock makes w read now as its wall clock when it reports its
// clock to the registry, so that a test can play a host whose clock is off.
// Call it before Start.
func SetWallClock(w *Worker, now func() time.Time) { w.reg.wallClock = now }
