package errandhttp

import (
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/errandhq/errand"
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
	p.Data = &workflowData{Workflow: wf, Next: workflowNext(wf)}
	d.render(w, http.StatusOK, "workflow", p)
}

// workflowNext says in words what happens next to wf: which steps it waits
// for, which compensation runs, or what an operator must replay.
func workflowNext(wf *errand.Workflow) string {
	state := func(s *errand.JobState) string {
		if s == nil {
			return "deleted"
		}
		return string(*s)
	}
	var inFlight, ready, deleted, failed []string
	for _, s := range wf.Steps {
		switch {
		case s.State != nil && !s.State.Terminal():
			inFlight = append(inFlight, fmt.Sprintf("%s (%s)", s.Name, *s.State))
		case s.State != nil && (*s.State == errand.StateDead || *s.State == errand.StateCancelled):
			failed = append(failed, fmt.Sprintf("step %s is %s", s.Name, *s.State))
		case s.State == nil && s.Enqueued:
			deleted = append(deleted, s.Name)
		}
	}
	stepWord := func(names []string) string {
		if len(names) == 1 {
			return "step " + names[0]
		}
		return "steps " + strings.Join(names, ", ")
	}
	switch wf.State {
	case errand.WorkflowSucceeded:
		return "succeeded: every step succeeded; nothing more runs"
	case errand.WorkflowRunning:
		switch {
		case len(failed) > 0:
			return "running, but " + strings.Join(failed, ", ") + "; the next pass stops the workflow and starts compensating"
		case len(inFlight) > 0:
			return "waiting for " + stepWord(inFlight)
		case len(deleted) > 0:
			return "waiting for " + stepWord(deleted) + ", whose job was deleted by retention; the workflow cannot go on"
		}
		for _, s := range wf.Steps {
			if !s.Enqueued {
				ready = append(ready, s.Name)
			}
		}
		if len(ready) > 0 {
			return "the next pass enqueues " + stepWord(ready) + " as their dependencies have succeeded"
		}
		return "every step has finished; the next pass completes the workflow"
	case errand.WorkflowCompensating:
		if len(inFlight) > 0 {
			return "compensating after step " + deref(wf.FailedStep) + " failed: waiting for " + stepWord(inFlight) +
				" to finish; then the compensations run, latest step first"
		}
		for i := len(wf.Steps) - 1; i >= 0; i-- {
			s := wf.Steps[i]
			c := s.Compensation
			if c == nil || s.State == nil || *s.State != errand.StateSucceeded || (c.State != nil && *c.State == errand.StateSucceeded) {
				continue
			}
			switch {
			case !c.Enqueued:
				return "compensating: the next pass enqueues undo " + s.Name
			case c.State == nil:
				return "stopped: compensation undo " + s.Name + " was deleted by retention before it succeeded; the workflow cannot go on"
			case *c.State == errand.StateDead || *c.State == errand.StateCancelled:
				return "stopped: compensation undo " + s.Name + " is " + state(c.State) + "; replay it to go on"
			}
			return "compensating: undo " + s.Name + " is " + state(c.State)
		}
		return "compensating: every compensation has run; the next pass marks the workflow failed"
	case errand.WorkflowFailed:
		name := deref(wf.FailedStep)
		for _, s := range wf.Steps {
			if s.Name == name {
				return "failed: step " + name + " is " + state(s.State) + "; replay it to resume"
			}
		}
		return "failed: step " + name + " failed; replay it to resume"
	}
	return string(wf.State)
}
