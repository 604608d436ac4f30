// Package workflowjson is the JSON form of a workflow to enqueue, which
// POST /api/v1/workflows and errand workflow enqueue --file both take:
//
//	{"id": "order-7", "name": "checkout", "steps": [
//	  {"name": "charge", "kind": "charge_card", "args": {"order": 7},
//	   "compensate": {"kind": "refund_card", "args": {"order": 7}}},
//	  {"name": "ship", "kind": "ship_order", "depends_on": ["charge"],
//	   "queue": "shipping", "max_attempts": 5}
//	]}
//
// A step's job fields, and its compensation's, are those of
// POST /api/v1/jobs that a workflow's job may have: no id, run_at or unique
// key, since a workflow's jobs have fixed ids and run when their
// dependencies succeed.
package workflowjson

import (
	"fmt"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
	"github.com/errandhq/errand/internal/jobjson"
)

// Request is a workflow to enqueue.
type Request struct {
	// ID is the workflow's id; empty means a new one. A duplicate id
	// returns the existing workflow and enqueues nothing, unless the
	// workflow differs from this one: that is an
	// *errand.IDConflictError, unless FirstWins.
	ID string `json:"id"`
	// FirstWins returns the existing workflow of a duplicate id even when
	// it differs (errand.WorkflowOpts.FirstWins).
	FirstWins bool `json:"first_wins"`
	// Name is a label for operators; optional.
	Name  string `json:"name"`
	Steps []Step `json:"steps"`
}

// Step is one step: its name, the steps it depends on, its job and the
// job that compensates it.
type Step struct {
	Name      string   `json:"name"`
	DependsOn []string `json:"depends_on"`
	Job
	// Compensate is the job that undoes the step; null for none.
	Compensate *Job `json:"compensate"`
}

// Job is a step's job or a compensation: the job fields of
// POST /api/v1/jobs that a workflow's job may have. Its args must be a JSON
// object (errand sets its field "workflow"); null or absent means {}.
type Job = jobjson.Job

// Workflow returns the steps and options of errand.Client.EnqueueWorkflow.
// A missing kind or args that are not a JSON object is an
// *errandtype.InputError naming the step; the client checks the rest.
func (r *Request) Workflow() ([]errand.WorkflowStep, *errand.WorkflowOpts, error) {
	if len(r.Steps) == 0 {
		return nil, nil, &errandtype.InputError{Field: "steps", Message: fmt.Sprintf("are missing; give 1 to %d steps, each {\"name\", \"kind\", \"args\", \"depends_on\", \"compensate\"}", errandstore.MaxWorkflowSteps)}
	}
	steps := make([]errand.WorkflowStep, len(r.Steps))
	for i := range r.Steps {
		s := &r.Steps[i]
		field := fmt.Sprintf("steps[%d]", i)
		if s.Name != "" {
			field = fmt.Sprintf("steps[%d] (%s)", i, s.Name)
		}
		args, opts, err := jobParams(&s.Job, field)
		if err != nil {
			return nil, nil, err
		}
		steps[i] = errand.WorkflowStep{Name: s.Name, DependsOn: s.DependsOn, Args: args, Opts: opts}
		if s.Compensate != nil {
			if steps[i].Compensate, steps[i].CompensateOpts, err = jobParams(s.Compensate, field+".compensate"); err != nil {
				return nil, nil, err
			}
		}
	}
	return steps, &errand.WorkflowOpts{ID: r.ID, Name: r.Name, FirstWins: r.FirstWins}, nil
}

// jobParams returns the args and options of a step's job or compensation;
// field names it in errors.
func jobParams(j *Job, field string) (errand.RawArgs, *errand.EnqueueOpts, error) {
	return j.Params(field, "name the job's kind, e.g. \"charge_card\"", "errand sets its field \"workflow\"")
}
