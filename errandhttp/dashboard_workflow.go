package errandhttp

import (
	"fmt"
	"net/http"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/internal/workflowview"
)

// workflowsData is the workflows listing.
type workflowsData struct {
	Workflows []*errand.Workflow
	States    []errand.WorkflowState
	stateFilter
}

// workflowsPage lists workflows, newest first, filtered by state.
func (d *dashboard) workflowsPage(w http.ResponseWriter, r *http.Request) {
	now, err := d.now(r.Context())
	if err != nil {
		d.fail(w, r, err)
		return
	}
	f, err := d.stateFilter(r.URL.Query())
	if err != nil {
		d.fail(w, r, err)
		return
	}
	l := &workflowsData{States: errand.WorkflowStates, stateFilter: f}
	p := &errand.WorkflowListParams{Limit: l.Limit}
	if l.State != "" {
		st := errand.WorkflowState(l.State)
		if !st.Valid() {
			d.fail(w, r, &errand.InputError{Field: "state", Message: fmt.Sprintf("%q is not a workflow state; use one of %v", l.State, errand.WorkflowStates)})
			return
		}
		p.States = []errand.WorkflowState{st}
	}
	if l.Workflows, err = d.c.Workflows(r.Context(), p); err != nil {
		d.fail(w, r, err)
		return
	}
	pg := d.newPage(r, "Workflows", "workflows", now, true)
	pg.Data = l
	d.render(w, http.StatusOK, "workflows", pg)
}

// workflowData is one workflow's page.
type workflowData struct {
	Workflow *errand.Workflow
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
