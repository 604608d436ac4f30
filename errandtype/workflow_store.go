package errandtype

import (
	"encoding/json"
	"slices"
	"time"
)

// WorkflowState is where a workflow is.
type WorkflowState string

const (
	// WorkflowRunning: no step has failed; steps run as their dependencies
	// succeed.
	WorkflowRunning WorkflowState = "running"
	// WorkflowCompensating: a step ended dead or cancelled. No new step
	// starts; once the steps in flight finish, the compensations of the
	// steps that succeeded run one at a time, in reverse order of the
	// steps' declaration. A dead compensation holds the workflow here
	// until it is replayed.
	WorkflowCompensating WorkflowState = "compensating"
	// WorkflowSucceeded is final: every step succeeded.
	WorkflowSucceeded WorkflowState = "succeeded"
	// WorkflowFailed is final: a step failed and every compensation has
	// succeeded. When it had nothing to undo, a replay of the failed step
	// resumes it (it is running again); once it compensated, rerun it
	// instead (see [github.com/errandhq/errand.Client.RerunWorkflow]).
	WorkflowFailed WorkflowState = "failed"
)

// WorkflowStates lists every workflow state.
var WorkflowStates = []WorkflowState{WorkflowRunning, WorkflowCompensating, WorkflowSucceeded, WorkflowFailed}

// Open reports whether the workflow may still enqueue jobs on its own.
func (s WorkflowState) Open() bool { return s == WorkflowRunning || s == WorkflowCompensating }

// Valid reports whether s is a workflow state.
func (s WorkflowState) Valid() bool { return slices.Contains(WorkflowStates, s) }

// Workflow is a workflow as operators see it: its state and each step's.
type Workflow struct {
	ID    string        `json:"id"`
	Name  string        `json:"name"`
	State WorkflowState `json:"state"`
	// FailedStep is the step whose failure stopped the workflow, nil while
	// none has.
	FailedStep *string            `json:"failed_step"`
	Steps      []WorkflowStepView `json:"steps"`
	CreatedAt  time.Time          `json:"created_at"`
	UpdatedAt  time.Time          `json:"updated_at"`
	FinishedAt *time.Time         `json:"finished_at"`
	// CompensationStartedAt is when the workflow enqueued its first
	// compensation, nil before: from then on its steps are not replayed,
	// and a rerun is the way forward.
	CompensationStartedAt *time.Time `json:"compensation_started_at"`
	// RerunOf is the workflow this one reruns, RerunAs the one that reruns
	// this one; nil for none.
	RerunOf *string `json:"rerun_of"`
	RerunAs *string `json:"rerun_as"`
}

// WorkflowStepView is one step of a [Workflow].
type WorkflowStepView struct {
	Name      string   `json:"name"`
	DependsOn []string `json:"depends_on"`
	Kind      string   `json:"kind"`
	// JobID is the step's job id
	// ([github.com/errandhq/errand/errandstore.WorkflowStepJobID]), whether
	// or not it was enqueued yet.
	JobID string `json:"job_id"`
	// State is the job's state; nil before it is enqueued, or when it was
	// enqueued and has since been deleted (Enqueued tells which).
	State    *JobState `json:"state"`
	Enqueued bool      `json:"enqueued"`
	Attempts int       `json:"attempts"`
	// MaxAttempts is the job's attempt budget; before the job is
	// enqueued, the one it will be enqueued with.
	MaxAttempts int `json:"max_attempts"`
	// Output is the step's recorded output, nil for none.
	Output json.RawMessage `json:"output"`
	// LastError is the last failure of the step's job (why a dead step
	// died), nil for none.
	LastError *LastError `json:"last_error"`
	// Compensation is the step's compensation, nil for a step without one.
	Compensation *WorkflowCompensationView `json:"compensation"`
}

// WorkflowCompensationView is a step's compensation in a [Workflow].
type WorkflowCompensationView struct {
	Kind  string `json:"kind"`
	JobID string `json:"job_id"`
	// State is the compensation job's state; nil while it was never
	// enqueued.
	State    *JobState `json:"state"`
	Enqueued bool      `json:"enqueued"`
	Attempts int       `json:"attempts"`
	// LastError is the compensation job's last failure, nil for none.
	LastError *LastError `json:"last_error"`
}
