package errand

import (
	"fmt"
	"time"
)

// MissedPolicy says what a schedule does with ticks that passed while no
// process ran it (see [ScheduleOpts].Grace for when a tick counts as
// missed).
type MissedPolicy string

const (
	// MissedSkip drops missed ticks: the schedule fires again at its next
	// tick that is not missed. The default.
	MissedSkip MissedPolicy = "skip"
	// MissedCatchUp enqueues one job for all the ticks missed in a row,
	// keyed by the first of them, then goes on with the next tick that is
	// not missed.
	MissedCatchUp MissedPolicy = "catch_up"
)

// ScheduleRecord is the stored state of one schedule, as [Client.Schedules]
// and errand schedules show it.
type ScheduleRecord struct {
	// Name identifies the schedule across processes and restarts.
	Name string `json:"name"`
	// Spec is the schedule's spec as registered, with its time zone as a
	// CRON_TZ= prefix when it has one: the spec that decides its ticks.
	Spec string `json:"spec"`
	// Kind and Queue are those of the jobs it enqueues.
	Kind  string `json:"kind"`
	Queue string `json:"queue"`
	// Missed is its missed-tick policy.
	Missed MissedPolicy `json:"missed"`
	// NextFireAt is its next tick: the next job is enqueued then.
	NextFireAt time.Time `json:"next_fire_at"`
	// LastFireAt is the tick of its last job; nil before the first.
	LastFireAt *time.Time `json:"last_fire_at"`
	// LastJobID is the id of its last job; nil before the first.
	LastJobID *string   `json:"last_job_id"`
	CreatedAt time.Time `json:"created_at"`
	// UpdatedAt is when it was last registered or advanced: a schedule
	// that no running process registers any more stops advancing.
	UpdatedAt time.Time `json:"updated_at"`
}

// ScheduleUpsertParams register a schedule (see [ScheduleStore]).
type ScheduleUpsertParams struct {
	Name   string
	Spec   string
	Kind   string
	Queue  string
	Missed MissedPolicy
	// NextFireAt is the first tick of a new schedule, or of one whose spec
	// changed.
	NextFireAt time.Time
}

// Validate checks the parameters of ScheduleUpsert.
func (p *ScheduleUpsertParams) Validate() error {
	if err := checkName("schedule name", p.Name); err != nil {
		return err
	}
	if p.Spec == "" || len(p.Spec) > maxSpecBytes {
		return &InputError{Field: "spec", Message: fmt.Sprintf("must be 1 to %d bytes, e.g. \"@every 1m\"", maxSpecBytes)}
	}
	if err := checkText("spec", p.Spec); err != nil {
		return err
	}
	if err := checkName("kind", p.Kind); err != nil {
		return err
	}
	if err := checkName("queue", p.Queue); err != nil {
		return err
	}
	if err := p.Missed.validate(); err != nil {
		return err
	}
	return checkScheduleTime("next fire time", p.NextFireAt)
}

func (m MissedPolicy) validate() error {
	if m != MissedSkip && m != MissedCatchUp {
		return &InputError{Field: "missed", Message: fmt.Sprintf("%q is not a missed-tick policy; use %q or %q", m, MissedSkip, MissedCatchUp)}
	}
	return nil
}

func checkScheduleTime(field string, t time.Time) error {
	if t.Before(minRunAt) || t.After(maxRunAt) {
		return &InputError{Field: field, Message: fmt.Sprintf("%s is outside the years 1 to 9999", t.Format(time.RFC3339))}
	}
	return nil
}

// ScheduleAdvanceParams move a schedule past a tick (see [ScheduleStore]).
type ScheduleAdvanceParams struct {
	Name string
	// From is the next_fire_at the caller read; To the one it writes.
	From, To time.Time
	// Spec, when not empty, is the stored spec the caller computed To
	// from: the schedule moves only while it is still the stored one, so
	// that a process that has not yet read a newer spec (a rolling deploy)
	// cannot write a next fire time of the old one.
	Spec string
	// Tick is the tick Job stands for: last_fire_at when Job is inserted.
	Tick time.Time
	// Job is the tick's job, with the tick's unique key (see
	// [ScheduleUniqueKey]); nil advances without enqueueing (skipped
	// ticks).
	Job *JobInsertParams
}

// Validate checks the parameters of ScheduleAdvance.
func (p *ScheduleAdvanceParams) Validate() error {
	if err := checkName("schedule name", p.Name); err != nil {
		return err
	}
	if err := checkScheduleTime("to", p.To); err != nil {
		return err
	}
	if err := checkScheduleTime("from", p.From); err != nil {
		return err
	}
	if !p.Tick.IsZero() {
		if err := checkScheduleTime("tick", p.Tick); err != nil {
			return err
		}
	}
	if p.Spec != "" {
		if err := checkText("spec", p.Spec); err != nil {
			return err
		}
	}
	if !p.To.After(p.From) {
		return &InputError{Field: "to", Message: fmt.Sprintf("%s is not after from %s; a schedule only moves forward", p.To.Format(time.RFC3339Nano), p.From.Format(time.RFC3339Nano))}
	}
	if p.Job != nil {
		if p.Job.UniqueKey == "" {
			return &InputError{Field: "job", Message: "has no unique key; give it ScheduleUniqueKey(name, tick)"}
		}
		return p.Job.Validate()
	}
	return nil
}

// ScheduleAdvanceResult is what ScheduleAdvance did.
type ScheduleAdvanceResult struct {
	// Advanced reports that this call moved the schedule; false means
	// another process had moved it first, and nothing was written.
	Advanced bool
	// Schedule is the schedule after the call.
	Schedule *ScheduleRecord
	// Job is the job inserted, or the one holding its unique key, when
	// Advanced with a Job.
	Job *JobInsertResult
}

// ScheduleListParams ask for every schedule. It has no fields yet.
type ScheduleListParams struct{}

// ScheduleUniqueKey is the unique key of the job of schedule name's tick:
// "errand.cron:NAME:TICK", the tick in RFC 3339 UTC with its fraction of a
// second when it has one. The key, not leadership, is what keeps a tick
// from enqueueing twice.
func ScheduleUniqueKey(name string, tick time.Time) string {
	return "errand.cron:" + name + ":" + tick.UTC().Format(time.RFC3339Nano)
}
