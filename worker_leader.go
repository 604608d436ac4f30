package errand

import (
	"context"
	"fmt"
	"time"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
	"github.com/errandhq/errand/internal/maintenance"
)

// Leadership (the mechanics are in internal/maintenance): some work must
// run once per cluster, not once per worker: sweeping expired leases,
// completing batches, advancing workflows, retention and pruning the
// worker registry. Every long-running Worker is a candidate for the
// leadership named LeaderName; the store grants it as a lease on its own
// clock, and the leader renews it every third of its TTL, and stops before
// its own share of the lease ends.

// LeaderName is the leadership the Workers of one store compete for.
const LeaderName = "errand"

// DefaultLeaderTTL is how long a leader's lease lasts unless renewed.
const DefaultLeaderTTL = 15 * time.Second

// DefaultSweepInterval is how often the leader sweeps expired leases and
// passed deadlines.
const DefaultSweepInterval = 5 * time.Second

// WorkerPruneAfter is how long the leader keeps stopped and gone workers in
// the registry, from their last sign of life, before deleting them.
const WorkerPruneAfter = 24 * time.Hour

// workerPruneEvery is how often the leader prunes the registry, and the
// turns of idle fairness keys.
const workerPruneEvery = 5 * time.Minute

// FairTurnPruneAfter is how long a fairness key with no waiting job keeps
// its turn (see [FairTurnPruner]) after a fair claim last served it; then
// the leader deletes it. A key that comes back after that counts as served
// longest ago, which it was.
const FairTurnPruneAfter = time.Hour

// minLeaderTTL keeps the election interval (a third of the TTL) meaningful.
const minLeaderTTL = 30 * time.Millisecond

// Leader returns the current holder of the cluster's leadership (a worker
// id, see [Worker.ID]), or an error wrapping ErrNotFound when no worker
// leads.
func (c *Client[TTx]) Leader(ctx context.Context) (*errandtype.Leader, error) {
	l, err := c.store.LeaderGet(ctx, &errandstore.LeaderGetParams{Name: LeaderName})
	if err != nil {
		return nil, fmt.Errorf("get leader: %w", err)
	}
	return l, nil
}

// Leading reports whether the worker leads the cluster now: it holds the
// leadership lease and runs the sweeps and registry cleanup. It turns false
// before the lease ends when the worker cannot renew it.
func (w *Worker) Leading() bool { return w.leader.Leading() }

// newLeader makes the worker's candidacy, with the duties that need the
// root: batches, workflows and retention.
func (w *Worker) newLeader() *maintenance.Leader {
	cfg := maintenance.Config{Store: w.c.store, FairTurns: w.c.caps.fairPruner, Keeper: w.c.caps.tableKeeper, Clock: w.c.clock, Logger: w.c.logger, ID: w.ID(), Name: LeaderName,
		TTL: w.cfg.LeaderTTL, SweepInterval: w.cfg.SweepInterval,
		AfterSweep:       []func(context.Context){w.leaderBatches, w.leaderWorkflows},
		WorkerPruneAfter: WorkerPruneAfter, FairTurnPruneAfter: FairTurnPruneAfter}
	if w.cfg.Retention != nil {
		cfg.Retention, cfg.RetentionEvery = w.leaderRetention, w.cfg.Retention.Interval
	}
	if len(w.cfg.PriorityAging) > 0 {
		cfg.AfterSweep = append(cfg.AfterSweep, w.leaderAging)
	}
	return maintenance.New(cfg)
}

// checkLeaderConfig applies the leadership defaults and validates them.
func checkLeaderConfig(cfg *WorkerConfig) error {
	if cfg.LeaderTTL == 0 {
		cfg.LeaderTTL = DefaultLeaderTTL
	}
	if cfg.LeaderTTL < minLeaderTTL {
		return &errandtype.InputError{Field: "LeaderTTL", Message: fmt.Sprintf("must be at least %s, e.g. 15s", minLeaderTTL)}
	}
	if cfg.SweepInterval == 0 {
		cfg.SweepInterval = DefaultSweepInterval
	}
	return errandstore.CheckInterval("SweepInterval", cfg.SweepInterval, "5s")
}

// leaderWorkflows advances the open workflows whose jobs have all finished
// since they were last looked at (less [WorkflowRecheckOverlap]), by
// whatever path.
func (w *Worker) leaderWorkflows(ctx context.Context) {
	if !w.Leading() {
		return
	}
	if _, err := w.c.advanceWorkflows(ctx, nil); err != nil && ctx.Err() == nil {
		w.c.logger.Error("leader workflow advance failed", "worker_id", w.ID(), "err", err)
	}
}

// leaderBatches completes the open batches whose members have all
// finished, by whatever path.
func (w *Worker) leaderBatches(ctx context.Context) {
	if !w.Leading() {
		return
	}
	if _, err := w.c.completeBatches(ctx, nil); err != nil && ctx.Err() == nil {
		w.c.logger.Error("leader batch completion failed", "worker_id", w.ID(), "err", err)
	}
}

// leaderRetention applies the worker's retention policy, when it has one
// and leads.
func (w *Worker) leaderRetention(ctx context.Context) {
	p := w.cfg.Retention
	if p == nil || !w.Leading() {
		return
	}
	r, err := w.c.prune(ctx, &PruneOpts{SucceededAge: p.SucceededAge, DeadAge: p.DeadAge, Kinds: p.Kinds, BatchSize: p.BatchSize,
		Operator: RetentionOperator, Reason: "retention policy of worker " + w.ID()})
	switch {
	case err != nil && ctx.Err() == nil:
		w.c.logger.Error("retention failed", "worker_id", w.ID(), "err", err)
	case r.Total() > 0 || r.Batches > 0 || r.Workflows > 0:
		w.c.logger.Info("pruned finished jobs", "worker_id", w.ID(), "succeeded", r.Succeeded,
			"cancelled", r.Cancelled, "dead", r.Dead, "batches", r.Batches, "workflows", r.Workflows)
	}
}
