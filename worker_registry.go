package errand

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
	"github.com/errandhq/errand/internal/registry"
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

// register records the worker in the registry and starts its heartbeats
// (see internal/registry), which run until deregister or until ctx ends.
func (w *Worker) register(ctx context.Context) error {
	return w.reg.Register(ctx, registry.Config{Store: w.c.store, Clock: w.c.clock, Logger: w.c.logger, ID: w.ID(),
		Params: w.registerParams, Every: w.cfg.HeartbeatInterval, Running: &w.stats.running, Completed: &w.stats.completed})
}

func (w *Worker) registerParams() *errandstore.WorkerRegisterParams {
	var qs []errandtype.WorkerQueue
	for _, q := range w.queues {
		qs = append(qs, errandtype.WorkerQueue{Name: q, Concurrency: w.cfg.Queues[q], Weight: w.weights[q]})
	}
	return registry.Params(w.ID(), w.kinds, qs, w.cfg.HeartbeatInterval)
}

// noteResult stamps the time of a finished attempt, for last_completed_at.
// The Worker calls it before counting the result, so that a heartbeat that
// sees the new count also sees this time.
func (w *Worker) noteResult(res *WorkResult) {
	if res.Result == ResultLeaseLost || res.Result == ResultInterrupted {
		return
	}
	w.reg.NoteCompleted()
}
