package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
)

// The workflow cases run on stores that implement the optional
// [errandstore.WorkflowStore]; others skip them. Each step's job runs in a queue
// named after the step ("undo-" and the step's name for its compensation),
// so that a case claims exactly the job it means to finish.
var workflowCases = []testCase{
	{"InsertGetRefusals", testWorkflowInsert},
	{"InsertTxRollsBack", testWorkflowInsertTx},
	{"OutputsReachDependants", testWorkflowOutputs},
	{"DiamondRunsJoinOnce", testWorkflowDiamond},
	{"ConcurrentAdvancesEnqueueOnce", testWorkflowConcurrentAdvance},
	{"CompensateThenFail", testWorkflowCompensate},
	{"DeletedJobNotEnqueuedAgain", testWorkflowDeletedJob},
	{"LeaderPicksNews", testWorkflowLeader},
	{"LeaderSeesLateOutcomes", testWorkflowLeaderLateOutcome},
	{"LeaderAdvancesBesideRunningSteps", testWorkflowLeaderBesideRunning},
	{"BulkReplaySkipsHeldSteps", testWorkflowBulkReplay},
	{"OutcomeNamesKindBatchWorkflow", testWorkflowOutcomeResult},
	{"OutcomeReportsOutputLastError", testOutcomeReportsJob},
	{"SetOutputFenced", testWorkflowSetOutput},
	{"ListOrderAndFilter", testWorkflowList},
	{"CountsByState", testWorkflowCounts},
	{"AdvanceFailureSkipped", testWorkflowAdvanceFailureSkipped},
	{"ArgsTooLarge", testWorkflowArgsTooLarge},
	{"ContextBound", testWorkflowContextBound},
}

func (e *env) workflows() errandstore.WorkflowStore {
	e.t.Helper()
	ws, ok := e.s.(errandstore.WorkflowStore)
	if !ok {
		e.t.Skip("the store is not an errandstore.WorkflowStore")
	}
	return ws
}

// wfTemplate is a job template in queue queue.
func wfTemplate(kind, queue string) *errandstore.JobTemplate {
	return &errandstore.JobTemplate{Kind: kind, Queue: queue, Args: json.RawMessage(`{"n":1}`), ArgsVersion: 1, MaxAttempts: 3}
}

// wfStep is step name, depending on deps, its job in the queue name.
func wfStep(name string, deps ...string) errandstore.WorkflowStepDef {
	return errandstore.WorkflowStepDef{Name: name, DependsOn: deps, Job: wfTemplate("step_"+name, name)}
}

// wfUndoStep is wfStep with a compensation in the queue "undo-" + name.
func wfUndoStep(name string, deps ...string) errandstore.WorkflowStepDef {
	s := wfStep(name, deps...)
	s.Compensation = wfTemplate("undo_"+name, "undo-"+name)
	return s
}

func wfParams(id string, steps ...errandstore.WorkflowStepDef) *errandstore.WorkflowInsertParams {
	return &errandstore.WorkflowInsertParams{ID: id, Name: "order", Steps: steps}
}

func (e *env) insertWorkflow(p *errandstore.WorkflowInsertParams) *errandstore.WorkflowInsertResult {
	e.t.Helper()
	r, err := e.workflows().WorkflowInsert(e.ctx, p)
	if err != nil {
		e.t.Fatalf("WorkflowInsert(%s): %v", p.ID, err)
	}
	return r
}

func (e *env) workflow(id string) *errandtype.Workflow {
	e.t.Helper()
	w, err := e.workflows().WorkflowGet(e.ctx, &errandstore.WorkflowGetParams{ID: id})
	if err != nil {
		e.t.Fatalf("WorkflowGet(%s): %v", id, err)
	}
	return w
}

func (e *env) noWorkflow(id string) {
	e.t.Helper()
	if w, err := e.workflows().WorkflowGet(e.ctx, &errandstore.WorkflowGetParams{ID: id}); !errors.Is(err, errandtype.ErrNotFound) {
		e.t.Fatalf("WorkflowGet(%s) = %+v, %v; want ErrNotFound", id, w, err)
	}
}

func (e *env) advanceWorkflows(p *errandstore.WorkflowAdvanceParams) []*errandstore.WorkflowAdvanceResult {
	e.t.Helper()
	rs, err := e.workflows().WorkflowAdvance(e.ctx, p)
	if err != nil {
		e.t.Fatalf("WorkflowAdvance(%+v): %v", *p, err)
	}
	return rs
}

// advanceOne advances workflow id by name and returns its result.
func (e *env) advanceOne(id string) *errandstore.WorkflowAdvanceResult {
	e.t.Helper()
	rs := e.advanceWorkflows(&errandstore.WorkflowAdvanceParams{IDs: []string{id}})
	if len(rs) != 1 || rs[0].Workflow.ID != id {
		e.t.Fatalf("WorkflowAdvance(%s) = %d results, want its own", id, len(rs))
	}
	return rs[0]
}

// wantAdvance advances workflow id and checks the jobs it inserted, each
// with the workflow's id, and its state after.
func (e *env) wantAdvance(id string, state errandtype.WorkflowState, jobIDs ...string) *errandstore.WorkflowAdvanceResult {
	e.t.Helper()
	r := e.advanceOne(id)
	if got := ids(r.Jobs); !slices.Equal(got, jobIDs) && !(len(got) == 0 && len(jobIDs) == 0) {
		e.t.Fatalf("advance of %s inserted %v, want %v", id, got, jobIDs)
	}
	for _, j := range r.Jobs {
		if j.WorkflowID == nil || *j.WorkflowID != id {
			e.t.Fatalf("inserted job %s has workflow %v, want %s", j.ID, j.WorkflowID, id)
		}
		if g := e.get(j.ID); g.WorkflowID == nil || *g.WorkflowID != id {
			e.t.Fatalf("stored job %s has workflow %v, want %s", j.ID, g.WorkflowID, id)
		}
	}
	if r.Workflow.State != state {
		e.t.Fatalf("workflow %s after advance is %s, want %s", id, r.Workflow.State, state)
	}
	if len(jobIDs) > 0 && !r.Changed {
		e.t.Fatalf("advance of %s inserted %v but reports no change", id, jobIDs)
	}
	return r
}

// claimIn claims the next job of queue, which must be id.
func (e *env) claimIn(queue, id string) *errandtype.Job {
	e.t.Helper()
	js := e.claimWith(&errandstore.JobClaimParams{Queues: []string{queue}, Limit: 1, Lease: lease, Owner: owner})
	if len(js) != 1 || js[0].ID != id {
		e.t.Fatalf("claim from %s: got %v, want job %s", queue, ids(js), id)
	}
	return js[0]
}

// finishStep claims the job of step (of workflow wf) and records its
// outcome: success after recording output (when not empty), or death.
func (e *env) finishStep(wf, step, output string, ok bool) {
	e.t.Helper()
	j := e.claimIn(step, errandstore.WorkflowStepJobID(wf, step))
	if output != "" {
		if err := e.workflows().JobSetOutput(e.ctx, &errandstore.JobSetOutputParams{ID: j.ID, LeaseToken: *j.LeaseToken, Output: json.RawMessage(output)}); err != nil {
			e.t.Fatalf("JobSetOutput(%s): %v", j.ID, err)
		}
	}
	if ok {
		e.recordOK(succeeded(j))
	} else {
		e.recordOK(dead(j))
	}
}

// finishUndo claims the compensation of step and records its outcome.
func (e *env) finishUndo(wf, step string, ok bool) *errandtype.Job {
	e.t.Helper()
	j := e.claimIn("undo-"+step, errandstore.WorkflowCompensationJobID(wf, step))
	if ok {
		e.recordOK(succeeded(j))
	} else {
		e.recordOK(dead(j))
	}
	return j
}

// stepView returns the view of step name of w.
func stepView(t *testing.T, w *errandtype.Workflow, name string) *errandtype.WorkflowStepView {
	t.Helper()
	for i := range w.Steps {
		if w.Steps[i].Name == name {
			return &w.Steps[i]
		}
	}
	t.Fatalf("workflow %s has no step %s", w.ID, name)
	return nil
}

func wantStepState(t *testing.T, w *errandtype.Workflow, name string, want errandtype.JobState) {
	t.Helper()
	if s := stepView(t, w, name); s.State == nil || *s.State != want {
		t.Fatalf("step %s of %s is %v, want %s", name, w.ID, s.State, want)
	}
}

// sameOutputs compares outputs by step, each JSON document by value: a
// store may keep args as a JSON value rather than its spelling.
func sameOutputs(got, want map[string]json.RawMessage) bool {
	if len(got) != len(want) {
		return false
	}
	for k, v := range want {
		if g, ok := got[k]; !ok || !sameJSON(g, v) {
			return false
		}
	}
	return true
}

// wfArgs decodes the args of a workflow job.
func wfArgs(t *testing.T, j *errandtype.Job) (n int, wc errandstore.WorkflowContext) {
	t.Helper()
	var a struct {
		N        int                         `json:"n"`
		Workflow errandstore.WorkflowContext `json:"workflow"`
	}
	if err := json.Unmarshal(j.Args, &a); err != nil {
		t.Fatalf("args of %s: %v", j.ID, err)
	}
	return a.N, a.Workflow
}

// testWorkflowInsert: a workflow is inserted with the jobs of its first
// steps, each carrying its workflow context, and reads back as inserted; the
// same id again is a duplicate that inserts nothing; a first step whose job
// id is taken, and a malformed workflow, are refused whole.
func testWorkflowInsert(t *testing.T, h harness) {
	e := open(t, h)
	want := e.wantWorkflowInserted("w1")

	// The same id again: the first workflow, nothing inserted.
	e.clock.Advance(time.Second)
	dup := e.insertWorkflow(wfParams("w1", wfStep("x"), wfStep("y")))
	if !dup.Duplicate || dup.Jobs != nil || !reflect.DeepEqual(dup.Workflow, want) {
		t.Fatalf("second WorkflowInsert(w1) = %+v, want the first as a duplicate", dup)
	}
	if n := len(e.listAll()); n != 2 {
		t.Fatalf("%d jobs after a duplicate workflow, want 2", n)
	}

	// A first step whose job id is taken refuses the whole workflow.
	e.insertIDs("w2.step.b")
	var ie *errandtype.InputError
	if _, err := e.workflows().WorkflowInsert(e.ctx, wfParams("w2", wfStep("a"), wfStep("b"))); !errors.As(err, &ie) {
		t.Fatalf("WorkflowInsert with a taken job id = %v, want an *InputError", err)
	}
	e.noWorkflow("w2")
	e.notFound("w2.step.a")
	if e.get("w2.step.b").WorkflowID != nil {
		t.Fatal("the job holding the taken id joined the refused workflow")
	}

	e.wantBadWorkflowsRefused()
	if n := len(e.listAll()); n != 3 {
		t.Fatalf("%d jobs after refused workflows, want 3", n)
	}
	if rs := e.advanceWorkflows(&errandstore.WorkflowAdvanceParams{IDs: []string{"nope", "bad\x00id"}}); len(rs) != 0 {
		t.Fatalf("advancing unknown workflows = %d results, want none", len(rs))
	}
}

// wantWorkflowInserted inserts workflow id of steps a (with a
// compensation), b after a, and c, and checks that the jobs of a and c are
// inserted queued in it, each with its workflow context, and that the
// workflow, as inserted and as read, is running with b not enqueued; and
// that unknown workflows are not found. It returns the workflow.
func (e *env) wantWorkflowInserted(id string) *errandtype.Workflow {
	t := e.t
	t.Helper()
	t0 := e.now()
	r := e.insertWorkflow(wfParams(id, wfUndoStep("a"), wfStep("b", "a"), wfStep("c")))
	if r.Duplicate || !slices.Equal(ids(r.Jobs), []string{id + ".step.a", id + ".step.c"}) {
		t.Fatalf("WorkflowInsert = duplicate %v, jobs %v; want a new workflow with jobs a and c", r.Duplicate, ids(r.Jobs))
	}
	for _, j := range r.Jobs {
		e.wantWorkflowStepJob(id, j)
	}
	queued := errandtype.StateQueued
	want := &errandtype.Workflow{ID: id, Name: "order", State: errandtype.WorkflowRunning, CreatedAt: t0, UpdatedAt: t0,
		Steps: []errandtype.WorkflowStepView{
			{Name: "a", DependsOn: []string{}, Kind: "step_a", JobID: id + ".step.a", State: &queued, Enqueued: true, MaxAttempts: 3,
				Compensation: &errandtype.WorkflowCompensationView{Kind: "undo_a", JobID: id + ".undo.a"}},
			{Name: "b", DependsOn: []string{"a"}, Kind: "step_b", JobID: id + ".step.b", MaxAttempts: 3}, // not enqueued yet: its budget to come
			{Name: "c", DependsOn: []string{}, Kind: "step_c", JobID: id + ".step.c", State: &queued, Enqueued: true, MaxAttempts: 3},
		}}
	if !reflect.DeepEqual(r.Workflow, want) {
		t.Fatalf("WorkflowInsert workflow =\n  %+v\nwant\n  %+v", r.Workflow, want)
	}
	if got := e.workflow(id); !reflect.DeepEqual(got, want) {
		t.Fatalf("WorkflowGet =\n  %+v\nwant\n  %+v", got, want)
	}
	e.noWorkflow("nope")
	e.noWorkflow("bad\x00id")
	return want
}

// wantWorkflowStepJob checks j, a step's job as WorkflowInsert inserted it
// in workflow id: queued in it without an output, and stored in it with
// the workflow context of its step.
func (e *env) wantWorkflowStepJob(id string, j *errandtype.Job) {
	t := e.t
	t.Helper()
	if j.WorkflowID == nil || *j.WorkflowID != id || j.State != errandtype.StateQueued || j.Output != nil {
		t.Fatalf("inserted job %s: workflow %v, state %s, output %s", j.ID, j.WorkflowID, j.State, j.Output)
	}
	g := e.get(j.ID)
	if g.WorkflowID == nil || *g.WorkflowID != id {
		t.Fatalf("stored job %s has workflow %v, want %s", j.ID, g.WorkflowID, id)
	}
	if _, wc := wfArgs(t, g); wc.ID != id || wc.Compensating || wc.Outputs != nil || id+".step."+wc.Step != j.ID {
		t.Fatalf("job %s's workflow context = %+v", j.ID, wc)
	}
}

// wantBadWorkflowsRefused checks that malformed workflows are refused with
// an *InputError, and not stored.
func (e *env) wantBadWorkflowsRefused() {
	e.t.Helper()
	var ie *errandtype.InputError
	for name, bad := range map[string]*errandstore.WorkflowInsertParams{
		"no steps":       wfParams("w3"),
		"no id":          wfParams("", wfStep("a")),
		"later dep":      wfParams("w4", wfStep("a", "b"), wfStep("b")),
		"self dep":       wfParams("w5", wfStep("a", "a")),
		"twice named":    wfParams("w6", wfStep("a"), wfStep("a")),
		"args not {}":    {ID: "w7", Steps: []errandstore.WorkflowStepDef{{Name: "a", Job: &errandstore.JobTemplate{Kind: "k", Queue: "q", Args: json.RawMessage(`[1]`), ArgsVersion: 1, MaxAttempts: 1}}}},
		"no job":         {ID: "w8", Steps: []errandstore.WorkflowStepDef{{Name: "a"}}},
		"bad undo":       {ID: "w9", Steps: []errandstore.WorkflowStepDef{{Name: "a", Job: wfTemplate("k", "q"), Compensation: &errandstore.JobTemplate{Queue: "q", Args: json.RawMessage(`{}`), ArgsVersion: 1, MaxAttempts: 1}}}},
		"step name NUL":  wfParams("w10", wfStep("a\x00")),
		"id with spaces": wfParams(" w11", wfStep("a")),
		"step name dot":  wfParams("w12", wfStep("b.step.a")),
	} {
		if _, err := e.workflows().WorkflowInsert(e.ctx, bad); !errors.As(err, &ie) {
			e.t.Errorf("WorkflowInsert(%s) = %v, want an *InputError", name, err)
		}
		if bad.ID != "" {
			e.noWorkflow(bad.ID)
		}
	}
}

// workflowTxOps is the workflow write inside one of a store's
// transactions; WorkflowInsert returns errNoWorkflowTx for a store that is
// not an [errandstore.WorkflowTxStore] of its transaction type.
type workflowTxOps interface {
	WorkflowInsert(ctx context.Context, p *errandstore.WorkflowInsertParams) (*errandstore.WorkflowInsertResult, error)
}

var errNoWorkflowTx = errors.New("storetest: not a WorkflowTxStore")

func (b boundTx[TTx]) WorkflowInsert(ctx context.Context, p *errandstore.WorkflowInsertParams) (*errandstore.WorkflowInsertResult, error) {
	ws, ok := any(b.s).(errandstore.WorkflowTxStore[TTx])
	if !ok {
		return nil, errNoWorkflowTx
	}
	return ws.WorkflowInsertTx(ctx, b.tx, p)
}

func testWorkflowInsertTx(t *testing.T, h harness) {
	e := open(t, h)
	e.workflows()
	err := e.h.inTx(e.ctx, e.s, func(ctx context.Context, tx txOps) error {
		if _, err := tx.(workflowTxOps).WorkflowInsert(ctx, wfParams("w1", wfStep("a"))); err != nil {
			return err
		}
		return errRollback
	})
	if errors.Is(err, errNoWorkflowTx) {
		t.Skip("the store is not an errandstore.WorkflowTxStore of its transaction type")
	}
	if !errors.Is(err, errRollback) {
		t.Fatalf("InTx = %v", err)
	}
	e.noWorkflow("w1")
	e.notFound("w1.step.a")

	err = e.h.inTx(e.ctx, e.s, func(ctx context.Context, tx txOps) error {
		_, err := tx.(workflowTxOps).WorkflowInsert(ctx, wfParams("w1", wfStep("a")))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	wantStepState(t, e.workflow("w1"), "a", errandtype.StateQueued)
	if j := e.get("w1.step.a"); j.WorkflowID == nil || *j.WorkflowID != "w1" {
		t.Fatalf("job of a workflow inserted in a transaction: workflow %v", j.WorkflowID)
	}
}

func testWorkflowOutputs(t *testing.T, h harness) {
	e := open(t, h)
	e.insertWorkflow(wfParams("w1", wfStep("a"), wfStep("b", "a"), wfStep("c", "a"), wfStep("d")))
	// Advancing with nothing finished changes nothing.
	e.clock.Advance(time.Second)
	e.wantAdvance("w1", errandtype.WorkflowRunning)

	e.clock.Advance(time.Second)
	e.finishStep("w1", "a", `{"sku":"x-1","qty":2}`, true)
	if got := e.get("w1.step.a").Output; string(got) != `{"sku":"x-1","qty":2}` {
		t.Fatalf("output of a = %s", got)
	}
	e.wantOutputOfAPassedOn()
	// Again: nothing new.
	e.wantAdvance("w1", errandtype.WorkflowRunning)

	// A step without output: its dependants get no outputs for it.
	e.finishStep("w1", "b", "", true)
	e.finishStep("w1", "c", "", true)
	e.wantAdvance("w1", errandtype.WorkflowRunning)
	e.clock.Advance(time.Second)
	e.finishStep("w1", "d", `"done"`, true)
	r := e.wantAdvance("w1", errandtype.WorkflowSucceeded)
	if r.Workflow.FinishedAt == nil || !r.Workflow.FinishedAt.Equal(e.now()) || r.Workflow.FailedStep != nil {
		t.Fatalf("succeeded workflow: finished %v, failed step %v", r.Workflow.FinishedAt, r.Workflow.FailedStep)
	}
	e.wantAdvance("w1", errandtype.WorkflowSucceeded)
}

// wantOutputOfAPassedOn checks testWorkflowOutputs' advance after step a
// of w1 succeeded: its dependants b and c enqueued with a's output in
// their workflow context, and the workflow, as the advance returns it and
// as read, showing a's output and still running.
func (e *env) wantOutputOfAPassedOn() {
	t := e.t
	t.Helper()
	r := e.wantAdvance("w1", errandtype.WorkflowRunning, "w1.step.b", "w1.step.c")
	for _, id := range []string{"w1.step.b", "w1.step.c"} {
		n, wc := wfArgs(t, e.get(id))
		if n != 1 || wc.ID != "w1" || "w1.step."+wc.Step != id || wc.Compensating {
			t.Fatalf("args of %s: n %d, workflow %+v", id, n, wc)
		}
		if len(wc.Outputs) != 1 || !sameJSON(wc.Outputs["a"], []byte(`{"sku":"x-1","qty":2}`)) {
			t.Fatalf("outputs in the args of %s = %v, want a's", id, wc.Outputs)
		}
	}
	if v := stepView(t, r.Workflow, "a"); string(v.Output) != `{"sku":"x-1","qty":2}` || *v.State != errandtype.StateSucceeded || v.Attempts != 1 {
		t.Fatalf("view of a = %+v", v)
	}
	if !r.Workflow.UpdatedAt.Equal(e.now()) || r.Workflow.FinishedAt != nil {
		t.Fatalf("workflow after an advance: updated %v, finished %v", r.Workflow.UpdatedAt, r.Workflow.FinishedAt)
	}
	if got := e.workflow("w1"); !reflect.DeepEqual(got, r.Workflow) {
		t.Fatalf("WorkflowGet =\n  %+v\nwant the advance's\n  %+v", got, r.Workflow)
	}
}

func testWorkflowDiamond(t *testing.T, h harness) {
	e := open(t, h)
	e.insertWorkflow(wfParams("w1", wfStep("a"), wfStep("b", "a"), wfStep("c", "a"), wfStep("d", "b", "c")))
	e.finishStep("w1", "a", "", true)
	e.wantAdvance("w1", errandtype.WorkflowRunning, "w1.step.b", "w1.step.c")
	e.finishStep("w1", "b", `1`, true)
	e.wantAdvance("w1", errandtype.WorkflowRunning)
	e.finishStep("w1", "c", `2`, true)
	e.wantAdvance("w1", errandtype.WorkflowRunning, "w1.step.d")
	e.wantAdvance("w1", errandtype.WorkflowRunning)
	_, wc := wfArgs(t, e.get("w1.step.d"))
	if want := map[string]json.RawMessage{"b": json.RawMessage(`1`), "c": json.RawMessage(`2`)}; !sameOutputs(wc.Outputs, want) {
		t.Fatalf("outputs in d's args = %v, want b's and c's", wc.Outputs)
	}
	e.finishStep("w1", "d", "", true)
	e.wantAdvance("w1", errandtype.WorkflowSucceeded)
	n := 0
	for _, j := range e.listAll() {
		if j.ID == "w1.step.d" {
			n++
		}
	}
	if n != 1 || len(e.listAll()) != 4 {
		t.Fatalf("%d jobs of d among %d, want one of 4", n, len(e.listAll()))
	}
}

// testWorkflowConcurrentAdvance finishes a step with eight dependants and
// has many goroutines on two stores advance the workflow at once, by name
// and as the leader: each dependant is enqueued exactly once.
func testWorkflowConcurrentAdvance(t *testing.T, h harness) {
	e := open(t, h)
	e.workflows()
	other, ok := e.second().(errandstore.WorkflowStore)
	if !ok {
		t.Fatal("the second store is not an errandstore.WorkflowStore")
	}
	steps := []errandstore.WorkflowStepDef{wfStep("a")}
	for i := range 8 {
		steps = append(steps, wfStep(fmt.Sprintf("b%d", i), "a"))
	}
	e.insertWorkflow(wfParams("w1", steps...))
	e.clock.Advance(time.Second)
	e.finishStep("w1", "a", `{"ok":true}`, true)
	inserted, changed := e.advanceConcurrently(other)
	slices.Sort(inserted)
	var want []string
	for i := range 8 {
		want = append(want, fmt.Sprintf("w1.step.b%d", i))
	}
	if !slices.Equal(inserted, want) || changed != 1 {
		t.Fatalf("concurrent advances inserted %v in %d changes, want %v in one", inserted, changed, want)
	}
	if n := len(e.listAll()); n != 9 {
		t.Fatalf("%d jobs, want 9", n)
	}
	w := e.workflow("w1")
	for _, s := range w.Steps {
		if !s.Enqueued || s.State == nil {
			t.Fatalf("step %s: enqueued %v, state %v", s.Name, s.Enqueued, s.State)
		}
	}
}

// advanceConcurrently runs 16 advances of w1 at once, half of them in the
// second store other, half of them of every workflow with news; it returns
// the jobs they inserted and how many changed a workflow.
func (e *env) advanceConcurrently(other errandstore.WorkflowStore) (inserted []string, changed int) {
	t := e.t
	var (
		wg sync.WaitGroup
		mu sync.Mutex
	)
	for i := range 16 {
		s := e.workflows()
		if i%2 == 1 {
			s = other
		}
		wg.Go(func() {
			var p errandstore.WorkflowAdvanceParams
			if i%4 < 2 {
				p.IDs = []string{"w1"}
			}
			rs, err := s.WorkflowAdvance(e.ctx, &p)
			if err != nil {
				t.Errorf("WorkflowAdvance: %v", err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			for _, r := range rs {
				inserted = append(inserted, ids(r.Jobs)...)
				if r.Changed {
					changed++
				}
			}
		})
	}
	wg.Wait()
	return inserted, changed
}

// testWorkflowCompensate is the four-step workflow whose third step dies:
// the compensations of the second and then the first step run, each only
// after the one before succeeded, and the workflow fails; a replay of the
// third step is refused then.
func testWorkflowCompensate(t *testing.T, h harness) {
	e := open(t, h)
	e.insertWorkflow(wfParams("w1", wfUndoStep("s1"), wfUndoStep("s2", "s1"), wfUndoStep("s3", "s2"), wfUndoStep("s4", "s3")))
	e.finishStep("w1", "s1", `{"reserved":7}`, true)
	e.wantAdvance("w1", errandtype.WorkflowRunning, "w1.step.s2")
	e.finishStep("w1", "s2", `{"charge":"ch_1"}`, true)
	e.wantAdvance("w1", errandtype.WorkflowRunning, "w1.step.s3")
	e.clock.Advance(time.Second)
	e.finishStep("w1", "s3", "", false)
	e.wantCompensationOfS2()

	// The first compensation only after the second succeeded; a retried
	// attempt does not count.
	e.wantAdvance("w1", errandtype.WorkflowCompensating)
	j := e.claimIn("undo-s2", "w1.undo.s2")
	e.recordOK(retry(j, 0))
	e.wantAdvance("w1", errandtype.WorkflowCompensating)
	e.notFound("w1.undo.s1")
	e.clock.Advance(time.Second)
	e.finishUndo("w1", "s2", true)
	e.wantAdvance("w1", errandtype.WorkflowCompensating, "w1.undo.s1")
	e.clock.Advance(time.Second)
	e.finishUndo("w1", "s1", true)
	e.wantCompensatedFailed()
	e.wantAdvance("w1", errandtype.WorkflowFailed)

	// Compensated, it does not resume: a replay of the dead step is
	// refused (see the WorkflowReplay cases).
	e.clock.Advance(time.Minute)
	e.wantReplayRefused("w1", "s3", errandtype.WorkflowFailed, []string{"s2", "s1"}, "")
	if n := len(e.listAll()); n != 5 {
		t.Fatalf("%d jobs, want 5 (three steps, two compensations)", n)
	}
}

// wantCompensationOfS2 checks testWorkflowCompensate's advance after s3
// died: w1 compensating, failed at s3, not finished, s4 never enqueued, and
// the compensation of s2 enqueued with the outputs of s1 and s2.
func (e *env) wantCompensationOfS2() {
	t := e.t
	t.Helper()
	r := e.wantAdvance("w1", errandtype.WorkflowCompensating, "w1.undo.s2")
	if r.Workflow.FailedStep == nil || *r.Workflow.FailedStep != "s3" || r.Workflow.FinishedAt != nil {
		t.Fatalf("compensating workflow: failed step %v, finished %v", r.Workflow.FailedStep, r.Workflow.FinishedAt)
	}
	if s4 := stepView(t, r.Workflow, "s4"); s4.Enqueued || s4.State != nil {
		t.Fatalf("s4 after s3 died: %+v", s4)
	}
	_, wc := wfArgs(t, e.get("w1.undo.s2"))
	wantOut := map[string]json.RawMessage{"s1": json.RawMessage(`{"reserved":7}`), "s2": json.RawMessage(`{"charge":"ch_1"}`)}
	if wc.ID != "w1" || wc.Step != "s2" || !wc.Compensating || !sameOutputs(wc.Outputs, wantOut) {
		t.Fatalf("compensation's workflow context = %+v", wc)
	}
}

// wantCompensatedFailed checks testWorkflowCompensate's advance after the
// compensations of s2 and s1 succeeded: w1 failed at s3, finished now, and
// the dead step's own compensation never enqueued.
func (e *env) wantCompensatedFailed() {
	t := e.t
	t.Helper()
	r := e.wantAdvance("w1", errandtype.WorkflowFailed)
	if r.Workflow.FailedStep == nil || *r.Workflow.FailedStep != "s3" || r.Workflow.FinishedAt == nil || !r.Workflow.FinishedAt.Equal(e.now()) {
		t.Fatalf("failed workflow: failed step %v, finished %v", r.Workflow.FailedStep, r.Workflow.FinishedAt)
	}
	for _, s := range []string{"s1", "s2"} {
		if c := stepView(t, r.Workflow, s).Compensation; c == nil || c.State == nil || *c.State != errandtype.StateSucceeded || !c.Enqueued {
			t.Fatalf("compensation of %s: %+v", s, c)
		}
	}
	if c := stepView(t, r.Workflow, "s3").Compensation; c.Enqueued || c.State != nil {
		t.Fatalf("the dead step's compensation ran: %+v", c)
	}
}

// testWorkflowDeletedJob: the jobs of a failed workflow that retention
// deleted are never enqueued again, not even once a replay of a dead step
// makes it run again; the workflow waits on them. (Retention keeps a failed
// workflow's other jobs until its failed step's job has gone; here that
// step was cancelled, and went first. Nothing was compensated, so the
// other dead step is replayed.)
func testWorkflowDeletedJob(t *testing.T, h harness) {
	e := open(t, h)
	e.insertWorkflow(wfParams("w1", wfStep("a"), wfStep("b", "a"), wfStep("c", "a")))
	e.finishStep("w1", "a", "", true)
	e.wantAdvance("w1", errandtype.WorkflowRunning, "w1.step.b", "w1.step.c")
	if _, err := e.s.JobCancel(e.ctx, &errandstore.JobCancelParams{ID: "w1.step.b", Operator: "ops", Reason: "not needed"}); err != nil {
		t.Fatal(err)
	}
	e.finishStep("w1", "c", "", false)
	e.wantAdvance("w1", errandtype.WorkflowFailed)
	e.clock.Advance(2 * time.Hour)
	p := pruneParams(time.Hour, 1000*time.Hour)
	if r := e.prune(p); r != (errandstore.PruneResult{Cancelled: 1}) {
		t.Fatalf("prune: %+v, want the failed step b", r)
	}
	if r := e.prune(p); r != (errandstore.PruneResult{Succeeded: 1}) {
		t.Fatalf("second prune: %+v, want a, once b has gone", r)
	}
	if _, err := e.s.JobReplay(e.ctx, &errandstore.JobReplayParams{ID: "w1.step.c", Operator: "ops", Reason: "fixed"}); err != nil {
		t.Fatal(err)
	}
	r := e.wantAdvance("w1", errandtype.WorkflowRunning)
	e.notFound("w1.step.a")
	e.notFound("w1.step.b")
	e.notFound("w1.undo.a")
	if a := stepView(t, r.Workflow, "a"); !a.Enqueued || a.State != nil {
		t.Fatalf("deleted step's view = %+v, want enqueued without a state", a)
	}
}

// testWorkflowLeader checks the leader's form (no IDs): it advances the
// open workflows whose jobs are all finished and one of them finished since
// the last advance, and looks at a stuck one once.
func testWorkflowLeader(t *testing.T, h harness) {
	e := open(t, h)
	leader := e.leaderAdvance
	e.insertWorkflow(wfParams("w1", wfStep("a")))
	e.clock.Advance(time.Second)
	e.insertWorkflow(wfParams("w2", wfStep("a")))
	e.clock.Advance(time.Second)
	e.insertWorkflow(wfParams("w3", wfUndoStep("a"), wfStep("b", "a")))
	e.clock.Advance(time.Second)
	e.insertWorkflow(wfParams("w4", wfStep("a")))
	if got := leader(); len(got) != 0 {
		t.Fatalf("leader with nothing finished advanced %v", got)
	}
	e.clock.Advance(time.Second)
	e.finishStep("w1", "a", "", true) // news
	e.claimIn("a", "w2.step.a")       // running: not all finished
	e.finishStep("w3", "a", "", true)
	e.wantAdvance("w3", errandtype.WorkflowRunning, "w3.step.b")
	e.finishStep("w3", "b", "", false)
	e.wantAdvance("w3", errandtype.WorkflowCompensating, "w3.undo.a")
	e.finishStep("w4", "a", "", true) // news too, but past the limit below
	e.clock.Advance(time.Second)
	e.finishUndo("w3", "a", false) // a dead compensation holds w3

	if rs := e.advanceWorkflows(&errandstore.WorkflowAdvanceParams{Limit: 1}); len(rs) != 1 || rs[0].Workflow.ID != "w1" || rs[0].Workflow.State != errandtype.WorkflowSucceeded {
		t.Fatalf("leader with limit 1 = %d results, want w1 succeeded", len(rs))
	}
	if got := leader(); !slices.Equal(got, []string{"w3", "w4"}) {
		t.Fatalf("leader advanced %v, want [w3 w4]", got)
	}
	if w := e.workflow("w3"); w.State != errandtype.WorkflowCompensating {
		t.Fatalf("w3 with a dead compensation is %s", w.State)
	}
	e.wantHeldW3LookedAtWithinTheMargin()
	e.wantHeldW3ReleasedByReplay()
}

// leaderAdvance advances, as the leader does, every workflow with news,
// and returns their ids.
func (e *env) leaderAdvance() []string {
	e.t.Helper()
	var out []string
	for _, r := range e.advanceWorkflows(&errandstore.WorkflowAdvanceParams{}) {
		out = append(out, r.Workflow.ID)
	}
	return out
}

// wantHeldW3LookedAtWithinTheMargin: w3 of testWorkflowLeader, held by a
// dead compensation, is looked at again while its last look was within
// the margin of its last finish, and no more after.
func (e *env) wantHeldW3LookedAtWithinTheMargin() {
	t := e.t
	t.Helper()
	e.clock.Advance(errandstore.WorkflowRecheckOverlap - 2*time.Second)
	if got := e.leaderAdvance(); !slices.Equal(got, []string{"w3"}) {
		t.Fatalf("leader within the margin advanced %v, want [w3]", got)
	}
	e.clock.Advance(3 * time.Second)
	if got := e.leaderAdvance(); !slices.Equal(got, []string{"w3"}) {
		t.Fatalf("leader after a look within the margin advanced %v, want [w3]", got)
	}
	if got := e.leaderAdvance(); len(got) != 0 {
		t.Fatalf("leader advanced %v again, want none", got)
	}
}

// wantHeldW3ReleasedByReplay: once the dead compensation of
// testWorkflowLeader's w3 is replayed and succeeds, w3 is news again and
// the leader's advance fails it at b; then nothing is left to advance.
func (e *env) wantHeldW3ReleasedByReplay() {
	t := e.t
	t.Helper()
	e.clock.Advance(time.Second)
	if _, err := e.s.JobReplay(e.ctx, &errandstore.JobReplayParams{ID: "w3.undo.a", Operator: "ops", Reason: "fixed"}); err != nil {
		t.Fatal(err)
	}
	e.finishUndo("w3", "a", true)
	if got := e.leaderAdvance(); !slices.Equal(got, []string{"w3"}) {
		t.Fatalf("leader after the compensation succeeded advanced %v, want [w3]", got)
	}
	if w := e.workflow("w3"); w.State != errandtype.WorkflowFailed || w.FailedStep == nil || *w.FailedStep != "b" {
		t.Fatalf("w3 = %s, failed step %v; want failed at b", w.State, w.FailedStep)
	}
	if got := e.leaderAdvance(); len(got) != 0 {
		t.Fatalf("leader advanced %v after every workflow settled", got)
	}
}

// testWorkflowLeaderLateOutcome: an outcome whose finish time is before
// the workflow's CheckedAt (its transaction began before an advance read
// the jobs and committed after it, and its worker died before advancing)
// is still news to the leader, within [errandstore.WorkflowRecheckOverlap].
func testWorkflowLeaderLateOutcome(t *testing.T, h harness) {
	e := open(t, h)
	e.insertWorkflow(wfParams("w1", wfStep("a"), wfStep("b", "a"), wfStep("c"), wfStep("d", "c")))
	a := e.claimIn("a", "w1.step.a")
	t0 := e.now()
	// c succeeds and its advance enqueues d at t0+10s: checked_at.
	e.clock.Set(t0.Add(10 * time.Second))
	e.finishStep("w1", "c", "", true)
	e.wantAdvance("w1", errandtype.WorkflowRunning, "w1.step.d")
	d := e.claimIn("d", "w1.step.d")
	// a and d finish at t0+5s, the time their transactions began.
	e.clock.Set(t0.Add(5 * time.Second))
	e.recordOK(succeeded(a))
	e.recordOK(succeeded(d))

	e.clock.Set(t0.Add(11 * time.Second))
	rs := e.advanceWorkflows(&errandstore.WorkflowAdvanceParams{})
	if len(rs) != 1 || rs[0].Workflow.ID != "w1" || !slices.Equal(ids(rs[0].Jobs), []string{"w1.step.b"}) {
		t.Fatalf("leader after late outcomes = %d results, want w1 enqueueing b", len(rs))
	}
	e.finishStep("w1", "b", "", true)
	e.clock.Set(t0.Add(12 * time.Second))
	if rs := e.advanceWorkflows(&errandstore.WorkflowAdvanceParams{}); len(rs) != 1 || rs[0].Workflow.State != errandtype.WorkflowSucceeded {
		t.Fatalf("leader after b = %d results, want w1 succeeded", len(rs))
	}
}

// testWorkflowLeaderBesideRunning: a step's outcome that no advance
// followed (its worker died in between) is news to the leader while the
// workflow's other steps still run, so that the steps waiting on it start
// without waiting for the others to end.
func testWorkflowLeaderBesideRunning(t *testing.T, h harness) {
	e := open(t, h)
	e.insertWorkflow(wfParams("w1", wfStep("a"), wfStep("b"), wfStep("c", "a")))
	e.claimIn("b", "w1.step.b") // runs on, for an hour say
	e.clock.Advance(time.Second)
	e.finishStep("w1", "a", "", true) // and its worker dies before advancing
	rs := e.advanceWorkflows(&errandstore.WorkflowAdvanceParams{})
	if len(rs) != 1 || rs[0].Workflow.ID != "w1" || !slices.Equal(ids(rs[0].Jobs), []string{"w1.step.c"}) {
		var got [][]string
		for _, r := range rs {
			got = append(got, append([]string{r.Workflow.ID}, ids(r.Jobs)...))
		}
		t.Fatalf("leader advanced %v; want w1, enqueueing w1.step.c beside the running b", got)
	}
	if rs := e.advanceWorkflows(&errandstore.WorkflowAdvanceParams{}); len(rs) != 0 {
		t.Fatalf("leader advanced %d workflows again with no news, want none", len(rs))
	}
}

// testWorkflowBulkReplay: a bulk replay leaves out the dead steps of
// workflows that are compensating, as a single replay refuses them, and
// replays the steps of failed workflows and dead compensations.
func testWorkflowBulkReplay(t *testing.T, h harness) {
	e := open(t, h)
	// w1 compensates for its dead step s2.
	e.insertWorkflow(wfParams("w1", wfUndoStep("s1"), wfStep("s2", "s1")))
	e.finishStep("w1", "s1", "", true)
	e.wantAdvance("w1", errandtype.WorkflowRunning, "w1.step.s2")
	e.finishStep("w1", "s2", "", false)
	e.wantAdvance("w1", errandtype.WorkflowCompensating, "w1.undo.s1")
	// w2 failed: nothing to compensate.
	e.insertWorkflow(wfParams("w2", wfStep("s1")))
	e.finishStep("w2", "s1", "", false)
	e.wantAdvance("w2", errandtype.WorkflowFailed)
	// w3 is held by its dead compensation.
	e.insertWorkflow(wfParams("w3", wfUndoStep("u1"), wfStep("u2", "u1")))
	e.finishStep("w3", "u1", "", true)
	e.wantAdvance("w3", errandtype.WorkflowRunning, "w3.step.u2")
	e.finishStep("w3", "u2", "", false)
	e.wantAdvance("w3", errandtype.WorkflowCompensating, "w3.undo.u1")
	e.finishUndo("w3", "u1", false)
	e.wantAdvance("w3", errandtype.WorkflowCompensating)
	e.deadWith("plain", "default", "k", errand.ClassPermanent)
	held := []*errandtype.Job{e.get("w1.step.s2"), e.get("w3.step.u2")}

	want := []string{"w2.step.s1", "w3.undo.u1", "plain"}
	dry := bulk(errandstore.DeadFilter{})
	dry.DryRun = true
	if got := ids(e.replayMany(dry)); !slices.Equal(got, want) {
		t.Fatalf("dry run would replay %v, want %v", got, want)
	}
	dry.Held = true
	if got := ids(e.replayMany(dry)); !slices.Equal(got, ids(held)) {
		t.Fatalf("the steps left out are listed as %v, want %v", got, ids(held))
	}
	dry.Filter.Kind = "plain"
	if got := ids(e.replayMany(dry)); len(got) != 0 {
		t.Fatalf("the steps left out of a replay of kind plain are listed as %v, want none", got)
	}
	if got := ids(e.replayMany(bulk(errandstore.DeadFilter{}))); !slices.Equal(got, want) {
		t.Fatalf("bulk replay replayed %v, want %v", got, want)
	}
	for _, j := range held {
		e.unchanged("held step after a bulk replay", j)
	}
	if n := len(e.auditList(&errandstore.AuditListParams{JobID: "w1.step.s2"})); n != 0 {
		t.Fatalf("held step has %d audit records", n)
	}
	// The store's own replay of one job refuses a held step too, in its
	// transaction: a check before it, by the Client, could be overtaken
	// by an advance that made the workflow compensating.
	for _, j := range held {
		_, err := e.s.JobReplay(e.ctx, &errandstore.JobReplayParams{ID: j.ID, Operator: "ops", Reason: "retry"})
		var se *errandtype.StateError
		if !errors.As(err, &se) || !strings.Contains(se.Reason, "compensating") || !errors.Is(err, errandstore.ErrWorkflowCompensated) {
			t.Fatalf("JobReplay(%s) of a held step = %v, want a *StateError saying its workflow is compensating", j.ID, err)
		}
		e.unchanged("held step after its replay was refused", j)
	}

	// Once w1's compensation ran, w1 failed, and its step stays left out.
	e.finishUndo("w1", "s1", true)
	e.wantAdvance("w1", errandtype.WorkflowFailed)
	if got := ids(e.replayMany(bulk(errandstore.DeadFilter{}))); len(got) != 0 {
		t.Fatalf("bulk replay after w1 failed replayed %v, want none", got)
	}
	e.unchanged("compensated step after a bulk replay", held[0])
}

// testWorkflowOutcomeResult: asked to (Follow), the result of an outcome
// names the job's kind, batch and workflow, so that what follows it needs
// no read of the job.
func testWorkflowOutcomeResult(t *testing.T, h harness) {
	e := open(t, h)
	e.insertWorkflow(wfParams("w1", wfStep("a")))
	e.insertBatch(batchParams("b1", 1))
	e.insertIDs("plain")
	wf := e.claimIn("a", "w1.step.a")
	js := e.claim(2)
	if got := ids(js); !slices.Equal(got, []string{"b1-m0", "plain"}) {
		t.Fatalf("claimed %v, want [b1-m0 plain]", got)
	}
	stale := succeeded(js[1])
	stale.LeaseToken = "stale"
	rs, err := e.s.JobRecordOutcomes(e.ctx, &errandstore.JobRecordOutcomesParams{Follow: true, Outcomes: []*errandstore.JobOutcome{
		succeeded(wf), dead(js[0]), stale, {JobLease: leaseOf(js[1]), Kind: errandstore.OutcomeSnooze, Delay: time.Minute}}})
	if err != nil {
		t.Fatal(err)
	}
	for i, w := range []struct{ state, kind, batch, workflow string }{
		{"succeeded", "step_a", "<nil>", "w1"},
		{"dead", "email", "b1", "<nil>"},
		{"", "", "<nil>", "<nil>"},
		{"queued", "email", "<nil>", "<nil>"},
	} {
		r := rs[i]
		if string(r.State) != w.state || r.Kind != w.kind || nilOr(r.BatchID) != w.batch || nilOr(r.WorkflowID) != w.workflow {
			t.Errorf("result %d = state %q, kind %q, batch %s, workflow %s; want %+v", i, r.State, r.Kind, nilOr(r.BatchID), nilOr(r.WorkflowID), w)
		}
	}
	e.wantGroupOutcomeResults()
}

// testOutcomeReportsJob: asked to (Follow), the result of an outcome holds
// the job's output and last error as a read right after the write finds
// them: an earlier attempt's, an outcome's own, none; for a job the write
// deleted, what it held. Outcomes go alone, in a group of one kind, and
// beside outcomes of other kinds.
func testOutcomeReportsJob(t *testing.T, h harness) {
	e := open(t, h)
	ws := e.workflows()
	e.insertIDs("a", "b", "c", "d", "e", "f", "g", "h")
	js := e.claim(8)
	if len(js) != 8 {
		t.Fatalf("claimed %d of 8", len(js))
	}
	for i, j := range js[:4] {
		out := json.RawMessage(fmt.Sprintf(`{"receipt": %d}`, i))
		if err := ws.JobSetOutput(e.ctx, &errandstore.JobSetOutputParams{ID: j.ID, LeaseToken: token(j), Output: out}); err != nil {
			t.Fatal(err)
		}
	}
	// a and b fail once, then run again: their outputs and errors stay.
	e.record(retry(js[0], 0), retry(js[1], 0))
	again := e.claim(2)
	if got := ids(again); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("claimed %v again, want [a b]", got)
	}
	held := map[string]*errandtype.Job{"d": e.get("d")} // read before the write deletes it
	follow := func(name string, os ...*errandstore.JobOutcome) {
		t.Helper()
		rs, err := e.s.JobRecordOutcomes(e.ctx, &errandstore.JobRecordOutcomesParams{Follow: true, Outcomes: os})
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range rs {
			if r.Err != nil {
				t.Fatalf("%s, outcome %d: %v", name, i, r.Err)
			}
			want := held[os[i].ID]
			if !os[i].Delete {
				want = e.get(os[i].ID)
			}
			if string(r.Output) != string(want.Output) || !reflect.DeepEqual(r.LastError, want.LastError) {
				t.Errorf("%s, job %s: output %s, last error %+v; a read finds %s, %+v", name, os[i].ID, r.Output, r.LastError, want.Output, want.LastError)
			}
		}
	}
	gone := succeeded(js[3])
	gone.Delete = true
	follow("alone", succeeded(again[0]))
	follow("beside a death and a deletion", succeeded(again[1]), dead(js[2]), gone)
	follow("a group", succeeded(js[4]), succeeded(js[5]), succeeded(js[6]), succeeded(js[7]))
	if r := e.get("b"); r.Output == nil || r.LastError == nil {
		t.Errorf("job b holds output %s, last error %+v; want its first attempt's", r.Output, r.LastError)
	}
}

// nilOr is *p, or <nil> when p is nil.
func nilOr(p *string) string {
	if p == nil {
		return "<nil>"
	}
	return *p
}

// wantGroupOutcomeResults: enough successes of one kind for a store to
// write them with one statement (the members of batch b2): each result
// still names its kind and batch.
func (e *env) wantGroupOutcomeResults() {
	t := e.t
	t.Helper()
	e.insertBatch(batchParams("b2", 5))
	ms := e.claim(5)
	outs := make([]*errandstore.JobOutcome, len(ms))
	for i, j := range ms {
		outs[i] = succeeded(j)
	}
	rs, err := e.s.JobRecordOutcomes(e.ctx, &errandstore.JobRecordOutcomesParams{Follow: true, Outcomes: outs})
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range rs {
		if r.State != errandtype.StateSucceeded || r.Kind != "email" || nilOr(r.BatchID) != "b2" || r.WorkflowID != nil {
			t.Errorf("result %d of a group = state %q, kind %q, batch %s, workflow %s; want succeeded, email, b2, <nil>", i, r.State, r.Kind, nilOr(r.BatchID), nilOr(r.WorkflowID))
		}
		if ms[i].AttemptedAt == nil || !r.AttemptedAt.Equal(*ms[i].AttemptedAt) {
			t.Errorf("result %d of a group attempted at %v; want the claim's %v", i, r.AttemptedAt, ms[i].AttemptedAt)
		}
	}
}

func testWorkflowSetOutput(t *testing.T, h harness) {
	e := open(t, h)
	ws := e.workflows()
	e.insertWorkflow(wfParams("w1", wfStep("a")))
	j := e.claimIn("a", "w1.step.a")
	before := e.get(j.ID)
	err := ws.JobSetOutput(e.ctx, &errandstore.JobSetOutputParams{ID: j.ID, LeaseToken: "not-the-token", Output: json.RawMessage(`1`)})
	if !errors.Is(err, errandtype.ErrLeaseLost) {
		t.Fatalf("JobSetOutput with a wrong token = %v, want ErrLeaseLost", err)
	}
	var ie *errandtype.InputError
	for name, out := range map[string]string{
		"not JSON": `{`, "NUL byte": "\"a\x00b\"", "NUL escape": `{"a": "x\u0000y"}`,
		"lone surrogate": `"\ud800"`, "number beyond numeric": `[1e200000]`,
	} {
		if err := ws.JobSetOutput(e.ctx, &errandstore.JobSetOutputParams{ID: j.ID, LeaseToken: *j.LeaseToken, Output: json.RawMessage(out)}); !errors.As(err, &ie) {
			t.Fatalf("JobSetOutput(%s) = %v, want an *InputError", name, err)
		}
	}
	e.unchanged("job after refused outputs", before)

	if err := ws.JobSetOutput(e.ctx, &errandstore.JobSetOutputParams{ID: j.ID, LeaseToken: *j.LeaseToken, Output: json.RawMessage(`{"a":1}`)}); err != nil {
		t.Fatal(err)
	}
	if err := ws.JobSetOutput(e.ctx, &errandstore.JobSetOutputParams{ID: j.ID, LeaseToken: *j.LeaseToken, Output: json.RawMessage(`{"a":2}`)}); err != nil {
		t.Fatal(err)
	}
	if got := e.get(j.ID).Output; string(got) != `{"a":2}` {
		t.Fatalf("output = %s, want the last recorded", got)
	}
	e.recordOK(succeeded(j))
	err = ws.JobSetOutput(e.ctx, &errandstore.JobSetOutputParams{ID: j.ID, LeaseToken: *j.LeaseToken, Output: json.RawMessage(`3`)})
	if !errors.Is(err, errandtype.ErrLeaseLost) {
		t.Fatalf("JobSetOutput after the outcome = %v, want ErrLeaseLost", err)
	}
	if got := e.get(j.ID).Output; string(got) != `{"a":2}` {
		t.Fatalf("output after a lost lease = %s", got)
	}
	if got := e.insertIDs("plain")[0]; got.Output != nil || got.WorkflowID != nil {
		t.Fatalf("a plain job: workflow %v, output %s", got.WorkflowID, got.Output)
	}
}

func testWorkflowList(t *testing.T, h harness) {
	e := open(t, h)
	list := func(p *errandstore.WorkflowListParams) []string {
		t.Helper()
		ws, err := e.workflows().WorkflowList(e.ctx, p)
		if err != nil {
			t.Fatalf("WorkflowList(%+v): %v", *p, err)
		}
		out := []string{}
		for _, w := range ws {
			if len(w.Steps) != 2 || w.Steps[0].State == nil {
				t.Fatalf("listed workflow %s without its steps' view: %+v", w.ID, w.Steps)
			}
			out = append(out, w.ID)
		}
		return out
	}
	if got := list(&errandstore.WorkflowListParams{}); len(got) != 0 {
		t.Fatalf("list of none = %v", got)
	}
	for _, id := range []string{"w1", "w2", "w3"} {
		e.insertWorkflow(wfParams(id, wfStep("a"), wfStep("b", "a")))
		e.clock.Advance(time.Second)
	}
	e.clock.Advance(-time.Second)
	e.insertWorkflow(wfParams("w0", wfStep("a"), wfStep("b", "a"))) // at w3's time: the id orders them
	e.clock.Advance(time.Second)
	e.finishStep("w1", "a", "", true)
	e.advanceOne("w1")
	e.finishStep("w1", "b", "", true)
	e.advanceOne("w1")
	e.finishStep("w2", "a", "", false)
	e.advanceOne("w2")
	for _, c := range []struct {
		p    errandstore.WorkflowListParams
		want []string
	}{
		{errandstore.WorkflowListParams{}, []string{"w3", "w0", "w2", "w1"}},
		{errandstore.WorkflowListParams{Limit: 2}, []string{"w3", "w0"}},
		{errandstore.WorkflowListParams{States: []errandtype.WorkflowState{errandtype.WorkflowRunning}}, []string{"w3", "w0"}},
		// Pages: after w3 (its time and id), after w0, and after a
		// position between them whose workflow does not exist.
		{errandstore.WorkflowListParams{Limit: 2, Before: cursorOf(e.workflow("w3").CreatedAt, "w3")}, []string{"w0", "w2"}},
		{errandstore.WorkflowListParams{Limit: 2, Before: cursorOf(e.workflow("w0").CreatedAt, "w0")}, []string{"w2", "w1"}},
		{errandstore.WorkflowListParams{Before: cursorOf(e.workflow("w3").CreatedAt, "w1")}, []string{"w0", "w2", "w1"}},
		{errandstore.WorkflowListParams{Before: cursorOf(e.workflow("w1").CreatedAt, "w1")}, []string{}},
		{errandstore.WorkflowListParams{States: []errandtype.WorkflowState{errandtype.WorkflowRunning}, Before: cursorOf(e.workflow("w3").CreatedAt, "w3")}, []string{"w0"}},
		{errandstore.WorkflowListParams{States: []errandtype.WorkflowState{errandtype.WorkflowSucceeded, errandtype.WorkflowFailed}}, []string{"w2", "w1"}},
		{errandstore.WorkflowListParams{States: []errandtype.WorkflowState{errandtype.WorkflowCompensating}}, []string{}},
	} {
		if got := list(&c.p); !slices.Equal(got, c.want) {
			t.Errorf("WorkflowList(%+v) = %v, want %v", c.p, got, c.want)
		}
	}
	if ws, err := e.workflows().WorkflowList(e.ctx, &errandstore.WorkflowListParams{}); err == nil {
		for _, w := range ws {
			if got := e.workflow(w.ID); !reflect.DeepEqual(got, w) {
				t.Errorf("listed %s =\n  %+v\nWorkflowGet\n  %+v", w.ID, w, got)
			}
		}
	}
}

// cursorOf is the position of an item created at at with id id.
func cursorOf(at time.Time, id string) *errandtype.ListCursor {
	return &errandtype.ListCursor{CreatedAt: at, ID: id}
}

func (e *env) workflowCounts() map[errandtype.WorkflowState]int {
	e.t.Helper()
	m, err := e.workflows().WorkflowCounts(e.ctx)
	if err != nil {
		e.t.Fatalf("WorkflowCounts: %v", err)
	}
	return m
}

// testWorkflowCounts: every state is counted, 0 when none is in it.
func testWorkflowCounts(t *testing.T, h harness) {
	e := open(t, h)
	want := map[errandtype.WorkflowState]int{errandtype.WorkflowRunning: 0, errandtype.WorkflowCompensating: 0,
		errandtype.WorkflowSucceeded: 0, errandtype.WorkflowFailed: 0}
	if got := e.workflowCounts(); !reflect.DeepEqual(got, want) {
		t.Fatalf("counts with no workflow = %v, want %v", got, want)
	}
	e.insertWorkflow(wfParams("w-run1", wfStep("a")))
	e.insertWorkflow(wfParams("w-run2", wfStep("a")))
	e.insertWorkflow(wfParams("w-ok", wfStep("o")))
	e.finishStep("w-ok", "o", "", true)
	e.wantAdvance("w-ok", errandtype.WorkflowSucceeded)
	e.insertWorkflow(wfParams("w-comp", wfUndoStep("c1"), wfStep("c2", "c1")))
	e.finishStep("w-comp", "c1", "", true)
	e.wantAdvance("w-comp", errandtype.WorkflowRunning, "w-comp.step.c2")
	e.finishStep("w-comp", "c2", "", false)
	e.wantAdvance("w-comp", errandtype.WorkflowCompensating, "w-comp.undo.c1")
	want[errandtype.WorkflowRunning], want[errandtype.WorkflowSucceeded], want[errandtype.WorkflowCompensating] = 2, 1, 1
	if got := e.workflowCounts(); !reflect.DeepEqual(got, want) {
		t.Fatalf("counts = %v, want %v", got, want)
	}
	e.finishUndo("w-comp", "c1", true)
	e.wantAdvance("w-comp", errandtype.WorkflowFailed)
	want[errandtype.WorkflowCompensating], want[errandtype.WorkflowFailed] = 0, 1
	if got := e.workflowCounts(); !reflect.DeepEqual(got, want) {
		t.Fatalf("counts after the compensation = %v, want %v", got, want)
	}
}

// testWorkflowAdvanceFailureSkipped: a workflow whose advance fails (here
// its next step's job, which the database refuses) is named in the error
// and left as it was, and the workflows after it in the leader's pass
// advance all the same, on every pass.
func testWorkflowAdvanceFailureSkipped(t *testing.T, h harness) {
	e := open(t, h)
	e.insertWorkflow(wfParams("w1", wfStep("a"), wfStep("b", "a")))
	e.clock.Advance(time.Second)
	e.insertWorkflow(wfParams("w2", wfStep("y")))
	e.refuseJob(errandstore.WorkflowStepJobID("w1", "b"))
	e.finishStep("w1", "a", "", true)
	e.finishStep("w2", "y", "", true)
	for pass := range 2 {
		rs, err := e.workflows().WorkflowAdvance(e.ctx, &errandstore.WorkflowAdvanceParams{})
		if err == nil || !strings.Contains(err.Error(), "w1") {
			t.Errorf("pass %d: error %v, want one naming w1", pass, err)
		}
		if pass == 0 && (len(rs) != 1 || rs[0].Workflow.ID != "w2" || rs[0].Workflow.State != errandtype.WorkflowSucceeded) {
			t.Fatalf("pass %d advanced %d workflows, want w2 to succeed", pass, len(rs))
		}
	}
	if w := e.workflow("w2"); w.State != errandtype.WorkflowSucceeded {
		t.Fatalf("w2 is %s, want succeeded", w.State)
	}
	if w := e.workflow("w1"); w.State != errandtype.WorkflowRunning || stepView(t, w, "b").Enqueued {
		t.Fatalf("w1 is %s with b enqueued %v, want it running as it was", w.State, stepView(t, w, "b").Enqueued)
	}
	e.notFound(errandstore.WorkflowStepJobID("w1", "b"))
}

// testWorkflowArgsTooLarge: a join whose args, with the outputs of its
// dependencies, would be over the bound of a job's args does not hold the
// workflow running for ever, failing every advance: it is enqueued dead,
// unrun, with an error of class args_too_large that says why and what to
// do, and the workflow compensates, its compensation (whose args would
// hold every output) dead the same way. Replaying the compensation, then
// the join with smaller args, resumes the workflow to its end.
func testWorkflowArgsTooLarge(t *testing.T, h harness) {
	e := open(t, h)
	e.insertJoinOverTheBound("w1")
	e.clock.Advance(time.Second)
	rs, err := e.workflows().WorkflowAdvance(e.ctx, &errandstore.WorkflowAdvanceParams{})
	if err != nil {
		t.Fatalf("WorkflowAdvance: %v", err)
	}
	if len(rs) != 1 || rs[0].Workflow.State != errandtype.WorkflowCompensating || !slices.Equal(ids(rs[0].Jobs), []string{"w1.step.join", "w1.undo.s0"}) {
		t.Fatalf("advance = %+v, want w1 compensating with join and the undo of s0 inserted", rs)
	}
	if f := rs[0].Workflow.FailedStep; f == nil || *f != "join" {
		t.Fatalf("failed step %v, want join", f)
	}
	// The workflow's view says why, as the advance made it and as read.
	for _, w := range []*errandtype.Workflow{rs[0].Workflow, e.workflow("w1")} {
		wantArgsTooLargeView(t, w)
	}
	for _, id := range []string{"w1.step.join", "w1.undo.s0"} {
		e.wantDeadArgsTooLarge(id)
	}
	// Nothing more to do until an operator acts: a dead compensation holds
	// the workflow.
	if rs := e.advanceWorkflows(&errandstore.WorkflowAdvanceParams{IDs: []string{"w1"}}); len(rs) != 1 || rs[0].Changed {
		t.Fatalf("a second advance changed the workflow: %+v", rs)
	}
	e.compensateAfterArgsTooLarge("w1")
}

// insertJoinOverTheBound inserts workflow id whose step join depends on
// 17 steps, s0 (which has a compensation) to s16, and finishes each of
// them with an output of the largest size a step may have: with them, the
// args of join, and of s0's compensation, are over a job's bound.
func (e *env) insertJoinOverTheBound(id string) {
	steps := []errandstore.WorkflowStepDef{wfUndoStep("s0")}
	names := []string{"s0"}
	for i := 1; i < 17; i++ {
		n := fmt.Sprintf("s%d", i)
		steps = append(steps, wfStep(n))
		names = append(names, n)
	}
	steps = append(steps, wfStep("join", names...), wfStep("after", "join"))
	e.insertWorkflow(wfParams(id, steps...))
	out := `"` + strings.Repeat("a", errandstore.MaxOutputBytes-2) + `"`
	for _, n := range names {
		e.finishStep(id, n, out, true)
	}
}

// wantArgsTooLargeView checks that w's view of its join and of the
// compensation of s0 says they failed with class args_too_large, and that
// s0 itself did not.
func wantArgsTooLargeView(t *testing.T, w *errandtype.Workflow) {
	t.Helper()
	join, s0 := stepView(t, w, "join"), stepView(t, w, "s0")
	if join.LastError == nil || join.LastError.Class != errandstore.ClassArgsTooLarge ||
		s0.Compensation == nil || s0.Compensation.LastError == nil || s0.Compensation.LastError.Class != errandstore.ClassArgsTooLarge || s0.LastError != nil {
		t.Fatalf("view: join's last error %+v, s0's %+v and its compensation's %+v; want %s for join and the compensation",
			join.LastError, s0.LastError, s0.Compensation, errandstore.ClassArgsTooLarge)
	}
}

// wantDeadArgsTooLarge checks that job id of workflow w1 was enqueued
// dead, unrun, with an error of class args_too_large that says why and
// what to do, and args with the workflow's context but not the outputs.
func (e *env) wantDeadArgsTooLarge(id string) {
	t := e.t
	t.Helper()
	j := e.get(id)
	if j.State != errandtype.StateDead || j.Attempt != 0 || j.FinishedAt == nil || !j.FinishedAt.Equal(e.now()) || j.LastError == nil ||
		j.LastError.Class != errandstore.ClassArgsTooLarge || len(j.Errors) != 1 || j.Errors[0].Attempt != 0 {
		t.Fatalf("job %s: state %s, attempt %d, finished %v, last error %+v, errors %+v; want dead at once with class %s",
			id, j.State, j.Attempt, j.FinishedAt, j.LastError, j.Errors, errandstore.ClassArgsTooLarge)
	}
	for _, want := range []string{"s0, s1", "over the bound of 1048576", "errand replay " + id + " --args", "record their key"} {
		if !strings.Contains(j.LastError.Message, want) {
			t.Fatalf("job %s: message %q does not say %q", id, j.LastError.Message, want)
		}
	}
	if j.WorkflowID == nil || *j.WorkflowID != "w1" {
		t.Fatalf("job %s has workflow %v", id, j.WorkflowID)
	}
	if _, wc := wfArgs(t, j); wc.ID != "w1" || len(wc.Outputs) != 0 {
		t.Fatalf("job %s: workflow context %+v, want the workflow's without the outputs", id, wc)
	}
}

// compensateAfterArgsTooLarge replays the dead compensation of s0 in
// workflow w, which then fails, compensated; and checks that its join,
// compensated, is not replayed, even with args that fit.
func (e *env) compensateAfterArgsTooLarge(w string) {
	t := e.t
	t.Helper()
	e.clock.Advance(time.Second)
	if _, err := e.s.JobReplay(e.ctx, &errandstore.JobReplayParams{ID: w + ".undo.s0", Operator: "ops", Reason: "nothing to read"}); err != nil {
		t.Fatal(err)
	}
	e.wantAdvance(w, errandtype.WorkflowCompensating)
	e.finishUndo(w, "s0", true)
	e.wantAdvance(w, errandtype.WorkflowFailed)
	// Compensated, it does not resume, even with args that fit.
	args := json.RawMessage(`{"n":2,"workflow":{"id":"` + w + `","step":"join"}}`)
	_, err := e.s.JobReplay(e.ctx, &errandstore.JobReplayParams{ID: w + ".step.join", Operator: "ops", Reason: "smaller", Args: args, ClearProgress: true})
	if !errors.Is(err, errandstore.ErrWorkflowCompensated) {
		t.Fatalf("replay of the compensated join = %v, want ErrWorkflowCompensated", err)
	}
}

// testWorkflowContextBound: a step whose args fit with an empty workflow
// context but not with its own (the workflow's id and the step's name) is
// refused at insert: accepted, the advance that enqueues it would fail on
// every try, and the workflow would never go on.
func testWorkflowContextBound(t *testing.T, h harness) {
	e := open(t, h)
	id := "w-" + strings.Repeat("x", 100)
	b := wfStep("b", "a")
	emptyArgs := func(pad int) int {
		t.Helper()
		args := json.RawMessage(`{"pad":"` + strings.Repeat("p", pad) + `","workflow":{"id":"","step":""}}`)
		var m map[string]json.RawMessage
		if err := json.Unmarshal(args, &m); err != nil {
			t.Fatal(err)
		}
		out, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return len(out)
	}
	pad := 1<<20 - emptyArgs(0)
	b.Job.Args = json.RawMessage(`{"pad":"` + strings.Repeat("p", pad) + `"}`)
	_, err := e.workflows().WorkflowInsert(e.ctx, wfParams(id, wfStep("a"), b))
	var ie *errandtype.InputError
	if !errors.As(err, &ie) || !strings.Contains(err.Error(), "step b") {
		if err == nil {
			e.finishStep(id, "a", "", true)
			_, err = e.workflows().WorkflowAdvance(e.ctx, &errandstore.WorkflowAdvanceParams{IDs: []string{id}})
			t.Fatalf("WorkflowInsert accepted step b with %d bytes of args; the advance that enqueues it: %v", len(b.Job.Args), err)
		}
		t.Fatalf("WorkflowInsert = %v, want an *InputError naming step b", err)
	}
	e.noWorkflow(id)
}
