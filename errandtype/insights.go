package errandtype

import (
	"encoding/json"
	"time"
)

// DepthBucket is why a job of a queue is not finished: a partition of the
// unfinished jobs, plus the dead.
type DepthBucket string

// The depth buckets.
const (
	// BucketReady: waiting, available now, claimable.
	BucketReady DepthBucket = "ready"
	// BucketScheduled: queued, available later (scheduled or snoozed).
	BucketScheduled DepthBucket = "scheduled"
	// BucketRetrying: retrying, waiting out its backoff.
	BucketRetrying DepthBucket = "retrying"
	// BucketHeld: available, but held back by its ordering key (see
	// [Job.HeldBy]).
	BucketHeld DepthBucket = "held"
	// BucketRunning: running under a lease.
	BucketRunning DepthBucket = "running"
	// BucketDead: dead letters.
	BucketDead DepthBucket = "dead"
)

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

// Insights are the figures of every queue and kind that has jobs.
type Insights struct {
	At time.Time `json:"at"`
	// Kinds are ordered by queue, then kind.
	Kinds []KindInsights `json:"kinds"`
}

// KindInsights are the figures of one kind in one queue.
type KindInsights struct {
	Queue string `json:"queue"`
	Kind  string `json:"kind"`
	// Depth by bucket (see [DepthBucket]).
	Ready     int `json:"ready"`
	Scheduled int `json:"scheduled"`
	Retrying  int `json:"retrying"`
	Held      int `json:"held"`
	Running   int `json:"running"`
	// HeldByBreaker counts the waiting, available jobs that the open or
	// half-open circuit breaker of Breaker, the kind's dependency, holds
	// back (see [github.com/errandhq/errand.BreakerHolds]): they are not in Ready nor in
	// OldestReadyAgeSeconds. Breaker is nil when no breaker holds the
	// kind. [github.com/errandhq/errand.Client.Insights] fills them.
	HeldByBreaker int     `json:"held_by_breaker"`
	Breaker       *string `json:"breaker"`
	// Paused counts the waiting, available jobs of a paused queue or kind
	// (see [github.com/errandhq/errand.Client.Pause]): they are not in
	// Ready nor in OldestReadyAgeSeconds.
	// [github.com/errandhq/errand.Client.Insights] fills it.
	Paused int `json:"paused"`
	// OldestReadyAgeSeconds is how long the oldest ready job has been
	// available; 0 when none is ready.
	OldestReadyAgeSeconds float64 `json:"oldest_ready_age_seconds"`
	// Throughput is jobs finished by workers (succeeded or dead) per
	// minute, averaged over the last minute, 5 minutes and hour.
	Throughput Throughput `json:"throughput_per_minute"`
	// SucceededLastHour counts jobs that succeeded in the last hour.
	SucceededLastHour int `json:"succeeded_last_hour"`
	// FailedLastHour counts failed attempts in the last hour (see
	// InsightsData.Failures), FailureRate is FailedLastHour over
	// FailedLastHour + SucceededLastHour (0 when both are 0), and
	// FailuresByClass splits them, most frequent first.
	FailedLastHour  int             `json:"failed_last_hour"`
	FailureRate     float64         `json:"failure_rate"`
	FailuresByClass []ClassFailures `json:"failures_by_class"`
	// RetriesLastHour counts the failed attempts of the last hour that
	// errand scheduled to run again (every failure that did not
	// dead-letter its job): the retry load, not only the jobs retrying now.
	RetriesLastHour int `json:"retries_last_hour"`
	// Dead is the dead-letter size; DeadLastHour and DeadLastDay count the
	// jobs that died in the last hour and day, its growth.
	Dead         int `json:"dead"`
	DeadLastHour int `json:"dead_last_hour"`
	DeadLastDay  int `json:"dead_last_day"`
	// RunTime and WaitTime are percentiles over the last hour's succeeded
	// jobs (see [TimingSample]).
	RunTime  Percentiles `json:"run_time"`
	WaitTime Percentiles `json:"wait_time"`
}

// Throughput is a rate per minute over three windows.
type Throughput struct {
	Last1m float64 `json:"last_1m"`
	Last5m float64 `json:"last_5m"`
	Last1h float64 `json:"last_1h"`
}

// ClassFailures counts one class's failures.
type ClassFailures struct {
	Class    string  `json:"class"`
	Failures int     `json:"failures"`
	Rate     float64 `json:"rate"`
}

// Percentiles of durations, nearest rank, in seconds; zero without
// samples.
type Percentiles struct {
	Samples    int     `json:"samples"`
	P50Seconds float64 `json:"p50_seconds"`
	P99Seconds float64 `json:"p99_seconds"`
}

// MarshalJSON writes the percentiles of no samples as null: there are none,
// which 0 would hide.
func (p Percentiles) MarshalJSON() ([]byte, error) {
	type wire struct {
		Samples    int      `json:"samples"`
		P50Seconds *float64 `json:"p50_seconds"`
		P99Seconds *float64 `json:"p99_seconds"`
	}
	w := wire{Samples: p.Samples}
	if p.Samples > 0 {
		w.P50Seconds, w.P99Seconds = &p.P50Seconds, &p.P99Seconds
	}
	return json.Marshal(w)
}
