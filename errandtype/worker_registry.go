package errandtype

import (
	"encoding/json"
	"slices"
	"time"
)

// WorkerStatus is what the registry knows of a worker, by the store's clock.
type WorkerStatus string

const (
	// WorkerAlive: the worker heartbeat within its staleness window.
	WorkerAlive WorkerStatus = "alive"
)

// WorkerQueue is one queue a worker runs and how many of its jobs at once.
type WorkerQueue struct {
	Name        string `json:"name"`
	Concurrency int    `json:"concurrency"`
	// Weight is the queue's share of the worker's MaxWorkers (see
	// [github.com/errandhq/errand.WorkerConfig].QueueWeights), or 0 when the
	// worker shares no capacity among its queues.
	Weight int `json:"weight"`
}

// MarshalJSON writes the queue with its weight null when the worker
// shares no capacity among its queues.
func (q WorkerQueue) MarshalJSON() ([]byte, error) {
	var weight *int
	if q.Weight != 0 {
		weight = &q.Weight
	}
	return json.Marshal(struct {
		Name        string `json:"name"`
		Concurrency int    `json:"concurrency"`
		Weight      *int   `json:"weight"`
	}{q.Name, q.Concurrency, weight})
}

// WorkerRecord is one worker's entry in the registry. Times are on the
// store's clock.
type WorkerRecord struct {
	// ID names the worker; its claims carry it as lease_owner.
	ID string `json:"id"`
	// Host and PID locate the worker's process.
	Host string `json:"host"`
	PID  int    `json:"pid"`
	// Queues the worker runs, by name.
	Queues []WorkerQueue `json:"queues"`
	// Kinds the worker has handlers for, sorted: the only kinds it claims.
	// Empty for a worker registered without them (by an older errand),
	// which [WorkerRecord.Handles] takes to handle every kind.
	Kinds []string `json:"kinds"`
	// HeartbeatInterval is how often the worker declared it would heartbeat.
	HeartbeatInterval Duration `json:"heartbeat_interval"`
	// StartedAt is when the worker registered.
	StartedAt time.Time `json:"started_at"`
	// HeartbeatAt is the worker's last heartbeat (or its registration).
	HeartbeatAt time.Time `json:"heartbeat_at"`
	// DrainingAt is when the worker began to drain (stopped claiming to
	// finish its jobs), or nil.
	DrainingAt *time.Time `json:"draining_at"`
	// StoppedAt is when the worker drained and stopped, or nil.
	StoppedAt *time.Time `json:"stopped_at"`
	// LastCompletedAt is when the worker last finished a job, or nil when
	// it has finished none.
	LastCompletedAt *time.Time `json:"last_completed_at"`
	// JobsRunning is how many jobs the worker held at its last heartbeat.
	JobsRunning int `json:"jobs_running"`
	// JobsCompleted counts the attempts the worker finished and recorded,
	// whatever their outcome (succeeded, retrying, dead, snoozed). Jobs
	// given back on a drain and attempts whose lease was lost do not count.
	JobsCompleted int64 `json:"jobs_completed"`
	// Status is computed by the store from its clock when it returns the
	// record.
	Status WorkerStatus `json:"status"`
	// ClockSkewMS is the store's clock minus the worker's at its last
	// heartbeat, in milliseconds, for a store whose clock is not the
	// worker's (PostgreSQL). Stores that share the worker's clock (SQLite)
	// leave it 0.
	ClockSkewMS int64 `json:"clock_skew_ms"`
}

// Handles reports whether worker r claims jobs of kind from queue now: it
// is alive (a draining, stopped or gone worker claims nothing), runs queue,
// and has a handler for kind. A record without kinds, from an errand that
// did not record them, counts as handling every kind, so that it raises no
// false alarm.
func (r *WorkerRecord) Handles(queue, kind string) bool {
	if r.Status != WorkerAlive {
		return false
	}
	if !slices.ContainsFunc(r.Queues, func(q WorkerQueue) bool { return q.Name == queue }) {
		return false
	}
	return len(r.Kinds) == 0 || slices.Contains(r.Kinds, kind)
}
