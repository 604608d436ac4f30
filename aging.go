package errand

import (
	"context"
	"maps"
	"slices"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
)

// PriorityAging raises a queue's waiting jobs in priority as they wait
// (see [WorkerConfig].PriorityAging): a job available for wait runs at
// max(Floor, priority - floor(wait / Step)), lower running first.
type PriorityAging = errandtype.PriorityAging

// checkPriorityAging refuses aging of a bad queue name, a step under
// [errandstore.MinAgingStep], or on a store that cannot age.
func checkPriorityAging(c *engine, aging map[string]PriorityAging) error {
	if len(aging) == 0 {
		return nil
	}
	if c.caps.ager == nil {
		return &errandtype.InputError{Field: "PriorityAging", Message: "the store cannot age priorities (it is no errandstore.PriorityAger); leave PriorityAging out"}
	}
	for _, q := range slices.Sorted(maps.Keys(aging)) {
		if err := errandstore.CheckIdentifier("PriorityAging", q, errandstore.MaxIDBytes); err != nil {
			return err
		}
		if err := errandstore.CheckPriorityAging("PriorityAging."+q, aging[q]); err != nil {
			return err
		}
	}
	return nil
}

// leaderAging ages the priorities of the configured queues' waiting jobs,
// at most [errandstore.AgingLimit] a queue each sweep.
func (w *Worker) leaderAging(ctx context.Context) {
	if !w.Leading() {
		return
	}
	for _, q := range slices.Sorted(maps.Keys(w.cfg.PriorityAging)) {
		n, err := w.c.caps.ager.JobAgePriorities(ctx, &errandstore.JobAgePrioritiesParams{Queue: q, Aging: w.cfg.PriorityAging[q], Limit: errandstore.AgingLimit})
		switch {
		case err != nil && ctx.Err() == nil:
			w.c.logger.Error("priority aging failed", "worker_id", w.ID(), "queue", q, "err", err)
		case n > 0:
			w.c.logger.Debug("aged priorities", "worker_id", w.ID(), "queue", q, "jobs", n)
		}
	}
}
