package errandstore

import (
	"fmt"
	"strings"

	"github.com/errandhq/errand/errandtype"
)

// WorkflowCompensatedError reports a replay of a workflow's step refused
// because its workflow has begun compensating, or was rerun: resumed, the
// workflow would run on over undone steps. It is an [ErrWorkflowCompensated]
// and an [errandtype.ErrWrongState], and unwraps to the *StateError older callers
// match, its Reason this error's advice.
type WorkflowCompensatedError struct {
	JobID         string
	JobState      errandtype.JobState
	WorkflowID    string
	WorkflowState errandtype.WorkflowState
	// Undone names the steps whose compensation has been enqueued, in the
	// order they were.
	Undone []string
	// RerunAs is the workflow it was rerun as, or "".
	RerunAs string
	// DeadCompensation is the job id of a dead compensation that holds
	// the workflow, when the caller looked; "" otherwise.
	DeadCompensation string
}

func (e *WorkflowCompensatedError) Error() string {
	return fmt.Sprintf("job is %s; %s", e.JobState, e.reason())
}

// reason says why the step is not replayed and what to do instead.
func (e *WorkflowCompensatedError) reason() string {
	if e.RerunAs != "" {
		return fmt.Sprintf("its workflow %s was rerun as %s: see errand workflow %s", e.WorkflowID, e.RerunAs, e.RerunAs)
	}
	undone := strings.Join(e.Undone, ", ")
	if e.WorkflowState.Open() {
		s := fmt.Sprintf("its workflow %s is compensating (undoing %s), and a replay would resume it over undone steps; once it has failed, rerun it as a new workflow: errand workflow rerun %s",
			e.WorkflowID, undone, e.WorkflowID)
		if e.DeadCompensation != "" {
			s += fmt.Sprintf(" (compensation %s is dead and holds it: replay that first)", e.DeadCompensation)
		}
		return s
	}
	return fmt.Sprintf("its workflow %s compensated (undid %s), and a replay would resume it over undone steps; rerun it as a new workflow: errand workflow rerun %s",
		e.WorkflowID, undone, e.WorkflowID)
}

// Is makes errors.Is(err, ErrWorkflowCompensated) and errors.Is(err,
// ErrWrongState) true.
func (e *WorkflowCompensatedError) Is(target error) bool {
	return target == ErrWorkflowCompensated || target == errandtype.ErrWrongState
}

// Unwrap returns the refusal as a *StateError with Reason set.
func (e *WorkflowCompensatedError) Unwrap() error {
	return &errandtype.StateError{Op: "replay", ID: e.JobID, State: e.JobState, Allowed: ReplayableStates, Reason: e.reason()}
}

// WorkflowStateError reports an operation on a workflow that its state
// forbids, and what to do instead. It is an [errandtype.ErrWrongState].
type WorkflowStateError struct {
	Op     string
	ID     string
	State  errandtype.WorkflowState
	Reason string
}

func (e *WorkflowStateError) Error() string {
	return fmt.Sprintf("workflow is %s; %s", e.State, e.Reason)
}

// Is makes errors.Is(err, ErrWrongState) true.
func (e *WorkflowStateError) Is(target error) bool { return target == errandtype.ErrWrongState }

// CheckReplayInWorkflow returns nil when step job id, in state st, of
// workflow w (its row as read, locked against an advance, in the replay's
// transaction) may be replayed, and otherwise the
// *WorkflowCompensatedError a store returns, having written nothing: once
// the workflow has enqueued a compensation, or was rerun, its steps are not
// replayed.
func CheckReplayInWorkflow(id string, st errandtype.JobState, w *WorkflowRecord) error {
	if w.CompensationStartedAt == nil && w.RerunAs == nil {
		return nil
	}
	e := &WorkflowCompensatedError{JobID: id, JobState: st, WorkflowID: w.ID, WorkflowState: w.State,
		Undone: compensationsEnqueued(w.ID, w.Enqueued)}
	if w.RerunAs != nil {
		e.RerunAs = *w.RerunAs
	}
	return e
}

// WorkflowRefusesReplaySQL renders, for the workflows row aliased alias,
// the SQL condition under which [CheckReplayInWorkflow] refuses a replay
// of its steps, so that a bulk replay leaves them out.
func WorkflowRefusesReplaySQL(alias string) string {
	return `(` + alias + `.compensation_started_at IS NOT NULL OR ` + alias + `.rerun_as IS NOT NULL)`
}

// compensationsEnqueued names, in order, the steps of workflow id whose
// compensation is among enqueued, the ids of its jobs.
func compensationsEnqueued(id string, enqueued []string) []string {
	var out []string
	for _, j := range enqueued {
		if name, ok := strings.CutPrefix(j, id+workflowUndoInfix); ok {
			out = append(out, name)
		}
	}
	return out
}

// WorkflowRerunParams name a finished workflow to run again as a new one
// (see [WorkflowStore]).
type WorkflowRerunParams struct {
	// ID is the workflow to rerun.
	ID string
	// NewID is the new workflow's id.
	NewID string
}

// Validate checks the parameters of WorkflowRerun.
func (p *WorkflowRerunParams) Validate() error {
	if err := checkID("workflow id", p.ID, MaxWorkflowIDBytes); err != nil {
		return err
	}
	if err := checkID("new workflow id", p.NewID, MaxWorkflowIDBytes); err != nil {
		return err
	}
	if p.NewID == p.ID {
		return &errandtype.InputError{Field: "new workflow id", Message: "is the workflow's own; give the rerun another id, or none for a generated one"}
	}
	return nil
}

// PlanWorkflowRerun decides a rerun of old, its row as read (locked) in the
// rerun's transaction, as newID. It returns the new workflow's insert
// parameters (old's name and steps, RerunOf old's id), or again set when
// old was rerun as newID already: a retried rerun, which inserts nothing
// and returns that workflow as a duplicate. An open workflow, or one rerun
// as another, is a *WorkflowStateError.
func PlanWorkflowRerun(old *WorkflowRecord, newID string) (p *WorkflowInsertParams, again bool, err error) {
	switch {
	case old.RerunAs != nil && *old.RerunAs == newID:
		return nil, true, nil
	case old.RerunAs != nil:
		return nil, false, &WorkflowStateError{Op: "rerun", ID: old.ID, State: old.State,
			Reason: fmt.Sprintf("it was rerun as %s already: rerun %s instead once it has finished", *old.RerunAs, *old.RerunAs)}
	case old.State.Open():
		return nil, false, &WorkflowStateError{Op: "rerun", ID: old.ID, State: old.State,
			Reason: "only a finished (succeeded or failed) workflow is rerun: wait until it has finished"}
	}
	p = &WorkflowInsertParams{ID: newID, Name: old.Name, Steps: old.Steps, RerunOf: old.ID}
	if err := p.Validate(); err != nil {
		return nil, false, err
	}
	return p, false, nil
}

// RerunIDTakenError is the *InputError of a rerun whose new id another
// workflow has.
func RerunIDTakenError(newID string) error {
	return &errandtype.InputError{Field: "new workflow id", Message: fmt.Sprintf("%q is another workflow's; give the rerun another id, or none for a generated one", newID)}
}
