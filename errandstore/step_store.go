package errandstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/errandhq/errand/errandtype"
)

// StepStore keeps the steps of durable handlers (errand.Step): per job, an
// ordered list that grows while an attempt holds the job's lease.
//
// Steps belong to one job record: a job deleted (pruned, or on success)
// takes its steps with it, and a later job with the same id starts with
// none. A replay that clears the job's progress ([JobReplayParams]) clears
// its steps too.
type StepStore interface {
	// JobStepRecord appends the step to the job, fenced by the lease
	// token: ErrLeaseLost, with nothing written, when the lease is gone. A
	// step already recorded at Step.Index is ErrStepRecorded, and the
	// recorded one stays. The store sets the step's Attempt and At.
	JobStepRecord(ctx context.Context, params *JobStepRecordParams) error

	// JobSteps returns the job's recorded steps in order, none for a job
	// without them; ErrNotFound for an unknown job.
	JobSteps(ctx context.Context, params *JobStepsParams) ([]errandtype.Step, error)
}

// ErrStepRecorded reports a step whose place in its job's order is taken.
var ErrStepRecorded = errors.New("a step is already recorded at this index")

// MaxJobStepNameBytes bounds the name of a durable handler's step.
const MaxJobStepNameBytes = 200

// JobStepRecordParams records one step.
type JobStepRecordParams struct {
	JobLease
	Step errandtype.Step
}

// JobStepsParams names the job whose steps to read.
type JobStepsParams struct {
	ID string
}

// Validate checks the lease, a name every store keeps, an index from 0,
// and either a result of valid JSON no larger than args may be or an
// error message.
func (p *JobStepRecordParams) Validate() error {
	if err := CheckLeaseText(p.ID, p.LeaseToken); err != nil {
		return err
	}
	s := &p.Step
	if s.Index < 0 {
		return &errandtype.InputError{Field: "step index", Message: fmt.Sprintf("is %d; steps count from 0", s.Index)}
	}
	if err := CheckJobStepName(s.Name); err != nil {
		return err
	}
	if s.Error != "" {
		if len(s.Result) != 0 {
			return &errandtype.InputError{Field: "step result", Message: "is set beside an error; a step records one or the other"}
		}
		if len(s.Error) > MaxMessageBytes {
			return &errandtype.InputError{Field: "step error", Message: fmt.Sprintf("is %d bytes; keep it under %d (errand.CleanText cuts it)", len(s.Error), MaxMessageBytes)}
		}
		return checkText("step error", s.Error)
	}
	if !json.Valid(s.Result) {
		return &errandtype.InputError{Field: "step result", Message: "is not valid JSON"}
	}
	if len(s.Result) > MaxArgsBytes {
		return &errandtype.InputError{Field: "step result", Message: fmt.Sprintf("is %d bytes; keep a step's result under %d bytes and put larger data elsewhere, keyed by the job", len(s.Result), MaxArgsBytes)}
	}
	_, err := checkJSONText("step result", s.Result, MaxArgsBytes)
	return err
}

// CheckJobStepName refuses a step name that is empty, too long, or text a
// store cannot keep.
func CheckJobStepName(name string) error {
	if name == "" {
		return &errandtype.InputError{Field: "step name", Message: "is empty; name each step"}
	}
	if len(name) > MaxJobStepNameBytes {
		return &errandtype.InputError{Field: "step name", Message: fmt.Sprintf("is %d bytes; keep it under %d", len(name), MaxJobStepNameBytes)}
	}
	return checkText("step name", name)
}

// StepWritten is JobStepRecord's answer from what its write found: whether
// the lease's fence held, and whether the step was written.
func StepWritten(owned, written bool) error {
	switch {
	case !owned:
		return errandtype.ErrLeaseLost
	case !written:
		return ErrStepRecorded
	}
	return nil
}

// ReadSteps gathers a job's steps from the rows of the job joined to its
// steps in order, as both stores read them: next scans the next row into a
// step, ok false after the last; a row of the job without a step has Index
// -1. No row at all is an unknown job, ErrNotFound.
func ReadSteps(next func() (st errandtype.Step, ok bool, err error)) ([]errandtype.Step, error) {
	found, steps := false, []errandtype.Step{}
	for {
		st, ok, err := next()
		if err != nil {
			return nil, err
		}
		if !ok {
			break
		}
		found = true
		if st.Index >= 0 {
			steps = append(steps, st)
		}
	}
	if !found {
		return nil, errandtype.ErrNotFound
	}
	return steps, nil
}
