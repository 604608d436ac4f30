package errandhttp

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
	"github.com/errandhq/errand/internal/workflowview"
)

// workflowsData is the workflows listing.
type workflowsData struct {
	Workflows []*errandtype.Workflow
	States    []errandtype.WorkflowState
	stateFilter
}

// workflowsPage lists workflows, newest first, filtered by state.
func (d *dashboard) workflowsPage(w http.ResponseWriter, r *http.Request) {
	d.stateListing(w, r, "Workflows", "workflows", func(f stateFilter) (any, error) {
		l := &workflowsData{States: errandtype.WorkflowStates, stateFilter: f}
		p := &errandstore.WorkflowListParams{Limit: l.Limit}
		if l.State != "" {
			st := errandtype.WorkflowState(l.State)
			if !st.Valid() {
				return nil, &errandtype.InputError{Field: "state", Message: fmt.Sprintf("%q is not a workflow state; use one of %v", l.State, errandtype.WorkflowStates)}
			}
			p.States = []errandtype.WorkflowState{st}
		}
		var err error
		l.Workflows, err = d.c.Workflows(r.Context(), p)
		return l, err
	})
}

// workflowData is one workflow's page.
type workflowData struct {
	Workflow *errandtype.Workflow
	Next     string
}

// workflowPage shows one workflow: its state, failed step, each step's job
// and compensation, and what happens next.
func (d *dashboard) workflowPage(w http.ResponseWriter, r *http.Request) {
	now, err := d.now(r.Context())
	if err != nil {
		d.fail(w, r, err)
		return
	}
	id := r.PathValue("id")
	wf, err := d.c.Workflow(r.Context(), id)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	p := d.newPage(r, "Workflow "+id, "workflows", now, true)
	p.Data = &workflowData{Workflow: wf, Next: workflowview.Next(wf)}
	d.render(w, http.StatusOK, "workflow", p)
}

// rerunWorkflow serves the Rerun form of a finished workflow's page: the
// new workflow starts at once, with no confirmation page (the old one
// changes only by recording the rerun), and the browser goes to its page.
func (d *dashboard) rerunWorkflow(w http.ResponseWriter, r *http.Request) {
	operator, canWrite := d.opts.Identity(r)
	if !canWrite {
		d.problem(w, r, http.StatusForbidden, "your token may read but not change anything; sign in with an operator token to rerun a workflow")
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxActionBody)
	if err := r.ParseForm(); err != nil {
		d.problem(w, r, http.StatusBadRequest, "read form: "+err.Error())
		return
	}
	id, newID := strings.TrimSpace(r.PostForm.Get("id")), strings.TrimSpace(r.PostForm.Get("new_id"))
	if id == "" {
		d.problem(w, r, http.StatusBadRequest, "no workflow named; rerun a workflow from its page")
		return
	}
	res, err := d.c.RerunWorkflow(r.Context(), id, &errand.WorkflowRerunOpts{ID: newID})
	if errors.Is(err, errandtype.ErrNotFound) {
		d.problem(w, r, http.StatusNotFound, fmt.Sprintf("no workflow with id %q: it never existed, or retention has deleted it", id))
		return
	}
	if err != nil {
		d.fail(w, r, err)
		return
	}
	d.opts.Logger.Info("dashboard: rerun workflow", "operator", operator, "workflow_id", id, "rerun_as", res.Workflow.ID, "duplicate", res.Duplicate)
	http.Redirect(w, r, d.opts.PathPrefix+"/workflows/"+url.PathEscape(res.Workflow.ID), http.StatusSeeOther)
}
