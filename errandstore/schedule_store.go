package errandstore

import (
	"encoding/json"
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

// DeleteSchedule deletes the schedule p names in one transaction, which
// inTx runs: del deletes its row and returns it, or ErrNotFound, and audit
// records the deletion with its details.
func DeleteSchedule[Tx any](p *ScheduleDeleteParams, inTx func(fn func(tx Tx) error) error,
	del func(tx Tx) (*errandtype.ScheduleRecord, error), audit func(tx Tx, details json.RawMessage) error) (*errandtype.ScheduleRecord, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	var r *errandtype.ScheduleRecord
	err := inTx(func(tx Tx) error {
		var err error
		if r, err = del(tx); err != nil {
			return err
		}
		return audit(tx, ScheduleDeleteDetails(r))
	})
	if err != nil {
		return nil, fmt.Errorf("delete schedule %s: %w", p.Name, err)
	}
	return r, nil
}

// ScheduleAdvanceSteps are the statements of a schedule's advance, run in
// one transaction of type Tx.
type ScheduleAdvanceSteps[Tx any] struct {
	// Advance moves next_fire_at from p.From to p.To (where the spec is
	// p.Spec, if given) and returns the row, or nil when it did not move.
	Advance func(tx Tx) (*errandtype.ScheduleRecord, error)
	// Read reads the schedule; ErrNotFound when there is none.
	Read func(tx Tx) (*errandtype.ScheduleRecord, error)
	// Insert enqueues the fire's job.
	Insert func(tx Tx, p *JobInsertParams) (JobInsertResult, error)
	// Fired records the fire's tick and job id, and returns the row.
	Fired func(tx Tx, jobID string) (*errandtype.ScheduleRecord, error)
}

// AdvanceSchedule advances the schedule of p with s, in one transaction
// which inTx runs: a schedule another process moved first is read and
// left alone; one this call moves enqueues p.Job, if any, and records it.
func AdvanceSchedule[Tx any](p *ScheduleAdvanceParams, inTx func(fn func(tx Tx) error) error, s ScheduleAdvanceSteps[Tx]) (*ScheduleAdvanceResult, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	res := &ScheduleAdvanceResult{}
	err := inTx(func(tx Tx) error {
		r, err := s.Advance(tx)
		if err != nil {
			return err
		}
		if r == nil {
			res.Schedule, err = s.Read(tx)
			return err
		}
		res.Advanced, res.Schedule = true, r
		if p.Job == nil {
			return nil
		}
		j, err := s.Insert(tx, p.Job)
		if err != nil {
			return err
		}
		res.Job = &j
		res.Schedule, err = s.Fired(tx, j.Job.ID)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("advance schedule %s: %w", p.Name, err)
	}
	return res, nil
}
