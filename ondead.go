package errand

import (
	"context"
	"fmt"
	"slices"
	"time"
)

// On-dead hooks: a kind may declare, in [KindOpts].OnDead, a job to enqueue
// each time one of its jobs is dead-lettered: a compensation (refund the
// payment whose capture died), a notification. The hook job's id is
// "JOB.dead.N", N the dead job's replay count, so that one death enqueues
// one hook job however many processes notice it, and a job replayed and dead
// again enqueues another.
//
// Detection is at-least-once, by two paths:
//
//   - the worker that records a dead outcome (a permanent error, attempts
//     used up, an expired deadline found by the handler's worker) enqueues
//     the hook job at once;
//   - every worker that handles a kind with a hook looks, every
//     SweepInterval, for dead jobs of its hooked kinds that have no hook job:
//     jobs swept to dead (a lease expired on the final attempt, a deadline
//     passed while waiting) and jobs whose worker died between the outcome
//     and the hook. A worker starting looks back DeadHookLookback; after
//     that it looks at the deaths since its last look, with a margin.
//
// A job that died while no worker with its kind's hook ran for longer than
// DeadHookLookback gets no hook job: replay it, or enqueue the compensation
// yourself.

// DeadHookLookback is how far back a starting worker looks for dead jobs of
// its hooked kinds that have no hook job.
const DeadHookLookback = 7 * 24 * time.Hour

// deadHookOverlap is how far before its last look a worker looks again: a
// transaction that dead-lettered a job may commit a moment after the time it
// wrote into finished_at.
const deadHookOverlap = 5 * time.Minute

// deadHookPage is how many dead jobs one look reads at a time.
const deadHookPage = 200

// OnDeadFunc returns the job to enqueue because job was dead-lettered, or
// nil args for none. job is the dead job as it was claimed or read (its
// last error may not be on it yet when a worker found it dead itself: use
// its id to read it again if the hook needs the history). The hook job's
// id is [DeadHookJobID] whatever opts say; other options apply. The
// hook's kind must be one the client may enqueue: declare it (with
// [Declare], or a handler) in the worker's Kinds.
type OnDeadFunc func(job *Job) (JobArgs, *EnqueueOpts)

// fireDeadHook enqueues the hook job of dead job, when its kind has a
// hook. It reports whether a job was enqueued or found already enqueued.
func (c *engine) fireDeadHook(ctx context.Context, job *Job) (bool, error) {
	k := c.kinds[job.Kind]
	if k == nil || k.OnDead == nil {
		return false, nil
	}
	args, opts := k.OnDead(job)
	if args == nil {
		return false, nil
	}
	o := EnqueueOpts{}
	if opts != nil {
		o = *opts
	}
	o.ID = DeadHookJobID(job.ID, job.Replays)
	ip, err := c.insertParam(&EnqueueParams{Args: args, Opts: &o})
	if err != nil {
		return false, fmt.Errorf("on-dead hook of job %s: %w", job.ID, err)
	}
	rs, err := c.store.JobInsertMany(ctx, &JobInsertManyParams{Jobs: []*JobInsertParams{ip}})
	if err != nil {
		return false, fmt.Errorf("on-dead hook of job %s: %w", job.ID, err)
	}
	if !rs[0].Duplicate {
		c.wakeQueues(ip.Queue)
		if c.observer != nil {
			c.observer.JobsEnqueued([]*Job{rs[0].Job})
		}
		c.logger.Info("on-dead hook enqueued", "job_id", job.ID, "hook_job_id", ip.ID, "hook_kind", ip.Kind)
	}
	return true, nil
}

// afterOutcome runs what follows a recorded outcome: the dead job's hook,
// the completion of its batch and the advance of its workflow. It costs
// nothing for a job outside a batch and a workflow whose kind has no hook.
func (c *engine) afterOutcome(ctx context.Context, job *Job, res *WorkResult) {
	switch res.Result {
	case ResultDead:
		if k := c.kinds[job.Kind]; k != nil && k.OnDead != nil {
			hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), batchCompleteTimeout)
			if _, err := c.fireDeadHook(hctx, job); err != nil {
				c.logger.Warn("on-dead hook failed; a worker's next look for dead jobs enqueues it", "job_id", job.ID, "err", err)
			}
			cancel()
		}
		c.afterMemberFinished(ctx, job)
		c.afterWorkflowJob(ctx, job)
	case ResultSucceeded, ResultCancelled:
		c.afterMemberFinished(ctx, job)
		c.afterWorkflowJob(ctx, job)
	}
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

// deadHookScanner finds the dead jobs of a worker's hooked kinds that have
// no hook job and enqueues their hooks.
type deadHookScanner struct {
	c     *engine
	store DeadHookStore
	kinds []string
	every time.Duration
	since time.Time // zero before the first look
}

// newDeadHookScanner returns nil when the worker has no hooked kinds or the
// store cannot find dead jobs without hooks.
func (c *engine) newDeadHookScanner(every time.Duration) *deadHookScanner {
	kinds := c.hookedKinds()
	ds, ok := c.store.(DeadHookStore)
	if len(kinds) == 0 || !ok {
		return nil
	}
	return &deadHookScanner{c: c, store: ds, kinds: kinds, every: every}
}

// run looks at once, then every interval, until ctx ends.
func (s *deadHookScanner) run(ctx context.Context) {
	t := s.c.clock.NewTicker(s.every)
	defer t.Stop()
	for {
		if _, err := s.scan(ctx); err != nil && ctx.Err() == nil {
			s.c.logger.Error("look for dead jobs without their on-dead hook failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
	}
}

// scan enqueues the hooks of the dead jobs found since the last look, and
// returns how many jobs it looked at.
func (s *deadHookScanner) scan(ctx context.Context) (int, error) {
	now, err := s.c.store.Now(ctx)
	if err != nil {
		return 0, err
	}
	since := s.since
	if since.IsZero() {
		since = now.Add(-DeadHookLookback)
	}
	seen := 0
	for {
		jobs, err := s.store.JobListDeadUnhooked(ctx, &JobListDeadUnhookedParams{Kinds: s.kinds, Since: since, Limit: deadHookPage})
		if err != nil {
			return seen, err
		}
		seen += len(jobs)
		for _, j := range jobs {
			if _, err := s.c.fireDeadHook(ctx, j); err != nil {
				// One hook that cannot be enqueued (its args do not
				// marshal, say) must not stop the others.
				s.c.logger.Error("on-dead hook failed", "job_id", j.ID, "err", err)
			}
		}
		if len(jobs) < deadHookPage {
			break
		}
		last := *jobs[len(jobs)-1].FinishedAt
		if !last.After(since) {
			break // a page of one instant: the next look goes on
		}
		since = last
	}
	s.since = now.Add(-deadHookOverlap)
	return seen, nil
}
