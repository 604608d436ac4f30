package errand

import "sync/atomic"

// workerCounters are a Worker's running totals, updated atomically.
type workerCounters struct {
	claims        atomic.Int64
	idleClaims    atomic.Int64
	completed     atomic.Int64
	givenBack     atomic.Int64
	leasesLost    atomic.Int64
	outcomeWrites atomic.Int64
	running       atomic.Int64
}

// WorkerRunStats are a Worker's totals since it started, for logs and
// benchmarks. Read them with [Worker.Stats].
type WorkerRunStats struct {
	// Claims counts claim queries, one per queue each time it looked for
	// work; IdleClaims counts those that found nothing. IdleClaims divided
	// by the worker's uptime is the idle query rate: the load an idle
	// worker puts on the store, governed by the poll interval.
	Claims     int64
	IdleClaims int64
	// JobsRunning is how many jobs hold one of the worker's slots now:
	// their handlers run, or their outcomes wait to be written (on a store
	// that writes in parallel, a successful job's slot frees as soon as
	// its outcome is handed over; see [ParallelWriter]).
	JobsRunning int64
	// JobsCompleted counts attempts finished and recorded, whatever the
	// outcome (succeeded, retrying, dead, snoozed).
	JobsCompleted int64
	// JobsGivenBack counts jobs given back on a drain, their attempt not
	// counted.
	JobsGivenBack int64
	// LeasesLost counts attempts whose lease was lost: nothing about them
	// was written, and the job is another worker's now.
	LeasesLost int64
	// OutcomeWrites counts the store transactions that recorded outcomes;
	// JobsCompleted+JobsGivenBack over OutcomeWrites is the mean batch.
	OutcomeWrites int64
}

// Stats returns the worker's totals so far. It is safe to call at any time,
// also after Stop.
func (w *Worker) Stats() WorkerRunStats {
	s := &w.stats
	return WorkerRunStats{
		Claims:        s.claims.Load(),
		IdleClaims:    s.idleClaims.Load(),
		JobsRunning:   s.running.Load(),
		JobsCompleted: s.completed.Load(),
		JobsGivenBack: s.givenBack.Load(),
		LeasesLost:    s.leasesLost.Load(),
		OutcomeWrites: s.outcomeWrites.Load(),
	}
}

// countResult adds a recorded attempt to the totals.
func (s *workerCounters) countResult(res *WorkResult) {
	switch res.Result {
	case ResultLeaseLost:
		s.leasesLost.Add(1)
	case ResultInterrupted:
		s.givenBack.Add(1)
	default:
		s.completed.Add(1)
	}
}
