package errand

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
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

// KindHandled reports whether any worker of workers (a registry listing,
// [Client.Workers]) handles kind in queue; see [WorkerRecord.Handles]. A job
// whose kind is not handled waits until a worker with a handler for it
// runs its queue: a misspelt kind waits forever. [Client.Stats] and the
// CLI's inspect use it to say so.
func KindHandled(workers []*errandtype.WorkerRecord, queue, kind string) bool {
	return slices.ContainsFunc(workers, func(r *errandtype.WorkerRecord) bool { return r.Handles(queue, kind) })
}

// Workers lists the worker registry, newest first: every worker that has
// not been pruned, alive, draining, stopped or gone by the store's clock.
func (c *Client[TTx]) Workers(ctx context.Context) ([]*errandtype.WorkerRecord, error) {
	ws, err := c.store.WorkerList(ctx, &errandstore.WorkerListParams{})
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

func (w *Worker) registerParams() *errandstore.WorkerRegisterParams {
	host, err := os.Hostname()
	if err != nil {
		host = "unknown"
	}
	p := &errandstore.WorkerRegisterParams{ID: w.ID(), Host: errandstore.CleanText(host, errandtype.MaxNameBytes), PID: os.Getpid(), Kinds: w.kinds, HeartbeatInterval: w.cfg.HeartbeatInterval}
	for _, q := range w.queues {
		p.Queues = append(p.Queues, errandtype.WorkerQueue{Name: q, Concurrency: w.cfg.Queues[q], Weight: w.weights[q]})
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

func (w *Worker) workerStats() errandstore.WorkerStats {
	completed := w.stats.completed.Load() // before the time: see noteResult
	now := w.c.clock.Now()
	st := errandstore.WorkerStats{
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
		_, err := w.c.store.WorkerHeartbeat(ctx, &errandstore.WorkerHeartbeatParams{ID: w.ID(), Stats: w.workerStats()})
		if errors.Is(err, errandtype.ErrNotFound) {
			w.c.logger.Warn("worker missing from the registry; registering again", "worker_id", w.ID())
			if _, err = w.c.store.WorkerRegister(ctx, w.registerParams()); err == nil {
				_, err = w.c.store.WorkerHeartbeat(ctx, &errandstore.WorkerHeartbeatParams{ID: w.ID(), Stats: w.workerStats()})
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
	_, err := w.c.store.WorkerHeartbeat(stopCtx, &errandstore.WorkerHeartbeatParams{ID: w.ID(), Stats: w.workerStats()})
	if err != nil && !errors.Is(err, errandtype.ErrNotFound) {
		w.c.logger.Warn("record the worker's final counts failed", "worker_id", w.ID(), "err", err)
	}
	if err := w.c.store.WorkerStop(stopCtx, &errandstore.WorkerStopParams{ID: w.ID()}); err != nil {
		w.c.logger.Error("mark worker stopped failed; the registry will show it as gone", "worker_id", w.ID(), "err", err)
	}
}
