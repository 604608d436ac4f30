package errand

// UnbatchOutcomes makes w write each outcome in a transaction of its own, as
// workers did before outcome batching, so that a benchmark can compare the
// two in one run. Call it before Start.
func UnbatchOutcomes(w *Worker) { w.unbatched = true }
