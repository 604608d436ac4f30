package workflowview

import (
	"testing"

	"github.com/errandhq/errand"
)

func TestNext(t *testing.T) {
	st := func(s errand.JobState) *errand.JobState { return &s }
	name := func(s string) *string { return &s }
	comp := func(s *errand.JobState, enqueued bool) *errand.WorkflowCompensationView {
		return &errand.WorkflowCompensationView{Kind: "refund", State: s, Enqueued: enqueued}
	}
	steps := func(charge, reserve, book *errand.JobState, undoCharge, undoReserve *errand.WorkflowCompensationView) []errand.WorkflowStepView {
		return []errand.WorkflowStepView{
			{Name: "charge", State: charge, Enqueued: charge != nil, Compensation: undoCharge},
			{Name: "reserve", State: reserve, Enqueued: reserve != nil, Compensation: undoReserve},
			{Name: "book", State: book, Enqueued: book != nil},
		}
	}
	ok, dead, running := st(errand.StateSucceeded), st(errand.StateDead), st(errand.StateRunning)
	for _, tt := range []struct {
		name string
		wf   errand.Workflow
		want string
	}{
		{"a step runs", errand.Workflow{State: errand.WorkflowRunning, Steps: steps(ok, running, nil, comp(nil, false), nil)},
			"waiting for step reserve (running)"},
		{"two steps wait", errand.Workflow{State: errand.WorkflowRunning, Steps: steps(running, st(errand.StateRetrying), nil, nil, nil)},
			"waiting for steps charge (running), reserve (retrying)"},
		{"a step died, not yet seen", errand.Workflow{State: errand.WorkflowRunning, Steps: steps(ok, dead, nil, nil, nil)},
			"running, but step reserve is dead; the next pass stops the workflow and starts compensating"},
		{"a step in flight holds the compensations", errand.Workflow{State: errand.WorkflowCompensating, FailedStep: name("book"),
			Steps: steps(ok, running, dead, comp(nil, false), nil)},
			"compensating after step book failed: waiting for step reserve (running) to finish; then the compensations run, latest step first"},
		{"a compensation runs", errand.Workflow{State: errand.WorkflowCompensating, FailedStep: name("book"),
			Steps: steps(ok, ok, dead, comp(running, true), comp(ok, true))},
			"compensating: undo charge is running"},
		{"the latest compensation first", errand.Workflow{State: errand.WorkflowCompensating, FailedStep: name("book"),
			Steps: steps(ok, ok, dead, comp(nil, false), comp(nil, false))},
			"compensating: the next pass enqueues undo reserve"},
		{"a dead compensation", errand.Workflow{State: errand.WorkflowCompensating, FailedStep: name("book"),
			Steps: steps(ok, ok, dead, comp(dead, true), comp(ok, true))},
			"stopped: compensation undo charge is dead; replay it to go on"},
		{"failed", errand.Workflow{State: errand.WorkflowFailed, FailedStep: name("book"), Steps: steps(ok, ok, dead, comp(ok, true), nil)},
			"failed: step book is dead; replay it to resume"},
		{"failed, and why", errand.Workflow{State: errand.WorkflowFailed, FailedStep: name("book"), Steps: func() []errand.WorkflowStepView {
			ss := steps(ok, ok, dead, comp(ok, true), nil)
			ss[2].LastError = &errand.LastError{Class: "args_too_large", Message: "args of 1.1 MiB"}
			return ss
		}()}, "failed: step book is dead (args_too_large); replay it to resume"},
		{"a dead compensation, and why", errand.Workflow{State: errand.WorkflowCompensating, FailedStep: name("book"),
			Steps: steps(ok, ok, dead, &errand.WorkflowCompensationView{Kind: "refund", State: dead, Enqueued: true,
				LastError: &errand.LastError{Class: "permanent", Message: "card gone"}}, comp(ok, true))},
			"stopped: compensation undo charge is dead (permanent); replay it to go on"},
		{"succeeded", errand.Workflow{State: errand.WorkflowSucceeded, Steps: steps(ok, ok, ok, nil, nil)},
			"succeeded: every step succeeded; nothing more runs"},
	} {
		if got := Next(&tt.wf); got != tt.want {
			t.Errorf("%s: %q, want %q", tt.name, got, tt.want)
		}
	}
}
