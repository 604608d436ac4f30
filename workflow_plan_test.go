package errand_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
)

// planTemplate is a step's job in these tests.
func planTemplate(kind string) *errandstore.JobTemplate {
	return &errandstore.JobTemplate{Kind: kind, Queue: "default", Args: json.RawMessage(`{"n":1}`), ArgsVersion: 1, MaxAttempts: 3}
}

// planStep declares a step of kind name, with a compensation of kind
// "undo_NAME" when undo.
func planStep(name string, undo bool, deps ...string) errandstore.WorkflowStepDef {
	s := errandstore.WorkflowStepDef{Name: name, DependsOn: deps, Job: planTemplate(name)}
	if undo {
		s.Compensation = planTemplate("undo_" + name)
	}
	return s
}

// planFixture is a workflow and its jobs, advanced as a store does: each
// plan's inserted jobs become queued jobs and its values the row's.
type planFixture struct {
	t    *testing.T
	w    *errandstore.WorkflowRecord
	jobs map[string]*errandstore.WorkflowJob
	// args are the args each inserted job was planned with.
	args map[string]json.RawMessage
}

func newPlanFixture(t *testing.T, steps ...errandstore.WorkflowStepDef) *planFixture {
	t.Helper()
	p := &errandstore.WorkflowInsertParams{ID: "wf1", Steps: steps}
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	return &planFixture{t: t, w: &errandstore.WorkflowRecord{ID: "wf1", State: errandtype.WorkflowRunning, Steps: steps},
		jobs: map[string]*errandstore.WorkflowJob{}, args: map[string]json.RawMessage{}}
}

// advance plans the workflow, applies the plan and returns the ids of the
// jobs it inserted.
func (f *planFixture) advance() (inserted []string, plan *errandstore.WorkflowPlan) {
	f.t.Helper()
	plan, err := errandstore.PlanWorkflow(f.w, f.jobs)
	if err != nil {
		f.t.Fatal(err)
	}
	for _, ip := range plan.Insert {
		if err := ip.Validate(); err != nil {
			f.t.Fatalf("planned job %s: %v", ip.ID, err)
		}
		if slices.Contains(f.w.Enqueued, ip.ID) {
			f.t.Fatalf("job %s planned twice", ip.ID)
		}
		if _, ok := f.jobs[ip.ID]; ok {
			f.t.Fatalf("job %s planned while it exists", ip.ID)
		}
		inserted = append(inserted, ip.ID)
		f.jobs[ip.ID] = &errandstore.WorkflowJob{ID: ip.ID, State: errandtype.StateQueued, MaxAttempts: ip.MaxAttempts}
		f.args[ip.ID] = ip.Args
	}
	if want := append(slices.Clone(f.w.Enqueued), inserted...); !slices.Equal(plan.Enqueued, want) {
		f.t.Fatalf("plan's enqueued = %v, want %v", plan.Enqueued, want)
	}
	f.w.State, f.w.FailedStep, f.w.Enqueued = plan.State, plan.FailedStep, plan.Enqueued
	return inserted, plan
}

// expect advances and checks the jobs inserted and the state after.
func (f *planFixture) expect(state errandtype.WorkflowState, inserted ...string) *errandstore.WorkflowPlan {
	f.t.Helper()
	got, plan := f.advance()
	want := make([]string, len(inserted))
	for i, s := range inserted {
		want[i] = "wf1." + s
	}
	if !slices.Equal(got, want) {
		f.t.Fatalf("inserted %v, want %v", got, want)
	}
	if plan.State != state {
		f.t.Fatalf("state %s, want %s", plan.State, state)
	}
	return plan
}

// set moves job ("step.NAME" or "undo.NAME") to state, with output when
// given.
func (f *planFixture) set(job string, state errandtype.JobState, output ...string) {
	f.t.Helper()
	j := f.jobs["wf1."+job]
	if j == nil {
		f.t.Fatalf("job %s was never inserted", job)
	}
	j.State = state
	if len(output) > 0 {
		j.Output = json.RawMessage(output[0])
	}
}

// context decodes the field "workflow" of the args job was planned with.
func (f *planFixture) context(job string) errandstore.WorkflowContext {
	f.t.Helper()
	var a struct {
		N        int                         `json:"n"`
		Workflow errandstore.WorkflowContext `json:"workflow"`
	}
	if err := json.Unmarshal(f.args["wf1."+job], &a); err != nil {
		f.t.Fatal(err)
	}
	if a.N != 1 {
		f.t.Fatalf("job %s lost its own args: %s", job, f.args["wf1."+job])
	}
	return a.Workflow
}

func failedStep(p *errandstore.WorkflowPlan) string {
	if p.FailedStep == nil {
		return "<nil>"
	}
	return *p.FailedStep
}

func TestPlanWorkflowLinearChain(t *testing.T) {
	f := newPlanFixture(t, planStep("a", false), planStep("b", false, "a"), planStep("c", false, "b"))
	p := f.expect(errandtype.WorkflowRunning, "step.a")
	if p.Changed != true {
		t.Fatal("inserting a job is a change")
	}
	p = f.expect(errandtype.WorkflowRunning)
	if p.Changed {
		t.Fatal("nothing happened, yet Changed")
	}
	f.set("step.a", errandtype.StateRunning)
	f.expect(errandtype.WorkflowRunning)
	f.set("step.a", errandtype.StateSucceeded)
	f.expect(errandtype.WorkflowRunning, "step.b")
	f.set("step.b", errandtype.StateRetrying)
	f.expect(errandtype.WorkflowRunning)
	f.set("step.b", errandtype.StateSucceeded)
	f.expect(errandtype.WorkflowRunning, "step.c")
	f.set("step.c", errandtype.StateSucceeded)
	p = f.expect(errandtype.WorkflowSucceeded)
	if !p.Changed || p.FailedStep != nil {
		t.Fatalf("succeeding: Changed %v, failed step %s", p.Changed, failedStep(p))
	}
	if p = f.expect(errandtype.WorkflowSucceeded); p.Changed {
		t.Fatal("a succeeded workflow advanced again changed")
	}
}

func TestPlanWorkflowDiamond(t *testing.T) {
	f := newPlanFixture(t, planStep("a", false), planStep("b", false, "a"), planStep("c", false, "a"), planStep("d", false, "b", "c"))
	f.expect(errandtype.WorkflowRunning, "step.a")
	f.set("step.a", errandtype.StateSucceeded, `{"id":"A"}`)
	f.expect(errandtype.WorkflowRunning, "step.b", "step.c")
	f.set("step.b", errandtype.StateSucceeded, `"B"`)
	f.expect(errandtype.WorkflowRunning) // d waits for c too
	f.set("step.c", errandtype.StateSucceeded)
	f.expect(errandtype.WorkflowRunning, "step.d")

	// Each step gets its dependencies' outputs, and no other's; a step
	// that recorded none is absent.
	if wc := f.context("step.b"); wc.ID != "wf1" || wc.Step != "b" || wc.Compensating || string(wc.Outputs["a"]) != `{"id":"A"}` || len(wc.Outputs) != 1 {
		t.Fatalf("b's context: %+v", wc)
	}
	if wc := f.context("step.a"); wc.Step != "a" || wc.Outputs != nil {
		t.Fatalf("a's context: %+v", wc)
	}
	wc := f.context("step.d")
	if wc.Step != "d" || len(wc.Outputs) != 1 || string(wc.Outputs["b"]) != `"B"` {
		t.Fatalf("d's context: %+v", wc)
	}
	if v, ok, err := errand.StepOutput[string](wc, "b"); err != nil || !ok || v != "B" {
		t.Fatalf("StepOutput(b) = %q, %v, %v", v, ok, err)
	}
	if _, ok, err := errand.StepOutput[string](wc, "c"); err != nil || ok {
		t.Fatalf("StepOutput(c), which recorded none = %v, %v", ok, err)
	}
	if _, _, err := errand.StepOutput[int](wc, "b"); err == nil {
		t.Fatal("decoding a string output as an int succeeded")
	}
	f.set("step.d", errandtype.StateSucceeded)
	f.expect(errandtype.WorkflowSucceeded)
}

// TestPlanWorkflowFailureWaitsForInFlight: a step dies while a parallel
// step runs: nothing more starts, and no compensation runs until the
// parallel step finishes; then the compensations run one at a time, latest
// declared first, skipping steps without one and steps that never
// succeeded.
func TestPlanWorkflowFailureWaitsForInFlight(t *testing.T) {
	f := newPlanFixture(t,
		planStep("a", true),
		planStep("b", false, "a"), // nothing to undo
		planStep("c", true, "b"),
		planStep("d", true, "b"), // runs beside e, fails
		planStep("e", true, "b"), // in flight when d fails
		planStep("f", true, "c"), // never enqueued
		planStep("g", true, "d", "e"),
	)
	f.expect(errandtype.WorkflowRunning, "step.a")
	f.set("step.a", errandtype.StateSucceeded, `1`)
	f.expect(errandtype.WorkflowRunning, "step.b")
	f.set("step.b", errandtype.StateSucceeded, `2`)
	f.expect(errandtype.WorkflowRunning, "step.c", "step.d", "step.e")
	f.set("step.c", errandtype.StateDead)
	f.set("step.d", errandtype.StateSucceeded, `4`)
	f.set("step.e", errandtype.StateRunning)
	p := f.expect(errandtype.WorkflowCompensating) // no f, no g, no compensation while e runs
	if !p.Changed || failedStep(p) != "c" {
		t.Fatalf("Changed %v, failed step %s", p.Changed, failedStep(p))
	}
	if p = f.expect(errandtype.WorkflowCompensating); p.Changed {
		t.Fatal("waiting on e changed the workflow")
	}
	f.set("step.e", errandtype.StateSucceeded, `5`)
	f.expect(errandtype.WorkflowCompensating, "undo.e")
	f.expect(errandtype.WorkflowCompensating) // one at a time
	f.set("undo.e", errandtype.StateRunning)
	f.expect(errandtype.WorkflowCompensating)
	f.set("undo.e", errandtype.StateSucceeded)
	f.expect(errandtype.WorkflowCompensating, "undo.d")
	f.set("undo.d", errandtype.StateSucceeded)
	// c died (never succeeded), b has no compensation: a's is next.
	f.expect(errandtype.WorkflowCompensating, "undo.a")

	// A compensation gets the outputs of every step that succeeded.
	wc := f.context("undo.a")
	if wc.Step != "a" || !wc.Compensating {
		t.Fatalf("undo.a's context: %+v", wc)
	}
	var got []string
	for k, v := range wc.Outputs {
		got = append(got, k+"="+string(v))
	}
	slices.Sort(got)
	if want := []string{"a=1", "b=2", "d=4", "e=5"}; !slices.Equal(got, want) {
		t.Fatalf("undo.a's outputs %v, want %v", got, want)
	}

	f.set("undo.a", errandtype.StateSucceeded)
	p = f.expect(errandtype.WorkflowFailed)
	if !p.Changed || failedStep(p) != "c" {
		t.Fatalf("failing: Changed %v, failed step %s", p.Changed, failedStep(p))
	}
	for _, id := range f.w.Enqueued {
		if strings.HasSuffix(id, ".f") || strings.HasSuffix(id, ".g") || id == "wf1.undo.c" || id == "wf1.undo.b" {
			t.Fatalf("enqueued %s", id)
		}
	}
	if p = f.expect(errandtype.WorkflowFailed); p.Changed {
		t.Fatal("a failed workflow advanced again changed")
	}
}

// TestPlanWorkflowDeadCompensationHolds: a dead compensation holds the
// workflow compensating, the next compensation waiting, until it is
// replayed.
func TestPlanWorkflowDeadCompensationHolds(t *testing.T) {
	f := newPlanFixture(t, planStep("a", true), planStep("b", true, "a"), planStep("c", false, "b"))
	f.expect(errandtype.WorkflowRunning, "step.a")
	f.set("step.a", errandtype.StateSucceeded)
	f.expect(errandtype.WorkflowRunning, "step.b")
	f.set("step.b", errandtype.StateSucceeded)
	f.expect(errandtype.WorkflowRunning, "step.c")
	f.set("step.c", errandtype.StateCancelled) // cancelled stops it as dead does
	f.expect(errandtype.WorkflowCompensating, "undo.b")
	f.set("undo.b", errandtype.StateDead)
	p := f.expect(errandtype.WorkflowCompensating)
	if p.Changed {
		t.Fatal("a dead compensation changed the workflow")
	}
	f.expect(errandtype.WorkflowCompensating)
	f.set("undo.b", errandtype.StateQueued) // replayed
	f.expect(errandtype.WorkflowCompensating)
	f.set("undo.b", errandtype.StateSucceeded)
	f.expect(errandtype.WorkflowCompensating, "undo.a")
	f.set("undo.a", errandtype.StateSucceeded)
	if p := f.expect(errandtype.WorkflowFailed); failedStep(p) != "c" {
		t.Fatalf("failed step %s", failedStep(p))
	}
}

// TestPlanWorkflowReplayResumes: replaying the failed step of a failed
// workflow runs it again: the workflow is running, its later steps run,
// and the compensations that ran are not run again.
func TestPlanWorkflowReplayResumes(t *testing.T) {
	f := newPlanFixture(t, planStep("charge", true), planStep("reserve", true, "charge"),
		planStep("book", true, "reserve"), planStep("confirm", false, "book"))
	f.expect(errandtype.WorkflowRunning, "step.charge")
	f.set("step.charge", errandtype.StateSucceeded)
	f.expect(errandtype.WorkflowRunning, "step.reserve")
	f.set("step.reserve", errandtype.StateSucceeded)
	f.expect(errandtype.WorkflowRunning, "step.book")
	f.set("step.book", errandtype.StateDead)
	f.expect(errandtype.WorkflowCompensating, "undo.reserve")
	f.set("undo.reserve", errandtype.StateSucceeded)
	f.expect(errandtype.WorkflowCompensating, "undo.charge")
	f.set("undo.charge", errandtype.StateSucceeded)
	f.expect(errandtype.WorkflowFailed)

	f.set("step.book", errandtype.StateQueued) // replayed
	p := f.expect(errandtype.WorkflowRunning)
	if !p.Changed || p.FailedStep != nil {
		t.Fatalf("resuming: Changed %v, failed step %s", p.Changed, failedStep(p))
	}
	f.set("step.book", errandtype.StateSucceeded)
	f.expect(errandtype.WorkflowRunning, "step.confirm")
	f.set("step.confirm", errandtype.StateSucceeded)
	f.expect(errandtype.WorkflowSucceeded)
}

// TestPlanWorkflowFailedStepStays: the step that stopped the workflow stays
// its failed step when a step declared before it fails after it.
func TestPlanWorkflowFailedStepStays(t *testing.T) {
	f := newPlanFixture(t, planStep("a", false), planStep("b", false), planStep("c", true))
	f.expect(errandtype.WorkflowRunning, "step.a", "step.b", "step.c")
	f.set("step.b", errandtype.StateDead)
	f.set("step.c", errandtype.StateSucceeded)
	if p := f.expect(errandtype.WorkflowCompensating); failedStep(p) != "b" {
		t.Fatalf("failed step %s, want b", failedStep(p))
	}
	f.set("step.a", errandtype.StateDead)
	p := f.expect(errandtype.WorkflowCompensating, "undo.c")
	if failedStep(p) != "b" {
		t.Fatalf("failed step %s, want b still", failedStep(p))
	}
	// Replaying b leaves a, which failed too: a names the failure now.
	f.set("step.b", errandtype.StateQueued)
	if p := f.expect(errandtype.WorkflowCompensating); failedStep(p) != "a" || !p.Changed {
		t.Fatalf("failed step %s, Changed %v; want a, true", failedStep(p), p.Changed)
	}
}

// TestPlanWorkflowMissingJobNotReenqueued: a job the workflow enqueued that
// retention deleted is never enqueued again: the workflow waits on it.
func TestPlanWorkflowMissingJobNotReenqueued(t *testing.T) {
	f := newPlanFixture(t, planStep("a", true), planStep("b", false, "a"))
	f.expect(errandtype.WorkflowRunning, "step.a")
	delete(f.jobs, "wf1.step.a")
	if p := f.expect(errandtype.WorkflowRunning); p.Changed {
		t.Fatal("a missing step changed the workflow")
	}

	f = newPlanFixture(t, planStep("a", true), planStep("b", false, "a"))
	f.expect(errandtype.WorkflowRunning, "step.a")
	f.set("step.a", errandtype.StateSucceeded)
	f.expect(errandtype.WorkflowRunning, "step.b")
	f.set("step.b", errandtype.StateDead)
	f.expect(errandtype.WorkflowCompensating, "undo.a")
	delete(f.jobs, "wf1.undo.a")
	f.expect(errandtype.WorkflowCompensating)
}

// TestPlanWorkflowChanged: Changed is set exactly when the state, failed
// step or enqueued jobs differ from the row's.
func TestPlanWorkflowChanged(t *testing.T) {
	w := &errandstore.WorkflowRecord{ID: "wf1", State: errandtype.WorkflowRunning,
		Steps: []errandstore.WorkflowStepDef{planStep("a", false)}, Enqueued: []string{"wf1.step.a"}}
	jobs := map[string]*errandstore.WorkflowJob{"wf1.step.a": {ID: "wf1.step.a", State: errandtype.StateRunning}}
	for _, c := range []struct {
		state   errandtype.WorkflowState
		job     errandtype.JobState
		changed bool
	}{
		{errandtype.WorkflowRunning, errandtype.StateRunning, false},
		{errandtype.WorkflowCompensating, errandtype.StateRunning, true}, // a replay resumed it
		{errandtype.WorkflowRunning, errandtype.StateSucceeded, true},
		{errandtype.WorkflowSucceeded, errandtype.StateSucceeded, false},
		{errandtype.WorkflowRunning, errandtype.StateDead, true},
	} {
		w.State = c.state
		jobs["wf1.step.a"].State = c.job
		p, err := errandstore.PlanWorkflow(w, jobs)
		if err != nil {
			t.Fatal(err)
		}
		if p.Changed != c.changed {
			t.Errorf("row %s, job %s: Changed %v, want %v", c.state, c.job, p.Changed, c.changed)
		}
	}
	// The failed step alone differing is a change.
	a, b := "a", "b"
	w.State, w.FailedStep = errandtype.WorkflowFailed, &b
	jobs["wf1.step.a"].State = errandtype.StateDead
	if p, _ := errandstore.PlanWorkflow(w, jobs); !p.Changed || failedStep(p) != a {
		t.Fatalf("failed step b → a: Changed %v, failed step %s", p.Changed, failedStep(p))
	}
}

// TestPlanWorkflowArgsNotObject: a template whose args are not a JSON
// object cannot be planned.
func TestPlanWorkflowArgsNotObject(t *testing.T) {
	s := planStep("a", false)
	s.Job.Args = json.RawMessage(`[1]`)
	w := &errandstore.WorkflowRecord{ID: "wf1", State: errandtype.WorkflowRunning, Steps: []errandstore.WorkflowStepDef{s}}
	if _, err := errandstore.PlanWorkflow(w, nil); !errors.Is(err, errandtype.ErrInvalid) {
		t.Fatalf("err = %v, want an input error", err)
	}
}

func TestViewWorkflow(t *testing.T) {
	f := newPlanFixture(t, planStep("a", true), planStep("b", false, "a"), planStep("c", true, "b"))
	f.expect(errandtype.WorkflowRunning, "step.a")
	f.set("step.a", errandtype.StateSucceeded, `{"x":1}`)
	f.jobs["wf1.step.a"].Attempts = 2
	f.expect(errandtype.WorkflowRunning, "step.b")
	f.set("step.b", errandtype.StateDead)
	f.jobs["wf1.step.b"].Attempts = 3
	f.expect(errandtype.WorkflowCompensating, "undo.a")
	f.set("undo.a", errandtype.StateRunning)
	f.jobs["wf1.undo.a"].Attempts = 1
	f.w.Name = "checkout"

	v := errandstore.ViewWorkflow(f.w, f.jobs)
	if v.ID != "wf1" || v.Name != "checkout" || v.State != errandtype.WorkflowCompensating || v.FailedStep == nil || *v.FailedStep != "b" || len(v.Steps) != 3 {
		t.Fatalf("view: %+v", v)
	}
	a, b, c := v.Steps[0], v.Steps[1], v.Steps[2]
	if a.Name != "a" || a.Kind != "a" || a.JobID != "wf1.step.a" || !a.Enqueued || a.State == nil || *a.State != errandtype.StateSucceeded ||
		a.Attempts != 2 || a.MaxAttempts != 3 || string(a.Output) != `{"x":1}` || a.DependsOn == nil || len(a.DependsOn) != 0 {
		t.Fatalf("step a: %+v", a)
	}
	if ac := a.Compensation; ac == nil || ac.Kind != "undo_a" || ac.JobID != "wf1.undo.a" || !ac.Enqueued || ac.State == nil || *ac.State != errandtype.StateRunning || ac.Attempts != 1 {
		t.Fatalf("a's compensation: %+v", a.Compensation)
	}
	if b.State == nil || *b.State != errandtype.StateDead || b.Compensation != nil || !slices.Equal(b.DependsOn, []string{"a"}) || b.Output != nil {
		t.Fatalf("step b: %+v", b)
	}
	if c.Enqueued || c.State != nil || c.JobID != "wf1.step.c" || c.Compensation == nil || c.Compensation.Enqueued || c.Compensation.State != nil {
		t.Fatalf("step c: %+v", c)
	}

	// A job enqueued and since deleted: enqueued, without a state.
	delete(f.jobs, "wf1.step.a")
	if a := errandstore.ViewWorkflow(f.w, f.jobs).Steps[0]; !a.Enqueued || a.State != nil {
		t.Fatalf("deleted step a: %+v", a)
	}
	if _, err := json.Marshal(v); err != nil {
		t.Fatal(err)
	}
}

func TestWorkflowInsertParamsValidate(t *testing.T) {
	ok := func() *errandstore.WorkflowInsertParams {
		return &errandstore.WorkflowInsertParams{ID: "wf1", Name: "checkout",
			Steps: []errandstore.WorkflowStepDef{planStep("a", true), planStep("b", false, "a")}}
	}
	if err := ok().Validate(); err != nil {
		t.Fatal(err)
	}
	long := ok()
	long.ID = strings.Repeat("w", errandstore.MaxWorkflowIDBytes)
	long.Steps[1].Name = strings.Repeat("s", errandstore.MaxStepNameBytes)
	if err := long.Validate(); err != nil {
		t.Fatalf("longest id and step name: %v", err)
	}
	many := ok()
	many.Steps = nil
	for i := range errandstore.MaxWorkflowSteps {
		many.Steps = append(many.Steps, planStep(fmt.Sprint("s", i), false))
	}
	if err := many.Validate(); err != nil {
		t.Fatalf("%d steps: %v", errandstore.MaxWorkflowSteps, err)
	}

	for _, c := range []struct {
		name string
		edit func(p *errandstore.WorkflowInsertParams)
		want string
	}{
		{"empty id", func(p *errandstore.WorkflowInsertParams) { p.ID = "" }, "workflow id"},
		{"id too long", func(p *errandstore.WorkflowInsertParams) {
			p.ID = strings.Repeat("w", errandstore.MaxWorkflowIDBytes+1)
		}, "workflow id"},
		{"name with a space", func(p *errandstore.WorkflowInsertParams) { p.Name = " checkout" }, "workflow name"},
		{"no steps", func(p *errandstore.WorkflowInsertParams) { p.Steps = nil }, "1 to"},
		{"too many steps", func(p *errandstore.WorkflowInsertParams) {
			for i := range errandstore.MaxWorkflowSteps {
				p.Steps = append(p.Steps, planStep(fmt.Sprint("s", i), false))
			}
		}, "1 to"},
		{"duplicate names", func(p *errandstore.WorkflowInsertParams) { p.Steps[1].Name = "a"; p.Steps[1].DependsOn = nil }, "two steps"},
		{"empty step name", func(p *errandstore.WorkflowInsertParams) { p.Steps[0].Name = "" }, "empty"},
		{"step name too long", func(p *errandstore.WorkflowInsertParams) {
			p.Steps[0].Name = strings.Repeat("s", errandstore.MaxStepNameBytes+1)
		}, "at most"},
		{"self dependency", func(p *errandstore.WorkflowInsertParams) { p.Steps[1].DependsOn = []string{"b"} }, "itself"},
		{"forward dependency", func(p *errandstore.WorkflowInsertParams) { p.Steps[0].DependsOn = []string{"b"} }, "declared before"},
		{"cycle", func(p *errandstore.WorkflowInsertParams) {
			p.Steps[0].DependsOn = []string{"b"} // a ← b ← a
		}, "declared before"},
		{"unknown dependency", func(p *errandstore.WorkflowInsertParams) { p.Steps[1].DependsOn = []string{"zz"} }, "declared before"},
		{"twice the same dependency", func(p *errandstore.WorkflowInsertParams) { p.Steps[1].DependsOn = []string{"a", "a"} }, "twice"},
		{"no job", func(p *errandstore.WorkflowInsertParams) { p.Steps[1].Job = nil }, "no job"},
		{"args not an object", func(p *errandstore.WorkflowInsertParams) { p.Steps[1].Job.Args = json.RawMessage(`"x"`) }, "JSON object"},
		{"compensation args not an object", func(p *errandstore.WorkflowInsertParams) { p.Steps[0].Compensation.Args = json.RawMessage(`null`) }, "JSON object"},
		{"bad template", func(p *errandstore.WorkflowInsertParams) { p.Steps[1].Job.MaxAttempts = 0 }, "required"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := ok()
			c.edit(p)
			err := p.Validate()
			var ie *errandtype.InputError
			if !errors.As(err, &ie) {
				t.Fatalf("err = %v, want an *InputError", err)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want it to say %q", err, c.want)
			}
		})
	}
}

func TestJobSetOutputParamsValidate(t *testing.T) {
	for _, c := range []struct {
		out  string
		fine bool
	}{
		{`{"id":1}`, true},
		{`"x"`, true},
		{`{"id":`, false},
		{`"` + strings.Repeat("x", errandstore.MaxOutputBytes) + `"`, false},
		// Text every store keeps, but not args every store keeps, as it
		// becomes in the steps that depend on it.
		{`"a\u0000"`, false},
		{`"\ud800"`, false},
		{`[1e200000]`, false},
		{`"\ud83d\ude00"`, true},
		{"\"a\x00\"", false},
	} {
		err := (&errandstore.JobSetOutputParams{ID: "j", LeaseToken: "t", Output: json.RawMessage(c.out)}).Validate()
		if (err == nil) != c.fine {
			t.Errorf("output %.20q: err = %v", c.out, err)
		}
	}
}
