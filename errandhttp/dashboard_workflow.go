package errandhttp

import (
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/internal/workflowview"
)

// workflowsData is the workflows listing.
type workflowsData struct {
	Workflows []*errand.Workflow
	States    []errand.WorkflowState
	// State and Limit are the filter as the visitor gave it.
	State string
	Limit int
}

// QueryMore is the query string of the listing with a page twice as long.
// Every value is query-escaped by url.Values, which is what makes it a safe
// template.URL.
func (l *workflowsData) QueryMore() template.URL {
	v := url.Values{}
	if l.State != "" {
		v.Set("state", l.State)
	}
	v.Set("limit", strconv.Itoa(min(2*l.Limit, MaxDashboardPageSize)))
	return template.URL(v.Encode())
}

// workflowsPage lists workflows, newest first, filtered by state.
func (d *dashboard) workflowsPage(w http.ResponseWriter, r *http.Request) {
	now, err := d.now(r.Context())
	if err != nil {
		d.fail(w, r, err)
		return
	}
	q := r.URL.Query()
	l := &workflowsData{States: errand.WorkflowStates, State: strings.TrimSpace(q.Get("state")), Limit: d.opts.PageSize}
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > MaxDashboardPageSize {
			d.fail(w, r, &errand.InputError{Field: "limit", Message: fmt.Sprintf("%q is not a page size; use 1 to %d", s, MaxDashboardPageSize)})
			return
		}
		l.Limit = n
	}
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
