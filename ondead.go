package errand

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
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
//     and the hook. Where to look from is kept in the store, per kind (see
//     [DeadHookCursorStore]): a worker starting looks from where the
//     cluster last finished looking, however long no worker with the hook
//     ran, and a kind never looked at is looked at from its first dead job.
//     A look moves the cursors forward only past deaths whose hooks are
//     enqueued; after the first look a worker looks at the deaths since its
//     last look, with a margin. Each look reads the finished-jobs index from
//     the cursor on, so its cost follows the deaths since, not the table.

// deadHookOverlap is how far before its last look a worker looks again: a
// transaction that dead-lettered a job may commit a moment after the time it
// wrote into finished_at.
const deadHookOverlap = 5 * time.Minute

// deadHookCursorEvery is how far a worker's looks move before it writes
// its kinds' cursors again: a worker that restarts looks again at most
// that much more, and a look every SweepInterval writes rarely.
const deadHookCursorEvery = time.Minute

// deadHookPage is how many dead jobs one look reads at a time.
const deadHookPage = 200

// OnDeadFunc returns the job to enqueue because job was dead-lettered, or
// nil args for none. job is the dead job as it was claimed or read (its
// last error may not be on it yet when a worker found it dead itself: use
// its id to read it again if the hook needs the history). The hook job's
// id is [DeadHookJobID] whatever opts say; other options apply. The
// hook's kind must be one the client may enqueue: declare it (with
// [Declare], or a handler) in the worker's Kinds.
type OnDeadFunc func(job *errandtype.Job) (JobArgs, *EnqueueOpts)

// fireDeadHook enqueues the hook job of dead job, when its kind has a
// hook. It reports whether a job was enqueued or found already enqueued.
func (c *engine) fireDeadHook(ctx context.Context, job *errandtype.Job) (bool, error) {
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
	o.ID = ""
	ip, err := c.ownInsertParam(&EnqueueParams{Args: args, Opts: &o}, DeadHookJobID(job.ID, job.Replays))
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

// deadHookScanner finds the dead jobs of a worker's hooked kinds that have
// no hook job and enqueues their hooks.
type deadHookScanner struct {
	c       *engine
	store   errandstore.DeadHookStore
	cursors errandstore.DeadHookCursorStore // nil: the store keeps none; a start looks from the first death
	kinds   []string
	every   time.Duration
	since   time.Time // zero before the first look
	written time.Time // the cursor this worker last wrote; zero: none yet
}

// newDeadHookScanner returns nil when the worker has no hooked kinds or the
// store cannot find dead jobs without hooks.
func (c *engine) newDeadHookScanner(every time.Duration) *deadHookScanner {
	kinds := c.hookedKinds()
	if len(kinds) == 0 || c.caps.deadHooks == nil {
		return nil
	}
	return &deadHookScanner{c: c, store: c.caps.deadHooks, cursors: c.caps.deadHookCursors, kinds: kinds, every: every}
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

// start returns where a worker's first look starts: the earliest cursor of
// its kinds, or the zero time (every death) when one of them has none.
func (s *deadHookScanner) start(ctx context.Context) (time.Time, error) {
	if s.cursors == nil {
		return time.Time{}, nil
	}
	cs, err := s.cursors.DeadHookCursors(ctx, &errandstore.DeadHookCursorsParams{Kinds: s.kinds})
	if err != nil {
		return time.Time{}, fmt.Errorf("read dead-hook cursors: %w", err)
	}
	var from time.Time
	for i, k := range s.kinds {
		at, ok := cs[k]
		if !ok {
			return time.Time{}, nil
		}
		if i == 0 || at.Before(from) {
			from = at
		}
	}
	return from, nil
}

// fireAll enqueues the hooks of jobs, calling held with the death of each
// whose hook the store refused: it is looked for again.
func (s *deadHookScanner) fireAll(ctx context.Context, jobs []*errandtype.Job, held func(time.Time)) {
	for _, j := range jobs {
		if _, err := s.c.fireDeadHook(ctx, j); err != nil {
			// One hook that cannot be enqueued (its args do not
			// marshal, say) must not stop the others; one the store
			// refused is looked for again.
			s.c.logger.Error("on-dead hook failed", "job_id", j.ID, "err", err)
			var ie *errandtype.InputError
			if !errors.As(err, &ie) && !errors.Is(err, errandtype.ErrInvalid) {
				held(*j.FinishedAt)
			}
		}
	}
}

// advanceCursors writes the store's cursors up to to, when it keeps them
// and they moved deadHookCursorEvery since this worker last wrote them.
func (s *deadHookScanner) advanceCursors(ctx context.Context, to time.Time) error {
	if s.cursors == nil || to.IsZero() || !s.written.IsZero() && to.Sub(s.written) < deadHookCursorEvery {
		return nil
	}
	err := s.cursors.DeadHookCursorAdvance(ctx, &errandstore.DeadHookCursorAdvanceParams{Kinds: s.kinds, To: to})
	if err != nil {
		return fmt.Errorf("advance dead-hook cursors: %w", err)
	}
	s.written = to
	return nil
}

// scan enqueues the hooks of the dead jobs found since the last look, and
// returns how many jobs it looked at. It moves the cursors up to the
// earliest death whose hook could not be enqueued for a reason that may
// pass (the store's), else to the margin before now.
func (s *deadHookScanner) scan(ctx context.Context) (int, error) {
	now, err := s.c.store.Now(ctx)
	if err != nil {
		return 0, err
	}
	since := s.since
	if since.IsZero() {
		if since, err = s.start(ctx); err != nil {
			return 0, err
		}
	}
	to := now.Add(-deadHookOverlap)
	held := func(at time.Time) { // the look is not done past at
		if at.Before(to) {
			to = at
		}
	}
	seen := 0
	for {
		jobs, err := s.store.JobListDeadUnhooked(ctx, &errandstore.JobListDeadUnhookedParams{Kinds: s.kinds, Since: since, Limit: deadHookPage})
		if err != nil {
			return seen, err
		}
		seen += len(jobs)
		s.fireAll(ctx, jobs, held)
		if len(jobs) < deadHookPage {
			break
		}
		last := *jobs[len(jobs)-1].FinishedAt
		if !last.After(since) {
			held(since) // a page of one instant: the next look goes on
			break
		}
		since = last
	}
	if err := s.advanceCursors(ctx, to); err != nil {
		return seen, err
	}
	s.since = to
	return seen, nil
}

// DeadHookJobID is the id of the on-dead job of job id when it died in its
// delivery cycle replays (the job's Replays when it died): "ID.dead.N". A
// job replayed and dead again gets a new on-dead job; one death never gets
// two, however many processes notice it.
func DeadHookJobID(jobID string, replays int) string {
	return jobID + ".dead." + strconv.Itoa(replays)
}
