// Package registry keeps the worker registry written: who is working. A
// long-running worker registers when it starts, heartbeats while it runs
// and marks itself stopped when it drains; a remote worker's claims count
// as its heartbeats. The registry is for operators only: no lease or claim
// decision reads it, so a failed write is logged and work goes on.
package registry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
)

// Store is the part of a store the registry writes.
type Store interface {
	WorkerRegister(ctx context.Context, params *errandstore.WorkerRegisterParams) (*errandtype.WorkerRecord, error)
	WorkerHeartbeat(ctx context.Context, params *errandstore.WorkerHeartbeatParams) (*errandtype.WorkerRecord, error)
	WorkerStop(ctx context.Context, params *errandstore.WorkerStopParams) error
}

// Params returns the registration of worker id on this host and process.
func Params(id string, kinds []string, queues []errandtype.WorkerQueue, heartbeat time.Duration) *errandstore.WorkerRegisterParams {
	host, err := os.Hostname()
	if err != nil {
		host = "unknown"
	}
	return &errandstore.WorkerRegisterParams{ID: id, Host: errandstore.CleanText(host, errandtype.MaxNameBytes), PID: os.Getpid(),
		Kinds: kinds, Queues: queues, HeartbeatInterval: heartbeat}
}

// Config is what a Registration takes from its worker.
type Config struct {
	Store  Store
	Clock  errandtype.TimeSource
	Logger *slog.Logger
	ID     string
	// Params returns the worker's registration, written at the start and
	// again when its row is gone.
	Params func() *errandstore.WorkerRegisterParams
	Every  time.Duration // the heartbeat interval
	// Running and Completed are the worker's counts of jobs running and
	// finished, reported in each heartbeat.
	Running, Completed *atomic.Int64
}

// Registration is a worker's side of the registry: its heartbeat goroutine
// and when it last finished a job.
type Registration struct {
	cfg           Config
	born          time.Time    // monotonic origin for lastCompleted
	lastCompleted atomic.Int64 // time since born at the last completion, on the worker's clock
	stopBeats     context.CancelFunc
	beats         sync.WaitGroup
	draining      atomic.Bool   // the drain has begun; heartbeats say so
	beatNow       chan struct{} // asks the heartbeat goroutine for a beat at once

	// WallClock reads the worker's wall clock for a heartbeat's SentAt, the
	// one place a worker uses its own wall time: only to report the clock
	// skew to operators, never for a lease or schedule decision. Nil means
	// the worker's clock; tests shift it to play a host whose clock is off.
	WallClock func() time.Time
}

// Register records the worker in the registry and starts its heartbeats,
// which run until Deregister or until ctx ends.
func (r *Registration) Register(ctx context.Context, cfg Config) error {
	r.cfg = cfg
	if _, err := cfg.Store.WorkerRegister(ctx, cfg.Params()); err != nil {
		return fmt.Errorf("start worker: register %s: %w", cfg.ID, err)
	}
	r.born = cfg.Clock.Now()
	r.beatNow = make(chan struct{}, 1)
	beatCtx, stop := context.WithCancel(ctx)
	r.stopBeats = stop
	r.beats.Go(func() { r.heartbeats(beatCtx) })
	return nil
}

// NoteCompleted stamps the time of a finished attempt, for
// last_completed_at. The worker calls it before counting the attempt in
// Completed, so that a heartbeat that sees the new count also sees this
// time.
func (r *Registration) NoteCompleted() {
	r.lastCompleted.Store(int64(r.cfg.Clock.Now().Sub(r.born)))
}

func (r *Registration) stats() errandstore.WorkerStats {
	completed := r.cfg.Completed.Load() // before the time: see NoteCompleted
	now := r.cfg.Clock.Now()
	st := errandstore.WorkerStats{
		JobsRunning:   int(r.cfg.Running.Load()),
		JobsCompleted: completed,
		SentAt:        now,
		Draining:      r.draining.Load(),
	}
	if r.WallClock != nil {
		st.SentAt = r.WallClock()
	}
	if completed > 0 {
		st.LastCompletedAgo = max(0, now.Sub(r.born)-time.Duration(r.lastCompleted.Load()))
	}
	return st
}

// heartbeats records that the worker is alive every Every, and at once
// when MarkDraining asks, until ctx ends. A failed heartbeat is logged and
// work goes on: the registry is for operators, and leases are renewed
// separately. A worker whose row is gone (pruned, or marked stopped)
// registers again.
func (r *Registration) heartbeats(ctx context.Context) {
	t := r.cfg.Clock.NewTicker(r.cfg.Every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		case <-r.beatNow:
		}
		_, err := r.cfg.Store.WorkerHeartbeat(ctx, &errandstore.WorkerHeartbeatParams{ID: r.cfg.ID, Stats: r.stats()})
		if errors.Is(err, errandtype.ErrNotFound) {
			r.cfg.Logger.Warn("worker missing from the registry; registering again", "worker_id", r.cfg.ID)
			if _, err = r.cfg.Store.WorkerRegister(ctx, r.cfg.Params()); err == nil {
				_, err = r.cfg.Store.WorkerHeartbeat(ctx, &errandstore.WorkerHeartbeatParams{ID: r.cfg.ID, Stats: r.stats()})
			}
		}
		if err != nil && ctx.Err() == nil {
			r.cfg.Logger.Error("worker heartbeat failed", "worker_id", r.cfg.ID, "err", err)
		}
	}
}

// MarkDraining makes every later heartbeat say that the worker is
// draining, and asks for one at once, so the registry shows it draining
// while its jobs finish rather than alive. It does not wait for the write.
func (r *Registration) MarkDraining() {
	r.draining.Store(true)
	select {
	case r.beatNow <- struct{}{}:
	default: // a beat is already asked for
	}
}

// Deregister stops the heartbeats, writes the worker's final counts and
// marks it stopped. ctx may have ended (the grace period ran out): both are
// written regardless, so the registry shows a clean stop rather than a gone
// worker. The final heartbeat is needed: the draining one went out before
// the last jobs finished, and stopping the heartbeats may have cut it off
// (a worker that ran thousands of jobs between two beats showed none).
func (r *Registration) Deregister(ctx context.Context) {
	r.stopBeats()
	r.beats.Wait()
	stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.cfg.Every)
	defer cancel()
	_, err := r.cfg.Store.WorkerHeartbeat(stopCtx, &errandstore.WorkerHeartbeatParams{ID: r.cfg.ID, Stats: r.stats()})
	if err != nil && !errors.Is(err, errandtype.ErrNotFound) {
		r.cfg.Logger.Warn("record the worker's final counts failed", "worker_id", r.cfg.ID, "err", err)
	}
	if err := r.cfg.Store.WorkerStop(stopCtx, &errandstore.WorkerStopParams{ID: r.cfg.ID}); err != nil {
		r.cfg.Logger.Error("mark worker stopped failed; the registry will show it as gone", "worker_id", r.cfg.ID, "err", err)
	}
}
