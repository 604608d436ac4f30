package errand

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
	"github.com/errandhq/errand/internal/schedule"
)

// Recurring jobs. A [Schedule] names a spec (when) and args (what); a Worker
// given schedules ([WorkerConfig].Schedules) enqueues one job per tick, and
// exactly one across any number of processes: the store keeps each
// schedule's next fire time ([ScheduleStore]) and the tick's job its unique
// key ([ScheduleUniqueKey]). Ticks missed while no process ran a schedule
// follow its [MissedPolicy]. internal/schedule says how.

// DefaultScheduleGrace is how late a tick may be and still get its own job,
// unless a schedule sets its own Grace.
const DefaultScheduleGrace = 10 * time.Second

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
	ticks schedule.Ticks
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
	stored, ticks, err := schedule.Stored(spec, o.Location)
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
	return o, schedule.CheckLocation(o.Location)
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

// newScheduler returns the scheduler of a Worker of c with schedules.
func newScheduler(c *engine, schedules []*Schedule) (*schedule.Scheduler, error) {
	ss := c.caps.schedules
	if ss == nil {
		return nil, &errandtype.InputError{Field: "Schedules", Message: fmt.Sprintf("the store (%T) keeps no schedules; use errand/sqlite or errand/postgres", c.store)}
	}
	entries := make([]schedule.Entry, len(schedules))
	for i, s := range schedules {
		if s == nil {
			return nil, &errandtype.InputError{Field: "Schedules", Message: "holds a nil schedule; create each with errand.NewSchedule"}
		}
		entries[i] = schedule.Entry{Name: s.name, Spec: s.spec, Ticks: s.ticks, Missed: s.opts.Missed, Grace: s.opts.Grace,
			Job: func(tick time.Time, catchUp bool) (*errandstore.JobInsertParams, error) {
				return c.scheduleJob(s, tick, catchUp)
			}}
	}
	return schedule.New(schedule.Config{Store: ss, Now: c.store.Now, Clock: c.clock, Logger: c.logger,
		Wake: func(queue string) { c.wakeQueues(queue) }}, entries)
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
	return c.insertParam(context.Background(), &EnqueueParams{Args: s.args, Opts: &o}) // a tick is no request's: no trace
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
