package errandhttp

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
	"github.com/errandhq/errand/internal/workflowview"
)

// workflowResponse is the answer to POST /api/v1/workflows.
type workflowResponse struct {
	Workflow *workflowview.Shown `json:"workflow"`
	// Jobs are the jobs enqueued with it, its first steps; [] when
	// Duplicate.
	Jobs []*errandtype.Job `json:"jobs"`
	// Duplicate: a workflow with this id (or Idempotency-Key) existed;
	// Workflow is that workflow and nothing was enqueued.
	Duplicate bool `json:"duplicate"`
}

// enqueueWorkflow serves POST /api/v1/workflows: a workflow from any
// language, in the JSON form of [WorkflowRequest]. Kinds need no Go
// handler on the server, as for POST /api/v1/jobs. An Idempotency-Key
// header becomes the workflow's id; reused for a different workflow it is
// answered 409 idempotency_conflict (an id in the body, 409 id_conflict),
// as on POST /api/v1/jobs.
func (a *api[TTx]) enqueueWorkflow(w http.ResponseWriter, r *http.Request, req *WorkflowRequest) error {
	key, err := idempotencyKey(r, &req.ID, "workflow")
	if err != nil {
		return err
	}
	steps, opts, err := req.Workflow()
	if err != nil {
		return err
	}
	res, err := a.c.EnqueueWorkflow(enqueueContext(r), steps, opts)
	err = keyConflict(keyError(err, key), key)
	if ie := (*errandtype.InputError)(nil); errors.As(err, &ie) {
		// The whole message: it names the step (and compensation) whose
		// field is wrong.
		return badRequest("%s", err)
	}
	if err != nil {
		return err
	}
	writeJSON(w, enqueueStatus(w, res.Duplicate, key), workflowResponse{Workflow: a.showWorkflow(res.Workflow), Jobs: a.showJobs(res.Jobs), Duplicate: res.Duplicate})
	return nil
}

// workflow serves GET /api/v1/workflows/{id}: the workflow of errand
// workflow --json, with its steps' current states.
func (a *api[TTx]) workflow(w http.ResponseWriter, r *http.Request) error {
	if err := checkQuery(r.URL.Query()); err != nil {
		return err
	}
	id := r.PathValue("id")
	wf, err := a.c.Workflow(r.Context(), id)
	if err != nil {
		return notFound(err, "no workflow with id "+strconv.Quote(id))
	}
	return reply(w, a.showWorkflow(wf))
}

// workflows serves GET /api/v1/workflows?state=&limit=: workflows, newest
// first, as {"workflows": [...]}.
func (a *api[TTx]) workflows(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	if err := checkQuery(q, "state", "limit", "cursor"); err != nil {
		return err
	}
	p := &errandstore.WorkflowListParams{}
	for _, v := range q["state"] {
		for _, s := range strings.Split(v, ",") {
			if s = strings.TrimSpace(s); s == "" {
				continue
			}
			st := errandtype.WorkflowState(s)
			if !st.Valid() {
				return badRequest("state %q is not a workflow state; use one of %s", s, joinWorkflowStates())
			}
			p.States = append(p.States, st)
		}
	}
	var err error
	if p.Limit, err = queryLimit(q, DefaultListLimit, MaxListLimit); err != nil {
		return err
	}
	if p.Before, err = queryListCursor(q); err != nil {
		return err
	}
	ws, err := a.c.Workflows(r.Context(), p)
	if err != nil {
		return err
	}
	out := make([]*workflowview.Shown, len(ws))
	for i, wf := range ws {
		out[i] = a.showWorkflow(wf)
	}
	var next *string
	if len(ws) == p.Limit {
		last := ws[len(ws)-1]
		next = nextCursor(last.CreatedAt, last.ID)
	}
	return reply(w, map[string]any{"workflows": out, "next_cursor": next})
}

// showWorkflow prepares a workflow for a reader: what happens next, and
// its steps' outputs, drawn from the jobs' data as progress is, hidden
// when args are.
func (a *api[TTx]) showWorkflow(wf *errandtype.Workflow) *workflowview.Shown {
	if !a.hideArgs || wf == nil {
		return workflowview.Show(wf)
	}
	c := *wf
	c.Steps = make([]errandtype.WorkflowStepView, len(wf.Steps))
	for i, s := range wf.Steps {
		s.Output = nil
		c.Steps[i] = s
	}
	return workflowview.Show(&c)
}

// rerunRequest is the body of POST /api/v1/workflows/{id}/rerun.
type rerunRequest struct {
	// ID, when given, is the new workflow's id; otherwise one is
	// generated. Sent again, it answers the same workflow.
	ID string `json:"id"`
}

// rerunWorkflow serves POST /api/v1/workflows/{id}/rerun: a finished
// workflow runs again as a new one (errand.Client.RerunWorkflow), answered
// as POST /api/v1/workflows is: 201 with the new workflow and its first
// jobs, 200 with "duplicate" when it was rerun as this id already. An open
// workflow is 409 wrong_state.
func (a *api[TTx]) rerunWorkflow(w http.ResponseWriter, r *http.Request, req *rerunRequest) error {
	id := r.PathValue("id")
	res, err := a.c.RerunWorkflow(r.Context(), id, &errand.WorkflowRerunOpts{ID: req.ID})
	if err != nil {
		return notFound(err, "no workflow with id "+strconv.Quote(id))
	}
	operator, _ := Identity(r)
	a.log.Info("workflow rerun", "workflow_id", id, "rerun_as", res.Workflow.ID, "operator", operator, "duplicate", res.Duplicate)
	status := http.StatusCreated
	if res.Duplicate {
		status = http.StatusOK
	}
	writeJSON(w, status, workflowResponse{Workflow: a.showWorkflow(res.Workflow), Jobs: a.showJobs(res.Jobs), Duplicate: res.Duplicate})
	return nil
}

// outputRequest is the body of POST /api/v1/jobs/{id}/output.
type outputRequest struct {
	LeaseToken string `json:"lease_token"`
	// Output is any JSON value, at most errandstore.MaxOutputBytes.
	Output json.RawMessage `json:"output"`
}

// output serves POST /api/v1/jobs/{id}/output: a worker records what its
// job produced, as errand.SetOutput does in Go, fenced by its lease token
// (409 lease_lost writes nothing). The steps that depend on the job in a
// workflow receive it.
func (a *api[TTx]) output(w http.ResponseWriter, r *http.Request, req *outputRequest) error {
	if len(bytes.TrimSpace(req.Output)) == 0 {
		return badRequest("output is missing; send the job's output as any JSON value, e.g. {\"lease_token\": \"...\", \"output\": {\"charge_id\": \"ch_1\"}}")
	}
	if !a.c.SupportsWorkflows() {
		return badRequest("the server's store does not keep outputs (it is not an errandstore.WorkflowStore)")
	}
	id := r.PathValue("id")
	if err := a.c.SetJobOutput(r.Context(), id, req.LeaseToken, req.Output); err != nil {
		return err
	}
	return reply(w, map[string]any{"id": id})
}

// joinWorkflowStates lists the workflow states for a message.
func joinWorkflowStates() string {
	names := make([]string, len(errandtype.WorkflowStates))
	for i, st := range errandtype.WorkflowStates {
		names[i] = string(st)
	}
	return strings.Join(names, ", ")
}
