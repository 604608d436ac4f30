package errand

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
	"github.com/errandhq/errand/internal/deadhook"
)

// On-dead hooks: a kind may declare, in [KindOpts].OnDead, a job to enqueue
// each time one of its jobs is dead-lettered: a compensation (refund the
// payment whose capture died), a notification. The hook job's id is
// "JOB.dead.N", N the dead job's replay count, so that one death enqueues
// one hook job however many processes notice it, and a job replayed and dead
// again enqueues another.
//
// Detection is at-least-once: the worker that records a dead outcome (a
// permanent error, attempts used up, an expired deadline found by the
// handler's worker) enqueues the hook job at once, and every worker that
// handles a kind with a hook looks, every SweepInterval, for dead jobs of
// its hooked kinds that have no hook job (see internal/deadhook).

// fireDeadHook enqueues the hook job of dead job, when its kind has a
// hook. It reports whether a job was enqueued or found already enqueued.
func (c *engine) fireDeadHook(ctx context.Context, job *errandtype.Job) (bool, error) {
	k := c.kinds[job.Kind]
	if k == nil || k.OnDead == nil {
		return false, nil
	}
	// A job the scanner found is as stored; the hook reads its args plain.
	// One that does not open is looked for again, by a worker that holds
	// its key.
	if err := c.openJob(job); err != nil {
		return false, fmt.Errorf("on-dead hook of job %s: %w", job.ID, err)
	}
	args, opts := k.OnDead(job)
	if args == nil {
		return false, nil
	}
	o := EnqueueOpts{}
	if opts != nil {
		o = *opts
	}
	o.ID = ""
	hctx := ctx
	if sc := jobSpanContext(job); sc.IsValid() {
		hctx = trace.ContextWithRemoteSpanContext(ctx, sc) // the hook job joins the dead job's trace
	}
	ip, err := c.ownInsertParam(hctx, &EnqueueParams{Args: args, Opts: &o}, DeadHookJobID(job.ID, job.Replays))
	if err != nil {
		return false, fmt.Errorf("on-dead hook of job %s: %w", job.ID, err)
	}
	rs, err := c.store.JobInsertMany(ctx, &errandstore.JobInsertManyParams{Jobs: []*errandstore.JobInsertParams{ip}})
	if err != nil {
		return false, fmt.Errorf("on-dead hook of job %s: %w", job.ID, err)
	}
	if !rs[0].Duplicate {
		c.wakeQueues(ip.Queue)
		if c.observer != nil {
			c.observer.JobsEnqueued([]*errandtype.Job{rs[0].Job})
		}
		c.logger.Info("on-dead hook enqueued", "job_id", job.ID, "hook_job_id", ip.ID, "hook_kind", ip.Kind)
	}
	return true, nil
}

// hasDeadHook reports whether kind has an OnDead hook.
func (c *engine) hasDeadHook(kind string) bool {
	k := c.kinds[kind]
	return k != nil && k.OnDead != nil
}

// hookedKinds lists, sorted, the kinds of handlers with an OnDead hook.
func (c *engine) hookedKinds() []string {
	var ks []string
	for name, k := range c.kinds {
		if k.handler != nil && k.OnDead != nil {
			ks = append(ks, name)
		}
	}
	slices.Sort(ks)
	return ks
}

// newDeadHookScanner returns nil when the worker has no hooked kinds or the
// store cannot find dead jobs without hooks.
func (c *engine) newDeadHookScanner(every time.Duration) *deadhook.Scanner {
	kinds := c.hookedKinds()
	if len(kinds) == 0 || c.caps.deadHooks == nil {
		return nil
	}
	return deadhook.New(deadhook.Config{Now: c.store.Now, Store: c.caps.deadHooks, Cursors: c.caps.deadHookCursors,
		Clock: c.clock, Logger: c.logger, Kinds: kinds, Every: every,
		Fire: func(ctx context.Context, j *errandtype.Job) error {
			_, err := c.fireDeadHook(ctx, j)
			return err
		}})
}

// DeadHookJobID is the id of the on-dead job of job id when it died in its
// delivery cycle replays (the job's Replays when it died): "ID.dead.N". A
// job replayed and dead again gets a new on-dead job; one death never gets
// two, however many processes notice it.
func DeadHookJobID(jobID string, replays int) string {
	return jobID + ".dead." + strconv.Itoa(replays)
}
