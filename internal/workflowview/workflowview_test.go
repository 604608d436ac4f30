package workflowview

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/errandhq/errand/errandtype"
)

func TestNext(t *testing.T) {
	st := func(s errandtype.JobState) *errandtype.JobState { return &s }
	name := func(s string) *string { return &s }
	comp := func(s *errandtype.JobState, enqueued bool) *errandtype.WorkflowCompensationView {
		return &errandtype.WorkflowCompensationView{Kind: "refund", State: s, Enqueued: enqueued}
	}
	steps := func(charge, reserve, book *errandtype.JobState, undoCharge, undoReserve *errandtype.WorkflowCompensationView) []errandtype.WorkflowStepView {
		return []errandtype.WorkflowStepView{
			{Name: "charge", State: charge, Enqueued: charge != nil, Compensation: undoCharge},
			{Name: "reserve", State: reserve, Enqueued: reserve != nil, Compensation: undoReserve},
			{Name: "book", State: book, Enqueued: book != nil},
		}
	}
	ok, dead, running := st(errandtype.StateSucceeded), st(errandtype.StateDead), st(errandtype.StateRunning)
	at := time.Date(2026, 11, 29, 9, 30, 0, 0, time.UTC)
	started := &at
	for _, tt := range []struct {
		name string
		wf   errandtype.Workflow
		want string
	}{
		{"a step runs", errandtype.Workflow{State: errandtype.WorkflowRunning, Steps: steps(ok, running, nil, comp(nil, false), nil)},
			"waiting for step reserve (running)"},
		{"two steps wait", errandtype.Workflow{State: errandtype.WorkflowRunning, Steps: steps(running, st(errandtype.StateRetrying), nil, nil, nil)},
			"waiting for steps charge (running), reserve (retrying)"},
		{"a step died, not yet seen", errandtype.Workflow{State: errandtype.WorkflowRunning, Steps: steps(ok, dead, nil, nil, nil)},
			"running, but step reserve is dead; the next pass stops the workflow and starts compensating"},
		{"a step in flight holds the compensations", errandtype.Workflow{ID: "w1", State: errandtype.WorkflowCompensating, FailedStep: name("book"),
			Steps: steps(ok, running, dead, comp(nil, false), nil)},
			"stopped after step book failed: waiting for step reserve (running) to finish, then the compensations run, latest step first; replay step book to resume instead"},
		{"stopped, not yet compensating", errandtype.Workflow{ID: "w1", State: errandtype.WorkflowCompensating, FailedStep: name("book"),
			Steps: steps(ok, ok, dead, comp(nil, false), comp(nil, false))},
			"stopped after step book failed: the next pass starts compensating; replay step book to resume instead"},
		{"a compensation runs", errandtype.Workflow{ID: "w1", State: errandtype.WorkflowCompensating, FailedStep: name("book"), CompensationStartedAt: started,
			Steps: steps(ok, ok, dead, comp(running, true), comp(ok, true))},
			"compensating: undo charge is running; once it has failed, rerun it as a new workflow: errand workflow rerun w1"},
		{"the latest compensation first", errandtype.Workflow{ID: "w1", State: errandtype.WorkflowCompensating, FailedStep: name("book"), CompensationStartedAt: started,
			Steps: steps(ok, ok, dead, comp(nil, false), comp(ok, true))},
			"compensating: the next pass enqueues undo charge; once it has failed, rerun it as a new workflow: errand workflow rerun w1"},
		{"a dead compensation", errandtype.Workflow{ID: "w1", State: errandtype.WorkflowCompensating, FailedStep: name("book"), CompensationStartedAt: started,
			Steps: steps(ok, ok, dead, comp(dead, true), comp(ok, true))},
			"stopped: compensation undo charge is dead; replay it to go on; once it has failed, rerun it as a new workflow: errand workflow rerun w1"},
		{"failed, compensated", errandtype.Workflow{ID: "w1", State: errandtype.WorkflowFailed, FailedStep: name("book"), CompensationStartedAt: started,
			Steps: steps(ok, ok, dead, comp(ok, true), comp(ok, true))},
			"failed: step book is dead; compensated; rerun it as a new workflow: errand workflow rerun w1"},
		{"failed, nothing to undo", errandtype.Workflow{ID: "w1", State: errandtype.WorkflowFailed, FailedStep: name("book"), Steps: steps(ok, ok, dead, nil, nil)},
			"failed: step book is dead; nothing was compensated: replay step book to resume"},
		{"failed, and why", errandtype.Workflow{ID: "w1", State: errandtype.WorkflowFailed, FailedStep: name("book"), Steps: func() []errandtype.WorkflowStepView {
			ss := steps(ok, ok, dead, nil, nil)
			ss[2].LastError = &errandtype.LastError{Class: "args_too_large", Message: "args of 1.1 MiB"}
			return ss
		}()}, "failed: step book is dead (args_too_large); nothing was compensated: replay step book to resume"},
		{"failed and rerun", errandtype.Workflow{ID: "w1", State: errandtype.WorkflowFailed, FailedStep: name("book"), CompensationStartedAt: started,
			RerunAs: name("w2"), Steps: steps(ok, ok, dead, comp(ok, true), comp(ok, true))},
			"failed: rerun as workflow w2; see errand workflow w2"},
		{"a dead compensation, and why", errandtype.Workflow{ID: "w1", State: errandtype.WorkflowCompensating, FailedStep: name("book"), CompensationStartedAt: started,
			Steps: steps(ok, ok, dead, &errandtype.WorkflowCompensationView{Kind: "refund", State: dead, Enqueued: true,
				LastError: &errandtype.LastError{Class: "permanent", Message: "card gone"}}, comp(ok, true))},
			"stopped: compensation undo charge is dead (permanent); replay it to go on; once it has failed, rerun it as a new workflow: errand workflow rerun w1"},
		{"succeeded", errandtype.Workflow{State: errandtype.WorkflowSucceeded, Steps: steps(ok, ok, ok, nil, nil)},
			"succeeded: every step succeeded; nothing more runs"},
	} {
		if got := Next(&tt.wf); got != tt.want {
			t.Errorf("%s: %q, want %q", tt.name, got, tt.want)
		}
	}
}

// TestShow: the JSON of a workflow carries what Next says, beside the
// workflow's own fields.
func TestShow(t *testing.T) {
	wf := &errandtype.Workflow{ID: "w1", State: errandtype.WorkflowSucceeded}
	b, err := json.Marshal(Show(wf))
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if got["id"] != "w1" || got["next"] != Next(wf) || got["rerun_as"] != nil {
		t.Fatalf("shown workflow %s", b)
	}
	if Show(nil) != nil {
		t.Fatal("Show(nil) is not nil")
	}
}
