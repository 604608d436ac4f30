package errand

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// The worker registry: every long-running [Worker] records itself in the
// store when it starts, heartbeats while it runs and marks itself stopped
// when it drains, so an operator can see which processes are working, on
// which queues, and when each last finished a job. A worker that stops
// heartbeating without stopping (killed, frozen, cut off) is shown as gone;
// its jobs' leases expire as usual and other workers recover them. The
// registry is for operators only: no lease or claim decision reads it.

// DefaultWorkerHeartbeat is how often a Worker records that it is alive.
const DefaultWorkerHeartbeat = 5 * time.Second

// WorkerMissedHeartbeats is how many of its declared heartbeat intervals a
// worker may go without heartbeating before the registry shows it as gone.
// Three tolerates a slow or failed beat without hiding a dead process for
// long.
const WorkerMissedHeartbeats = 3

// WorkerStatus is what the registry knows of a worker, by the store's clock.
type WorkerStatus string

const (
	// WorkerAlive: the worker heartbeat within its staleness window.
	WorkerAlive WorkerStatus = "alive"
	// WorkerDraining: the worker began to stop: it claims nothing more and
	// finishes the jobs it holds, and still heartbeats. A draining worker
	// whose heartbeats go stale is gone.
	WorkerDraining WorkerStatus = "draining"
	// WorkerStopped: the worker drained and said so.
	WorkerStopped WorkerStatus = "stopped"
	// WorkerGone: the worker stopped heartbeating without stopping. Its
	// leases expire as usual and other workers recover its jobs.
	WorkerGone WorkerStatus = "gone"
)

// WorkerQueue is one queue a worker runs and how many of its jobs at once.
type WorkerQueue struct {
	Name        string `json:"name"`
	Concurrency int    `json:"concurrency"`
	// Weight is the queue's share of the worker's MaxWorkers (see
	// [WorkerConfig].QueueWeights), or 0 when the worker shares no
	// capacity among its queues.
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

// WorkerRegisterParams describe a worker that is starting.
type WorkerRegisterParams struct {
	// ID is unique per worker process; required.
	ID   string
	Host string
	PID  int
	// Queues the worker runs. The store keeps them in the order given.
	Queues []WorkerQueue
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
func WorkerStatusAt(r *WorkerRecord, now time.Time, staleAfter time.Duration) WorkerStatus {
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
	return WorkerAlive
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

// KindHandled reports whether any worker of workers (a registry listing,
// [Client.Workers]) handles kind in queue; see [WorkerRecord.Handles]. A job
// whose kind is not handled waits until a worker with a handler for it
// runs its queue: a misspelt kind waits forever. [Client.Stats] and the
// CLI's inspect use it to say so.
func KindHandled(workers []*WorkerRecord, queue, kind string) bool {
	return slices.ContainsFunc(workers, func(r *WorkerRecord) bool { return r.Handles(queue, kind) })
}

// Workers lists the worker registry, newest first: every worker that has
// not been pruned, alive, draining, stopped or gone by the store's clock.
func (c *Client[TTx]) Workers(ctx context.Context) ([]*WorkerRecord, error) {
	ws, err := c.store.WorkerList(ctx, &WorkerListParams{})
	if err != nil {
		return nil, fmt.Errorf("list workers: %w", err)
	}
	return ws, nil
}

// workerRegistration is a Worker's side of the registry: its heartbeat
// goroutine and when it last finished a job.
type workerRegistration struct {
	born          time.Time    // monotonic origin for lastCompleted
	lastCompleted atomic.Int64 // time since born at the last completion, on the client's clock
	stopBeats     context.CancelFunc
	beats         sync.WaitGroup
	draining      atomic.Bool   // Stop has begun; heartbeats say so
	beatNow       chan struct{} // asks the heartbeat goroutine for a beat at once

	// wallClock reads the worker's wall clock for a heartbeat's SentAt, the
	// one place a Worker uses its own wall time: only to report the clock
	// skew to operators, never for a lease or schedule decision. Nil means
	// the client's clock; tests shift it to play a host whose clock is off.
	wallClock func() time.Time
}

// ID returns the worker's id: its row in the registry ([Client.Workers]) and
// the lease_owner of the jobs it claims.
func (w *Worker) ID() string { return w.cfg.Owner }

// register records the worker in the registry and starts its heartbeats,
// which run until stopHeartbeats or until ctx ends.
func (w *Worker) register(ctx context.Context) error {
	if _, err := w.c.store.WorkerRegister(ctx, w.registerParams()); err != nil {
		return fmt.Errorf("start worker: register %s: %w", w.ID(), err)
	}
	w.reg.born = w.c.clock.Now()
	w.reg.beatNow = make(chan struct{}, 1)
	beatCtx, stop := context.WithCancel(ctx)
	w.reg.stopBeats = stop
	w.reg.beats.Go(func() { w.heartbeats(beatCtx) })
	return nil
}

func (w *Worker) registerParams() *WorkerRegisterParams {
	host, err := os.Hostname()
	if err != nil {
		host = "unknown"
	}
	p := &WorkerRegisterParams{ID: w.ID(), Host: CleanText(host, MaxNameBytes), PID: os.Getpid(), Kinds: w.kinds, HeartbeatInterval: w.cfg.HeartbeatInterval}
	for _, q := range w.queues {
		p.Queues = append(p.Queues, WorkerQueue{Name: q, Concurrency: w.cfg.Queues[q], Weight: w.weights[q]})
	}
	return p
}

// noteResult stamps the time of a finished attempt, for last_completed_at.
// The Worker calls it before counting the result, so that a heartbeat that
// sees the new count also sees this time.
func (w *Worker) noteResult(res *WorkResult) {
	if res.Result == ResultLeaseLost || res.Result == ResultInterrupted {
		return
	}
	w.reg.lastCompleted.Store(int64(w.c.clock.Now().Sub(w.reg.born)))
}

func (w *Worker) workerStats() WorkerStats {
	completed := w.stats.completed.Load() // before the time: see noteResult
	now := w.c.clock.Now()
	st := WorkerStats{
		JobsRunning:   int(w.stats.running.Load()),
		JobsCompleted: completed,
		SentAt:        now,
		Draining:      w.reg.draining.Load(),
	}
	if w.reg.wallClock != nil {
		st.SentAt = w.reg.wallClock()
	}
	if completed > 0 {
		st.LastCompletedAgo = max(0, now.Sub(w.reg.born)-time.Duration(w.reg.lastCompleted.Load()))
	}
	return st
}

// heartbeats records that the worker is alive every HeartbeatInterval, and
// at once when markDraining asks, until ctx ends. A failed heartbeat is
// logged and work goes on: the registry is for operators, and leases are
// renewed separately. A worker whose row is gone (pruned, or marked
// stopped) registers again.
func (w *Worker) heartbeats(ctx context.Context) {
	t := w.c.clock.NewTicker(w.cfg.HeartbeatInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		case <-w.reg.beatNow:
		}
		_, err := w.c.store.WorkerHeartbeat(ctx, &WorkerHeartbeatParams{ID: w.ID(), Stats: w.workerStats()})
		if errors.Is(err, ErrNotFound) {
			w.c.logger.Warn("worker missing from the registry; registering again", "worker_id", w.ID())
			if _, err = w.c.store.WorkerRegister(ctx, w.registerParams()); err == nil {
				_, err = w.c.store.WorkerHeartbeat(ctx, &WorkerHeartbeatParams{ID: w.ID(), Stats: w.workerStats()})
			}
		}
		if err != nil && ctx.Err() == nil {
			w.c.logger.Error("worker heartbeat failed", "worker_id", w.ID(), "err", err)
		}
	}
}

// markDraining makes every later heartbeat say that the worker is draining,
// and asks for one at once, so the registry shows it draining while its
// jobs finish rather than alive. It does not wait for the write.
func (w *Worker) markDraining() {
	w.reg.draining.Store(true)
	select {
	case w.reg.beatNow <- struct{}{}:
	default: // a beat is already asked for
	}
}

// deregister stops the heartbeats, writes the worker's final counts and
// marks it stopped. ctx may have ended (the grace period ran out): both are
// written regardless, so the registry shows a clean stop rather than a gone
// worker. The final heartbeat is needed: the draining one went out before
// the last jobs finished, and stopping the heartbeats may have cut it off
// (a worker that ran thousands of jobs between two beats showed none).
func (w *Worker) deregister(ctx context.Context) {
	w.reg.stopBeats()
	w.reg.beats.Wait()
	stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), w.cfg.HeartbeatInterval)
	defer cancel()
	_, err := w.c.store.WorkerHeartbeat(stopCtx, &WorkerHeartbeatParams{ID: w.ID(), Stats: w.workerStats()})
	if err != nil && !errors.Is(err, ErrNotFound) {
		w.c.logger.Warn("record the worker's final counts failed", "worker_id", w.ID(), "err", err)
	}
	if err := w.c.store.WorkerStop(stopCtx, &WorkerStopParams{ID: w.ID()}); err != nil {
		w.c.logger.Error("mark worker stopped failed; the registry will show it as gone", "worker_id", w.ID(), "err", err)
	}
}
