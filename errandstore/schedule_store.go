package errandstore

import (
	"fmt"
	"time"

	"github.com/errandhq/errand/errandtype"
)

// ScheduleUpsertParams register a schedule (see [ScheduleStore]).
type ScheduleUpsertParams struct {
	Name   string
	Spec   string
	Kind   string
	Queue  string
	Missed errandtype.MissedPolicy
	// NextFireAt is the first tick of a new schedule, or of one whose spec
	// changed.
	NextFireAt time.Time
}

// Validate checks the parameters of ScheduleUpsert.
func (p *ScheduleUpsertParams) Validate() error {
	if err := CheckName("schedule name", p.Name); err != nil {
		return err
	}
	if p.Spec == "" || len(p.Spec) > MaxSpecBytes {
		return &errandtype.InputError{Field: "spec", Message: fmt.Sprintf("must be 1 to %d bytes, e.g. \"@every 1m\"", MaxSpecBytes)}
	}
	if err := checkText("spec", p.Spec); err != nil {
		return err
	}
	if err := CheckName("kind", p.Kind); err != nil {
		return err
	}
	if err := CheckName("queue", p.Queue); err != nil {
		return err
	}
	if err := p.Missed.Validate(); err != nil {
		return err
	}
	return checkScheduleTime("next fire time", p.NextFireAt)
}

func checkScheduleTime(field string, t time.Time) error {
	if t.Before(errandtype.MinRunAt) || t.After(errandtype.MaxRunAt) {
		return &errandtype.InputError{Field: field, Message: fmt.Sprintf("%s is outside the years 1 to 9999", t.Format(time.RFC3339))}
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
	// [github.com/errandhq/errand.ScheduleUniqueKey]); nil advances without
	// enqueueing (skipped ticks).
	Job *JobInsertParams
}

// Validate checks the parameters of ScheduleAdvance.
func (p *ScheduleAdvanceParams) Validate() error {
	if err := CheckName("schedule name", p.Name); err != nil {
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
		return &errandtype.InputError{Field: "to", Message: fmt.Sprintf("%s is not after from %s; a schedule only moves forward", p.To.Format(time.RFC3339Nano), p.From.Format(time.RFC3339Nano))}
	}
	if p.Job != nil {
		if p.Job.UniqueKey == "" {
			return &errandtype.InputError{Field: "job", Message: "has no unique key; give it ScheduleUniqueKey(name, tick)"}
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
	Schedule *errandtype.ScheduleRecord
	// Job is the job inserted, or the one holding its unique key, when
	// Advanced with a Job.
	Job *JobInsertResult
}

// ScheduleListParams ask for every schedule. It has no fields yet.
type ScheduleListParams struct{}
