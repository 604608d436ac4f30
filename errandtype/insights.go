package errandtype

import (
	"time"
)

// DepthBucket is why a job of a queue is not finished: a partition of the
// unfinished jobs, plus the dead.
type DepthBucket string

// InsightsData is what a store reads for
// [github.com/errandhq/errand.AssembleInsights]. Times are the store's.
type InsightsData struct {
	// Now is the store's time when it read them.
	Now time.Time
	// Depth counts the unfinished and the dead jobs by queue, kind and
	// bucket. OldestAvailableAt is the earliest available_at of the
	// bucket's jobs (used for BucketReady).
	Depth []DepthCount
	// Finished counts jobs of the terminal states by when they finished:
	// within the last minute, 5 minutes, hour and day of Now.
	Finished []FinishedCount
	// Failures counts, by queue, kind and class, the history entries of the
	// last hour, except class interrupted (a job given back on drain did
	// not fail), whatever the job's state now. They are read from the jobs
	// that finished in the last hour, the running and retrying ones, and
	// the queued ones whose last error is in the hour: a failure within the
	// hour left its job retrying, running again, finished since, or queued
	// again (replayed, snoozed or given back on drain).
	Failures []FailureCount
	// Samples are run and wait times of jobs that succeeded in the last
	// hour, newest first, at most SampleLimit.
	Samples []TimingSample
}

// DepthCount is one group of InsightsData.Depth.
type DepthCount struct {
	Queue, Kind       string
	Bucket            DepthBucket
	Jobs              int
	OldestAvailableAt time.Time
}

// FinishedCount is one group of InsightsData.Finished.
type FinishedCount struct {
	Queue, Kind                     string
	State                           JobState
	Last1m, Last5m, Last1h, Last24h int
}

// FailureCount is one group of InsightsData.Failures.
type FailureCount struct {
	Queue, Kind, Class string
	// Failures counts the entries; Retried those that did not kill their
	// job (every entry but the last of a delivery cycle that ended dead,
	// see [github.com/errandhq/errand/errandstore.FailureKilledSQL]).
	Failures int
	Retried  int
}

// TimingSample is one succeeded job's latest attempt: Run is finished_at
// minus attempted_at, Wait is attempted_at minus available_at (how long
// it waited, claimable or held, before a worker started it).
type TimingSample struct {
	Queue, Kind string
	Run, Wait   time.Duration
}
