package errandstore

import (
	"math"
	"time"

	"github.com/errandhq/errand/errandtype"
)

// WorkerMissedHeartbeats is how many of its declared heartbeat intervals a
// worker may go without heartbeating before the registry shows it as gone.
// Three tolerates a slow or failed beat without hiding a dead process for
// long.
const WorkerMissedHeartbeats = 3

const (
	// WorkerDraining: the worker began to stop: it claims nothing more and
	// finishes the jobs it holds, and still heartbeats. A draining worker
	// whose heartbeats go stale is gone.
	WorkerDraining errandtype.WorkerStatus = "draining"
	// WorkerStopped: the worker drained and said so.
	WorkerStopped errandtype.WorkerStatus = "stopped"
	// WorkerGone: the worker stopped heartbeating without stopping. Its
	// leases expire as usual and other workers recover its jobs.
	WorkerGone errandtype.WorkerStatus = "gone"
)

// WorkerRegisterParams describe a worker that is starting.
type WorkerRegisterParams struct {
	// ID is unique per worker process; required.
	ID   string
	Host string
	PID  int
	// Queues the worker runs. The store keeps them in the order given.
	Queues []errandtype.WorkerQueue
	// Kinds the worker has handlers for. The store keeps them in the order
	// given.
	Kinds []string
	// HeartbeatInterval is how often the worker will heartbeat; at least
	// MinInterval.
	// The registry shows the worker as gone after WorkerMissedHeartbeats
	// intervals without one.
	HeartbeatInterval time.Duration
}

// WorkerStats is what a worker reports with each heartbeat. Counts are
// totals since the worker started, not deltas, so a heartbeat written twice
// or lost changes nothing.
type WorkerStats struct {
	// JobsRunning is how many jobs the worker holds now.
	JobsRunning int
	// JobsCompleted is how many attempts it has finished and recorded.
	JobsCompleted int64
	// LastCompletedAgo is how long before this heartbeat the worker last
	// finished a job, measured on the worker's monotonic clock so that no
	// wall clock but the store's is involved. The store records
	// last_completed_at = now - LastCompletedAgo when JobsCompleted differs
	// from what it holds, and keeps it otherwise. Ignored when
	// JobsCompleted is 0.
	LastCompletedAgo time.Duration
	// SentAt is the worker's wall clock when it sent the heartbeat. A store
	// whose clock is not the worker's records now - SentAt as ClockSkewMS.
	SentAt time.Time
	// Draining reports that the worker has begun to stop: it claims
	// nothing more and finishes the jobs it holds. The store records
	// draining_at = now at the first heartbeat that says so and keeps it
	// (a worker does not stop draining); only a registration clears it.
	Draining bool
}

// WorkerHeartbeatParams are one worker's heartbeat.
type WorkerHeartbeatParams struct {
	ID    string
	Stats WorkerStats
}

// WorkerStopParams name the worker that stops.
type WorkerStopParams struct {
	ID string
}

// WorkerPruneParams say which workers to prune.
type WorkerPruneParams struct {
	// OlderThan is how long a stopped or gone worker is kept.
	OlderThan time.Duration
}

// WorkerListParams filter WorkerList.
type WorkerListParams struct {
	// StaleAfter, when non-zero, overrides each worker's staleness window:
	// a worker whose last heartbeat is at least this old is gone. Zero means
	// WorkerMissedHeartbeats times the worker's declared interval.
	StaleAfter time.Duration
}

// WorkerStatusAt is the status of worker r at time now on the store's clock,
// with a staleness window of staleAfter (zero: WorkerMissedHeartbeats times
// r's declared interval). A stopped worker is stopped. A worker is gone once
// now reaches heartbeatAt + window, the same rule as a lease: alive (or
// draining) strictly before, gone from that instant, draining or not. A
// worker with a draining_at that is not gone is draining. Stores use it so
// that they agree at the boundary.
func WorkerStatusAt(r *errandtype.WorkerRecord, now time.Time, staleAfter time.Duration) errandtype.WorkerStatus {
	if r.StoppedAt != nil {
		return WorkerStopped
	}
	if staleAfter <= 0 {
		// Saturated, not wrapped: three intervals of a remote worker's
		// lease of a million hours are past time.Duration's range, and
		// wrapped around they were negative, the worker gone at once.
		staleAfter = time.Duration(math.MaxInt64)
		if d := time.Duration(r.HeartbeatInterval); d <= staleAfter/WorkerMissedHeartbeats {
			staleAfter = WorkerMissedHeartbeats * d
		}
	}
	if !now.Before(r.HeartbeatAt.Add(staleAfter)) {
		return WorkerGone
	}
	if r.DrainingAt != nil {
		return WorkerDraining
	}
	return errandtype.WorkerAlive
}
