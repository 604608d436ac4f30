package errand

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
	"github.com/robfig/cron/v3"
)

// Recurring jobs. A [Schedule] names a spec (when) and args (what); a Worker
// given schedules ([WorkerConfig].Schedules) enqueues one job per tick.
//
// Exactly one job per tick, across any number of processes: a schedule's
// next fire time lives in the store (see [ScheduleStore]), and a process
// fires a tick by moving that time forward from the value it read, a
// compare-and-set, in the transaction that inserts the tick's job. The job's
// unique key names the schedule and the tick ([ScheduleUniqueKey]), so even
// a schedule row reset by hand cannot enqueue a tick twice. No leadership is
// involved: every worker with schedules runs them, and the store decides.
// A restart reads the stored next fire time, so it neither loses nor repeats
// a tick.
//
// Ticks that pass while no process runs the schedule are late or missed. A
// tick up to Grace late still gets its own job. Older ticks are missed, and
// the schedule's [MissedPolicy] decides: skip them, or catch up with one job
// for all of them (keyed by the first), then go on with the first tick that
// is not missed.
//
// A spec decides ticks on the store's clock. Registering a name with a spec
// that differs from the stored one replaces the spec and computes the next
// fire time afresh from now; the pending tick of the old spec does not fire.
// Kind, queue and policy follow the latest registration without resetting
// the next fire time. While processes disagree on a name's spec (a rolling
// deploy), ticks follow the stored spec, the latest registered.

// DefaultScheduleGrace is how late a tick may be and still get its own job,
// unless a schedule sets its own Grace.
const DefaultScheduleGrace = 10 * time.Second

// scheduleResync bounds how long a scheduler sleeps without reading the
// stored schedules again, so that a spec changed by another process is seen.
const scheduleResync = time.Minute

// scheduleRetry is how long a scheduler waits after a schedule failed (the
// store could not be reached, say) before it tries again.
const scheduleRetry = time.Second

// ScheduleOpts are the optional settings of a schedule.
type ScheduleOpts struct {
	// Location is the time zone of a cron spec that does not name one with
	// a CRON_TZ= prefix. Nil means UTC. It must be a named zone
	// (time.LoadLocation("Europe/Paris")), not time.Local, so that every
	// host reads the spec alike.
	Location *time.Location
	// Missed is what happens to ticks missed while no process ran the
	// schedule. Default MissedSkip.
	Missed errandtype.MissedPolicy
	// Grace is how late a tick may be and still get its own job; older
	// ticks are missed. Default DefaultScheduleGrace.
	Grace time.Duration
	// Enqueue are the options of every job the schedule enqueues (queue,
	// priority, attempts, tags...). ID, UniqueKey and Unique must be empty:
	// a tick's job gets a fresh id and the tick's unique key, held in every
	// state ([UniqueAlways]) so that a tick never enqueues twice. RunAt
	// must be empty too: Delay runs each tick's job that long after its
	// tick. A catch-up job carries the tag "catch_up" besides Tags, so
	// Tags may hold at most MaxTags-1 others.
	Enqueue *EnqueueOpts
}

// Schedule is a recurring job: args to enqueue on every tick of a spec.
// Create it with [NewSchedule] or [ParseScheduleFlag].
type Schedule struct {
	name  string
	spec  string // as stored: with a CRON_TZ= prefix when it has a zone
	ticks cron.Schedule
	args  JobArgs
	opts  ScheduleOpts // defaults applied; Enqueue not nil
}

// Name returns the schedule's name.
func (s *Schedule) Name() string { return s.name }

// Spec returns the schedule's spec as the store keeps it: with a CRON_TZ=
// prefix when a time zone applies.
func (s *Schedule) Spec() string { return s.spec }

// Args returns the args of the schedule's jobs.
func (s *Schedule) Args() JobArgs { return s.args }

// Next returns the schedule's first tick after t.
func (s *Schedule) Next(t time.Time) time.Time { return s.ticks.Next(t) }

var specParser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// NewSchedule returns a schedule that enqueues args on every tick of spec.
// name identifies it across processes and restarts (a name as for a kind:
// no spaces). spec is one of:
//
//   - a cron expression of five fields (minute hour day-of-month month
//     day-of-week) or six, a seconds field first: "0 9 * * MON-FRI",
//     "*/10 * * * * *";
//   - a descriptor: @yearly, @monthly, @weekly, @daily (@midnight), @hourly;
//   - @every DURATION, at least a second: "@every 90s". Its ticks are
//     multiples of the duration since the zero time (for "@every 1m", on the
//     minute), not counted from the moment a process starts, so that every
//     process agrees on them.
//
// A cron expression or descriptor may start with CRON_TZ=ZONE (or TZ=ZONE),
// e.g. "CRON_TZ=Europe/Paris 0 9 * * *"; otherwise opts.Location applies,
// or UTC. Bad input is an *InputError that says what to change.
func NewSchedule(name, spec string, args JobArgs, opts *ScheduleOpts) (*Schedule, error) {
	if err := errandstore.CheckName("schedule name", name); err != nil {
		return nil, err
	}
	if args == nil {
		return nil, &errandtype.InputError{Field: "args", Message: "are nil; pass a value of an args type, which names the kind"}
	}
	o, err := scheduleOpts(opts)
	if err != nil {
		return nil, err
	}
	stored, ticks, err := storedSpec(spec, o.Location)
	if err != nil {
		return nil, err
	}
	if err := errandstore.CheckName("kind", args.Kind()); err != nil {
		return nil, err
	}
	return &Schedule{name: name, spec: stored, ticks: ticks, args: args, opts: o}, nil
}

// scheduleOpts returns opts with its defaults, checked.
func scheduleOpts(opts *ScheduleOpts) (ScheduleOpts, error) {
	var o ScheduleOpts
	if opts != nil {
		o = *opts
	}
	if o.Missed == "" {
		o.Missed = errandtype.MissedSkip
	}
	if err := o.Missed.Validate(); err != nil {
		return o, err
	}
	if o.Grace == 0 {
		o.Grace = DefaultScheduleGrace
	}
	if o.Grace < 0 {
		return o, &errandtype.InputError{Field: "Grace", Message: "must be positive, e.g. 10s"}
	}
	if o.Enqueue == nil {
		o.Enqueue = &EnqueueOpts{}
	}
	if err := checkScheduleEnqueue(o.Enqueue); err != nil {
		return o, err
	}
	return o, checkScheduleLocation(o.Location)
}

// checkScheduleEnqueue checks the options of a schedule's jobs: a tick
// gives each its id, its unique key and its time.
func checkScheduleEnqueue(e *EnqueueOpts) error {
	if e.ID != "" || e.UniqueKey != "" || e.Unique != nil {
		return &errandtype.InputError{Field: "Enqueue", Message: "sets ID, UniqueKey or Unique; leave them empty, a tick's job gets a fresh id and the tick's unique key"}
	}
	if !e.RunAt.IsZero() {
		return &errandtype.InputError{Field: "Enqueue", Message: "sets RunAt, which would hold every tick's job until that one moment; leave it empty, and set Delay to run each tick's job that long after its tick"}
	}
	if n := len(e.Tags); n >= errandstore.MaxTags && !slices.Contains(e.Tags, catchUpTag) {
		return &errandtype.InputError{Field: "Enqueue", Message: fmt.Sprintf("sets %d tags; a schedule's jobs may carry at most %d, since a catch-up job adds the tag %q", n, errandstore.MaxTags-1, catchUpTag)}
	}
	return nil
}

// checkScheduleLocation refuses a zone that hosts may read differently.
func checkScheduleLocation(loc *time.Location) error {
	if loc != nil && loc != time.UTC && loc != time.Local {
		if _, err := time.LoadLocation(loc.String()); err != nil {
			return &errandtype.InputError{Field: "Location", Message: fmt.Sprintf("%q is not a zone of the time zone database (a time.FixedZone?); load a named zone with time.LoadLocation(\"Europe/Paris\") so every host reads the spec alike", loc.String())}
		}
	}
	if loc == time.Local {
		return &errandtype.InputError{Field: "Location", Message: "is time.Local; name the zone (time.LoadLocation(\"Europe/Paris\")) so every host reads the spec alike"}
	}
	return nil
}

// storedSpec returns spec as the store keeps it (see canonicalSpec) and
// its ticks, refusing one too long to store or that never fires.
func storedSpec(spec string, loc *time.Location) (string, cron.Schedule, error) {
	stored, err := canonicalSpec(spec, loc)
	if err != nil {
		return "", nil, err
	}
	if len(stored) > errandstore.MaxSpecBytes {
		return "", nil, &errandtype.InputError{Field: "spec", Message: fmt.Sprintf("is %d bytes as stored (with its zone); use at most %d, with ranges (0-30) and steps (*/5) rather than lists", len(stored), errandstore.MaxSpecBytes)}
	}
	ticks, err := parseSpec(stored)
	if err != nil {
		return "", nil, err
	}
	// A spec with no tick (the 30th of February) would be stored with no
	// next fire time and fail on every turn of the scheduler.
	if ticks.Next(time.Now()).IsZero() {
		return "", nil, &errandtype.InputError{Field: "spec", Message: fmt.Sprintf("%q never fires; check the day of the month against the month", spec)}
	}
	return stored, ticks, nil
}

// canonicalSpec returns spec as the store keeps it: trimmed, with loc as a
// CRON_TZ= prefix when spec names no zone and loc is not nil or UTC.
func canonicalSpec(spec string, loc *time.Location) (string, error) {
	spec = strings.Join(strings.Fields(spec), " ")
	if spec == "" {
		return "", &errandtype.InputError{Field: "spec", Message: "is empty; give a cron expression (\"0 9 * * *\"), a descriptor (\"@hourly\") or \"@every 1m\""}
	}
	if strings.HasPrefix(spec, "CRON_TZ=") || strings.HasPrefix(spec, "TZ=") {
		if strings.HasPrefix(spec, "CRON_TZ=@every") || strings.Contains(spec, " @every") {
			return "", &errandtype.InputError{Field: "spec", Message: fmt.Sprintf("%q: @every takes no time zone; drop the CRON_TZ= prefix", spec)}
		}
		return spec, nil
	}
	if loc == nil || loc == time.UTC || strings.HasPrefix(spec, "@every ") {
		return spec, nil
	}
	return "CRON_TZ=" + loc.String() + " " + spec, nil
}

// parseSpec parses a spec as the store keeps it.
func parseSpec(spec string) (cron.Schedule, error) {
	if d, ok := strings.CutPrefix(spec, "@every "); ok {
		every, err := time.ParseDuration(strings.TrimSpace(d))
		if err != nil || every < time.Second {
			return nil, &errandtype.InputError{Field: "spec", Message: fmt.Sprintf("%q: give @every a duration of at least a second, e.g. \"@every 1m\"", spec)}
		}
		// Stores keep fire times in microseconds: a tick between two
		// would be kept before itself, and found due again at once.
		if every%time.Microsecond != 0 {
			return nil, &errandtype.InputError{Field: "spec", Message: fmt.Sprintf("%q: give @every a whole number of microseconds, e.g. \"@every 1.5s\"", spec)}
		}
		return everySchedule(every), nil
	}
	s, err := specParser.Parse(spec)
	if err != nil {
		return nil, &errandtype.InputError{Field: "spec", Message: fmt.Sprintf("%q: %v; give a cron expression (\"0 9 * * *\", seconds optional), a descriptor (\"@hourly\") or \"@every 1m\"", spec, err)}
	}
	if cs, ok := s.(*cron.SpecSchedule); ok && cs.Location == time.Local {
		cs.Location = time.UTC // no zone named: UTC, whatever the host's
	}
	return withDST(s), nil // see schedule_dst.go
}

// everySchedule ticks at the multiples of its duration since the zero
// time, whoever asks and whenever.
type everySchedule time.Duration

func (e everySchedule) Next(t time.Time) time.Time {
	d := time.Duration(e)
	return t.Truncate(d).Add(d)
}

// scheduleStep is what a scheduler does with a schedule whose next fire
// time has come: advance it to To, and enqueue a job for Tick unless Skip.
type scheduleStep struct {
	Tick, To time.Time
	// CatchUp marks the job of missed ticks.
	CatchUp bool
	// Skip advances past missed ticks without a job.
	Skip bool
}

// planTick decides what to do about next, a schedule's stored next fire
// time, at now. due is false while next is ahead.
func planTick(ticks cron.Schedule, next, now time.Time, missed errandtype.MissedPolicy, grace time.Duration) (step scheduleStep, due bool, err error) {
	if next.After(now) {
		return scheduleStep{}, false, nil
	}
	if now.Sub(next) <= grace {
		to := ticks.Next(next)
		if to.IsZero() {
			return scheduleStep{}, true, errNoNextTick
		}
		return scheduleStep{Tick: next, To: to}, true, nil
	}
	// next is missed, and so may be ticks after it: go on with the first
	// tick that is not, which may be due already (late, within grace).
	to := ticks.Next(now.Add(-grace - time.Microsecond))
	if !to.After(next) {
		to = ticks.Next(next)
	}
	if to.IsZero() {
		return scheduleStep{}, true, errNoNextTick
	}
	return scheduleStep{Tick: next, To: to, CatchUp: missed == errandtype.MissedCatchUp, Skip: missed != errandtype.MissedCatchUp}, true, nil
}

var errNoNextTick = errors.New("the spec has no next tick")

// scheduler runs a Worker's schedules.
type scheduler struct {
	c         *engine
	store     errandstore.ScheduleStore
	schedules []*Schedule
	recs      map[string]*errandtype.ScheduleRecord // the stored state last seen
	specs     map[string]cron.Schedule              // parsed stored specs
}

func newScheduler(c *engine, schedules []*Schedule) (*scheduler, error) {
	ss := c.caps.schedules
	if ss == nil {
		return nil, &errandtype.InputError{Field: "Schedules", Message: fmt.Sprintf("the store (%T) keeps no schedules; use errand/sqlite or errand/postgres", c.store)}
	}
	seen := map[string]bool{}
	for _, s := range schedules {
		if s == nil {
			return nil, &errandtype.InputError{Field: "Schedules", Message: "holds a nil schedule; create each with errand.NewSchedule"}
		}
		if seen[s.name] {
			return nil, &errandtype.InputError{Field: "Schedules", Message: fmt.Sprintf("names %q twice; give each schedule its own name", s.name)}
		}
		seen[s.name] = true
		// The catch-up job too: another process may have stored the
		// catch-up policy.
		for _, catchUp := range []bool{false, true} {
			if _, err := c.scheduleJob(s, time.Time{}, catchUp); err != nil {
				return nil, fmt.Errorf("schedule %s: %w", s.name, err)
			}
		}
	}
	return &scheduler{c: c, store: ss, schedules: schedules, recs: map[string]*errandtype.ScheduleRecord{}, specs: map[string]cron.Schedule{}}, nil
}

// catchUpTag marks the job a schedule enqueues for its missed ticks.
const catchUpTag = "catch_up"

// scheduleJob returns the job of s's tick.
func (c *engine) scheduleJob(s *Schedule, tick time.Time, catchUp bool) (*errandstore.JobInsertParams, error) {
	o := *s.opts.Enqueue
	o.UniqueKey = ScheduleUniqueKey(s.name, tick)
	if catchUp && !slices.Contains(o.Tags, catchUpTag) {
		o.Tags = append(slices.Clip(o.Tags), catchUpTag)
	}
	return c.insertParam(&EnqueueParams{Args: s.args, Opts: &o})
}

// register records every schedule in the store, keeping the stored next
// fire time of a schedule whose spec has not changed.
func (sc *scheduler) register(ctx context.Context) error {
	now, err := sc.c.store.Now(ctx)
	if err != nil {
		return fmt.Errorf("register schedules: %w", err)
	}
	for _, s := range sc.schedules {
		if err := sc.registerAt(ctx, s, s.ticks.Next(now)); err != nil {
			return err
		}
	}
	return nil
}

// registerAt records s with next as its next fire time if it is new or its
// spec changed.
func (sc *scheduler) registerAt(ctx context.Context, s *Schedule, next time.Time) error {
	job, err := sc.c.scheduleJob(s, next, false)
	if err != nil {
		return fmt.Errorf("register schedule %s: %w", s.name, err)
	}
	r, err := sc.store.ScheduleUpsert(ctx, &errandstore.ScheduleUpsertParams{Name: s.name, Spec: s.spec, Kind: job.Kind,
		Queue: job.Queue, Missed: s.opts.Missed, NextFireAt: next})
	if err != nil {
		return fmt.Errorf("register schedule %s: %w", s.name, err)
	}
	sc.recs[s.name] = r
	return nil
}

// resync reads the stored state of the schedules again.
func (sc *scheduler) resync(ctx context.Context) error {
	rs, err := sc.store.ScheduleList(ctx, &errandstore.ScheduleListParams{})
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
func (sc *scheduler) ticksOf(spec string) (cron.Schedule, error) {
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

// fire fires every due tick of every schedule, and returns the earliest
// next fire time. A schedule that fails is logged and left for the next
// pass, and failed reports it. A schedule whose row was deleted is
// registered again.
func (sc *scheduler) fire(ctx context.Context) (next time.Time, failed bool, err error) {
	var earliest time.Time
	for _, s := range sc.schedules {
		err := sc.fireOne(ctx, s)
		if errors.Is(err, errandtype.ErrNotFound) {
			// Deleted (errand schedules delete, or by hand) while this
			// process still declares it: the declaration wins. Insert it
			// again from the tick it was about to fire.
			sc.c.logger.Warn("schedule was deleted but this worker still runs it: registering it again; remove it from the worker's schedules to stop it",
				"schedule", s.name)
			if err = sc.registerAt(ctx, s, sc.recs[s.name].NextFireAt); err == nil {
				err = sc.fireOne(ctx, s)
			}
		}
		if err != nil {
			if ctx.Err() != nil {
				return time.Time{}, false, ctx.Err()
			}
			failed = true
			sc.c.logger.Error("schedule failed", "schedule", s.name, "err", err)
		}
		if n := sc.recs[s.name].NextFireAt; earliest.IsZero() || n.Before(earliest) {
			earliest = n
		}
	}
	return earliest, failed, nil
}

// fireOne fires s's due ticks: the missed ones as its policy says, and
// each late or on-time one with a job of its own.
func (sc *scheduler) fireOne(ctx context.Context, s *Schedule) error {
	for {
		rec := sc.recs[s.name]
		ticks, err := sc.ticksOf(rec.Spec)
		if err != nil {
			return err
		}
		now, err := sc.c.store.Now(ctx)
		if err != nil {
			return err
		}
		step, due, err := planTick(ticks, rec.NextFireAt, now, missedOf(rec), s.opts.Grace)
		if err != nil || !due {
			return err
		}
		p := &errandstore.ScheduleAdvanceParams{Name: s.name, From: rec.NextFireAt, Spec: rec.Spec, To: step.To, Tick: step.Tick}
		if !step.Skip {
			if p.Job, err = sc.c.scheduleJob(s, step.Tick, step.CatchUp); err != nil {
				return err
			}
		}
		res, err := sc.store.ScheduleAdvance(ctx, p)
		if err != nil {
			return err
		}
		sc.recs[s.name] = res.Schedule
		switch {
		case !res.Advanced:
			// Another process fired it; go on from what it stored.
		case step.Skip:
			sc.c.logger.Info("skipped missed ticks", "schedule", s.name, "from", step.Tick, "next", step.To)
		case res.Job.Duplicate:
			sc.c.logger.Info("tick's job exists already", "schedule", s.name, "tick", step.Tick, "job_id", res.Job.Job.ID)
		default:
			sc.c.logger.Debug("enqueued scheduled job", "schedule", s.name, "tick", step.Tick, "job_id", res.Job.Job.ID, "catch_up", step.CatchUp)
			sc.c.wakeQueues(res.Job.Job.Queue)
		}
	}
}

// missedOf returns r's missed-tick policy, MissedSkip when it names none
// this errand knows.
func missedOf(r *errandtype.ScheduleRecord) errandtype.MissedPolicy {
	if r.Missed == errandtype.MissedCatchUp {
		return errandtype.MissedCatchUp
	}
	return errandtype.MissedSkip
}

// run registers the schedules and fires their ticks until ctx ends.
func (sc *scheduler) run(ctx context.Context) {
	retry := time.Second
	for ctx.Err() == nil {
		err := sc.register(ctx)
		if err == nil {
			break
		}
		sc.c.logger.Error("register schedules failed; retrying", "err", err, "in", retry)
		sleepCtx(ctx, sc.c.clock, retry)
		retry = min(2*retry, scheduleResync)
	}
	lastSync := sc.c.clock.Now()
	for ctx.Err() == nil {
		if sc.c.clock.Now().Sub(lastSync) >= scheduleResync {
			if err := sc.resync(ctx); err != nil && ctx.Err() == nil {
				sc.c.logger.Error("read schedules failed", "err", err)
			}
			lastSync = sc.c.clock.Now()
		}
		next, failed, err := sc.fire(ctx)
		if err != nil {
			return
		}
		wait := scheduleResync
		if now, err := sc.c.store.Now(ctx); err == nil {
			wait = min(max(next.Sub(now), 0), scheduleResync)
		}
		if failed {
			wait = max(wait, scheduleRetry) // not a busy loop against a failing store
		}
		if wait > 0 {
			sleepCtx(ctx, sc.c.clock, wait)
		}
	}
}

// Schedules returns the stored state of every schedule any process
// registered, ordered by name: spec, kind, queue, missed-tick policy, next
// fire time, last fire time and last job id. A schedule no running process
// registers any more stays listed, its UpdatedAt no longer moving. It is an
// error when the store keeps no schedules (is not a [ScheduleStore]).
func (c *Client[TTx]) Schedules(ctx context.Context) ([]*errandtype.ScheduleRecord, error) {
	ss := c.caps.schedules
	if ss == nil {
		return nil, fmt.Errorf("list schedules: the store (%T) keeps no schedules", c.store)
	}
	rs, err := ss.ScheduleList(ctx, &errandstore.ScheduleListParams{})
	if err != nil {
		return nil, err
	}
	return rs, nil
}

// DeleteScheduleOpts record who deletes a schedule and why. Both are
// required.
type DeleteScheduleOpts struct {
	Operator string
	Reason   string
}

// DeleteSchedule deletes the schedule name and records the operator, the
// reason and the schedule as it was in the audit ([AuditScheduleDelete]).
// Jobs it already enqueued stay. It returns the deleted schedule, or an
// error wrapping ErrNotFound.
//
// A schedule lives in the code of the workers that run it: a worker still
// running with the schedule in WorkerConfig.Schedules (or errand work
// --cron) registers it again when its next tick comes due, fires that
// tick, and goes on firing. Remove it from every worker's configuration first, then delete
// it.
func (c *Client[TTx]) DeleteSchedule(ctx context.Context, name string, opts *DeleteScheduleOpts) (*errandtype.ScheduleRecord, error) {
	if opts == nil {
		opts = &DeleteScheduleOpts{}
	}
	if err := errandstore.CheckOperatorAction(opts.Operator, opts.Reason, "deleting the schedule"); err != nil {
		return nil, err
	}
	ss := c.caps.schedules
	if ss == nil {
		return nil, fmt.Errorf("delete schedule: the store (%T) keeps no schedules", c.store)
	}
	r, err := ss.ScheduleDelete(ctx, &errandstore.ScheduleDeleteParams{Name: name, Operator: opts.Operator, Reason: opts.Reason})
	if err != nil {
		return nil, err
	}
	return r, nil
}

// ScheduleUniqueKey is the unique key of the job of schedule name's tick:
// "errand.cron:NAME:TICK", the tick in RFC 3339 UTC with its fraction of a
// second when it has one. The key, not leadership, is what keeps a tick
// from enqueueing twice.
func ScheduleUniqueKey(name string, tick time.Time) string {
	return "errand.cron:" + name + ":" + tick.UTC().Format(time.RFC3339Nano)
}
