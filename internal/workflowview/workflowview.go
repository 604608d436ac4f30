// Package workflowview says in words where a workflow is, for the
// dashboard and the command line.
package workflowview

import (
	"fmt"
	"strings"

	"github.com/errandhq/errand"
)

// Next says in words what happens next to wf: which steps it waits
// for, which compensation runs, or what an operator must replay.
func Next(wf *errand.Workflow) string {
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
				return "stopped: compensation undo " + s.Name + " is " + state(c.State) + why(c.LastError) + "; replay it to go on"
			}
			return "compensating: undo " + s.Name + " is " + state(c.State)
		}
		return "compensating: every compensation has run; the next pass marks the workflow failed"
	case errand.WorkflowFailed:
		name := deref(wf.FailedStep)
		for _, s := range wf.Steps {
			if s.Name == name {
				return "failed: step " + name + " is " + state(s.State) + why(s.LastError) + "; replay it to resume"
			}
		}
		return "failed: step " + name + " failed; replay it to resume"
	}
	return string(wf.State)
}

// why names the class of a job's last failure, " (class)", or nothing.
func why(e *errand.LastError) string {
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
