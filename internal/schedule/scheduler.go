package schedule

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
	"github.com/errandhq/errand/internal/clock"
)

// resync bounds how long a scheduler sleeps without reading the stored
// schedules again, so that a spec changed by another process is seen.
const resync = time.Minute

// retry is how long a scheduler waits after a schedule failed (the store
// could not be reached, say) before it tries again.
const retry = time.Second

// Entry is one schedule a Scheduler runs.
type Entry struct {
	Name string
	Spec string // as stored (see Stored)
	// Ticks are Spec's; they give the first next fire time of a schedule
	// new to the store. Later ticks follow the stored spec.
	Ticks  Ticks
	Missed errandtype.MissedPolicy
	Grace  time.Duration
	// Job returns the job of a tick; catchUp marks the job of missed ticks.
	Job func(tick time.Time, catchUp bool) (*errandstore.JobInsertParams, error)
}

// Config is what a Scheduler uses of the engine that runs it.
type Config struct {
	Store errandstore.ScheduleStore
	// Now reads the store's clock, which decides ticks.
	Now func(context.Context) (time.Time, error)
	// Clock times the scheduler's sleeps.
	Clock  errandtype.TimeSource
	Logger *slog.Logger
	// Wake is called with the queue of each job a tick inserted.
	Wake func(queue string)
}

// Scheduler runs a Worker's schedules.
type Scheduler struct {
	cfg     Config
	entries []*Entry
	recs    map[string]*errandtype.ScheduleRecord // the stored state last seen
	specs   map[string]Ticks                      // parsed stored specs
}

// New returns a scheduler of entries. Their names must differ, and each
// must make the jobs of its ticks.
func New(cfg Config, entries []Entry) (*Scheduler, error) {
	sc := &Scheduler{cfg: cfg, recs: map[string]*errandtype.ScheduleRecord{}, specs: map[string]Ticks{}}
	seen := map[string]bool{}
	for i := range entries {
		e := &entries[i]
		if seen[e.Name] {
			return nil, &errandtype.InputError{Field: "Schedules", Message: fmt.Sprintf("names %q twice; give each schedule its own name", e.Name)}
		}
		seen[e.Name] = true
		// The catch-up job too: another process may have stored the
		// catch-up policy.
		for _, catchUp := range []bool{false, true} {
			if _, err := e.Job(time.Time{}, catchUp); err != nil {
				return nil, fmt.Errorf("schedule %s: %w", e.Name, err)
			}
		}
		sc.entries = append(sc.entries, e)
	}
	return sc, nil
}

// Register records every schedule in the store, keeping the stored next
// fire time of a schedule whose spec has not changed.
func (sc *Scheduler) Register(ctx context.Context) error {
	now, err := sc.cfg.Now(ctx)
	if err != nil {
		return fmt.Errorf("register schedules: %w", err)
	}
	for _, e := range sc.entries {
		if err := sc.registerAt(ctx, e, e.Ticks.Next(now)); err != nil {
			return err
		}
	}
	return nil
}

// registerAt records e with next as its next fire time if it is new or its
// spec changed.
func (sc *Scheduler) registerAt(ctx context.Context, e *Entry, next time.Time) error {
	job, err := e.Job(next, false)
	if err != nil {
		return fmt.Errorf("register schedule %s: %w", e.Name, err)
	}
	r, err := sc.cfg.Store.ScheduleUpsert(ctx, &errandstore.ScheduleUpsertParams{Name: e.Name, Spec: e.Spec, Kind: job.Kind,
		Queue: job.Queue, Missed: e.Missed, NextFireAt: next})
	if err != nil {
		return fmt.Errorf("register schedule %s: %w", e.Name, err)
	}
	sc.recs[e.Name] = r
	return nil
}

// resync reads the stored state of the schedules again.
func (sc *Scheduler) resync(ctx context.Context) error {
	rs, err := sc.cfg.Store.ScheduleList(ctx, &errandstore.ScheduleListParams{})
	if err != nil {
		return fmt.Errorf("read schedules: %w", err)
	}
	for _, r := range rs {
		if _, ok := sc.recs[r.Name]; ok {
			sc.recs[r.Name] = r
		}
	}
	return nil
}

// ticksOf parses a stored spec, once per spec.
func (sc *Scheduler) ticksOf(spec string) (Ticks, error) {
	if t, ok := sc.specs[spec]; ok {
		return t, nil
	}
	t, err := parseSpec(spec)
	if err != nil {
		return nil, err
	}
	sc.specs[spec] = t
	return t, nil
}

// Fire fires every due tick of every schedule, and returns the earliest
// next fire time. A schedule that fails is logged and left for the next
// pass, and failed reports it. A schedule whose row was deleted is
// registered again. Call Register first.
func (sc *Scheduler) Fire(ctx context.Context) (next time.Time, failed bool, err error) {
	var earliest time.Time
	for _, e := range sc.entries {
		err := sc.fireOne(ctx, e)
		if errors.Is(err, errandtype.ErrNotFound) {
			// Deleted (errand schedules delete, or by hand) while this
			// process still declares it: the declaration wins. Insert it
			// again from the tick it was about to fire.
			sc.cfg.Logger.Warn("schedule was deleted but this worker still runs it: registering it again; remove it from the worker's schedules to stop it",
				"schedule", e.Name)
			if err = sc.registerAt(ctx, e, sc.recs[e.Name].NextFireAt); err == nil {
				err = sc.fireOne(ctx, e)
			}
		}
		if err != nil {
			if ctx.Err() != nil {
				return time.Time{}, false, ctx.Err()
			}
			failed = true
			sc.cfg.Logger.Error("schedule failed", "schedule", e.Name, "err", err)
		}
		if n := sc.recs[e.Name].NextFireAt; earliest.IsZero() || n.Before(earliest) {
			earliest = n
		}
	}
	return earliest, failed, nil
}

// fireOne fires e's due ticks: the missed ones as its policy says, and
// each late or on-time one with a job of its own.
func (sc *Scheduler) fireOne(ctx context.Context, e *Entry) error {
	for {
		rec := sc.recs[e.Name]
		ticks, err := sc.ticksOf(rec.Spec)
		if err != nil {
			return err
		}
		now, err := sc.cfg.Now(ctx)
		if err != nil {
			return err
		}
		step, due, err := planTick(ticks, rec.NextFireAt, now, missedOf(rec), e.Grace)
		if err != nil || !due {
			return err
		}
		p := &errandstore.ScheduleAdvanceParams{Name: e.Name, From: rec.NextFireAt, Spec: rec.Spec, To: step.To, Tick: step.Tick}
		if !step.Skip {
			if p.Job, err = e.Job(step.Tick, step.CatchUp); err != nil {
				return err
			}
		}
		res, err := sc.cfg.Store.ScheduleAdvance(ctx, p)
		if err != nil {
			return err
		}
		sc.recs[e.Name] = res.Schedule
		switch {
		case !res.Advanced:
			// Another process fired it; go on from what it stored.
		case step.Skip:
			sc.cfg.Logger.Info("skipped missed ticks", "schedule", e.Name, "from", step.Tick, "next", step.To)
		case res.Job.Duplicate:
			sc.cfg.Logger.Info("tick's job exists already", "schedule", e.Name, "tick", step.Tick, "job_id", res.Job.Job.ID)
		default:
			sc.cfg.Logger.Debug("enqueued scheduled job", "schedule", e.Name, "tick", step.Tick, "job_id", res.Job.Job.ID, "catch_up", step.CatchUp)
			sc.cfg.Wake(res.Job.Job.Queue)
		}
	}
}

// Run registers the schedules and fires their ticks until ctx ends.
func (sc *Scheduler) Run(ctx context.Context) {
	backoff := retry
	for ctx.Err() == nil {
		err := sc.Register(ctx)
		if err == nil {
			break
		}
		sc.cfg.Logger.Error("register schedules failed; retrying", "err", err, "in", backoff)
		_ = clock.SleepCtx(ctx, sc.cfg.Clock, backoff)
		backoff = min(2*backoff, resync)
	}
	lastSync := sc.cfg.Clock.Now()
	for ctx.Err() == nil {
		if sc.cfg.Clock.Now().Sub(lastSync) >= resync {
			if err := sc.resync(ctx); err != nil && ctx.Err() == nil {
				sc.cfg.Logger.Error("read schedules failed", "err", err)
			}
			lastSync = sc.cfg.Clock.Now()
		}
		next, failed, err := sc.Fire(ctx)
		if err != nil {
			return
		}
		wait := retry // the store's clock is out of reach: look again soon
		if now, err := sc.cfg.Now(ctx); err == nil {
			wait = min(max(next.Sub(now), 0), resync)
		}
		if failed {
			wait = max(wait, retry) // not a busy loop against a failing store
		}
		if wait > 0 {
			_ = clock.SleepCtx(ctx, sc.cfg.Clock, wait)
		}
	}
}
