// Package workflowview says in words where a workflow is, for the
// dashboard and the command line.
package workflowview

import (
	"fmt"
	"strings"

	"github.com/errandhq/errand/errandtype"
)

// Next says in words what happens next to wf: which steps it waits
// for, which compensation runs, or what an operator must do: replay the
// failed step to resume it while nothing was compensated, or else rerun
// it as a new workflow.
func Next(wf *errandtype.Workflow) string {
	if wf.RerunAs != nil && !wf.State.Open() {
		return string(wf.State) + ": rerun as workflow " + *wf.RerunAs + "; see errand workflow " + *wf.RerunAs
	}
	switch wf.State {
	case errandtype.WorkflowSucceeded:
		return "succeeded: every step succeeded; nothing more runs"
	case errandtype.WorkflowRunning:
		return nextRunning(wf)
	case errandtype.WorkflowCompensating:
		if wf.CompensationStartedAt == nil {
			return nextStopped(wf)
		}
		return nextCompensating(wf) + "; " + rerun(wf, "once it has failed, ")
	case errandtype.WorkflowFailed:
		name := deref(wf.FailedStep)
		failed := "failed: step " + name + " failed"
		if s := step(wf, name); s != nil {
			failed = "failed: step " + name + " is " + state(s.State) + why(s.LastError)
		}
		if wf.CompensationStartedAt == nil {
			return failed + "; nothing was compensated: replay step " + name + " to resume"
		}
		return failed + "; compensated; " + rerun(wf, "")
	}
	return string(wf.State)
}

// rerun is the advice for a workflow that has compensated.
func rerun(wf *errandtype.Workflow, when string) string {
	return when + "rerun it as a new workflow: errand workflow rerun " + wf.ID
}

// inFlight lists wf's steps not yet finished, with their states.
func inFlight(wf *errandtype.Workflow) []string {
	var out []string
	for _, s := range wf.Steps {
		if s.State != nil && !s.State.Terminal() {
			out = append(out, fmt.Sprintf("%s (%s)", s.Name, *s.State))
		}
	}
	return out
}

func nextRunning(wf *errandtype.Workflow) string {
	var ready, deleted, failed []string
	for _, s := range wf.Steps {
		switch {
		case s.State != nil && (*s.State == errandtype.StateDead || *s.State == errandtype.StateCancelled):
			failed = append(failed, fmt.Sprintf("step %s is %s", s.Name, *s.State))
		case s.State == nil && s.Enqueued:
			deleted = append(deleted, s.Name)
		case !s.Enqueued:
			ready = append(ready, s.Name)
		}
	}
	switch running := inFlight(wf); {
	case len(failed) > 0:
		return "running, but " + strings.Join(failed, ", ") + "; the next pass stops the workflow and starts compensating"
	case len(running) > 0:
		return "waiting for " + stepWord(running)
	case len(deleted) > 0:
		return "waiting for " + stepWord(deleted) + ", whose job was deleted by retention; the workflow cannot go on"
	case len(ready) > 0:
		return "the next pass enqueues " + stepWord(ready) + " as their dependencies have succeeded"
	}
	return "every step has finished; the next pass completes the workflow"
}

// nextStopped is Next for a workflow stopped by a failed step that has
// enqueued no compensation yet: a replay of the step still resumes it.
func nextStopped(wf *errandtype.Workflow) string {
	name := deref(wf.FailedStep)
	resume := "; replay step " + name + " to resume instead"
	if running := inFlight(wf); len(running) > 0 {
		return "stopped after step " + name + " failed: waiting for " + stepWord(running) +
			" to finish, then the compensations run, latest step first" + resume
	}
	return "stopped after step " + name + " failed: the next pass starts compensating" + resume
}

// Shown is a workflow as errand workflow --json and the API print it: its
// fields and "next", what [Next] says.
type Shown struct {
	*errandtype.Workflow
	Next string `json:"next"`
}

// Show returns wf with what happens next; nil for nil.
func Show(wf *errandtype.Workflow) *Shown {
	if wf == nil {
		return nil
	}
	return &Shown{Workflow: wf, Next: Next(wf)}
}

// nextCompensating says which compensation runs or holds the workflow,
// starting "compensating: " or "stopped: ".
func nextCompensating(wf *errandtype.Workflow) string {
	for i := len(wf.Steps) - 1; i >= 0; i-- {
		s := wf.Steps[i]
		c := s.Compensation
		if c == nil || s.State == nil || *s.State != errandtype.StateSucceeded || (c.State != nil && *c.State == errandtype.StateSucceeded) {
			continue
		}
		switch {
		case !c.Enqueued:
			return "compensating: the next pass enqueues undo " + s.Name
		case c.State == nil:
			return "stopped: compensation undo " + s.Name + " was deleted by retention before it succeeded; the workflow cannot go on"
		case *c.State == errandtype.StateDead || *c.State == errandtype.StateCancelled:
			return "stopped: compensation undo " + s.Name + " is " + state(c.State) + why(c.LastError) + "; replay it to go on"
		}
		return "compensating: undo " + s.Name + " is " + state(c.State)
	}
	return "compensating: every compensation has run; the next pass marks the workflow failed"
}

func step(wf *errandtype.Workflow, name string) *errandtype.WorkflowStepView {
	for i := range wf.Steps {
		if wf.Steps[i].Name == name {
			return &wf.Steps[i]
		}
	}
	return nil
}

func stepWord(names []string) string {
	if len(names) == 1 {
		return "step " + names[0]
	}
	return "steps " + strings.Join(names, ", ")
}

func state(s *errandtype.JobState) string {
	if s == nil {
		return "deleted"
	}
	return string(*s)
}

// why names the class of a job's last failure, " (class)", or nothing.
func why(e *errandtype.LastError) string {
	if e == nil {
		return ""
	}
	return " (" + e.Class + ")"
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
