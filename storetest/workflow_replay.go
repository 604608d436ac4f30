package storetest

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
)

// What a replay of a workflow's step means in each order of events, and
// the rerun that follows a compensated workflow.
var workflowReplayCases = []testCase{
	{"BeforeCompensationResumes", testReplayBeforeCompensation},
	{"RefusedDuringCompensation", testReplayDuringCompensation},
	{"RefusedAfterCompensation", testReplayAfterCompensation},
	{"DeadCompensationReplayed", testReplayDeadCompensation},
	{"RacesCompensationStart", testReplayRacesCompensation},
	{"Rerun", testWorkflowRerun},
	{"RerunOpenRefused", testWorkflowRerunOpen},
}

// checkout inserts workflow id: charge and reserve, each with a
// compensation, then book, then mail; charge and reserve succeed and book
// dies, not yet advanced.
func (e *env) checkout(id string) {
	e.t.Helper()
	e.insertWorkflow(wfParams(id, wfUndoStep("charge"), wfUndoStep("reserve", "charge"), wfStep("book", "reserve"), wfStep("mail", "book")))
	e.finishStep(id, "charge", `{"charge":"ch_1"}`, true)
	e.wantAdvance(id, errandtype.WorkflowRunning, id+".step.reserve")
	e.finishStep(id, "reserve", "", true)
	e.wantAdvance(id, errandtype.WorkflowRunning, id+".step.book")
	e.clock.Advance(time.Second)
	e.finishStep(id, "book", "", false)
}

// compensated is checkout, then the advances and compensations that end
// workflow id failed, reserve and then charge undone.
func (e *env) compensated(id string) {
	e.t.Helper()
	e.checkout(id)
	e.wantAdvance(id, errandtype.WorkflowCompensating, id+".undo.reserve")
	e.finishUndo(id, "reserve", true)
	e.wantAdvance(id, errandtype.WorkflowCompensating, id+".undo.charge")
	e.finishUndo(id, "charge", true)
	e.wantAdvance(id, errandtype.WorkflowFailed)
}

// replayStep replays step of workflow wf through the store.
func (e *env) replayStep(wf, step string) (*errandtype.Job, error) {
	return e.s.JobReplay(e.ctx, &errandstore.JobReplayParams{ID: errandstore.WorkflowStepJobID(wf, step), Operator: "ops", Reason: "fixed"})
}

// wantReplayRefused checks that a replay of step of wf is refused with a
// *WorkflowCompensatedError naming the workflow, its state, the steps
// undone and the rerun, and that nothing was written.
func (e *env) wantReplayRefused(wf, step string, state errandtype.WorkflowState, undone []string, rerunAs string) {
	e.t.Helper()
	before := e.get(errandstore.WorkflowStepJobID(wf, step))
	wfBefore := e.workflow(wf)
	j, err := e.replayStep(wf, step)
	e.wantCompensatedError(j, err, errandstore.WorkflowCompensatedError{JobID: before.ID, JobState: before.State,
		WorkflowID: wf, WorkflowState: state, Undone: undone, RerunAs: rerunAs})
	e.unchanged("refused step", before)
	if n := len(e.auditList(&errandstore.AuditListParams{JobID: before.ID})); n != 0 {
		e.t.Fatalf("refused replay left %d audit records", n)
	}
	if got := e.workflow(wf); got.State != wfBefore.State || !slices.Equal(enqueuedJobs(got), enqueuedJobs(wfBefore)) {
		e.t.Fatalf("refused replay changed the workflow: %s %v, was %s %v", got.State, enqueuedJobs(got), wfBefore.State, enqueuedJobs(wfBefore))
	}
}

// wantCompensatedError checks that j, err, what a replay of want.JobID
// returned, are a refusal: a *WorkflowCompensatedError as want (also
// ErrWorkflowCompensated, ErrWrongState and a *StateError) that names the
// way forward, a rerun or the rerun.
func (e *env) wantCompensatedError(j *errandtype.Job, err error, want errandstore.WorkflowCompensatedError) {
	e.t.Helper()
	var ce *errandstore.WorkflowCompensatedError
	var se *errandtype.StateError
	if !errors.As(err, &ce) || !errors.Is(err, errandstore.ErrWorkflowCompensated) || !errors.Is(err, errandtype.ErrWrongState) || !errors.As(err, &se) {
		e.t.Fatalf("replay of %s = %v, %v; want a *WorkflowCompensatedError", want.JobID, j, err)
	}
	if ce.JobID != want.JobID || ce.JobState != want.JobState || ce.WorkflowID != want.WorkflowID || ce.WorkflowState != want.WorkflowState ||
		!slices.Equal(ce.Undone, want.Undone) || ce.RerunAs != want.RerunAs {
		e.t.Fatalf("refusal = %+v, want %+v", *ce, want)
	}
	forward := "errand workflow rerun " + want.WorkflowID
	if want.RerunAs != "" {
		forward = "errand workflow " + want.RerunAs
	}
	if !strings.Contains(err.Error(), forward) || !strings.Contains(se.Reason, forward) {
		e.t.Fatalf("refusal %q does not name the way forward, %q", err, forward)
	}
}

// enqueuedJobs lists the jobs of w's steps and compensations enqueued.
func enqueuedJobs(w *errandtype.Workflow) []string {
	var out []string
	for _, s := range w.Steps {
		if s.Enqueued {
			out = append(out, s.JobID)
		}
		if c := s.Compensation; c != nil && c.Enqueued {
			out = append(out, c.JobID)
		}
	}
	return out
}

// testReplayBeforeCompensation: while no compensation has been enqueued, a
// replay of the dead step resumes the workflow and nothing is compensated:
// before the advance saw the step die, while a step in flight holds the
// compensations back, and when the failed workflow had nothing to undo.
func testReplayBeforeCompensation(t *testing.T, h harness) {
	e := open(t, h)
	e.checkout("w1")
	if _, err := e.replayStep("w1", "book"); err != nil {
		t.Fatalf("replay before the advance saw the step die: %v", err)
	}
	r := e.wantAdvance("w1", errandtype.WorkflowRunning)
	if r.Workflow.CompensationStartedAt != nil || r.Workflow.FailedStep != nil {
		t.Fatalf("resumed workflow: compensation started %v, failed step %v", r.Workflow.CompensationStartedAt, r.Workflow.FailedStep)
	}
	e.finishStep("w1", "book", "", true)
	e.wantAdvance("w1", errandtype.WorkflowRunning, "w1.step.mail")
	e.finishStep("w1", "mail", "", true)
	e.wantAdvance("w1", errandtype.WorkflowSucceeded)
	e.notFound("w1.undo.reserve")
	e.notFound("w1.undo.charge")

	// x, with a compensation, runs while y dies: the workflow stops and
	// waits for x. Replayed then, y resumes it; x's success does not
	// start the compensations.
	e.insertWorkflow(wfParams("w2", wfUndoStep("x"), wfStep("y"), wfStep("z", "x", "y")))
	x := e.claimIn("x", "w2.step.x")
	e.finishStep("w2", "y", "", false)
	e.wantAdvance("w2", errandtype.WorkflowCompensating)
	if _, err := e.replayStep("w2", "y"); err != nil {
		t.Fatalf("replay while a step in flight holds the compensations: %v", err)
	}
	e.wantAdvance("w2", errandtype.WorkflowRunning)
	e.recordOK(succeeded(x))
	e.wantAdvance("w2", errandtype.WorkflowRunning)
	e.finishStep("w2", "y", "", true)
	e.wantAdvance("w2", errandtype.WorkflowRunning, "w2.step.z")
	e.notFound("w2.undo.x")
	if w := e.workflow("w2"); w.CompensationStartedAt != nil {
		t.Fatalf("w2 compensation started at %v, want never", w.CompensationStartedAt)
	}

	// Nothing to undo: the workflow failed without compensating, and a
	// replay resumes it.
	e.insertWorkflow(wfParams("w3", wfStep("p"), wfStep("q", "p")))
	e.finishStep("w3", "p", "", true)
	e.wantAdvance("w3", errandtype.WorkflowRunning, "w3.step.q")
	e.finishStep("w3", "q", "", false)
	e.wantAdvance("w3", errandtype.WorkflowFailed)
	if _, err := e.replayStep("w3", "q"); err != nil {
		t.Fatalf("replay of a failed workflow with nothing to undo: %v", err)
	}
	e.wantAdvance("w3", errandtype.WorkflowRunning)
	e.finishStep("w3", "q", "", true)
	e.wantAdvance("w3", errandtype.WorkflowSucceeded)
}

// testReplayDuringCompensation: once the first compensation is enqueued, a
// replay of the dead step is refused and writes nothing, while each
// compensation runs.
func testReplayDuringCompensation(t *testing.T, h harness) {
	e := open(t, h)
	e.checkout("w1")
	e.clock.Advance(time.Second)
	r := e.wantAdvance("w1", errandtype.WorkflowCompensating, "w1.undo.reserve")
	if at := r.Workflow.CompensationStartedAt; at == nil || !at.Equal(e.now()) {
		t.Fatalf("compensation started at %v, want %v", at, e.now())
	}
	if w := e.workflow("w1"); w.CompensationStartedAt == nil || !w.CompensationStartedAt.Equal(e.now()) {
		t.Fatalf("stored compensation start %v, want %v", w.CompensationStartedAt, e.now())
	}
	e.wantReplayRefused("w1", "book", errandtype.WorkflowCompensating, []string{"reserve"}, "")
	started := e.now()
	e.clock.Advance(time.Second)
	e.finishUndo("w1", "reserve", true)
	e.wantAdvance("w1", errandtype.WorkflowCompensating, "w1.undo.charge")
	e.wantReplayRefused("w1", "book", errandtype.WorkflowCompensating, []string{"reserve", "charge"}, "")
	if w := e.workflow("w1"); w.CompensationStartedAt == nil || !w.CompensationStartedAt.Equal(started) {
		t.Fatalf("compensation start moved to %v, want %v", w.CompensationStartedAt, started)
	}
}

// testReplayAfterCompensation: once the compensations have run (the
// workflow failed), a replay of the dead step is refused and writes
// nothing, by the store's replay and its bulk replay alike.
func testReplayAfterCompensation(t *testing.T, h harness) {
	e := open(t, h)
	e.compensated("w1")
	e.wantReplayRefused("w1", "book", errandtype.WorkflowFailed, []string{"reserve", "charge"}, "")
	held := e.get("w1.step.book")
	if got := ids(e.replayMany(bulk(errandstore.DeadFilter{}))); len(got) != 0 {
		t.Fatalf("bulk replay replayed %v, want none", got)
	}
	e.unchanged("step after a bulk replay", held)
	dry := bulk(errandstore.DeadFilter{})
	dry.DryRun, dry.Held = true, true
	if got := ids(e.replayMany(dry)); !slices.Equal(got, []string{"w1.step.book"}) {
		t.Fatalf("the steps left out are listed as %v, want [w1.step.book]", got)
	}
	e.wantAdvance("w1", errandtype.WorkflowFailed)
}

// testReplayDeadCompensation: a dead compensation holds the workflow
// compensating; the failed step is still refused, and the compensation,
// replayed, goes on compensating until the workflow fails.
func testReplayDeadCompensation(t *testing.T, h harness) {
	e := open(t, h)
	e.checkout("w1")
	e.wantAdvance("w1", errandtype.WorkflowCompensating, "w1.undo.reserve")
	e.finishUndo("w1", "reserve", false)
	e.wantAdvance("w1", errandtype.WorkflowCompensating)
	e.wantReplayRefused("w1", "book", errandtype.WorkflowCompensating, []string{"reserve"}, "")
	if _, err := e.s.JobReplay(e.ctx, &errandstore.JobReplayParams{ID: "w1.undo.reserve", Operator: "ops", Reason: "fixed"}); err != nil {
		t.Fatalf("replay of the dead compensation: %v", err)
	}
	e.wantAdvance("w1", errandtype.WorkflowCompensating)
	e.finishUndo("w1", "reserve", true)
	e.wantAdvance("w1", errandtype.WorkflowCompensating, "w1.undo.charge")
	e.finishUndo("w1", "charge", true)
	e.wantAdvance("w1", errandtype.WorkflowFailed)
	e.notFound("w1.step.mail")
}

// testReplayRacesCompensation: a replay of the dead step racing, from
// another store, the advance that would start compensating: exactly one
// wins. Either the step is queued and the workflow runs with nothing
// compensated, or the compensation is enqueued and the replay refused
// with nothing written.
func testReplayRacesCompensation(t *testing.T, h harness) {
	e := open(t, h)
	e.workflows()
	other, ok := e.second().(errandstore.WorkflowStore)
	if !ok {
		t.Fatal("the second store is not an errandstore.WorkflowStore")
	}
	const n = 12
	for i := range n {
		e.checkout(fmt.Sprintf("w%d", i))
	}
	type outcome struct{ replayErr error }
	results := make([]outcome, n)
	var wg sync.WaitGroup
	for i := range n {
		id := fmt.Sprintf("w%d", i)
		wg.Go(func() { _, results[i].replayErr = e.replayStep(id, "book") })
		wg.Go(func() {
			if _, err := other.WorkflowAdvance(e.ctx, &errandstore.WorkflowAdvanceParams{IDs: []string{id}}); err != nil {
				t.Errorf("advance %s: %v", id, err)
			}
		})
	}
	wg.Wait()
	for i, r := range results {
		e.wantOneWinner(fmt.Sprintf("w%d", i), r.replayErr)
	}
}

// wantOneWinner checks workflow id after a replay of its dead step book,
// which returned replayErr, raced the advance that would compensate it:
// the replay won, and the step is queued and nothing compensated, or it
// was refused, and the step is dead as it was and the compensation
// enqueued.
func (e *env) wantOneWinner(id string, replayErr error) {
	t := e.t
	t.Helper()
	e.advanceOne(id) // whatever the race left, the next advance settles
	w, book := e.workflow(id), e.get(id+".step.book")
	undo := stepView(t, w, "reserve").Compensation
	switch {
	case replayErr == nil:
		if book.State != errandtype.StateQueued || w.State != errandtype.WorkflowRunning || undo.Enqueued || w.CompensationStartedAt != nil {
			t.Fatalf("%s: replay won, but the step is %s, the workflow %s, its compensation enqueued %v", id, book.State, w.State, undo.Enqueued)
		}
	case errors.Is(replayErr, errandstore.ErrWorkflowCompensated):
		if book.State != errandtype.StateDead || book.Replays != 0 || w.State != errandtype.WorkflowCompensating || !undo.Enqueued {
			t.Fatalf("%s: replay refused, but the step is %s (%d replays), the workflow %s, its compensation enqueued %v",
				id, book.State, book.Replays, w.State, undo.Enqueued)
		}
	default:
		t.Fatalf("%s: replay: %v", id, replayErr)
	}
}

// rerun reruns workflow id as newID through the store.
func (e *env) rerun(id, newID string) (*errandstore.WorkflowInsertResult, error) {
	return e.workflows().WorkflowRerun(e.ctx, &errandstore.WorkflowRerunParams{ID: id, NewID: newID})
}

// testWorkflowRerun: a compensated workflow is rerun as a new one that runs
// every step from the start; the old one stays as it was, naming the
// rerun, and its steps are no longer replayed. A retried rerun returns the
// same workflow; a second rerun, or an id another workflow has, is refused.
func testWorkflowRerun(t *testing.T, h harness) {
	e := open(t, h)
	e.compensated("w1")
	oldJobs := e.listAll()
	old := e.workflow("w1")

	e.insertWorkflow(wfParams("taken", wfStep("a")))
	if r, err := e.rerun("w1", "taken"); !errors.Is(err, errandtype.ErrInvalid) || !strings.Contains(err.Error(), "taken") {
		t.Fatalf("rerun as another workflow's id = %+v, %v; want an *InputError naming it", r, err)
	}
	if w := e.workflow("w1"); w.RerunAs != nil {
		t.Fatalf("refused rerun set rerun_as %q", *w.RerunAs)
	}

	e.clock.Advance(time.Minute)
	e.wantRerunAs(old, "w1-again")
	e.wantRerunLeavesOld(old, oldJobs, "w1-again")

	again, err := e.rerun("w1", "w1-again")
	if err != nil || !again.Duplicate || again.Workflow.ID != "w1-again" || len(again.Jobs) != 0 {
		t.Fatalf("retried rerun = %+v, %v; want the rerun as a duplicate", again, err)
	}
	var we *errandstore.WorkflowStateError
	if _, err := e.rerun("w1", "w1-third"); !errors.As(err, &we) || !strings.Contains(err.Error(), "w1-again") {
		t.Fatalf("second rerun = %v, want a *WorkflowStateError naming w1-again", err)
	}
	e.noWorkflow("w1-third")

	// The rerun runs every step from the start, and succeeds.
	e.finishStep("w1-again", "charge", `{"charge":"ch_2"}`, true)
	e.wantAdvance("w1-again", errandtype.WorkflowRunning, "w1-again.step.reserve")
	e.finishStep("w1-again", "reserve", "", true)
	e.wantAdvance("w1-again", errandtype.WorkflowRunning, "w1-again.step.book")
	e.finishStep("w1-again", "book", "", true)
	e.wantAdvance("w1-again", errandtype.WorkflowRunning, "w1-again.step.mail")
	e.finishStep("w1-again", "mail", "", true)
	e.wantAdvance("w1-again", errandtype.WorkflowSucceeded)
	e.advanceOne("w1")
	if w := e.workflow("w1"); w.State != errandtype.WorkflowFailed {
		t.Fatalf("old workflow is %s after its rerun succeeded", w.State)
	}

	// Rerun, a failed workflow with nothing undone no longer resumes by a
	// replay either: two runs would go on at once.
	e.insertWorkflow(wfParams("w2", wfStep("p")))
	e.finishStep("w2", "p", "", false)
	e.wantAdvance("w2", errandtype.WorkflowFailed)
	if _, err := e.rerun("w2", "w2-again"); err != nil {
		t.Fatal(err)
	}
	e.wantReplayRefused("w2", "p", errandtype.WorkflowFailed, nil, "w2-again")
}

// wantRerunAs reruns old as newID, and checks the new workflow, as the
// rerun returns it and as read: running now, with old's name and steps,
// naming old, with only its first step enqueued.
func (e *env) wantRerunAs(old *errandtype.Workflow, newID string) {
	t := e.t
	t.Helper()
	r, err := e.rerun(old.ID, newID)
	if err != nil {
		t.Fatal(err)
	}
	nw := r.Workflow
	if r.Duplicate || nw.ID != newID || nw.Name != old.Name || nw.State != errandtype.WorkflowRunning ||
		nw.RerunOf == nil || *nw.RerunOf != old.ID || nw.RerunAs != nil || nw.CompensationStartedAt != nil || !nw.CreatedAt.Equal(e.now()) {
		t.Fatalf("rerun = %+v", nw)
	}
	if got := ids(r.Jobs); !slices.Equal(got, []string{newID + ".step.charge"}) {
		t.Fatalf("rerun enqueued %v, want its first step", got)
	}
	if got := e.workflow(newID); got.RerunOf == nil || *got.RerunOf != old.ID || len(got.Steps) != len(old.Steps) {
		t.Fatalf("stored rerun = %+v", got)
	}
}

// wantRerunLeavesOld checks that old, rerun as newID, stays as it was but
// for naming the rerun, its jobs oldJobs unchanged, and that its steps are
// no longer replayed.
func (e *env) wantRerunLeavesOld(old *errandtype.Workflow, oldJobs []*errandtype.Job, newID string) {
	t := e.t
	t.Helper()
	w := e.workflow(old.ID)
	if w.RerunAs == nil || *w.RerunAs != newID || w.State != errandtype.WorkflowFailed ||
		!w.UpdatedAt.Equal(old.UpdatedAt) || !slices.Equal(enqueuedJobs(w), enqueuedJobs(old)) {
		t.Fatalf("old workflow after the rerun = %+v", w)
	}
	for _, j := range oldJobs {
		e.unchanged("old workflow's job after the rerun", j)
	}
	e.wantReplayRefused(old.ID, "book", errandtype.WorkflowFailed, []string{"reserve", "charge"}, newID)
}

// testWorkflowRerunOpen: a running or compensating workflow is not rerun,
// nor an unknown one, and nothing is written.
func testWorkflowRerunOpen(t *testing.T, h harness) {
	e := open(t, h)
	e.checkout("w1")
	e.wantAdvance("w1", errandtype.WorkflowCompensating, "w1.undo.reserve")
	e.insertWorkflow(wfParams("w2", wfStep("a")))
	for _, tc := range []struct {
		id    string
		state errandtype.WorkflowState
	}{{"w1", errandtype.WorkflowCompensating}, {"w2", errandtype.WorkflowRunning}} {
		jobs := e.listAll()
		r, err := e.rerun(tc.id, tc.id+"-again")
		var we *errandstore.WorkflowStateError
		if !errors.As(err, &we) || !errors.Is(err, errandtype.ErrWrongState) || we.State != tc.state || we.ID != tc.id {
			t.Fatalf("rerun of %s workflow %s = %+v, %v; want a *WorkflowStateError", tc.state, tc.id, r, err)
		}
		e.noWorkflow(tc.id + "-again")
		if w := e.workflow(tc.id); w.RerunAs != nil {
			t.Fatalf("refused rerun set rerun_as of %s", tc.id)
		}
		if n := len(e.listAll()); n != len(jobs) {
			t.Fatalf("refused rerun of %s: %d jobs, was %d", tc.id, n, len(jobs))
		}
	}
	if _, err := e.rerun("nope", "nope-again"); !errors.Is(err, errandtype.ErrNotFound) {
		t.Fatalf("rerun of an unknown workflow = %v, want ErrNotFound", err)
	}
	for _, p := range []*errandstore.WorkflowRerunParams{{ID: "w2", NewID: "w2"}, {ID: "w2"}, {NewID: "x"}} {
		if _, err := e.workflows().WorkflowRerun(e.ctx, p); !errors.Is(err, errandtype.ErrInvalid) {
			t.Fatalf("WorkflowRerun(%+v) = %v, want an *InputError", *p, err)
		}
	}
}
