package errandhttp

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandtype"
)

// dashboardAction is a change an operator makes to jobs from the dashboard.
type dashboardAction struct {
	Name    string // "replay" or "cancel", also the form's path
	Verb    string // for people: "Replay", "Cancel"
	Applies func(errandtype.JobState) bool
	// Explain says which states the action applies to, for a job in
	// another.
	Explain string
}

var (
	replayAction = &dashboardAction{
		Name: "replay", Verb: "Replay",
		Applies: func(s errandtype.JobState) bool { return s == errandtype.StateDead || s == errandtype.StateCancelled },
		Explain: "only dead and cancelled jobs can be replayed",
	}
	cancelAction = &dashboardAction{
		Name: "cancel", Verb: "Cancel",
		// A running job gets a cancel request: its worker cancels the
		// handler and ends the attempt cancelled.
		Applies: func(s errandtype.JobState) bool { return s.Waiting() || s == errandtype.StateRunning },
		Explain: "only queued, retrying and running jobs can be cancelled",
	}
)

// maxActionBody bounds an action's form: ids and a reason.
const maxActionBody = 256 << 10

// actionJob is one job an action names, and what became of it.
type actionJob struct {
	ID  string
	Job *errandtype.Job // nil when the job was not found
	// Problem says why the action does not or did not apply, or is empty.
	Problem string
	Done    bool
}

// actionData is the confirmation page of an action, or its result.
type actionData struct {
	Action *dashboardAction
	Reason string
	Jobs   []*actionJob
	// Applicable counts the jobs the action applies to (on the confirm
	// page) or was applied to (on the result page).
	Applicable int
	Committed  bool
	// FromStep forks the one job replayed from that step of its durable
	// handler; empty for none.
	FromStep string
}

// action serves the two POSTs of an action. The first (commit false)
// shows the jobs named and asks for confirmation; it changes nothing. The
// second does the action, one job at a time, and shows what happened to
// each.
func (d *dashboard) action(a *dashboardAction, commit bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		operator, canWrite := d.opts.Identity(r)
		if !canWrite {
			d.problem(w, r, http.StatusForbidden, "your token may read but not change jobs; sign in with an operator token to "+a.Name+" jobs")
			return
		}
		ids, reason, ok := d.actionForm(w, r, a)
		if !ok {
			return
		}
		data := &actionData{Action: a, Reason: reason, Committed: commit, FromStep: strings.TrimSpace(r.FormValue("from_step"))}
		var fromStep *int
		if data.FromStep != "" {
			n, err := strconv.Atoi(data.FromStep)
			if err != nil || n < 0 || a != replayAction || len(ids) != 1 {
				d.problem(w, r, http.StatusBadRequest, "from step: give the number of a step, from 0, when replaying one job")
				return
			}
			fromStep = &n
		}
		for _, id := range ids {
			aj := &actionJob{ID: id}
			data.Jobs = append(data.Jobs, aj)
			if commit {
				if err := d.applyAction(r, a, aj, operator, reason, fromStep); err != nil {
					// The operator or the reason is at fault, for every
					// job alike: stop before trying the rest.
					d.problem(w, r, http.StatusBadRequest, err.Error())
					return
				}
			} else if err := d.previewAction(r, a, aj); err != nil {
				d.fail(w, r, err)
				return
			}
			if aj.Job != nil && aj.Problem == "" {
				data.Applicable++
			}
		}
		status := http.StatusOK
		if commit && data.Applicable < len(data.Jobs) {
			status = http.StatusConflict
		}
		title := a.Verb + " jobs?"
		if commit {
			title = a.Verb + ": done"
		}
		p := d.newPage(r, title, "", d.timeNow(r), false)
		p.Data = data
		d.render(w, status, "action", p)
	})
}

// actionForm reads an action's form: the ids of the jobs it names, each
// once, and the operator's reason. A form it refuses it answers itself,
// returning ok false.
func (d *dashboard) actionForm(w http.ResponseWriter, r *http.Request, a *dashboardAction) (ids []string, reason string, ok bool) {
	r.Body = http.MaxBytesReader(w, r.Body, maxActionBody)
	if err := r.ParseForm(); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			d.problem(w, r, http.StatusRequestEntityTooLarge, fmt.Sprintf("the form is over %d bytes; select fewer jobs or shorten the reason", maxActionBody))
			return nil, "", false
		}
		d.problem(w, r, http.StatusBadRequest, "read form: "+err.Error())
		return nil, "", false
	}
	ids = formIDs(r.PostForm["id"])
	reason = strings.TrimSpace(r.PostForm.Get("reason"))
	switch {
	case len(ids) == 0:
		d.problem(w, r, http.StatusBadRequest, "no job selected; tick at least one job to "+a.Name)
		return nil, "", false
	case len(ids) > d.opts.MaxBatch:
		d.problem(w, r, http.StatusBadRequest, fmt.Sprintf("%d jobs selected; %s at most %d at a time", len(ids), a.Name, d.opts.MaxBatch))
		return nil, "", false
	case reason == "":
		d.problem(w, r, http.StatusBadRequest, "no reason given; say why you "+a.Name+" these jobs, for the audit")
		return nil, "", false
	}
	return ids, reason, true
}

// previewAction finds the job aj names and says whether a applies to it,
// changing nothing. It returns only the store's errors.
func (d *dashboard) previewAction(r *http.Request, a *dashboardAction, aj *actionJob) error {
	j, err := d.c.Get(r.Context(), aj.ID)
	switch {
	case errors.Is(err, errandtype.ErrNotFound):
		aj.Problem = "no such job"
	case err != nil:
		return err
	case !a.Applies(j.State):
		aj.Job, aj.Problem = j, fmt.Sprintf("%s: %s", j.State, a.Explain)
	default:
		aj.Job = j
	}
	return nil
}

// applyAction does a to the job aj names and records what became of it.
// It returns only an *errandtype.InputError, which every job would meet
// alike.
func (d *dashboard) applyAction(r *http.Request, a *dashboardAction, aj *actionJob, operator, reason string, fromStep *int) error {
	var j *errandtype.Job
	var err error
	if a == replayAction {
		j, err = d.c.Replay(r.Context(), aj.ID, &errand.ReplayOpts{Operator: operator, Reason: reason, FromStep: fromStep})
	} else {
		j, err = d.c.Cancel(r.Context(), aj.ID, &errand.CancelOpts{Operator: operator, Reason: reason})
	}
	var in *errandtype.InputError
	if errors.As(err, &in) {
		return err
	}
	d.opts.Logger.Info("dashboard: "+a.Name, "operator", operator, "job", aj.ID, "reason", reason, "err", err)
	if err != nil {
		aj.Problem = problemText(err)
		return nil
	}
	aj.Job, aj.Done = j, true
	return nil
}

// formIDs returns the ids of a form, each once, in the order given.
func formIDs(values []string) []string {
	var ids []string
	for _, v := range values {
		if v = strings.TrimSpace(v); v != "" && !slices.Contains(ids, v) {
			ids = append(ids, v)
		}
	}
	return ids
}

// problemText says why an action failed for one job.
func problemText(err error) string {
	var se *errandtype.StateError
	switch {
	case errors.Is(err, errandtype.ErrNotFound):
		return "no such job"
	case errors.As(err, &se):
		return se.Error()
	default:
		return err.Error()
	}
}
