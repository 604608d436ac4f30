package errand_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtest"
	"github.com/errandhq/errand/errandtype"
)

// tripArgs are the args of every job of the trip workflow in these tests:
// the order, and the workflow context errand sets.
type tripArgs struct {
	Order    int                         `json:"order"`
	Workflow errandstore.WorkflowContext `json:"workflow"`
}

// tripPayment is what the charge step records as its output.
type tripPayment struct {
	Payment string `json:"payment"`
}

// trip is a recorder of the trip workflow's handlers: charge → reserve →
// book → confirm, each compensated (refund, release, cancel_booking) but
// confirm.
type trip struct {
	mu  sync.Mutex
	ran []string // "kind" as each handler ran, in order
	// bookFails makes book fail permanently while set.
	bookFails atomic.Bool
	// compensationFails makes the named compensation kind fail
	// permanently while set.
	compensationFails sync.Map
	// payment is the payment reserve read from charge's output.
	payment string
}

var tripKinds = []string{"trip_charge", "trip_reserve", "trip_book", "trip_confirm", "trip_refund", "trip_release", "trip_cancel_booking"}

func (tr *trip) handler(kind string) errand.HandlerFunc {
	return func(ctx context.Context, job *errandtype.Job) error {
		var a tripArgs
		if err := json.Unmarshal(job.Args, &a); err != nil {
			return errand.Permanent(err)
		}
		if a.Workflow.ID == "" || job.WorkflowID == nil || *job.WorkflowID != a.Workflow.ID {
			return errand.Permanent(errors.New("no workflow context"))
		}
		switch kind {
		case "trip_charge":
			if err := errand.SetOutput(ctx, tripPayment{Payment: "pay-7"}); err != nil {
				return err
			}
		case "trip_reserve":
			p, ok, err := errand.StepOutput[tripPayment](a.Workflow, "charge")
			if err != nil || !ok {
				return errand.Permanent(errors.New("no output of charge"))
			}
			tr.mu.Lock()
			tr.payment = p.Payment
			tr.mu.Unlock()
		case "trip_book":
			if tr.bookFails.Load() {
				tr.record(kind + ":failed")
				return errand.Permanent(errors.New("no seats"))
			}
		}
		if _, fail := tr.compensationFails.Load(kind); fail {
			tr.record(kind + ":failed")
			return errand.Permanent(errors.New("compensation failed"))
		}
		tr.record(kind)
		return nil
	}
}

func (tr *trip) record(s string) {
	tr.mu.Lock()
	tr.ran = append(tr.ran, s)
	tr.mu.Unlock()
}

func (tr *trip) order() []string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return slices.Clone(tr.ran)
}

// tripClient returns a client that runs the trip's kinds, each with one
// attempt.
func tripClient(t *testing.T, st errandstore.TxStore[*sql.Tx], tr *trip, clock errand.TimeSource) *errand.Client[*sql.Tx] {
	t.Helper()
	ks := errand.NewKinds()
	for _, k := range tripKinds {
		ks.HandleRaw(k, tr.handler(k), &errand.KindOpts{MaxAttempts: 1})
	}
	return newClient(t, st, &errand.Config{Kinds: ks, Clock: clock})
}

// tripSteps is the workflow of the issue: charge → reserve → book →
// confirm, each with a compensation but confirm.
func tripSteps(t *testing.T, order int) []errand.WorkflowStep {
	t.Helper()
	args := func(kind string) errand.JobArgs { return rawArgs(t, kind, map[string]int{"order": order}) }
	return []errand.WorkflowStep{
		{Name: "charge", Args: args("trip_charge"), Compensate: args("trip_refund")},
		{Name: "reserve", Args: args("trip_reserve"), DependsOn: []string{"charge"}, Compensate: args("trip_release")},
		{Name: "book", Args: args("trip_book"), DependsOn: []string{"reserve"}, Compensate: args("trip_cancel_booking")},
		{Name: "confirm", Args: args("trip_confirm"), DependsOn: []string{"book"}},
	}
}

// waitWorkflow waits until workflow id is in state, and returns it.
func waitWorkflow(t *testing.T, c *errand.Client[*sql.Tx], id string, state errandtype.WorkflowState) *errandtype.Workflow {
	t.Helper()
	deadline := time.Now().Add(5 * time.Minute) // generous: a shared, loaded machine under -race
	for {
		w, err := c.Workflow(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		if w.State == state {
			return w
		}
		if time.Now().After(deadline) {
			b, _ := json.Marshal(w)
			t.Fatalf("workflow %s is %s, want %s: %s", id, w.State, state, b)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func stepState(w *errandtype.Workflow, step string) string {
	for _, s := range w.Steps {
		if s.Name == step && s.State != nil {
			return string(*s.State)
		}
	}
	return "<none>"
}

func compensationState(w *errandtype.Workflow, step string) string {
	for _, s := range w.Steps {
		if s.Name == step && s.Compensation != nil && s.Compensation.State != nil {
			return string(*s.Compensation.State)
		}
	}
	return "<none>"
}

// TestWorkflowCompensatesThenReruns is the test, through a Worker
// on each store: four linear steps whose third fails permanently run the
// compensations of the second and the first, in that order, and end failed
// with the third as the failed step. A replay of that step is refused: it
// would resume the workflow over the refunded charge. After a fix, a rerun
// runs every step again as a new workflow, which succeeds; the old one
// stays failed. The first step's output reaches the second's args.
func TestWorkflowCompensatesThenReruns(t *testing.T) {
	sharedStores(t, func(t *testing.T, stores []errandstore.TxStore[*sql.Tx]) {
		ctx := t.Context()
		tr := &trip{}
		tr.bookFails.Store(true)
		c := tripClient(t, stores[0], tr, nil)
		w, err := c.NewWorker(&errand.WorkerConfig{
			Queues:       map[string]int{errand.DefaultQueue: 2},
			PollInterval: 100 * time.Millisecond,
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Start(ctx); err != nil {
			t.Fatal(err)
		}
		defer func() {
			sctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := w.Stop(sctx); err != nil {
				t.Errorf("stop worker: %v", err)
			}
		}()

		res, err := c.EnqueueWorkflow(ctx, tripSteps(t, 7), &errand.WorkflowOpts{ID: "trip-7", Name: "trip"})
		if err != nil {
			t.Fatal(err)
		}
		if res.Duplicate || len(res.Jobs) != 1 || res.Jobs[0].ID != "trip-7.step.charge" || res.Workflow.State != errandtype.WorkflowRunning {
			t.Fatalf("EnqueueWorkflow = %+v", res)
		}
		again, err := c.EnqueueWorkflow(ctx, tripSteps(t, 7), &errand.WorkflowOpts{ID: "trip-7", Name: "trip"})
		if err != nil || !again.Duplicate || len(again.Jobs) != 0 {
			t.Fatalf("enqueue again = %+v, %v; want the duplicate", again, err)
		}

		wf := waitWorkflow(t, c, "trip-7", errandtype.WorkflowFailed)
		want := []string{"trip_charge", "trip_reserve", "trip_book:failed", "trip_release", "trip_refund"}
		if got := tr.order(); !slices.Equal(got, want) {
			t.Fatalf("handlers ran %v, want %v", got, want)
		}
		if wf.FailedStep == nil || *wf.FailedStep != "book" || wf.FinishedAt == nil {
			t.Fatalf("failed workflow: %+v", wf)
		}
		if stepState(wf, "book") != "dead" || stepState(wf, "confirm") != "<none>" ||
			compensationState(wf, "reserve") != "succeeded" || compensationState(wf, "charge") != "succeeded" ||
			compensationState(wf, "book") != "<none>" {
			b, _ := json.Marshal(wf)
			t.Fatalf("failed workflow: %s", b)
		}
		if tr.payment != "pay-7" {
			t.Fatalf("reserve read payment %q from charge's output, want pay-7", tr.payment)
		}
		if s := wf.Steps[0]; string(s.Output) != `{"payment":"pay-7"}` {
			t.Fatalf("charge's output %s", s.Output)
		}
		book := getJob(t, c, "trip-7.step.book")
		if book.WorkflowID == nil || *book.WorkflowID != "trip-7" {
			t.Fatalf("book's workflow id %v", book.WorkflowID)
		}

		// The fix; a replay of the dead step is refused, and names the
		// rerun.
		tr.bookFails.Store(false)
		_, err = c.Replay(ctx, "trip-7.step.book", &errand.ReplayOpts{Operator: "ops", Reason: "seats added"})
		if !errors.Is(err, errandstore.ErrWorkflowCompensated) || !strings.Contains(err.Error(), "errand workflow rerun trip-7") {
			t.Fatalf("replay of the compensated step = %v, want ErrWorkflowCompensated naming the rerun", err)
		}
		if _, err := c.RerunWorkflow(ctx, "trip-7", &errand.WorkflowRerunOpts{ID: "trip-7b"}); err != nil {
			t.Fatal(err)
		}
		wf = waitWorkflow(t, c, "trip-7b", errandtype.WorkflowSucceeded)
		want = append(want, "trip_charge", "trip_reserve", "trip_book", "trip_confirm")
		if got := tr.order(); !slices.Equal(got, want) {
			t.Fatalf("handlers ran %v, want %v", got, want)
		}
		if wf.RerunOf == nil || *wf.RerunOf != "trip-7" || wf.Name != "trip" || stepState(wf, "confirm") != "succeeded" {
			t.Fatalf("rerun workflow: %+v", wf)
		}
		old := workflowState(t, c, "trip-7")
		if old.State != errandtype.WorkflowFailed || old.RerunAs == nil || *old.RerunAs != "trip-7b" || stepState(old, "book") != "dead" {
			t.Fatalf("old workflow after the rerun: %+v", old)
		}
		ws, err := c.Workflows(ctx, &errandstore.WorkflowListParams{States: []errandtype.WorkflowState{errandtype.WorkflowSucceeded}})
		if err != nil || len(ws) != 1 || ws[0].ID != "trip-7b" {
			t.Fatalf("succeeded workflows: %v, %v", ws, err)
		}
	})
}

// workTrip runs the next job of c, which must be the job id, to result.
func workTrip(t *testing.T, c *errand.Client[*sql.Tx], id string, result errand.Result) {
	t.Helper()
	r := workOne(t, c, nil)
	if r.JobID == nil || *r.JobID != id || r.Result != result {
		got := "<none>"
		if r.JobID != nil {
			got = *r.JobID
		}
		t.Fatalf("worked %s: %s, want %s: %s", got, r.Result, id, result)
	}
}

func workflowState(t *testing.T, c *errand.Client[*sql.Tx], id string) *errandtype.Workflow {
	t.Helper()
	w, err := c.Workflow(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// TestWorkflowReplayRules: a dead step of a compensating workflow is not
// replayed (nothing is written), and the error names the rerun and the
// dead compensation holding the workflow; the dead compensation is
// replayed and the workflow goes on; failed, the step is still refused. A
// failed workflow with nothing to undo resumes by a replay of its step,
// with corrected args that keep the field "workflow"; a bulk replay
// advances the workflows of the jobs it replayed.
func TestWorkflowReplayRules(t *testing.T) {
	eachJobStore(t, func(t *testing.T, st errandstore.TxStore[*sql.Tx], clock *errandtest.Clock) {
		ctx := t.Context()
		tr := &trip{}
		tr.bookFails.Store(true)
		tr.compensationFails.Store("trip_release", true)
		c := tripClient(t, st, tr, clock)
		if _, err := c.EnqueueWorkflow(ctx, tripSteps(t, 8), &errand.WorkflowOpts{ID: "trip-8"}); err != nil {
			t.Fatal(err)
		}
		workTrip(t, c, "trip-8.step.charge", errand.ResultSucceeded)
		workTrip(t, c, "trip-8.step.reserve", errand.ResultSucceeded)
		workTrip(t, c, "trip-8.step.book", errand.ResultDead)
		workTrip(t, c, "trip-8.undo.reserve", errand.ResultDead)
		if w := workflowState(t, c, "trip-8"); w.State != errandtype.WorkflowCompensating {
			t.Fatalf("workflow %s, want compensating", w.State)
		}

		replay := &errand.ReplayOpts{Operator: "ops", Reason: "seats added"}
		before := getJob(t, c, "trip-8.step.book")
		_, err := c.Replay(ctx, "trip-8.step.book", replay)
		var se *errandtype.StateError
		if !errors.As(err, &se) || !errors.Is(err, errandtype.ErrWrongState) {
			t.Fatalf("replay while compensating: %v, want a *StateError", err)
		}
		for _, s := range []string{"compensating", "once it has failed, rerun it as a new workflow: errand workflow rerun trip-8", "trip-8.undo.reserve is dead"} {
			if !strings.Contains(err.Error(), s) {
				t.Fatalf("error %q does not say %q", err, s)
			}
		}
		if after := getJob(t, c, "trip-8.step.book"); after.State != errandtype.StateDead || after.Replays != before.Replays {
			t.Fatalf("refused replay wrote: %s, replays %d", after.State, after.Replays)
		}
		if rs, err := c.ReplayAudit(ctx, "trip-8.step.book"); err != nil || len(rs) != 0 {
			t.Fatalf("refused replay audited: %v %v", rs, err)
		}
		// A bulk replay leaves the step out, and says so.
		rm, err := c.ReplayMany(ctx, &errand.ReplayManyOpts{Filter: errandstore.DeadFilter{Kind: "trip_book"}, Operator: "ops", Reason: "seats added"})
		if err != nil || len(rm.Jobs) != 0 || !slices.Equal(rm.Held, []string{"trip-8.step.book"}) {
			t.Fatalf("bulk replay while compensating: %+v, %v; want nothing replayed and the step reported held", rm, err)
		}

		// The dead compensation is replayed: compensating goes on.
		tr.compensationFails.Delete("trip_release")
		if _, err := c.Replay(ctx, "trip-8.undo.reserve", replay); err != nil {
			t.Fatal(err)
		}
		workTrip(t, c, "trip-8.undo.reserve", errand.ResultSucceeded)
		if _, err := c.Replay(ctx, "trip-8.step.book", replay); !errors.As(err, &se) {
			t.Fatalf("replay while the second compensation waits: %v, want a *StateError", err)
		}
		workTrip(t, c, "trip-8.undo.charge", errand.ResultSucceeded)
		w := workflowState(t, c, "trip-8")
		if w.State != errandtype.WorkflowFailed || w.FailedStep == nil || *w.FailedStep != "book" {
			t.Fatalf("workflow %s, failed step %v", w.State, w.FailedStep)
		}

		// Failed after compensating: still refused, and the error no longer
		// names a dead compensation.
		_, err = c.Replay(ctx, "trip-8.step.book", replay)
		if !errors.Is(err, errandstore.ErrWorkflowCompensated) || strings.Contains(err.Error(), "is dead and holds") ||
			!strings.Contains(err.Error(), "compensated (undid reserve, charge)") {
			t.Fatalf("replay once failed: %v, want ErrWorkflowCompensated naming what was undone", err)
		}

		// Failed with nothing to undo: the step is replayed, with corrected
		// args that keep the workflow's context, and the workflow runs
		// again at once.
		tr.bookFails.Store(true)
		nine := []errand.WorkflowStep{{Name: "book", Args: rawArgs(t, "trip_book", map[string]int{"order": 9})}}
		if _, err := c.EnqueueWorkflow(ctx, nine, &errand.WorkflowOpts{ID: "trip-9"}); err != nil {
			t.Fatal(err)
		}
		workTrip(t, c, "trip-9.step.book", errand.ResultDead)
		tr.bookFails.Store(false)
		ra := *replay
		ra.Args = json.RawMessage(`{"order":99,"workflow":{"id":"forged"}}`)
		j, err := c.Replay(ctx, "trip-9.step.book", &ra)
		if err != nil {
			t.Fatal(err)
		}
		var a tripArgs
		if err := json.Unmarshal(getJob(t, c, j.ID).Args, &a); err != nil || a.Order != 99 || a.Workflow.ID != "trip-9" || a.Workflow.Step != "book" {
			t.Fatalf("replayed args %+v (%v)", a, err)
		}
		if w := workflowState(t, c, "trip-9"); w.State != errandtype.WorkflowRunning || w.FailedStep != nil {
			t.Fatalf("after the replay: workflow %s, failed step %v; want running", w.State, w.FailedStep)
		}
		workTrip(t, c, "trip-9.step.book", errand.ResultSucceeded)
		if w := workflowState(t, c, "trip-9"); w.State != errandtype.WorkflowSucceeded {
			t.Fatalf("workflow %s, want succeeded", w.State)
		}

		// A bulk replay advances the workflows of the jobs it replayed.
		tr.bookFails.Store(true)
		if _, err := c.EnqueueWorkflow(ctx, tripSteps(t, 10)[2:3:3], &errand.WorkflowOpts{ID: "trip-10"}); err == nil {
			t.Fatal("a step depending on an undeclared step was accepted")
		}
		one := []errand.WorkflowStep{{Name: "book", Args: rawArgs(t, "trip_book", map[string]int{"order": 10})}}
		if _, err := c.EnqueueWorkflow(ctx, one, &errand.WorkflowOpts{ID: "trip-10"}); err != nil {
			t.Fatal(err)
		}
		workTrip(t, c, "trip-10.step.book", errand.ResultDead)
		if w := workflowState(t, c, "trip-10"); w.State != errandtype.WorkflowFailed {
			t.Fatalf("workflow %s, want failed", w.State)
		}
		tr.bookFails.Store(false)
		rm, err = c.ReplayMany(ctx, &errand.ReplayManyOpts{Filter: errandstore.DeadFilter{Kind: "trip_book"}, Operator: "ops", Reason: "seats added"})
		if err != nil || len(rm.Jobs) != 1 || rm.Jobs[0].ID != "trip-10.step.book" || !slices.Equal(rm.Held, []string{"trip-8.step.book"}) {
			t.Fatalf("replay many: %+v %v", rm, err)
		}
		if w := workflowState(t, c, "trip-10"); w.State != errandtype.WorkflowRunning {
			t.Fatalf("after the bulk replay: workflow %s, want running", w.State)
		}
		workTrip(t, c, "trip-10.step.book", errand.ResultSucceeded)
		if w := workflowState(t, c, "trip-10"); w.State != errandtype.WorkflowSucceeded {
			t.Fatalf("workflow %s, want succeeded", w.State)
		}
	})
}

// TestWorkflowLeaderCoversCrashedWorker: a worker that recorded a step's
// outcome and died before advancing its workflow is covered by the
// leader's pass, for a success (the next step is enqueued) and for a death
// (the compensation is enqueued); a pass with nothing new changes nothing.
func TestWorkflowLeaderCoversCrashedWorker(t *testing.T) {
	eachJobStore(t, func(t *testing.T, st errandstore.TxStore[*sql.Tx], clock *errandtest.Clock) {
		ctx := t.Context()
		tr := &trip{}
		c := tripClient(t, st, tr, clock)
		if _, err := c.EnqueueWorkflow(ctx, tripSteps(t, 11), &errand.WorkflowOpts{ID: "trip-11"}); err != nil {
			t.Fatal(err)
		}
		crash := func(id string, kind errandstore.OutcomeKind) {
			t.Helper()
			js, err := st.JobClaimMany(ctx, &errandstore.JobClaimParams{Queues: []string{errand.DefaultQueue}, Limit: 1, Lease: time.Minute, Owner: "crashed"})
			if err != nil || len(js) != 1 || js[0].ID != id {
				t.Fatalf("claim %s: %v %v", id, js, err)
			}
			if kind == errandstore.OutcomeSucceeded {
				out := &errandstore.JobSetOutputParams{ID: id, LeaseToken: *js[0].LeaseToken, Output: json.RawMessage(`{"payment":"pay-11"}`)}
				if err := st.(errandstore.WorkflowStore).JobSetOutput(ctx, out); err != nil {
					t.Fatal(err)
				}
			}
			clock.Advance(time.Second) // the outcome comes after the workflow was last checked
			o := &errandstore.JobOutcome{JobLease: errandstore.JobLease{ID: id, LeaseToken: *js[0].LeaseToken}, Kind: kind}
			if kind == errandstore.OutcomeDead {
				o.Error = &errandtype.AttemptError{Attempt: 1, Class: errand.ClassPermanent, Message: "no seats"}
			}
			if rs, err := st.JobRecordOutcomes(ctx, &errandstore.JobRecordOutcomesParams{Outcomes: []*errandstore.JobOutcome{o}}); err != nil || rs[0].Err != nil {
				t.Fatalf("record %s: %v %v", id, rs, err)
			}
		}
		pass := func(want int) {
			t.Helper()
			if n, err := errand.AdvanceOpenWorkflows(ctx, c); err != nil || n != want {
				t.Fatalf("leader pass changed %d workflows (%v), want %d", n, err, want)
			}
		}

		pass(0)
		crash("trip-11.step.charge", errandstore.OutcomeSucceeded)
		if _, err := c.Get(ctx, "trip-11.step.reserve"); !errors.Is(err, errandtype.ErrNotFound) {
			t.Fatalf("reserve before the leader's pass: %v", err)
		}
		pass(1)
		getJob(t, c, "trip-11.step.reserve")
		pass(0)

		workTrip(t, c, "trip-11.step.reserve", errand.ResultSucceeded)
		crash("trip-11.step.book", errandstore.OutcomeDead)
		if w := workflowState(t, c, "trip-11"); w.State != errandtype.WorkflowRunning {
			t.Fatalf("workflow %s before the leader's pass, want running", w.State)
		}
		pass(1)
		if w := workflowState(t, c, "trip-11"); w.State != errandtype.WorkflowCompensating || getJob(t, c, "trip-11.undo.reserve").State != errandtype.StateQueued {
			t.Fatalf("workflow %s after the leader's pass, want compensating with undo.reserve queued", w.State)
		}
		pass(0)
		workTrip(t, c, "trip-11.undo.reserve", errand.ResultSucceeded)
		workTrip(t, c, "trip-11.undo.charge", errand.ResultSucceeded)
		if w := workflowState(t, c, "trip-11"); w.State != errandtype.WorkflowFailed {
			t.Fatalf("workflow %s, want failed", w.State)
		}
		pass(0)
	})
}

// jobGetCounter is a workflow store that counts its JobGet calls.
type jobGetCounter struct {
	errandstore.TxStore[*sql.Tx]
	errandstore.WorkflowStore
	gets atomic.Int64
}

func (s *jobGetCounter) JobGet(ctx context.Context, p *errandstore.JobGetParams) (*errandtype.Job, error) {
	s.gets.Add(1)
	return s.TxStore.JobGet(ctx, p)
}

// TestWorkflowRemoteOutcomes: outcomes that remote workers record through
// the Client (Ack, AckMany, Fail) advance the workflow as a Worker's do;
// an acknowledgment reads no job to do it.
func TestWorkflowRemoteOutcomes(t *testing.T) {
	eachJobStore(t, func(t *testing.T, inner errandstore.TxStore[*sql.Tx], clock *errandtest.Clock) {
		ctx := t.Context()
		st := &jobGetCounter{TxStore: inner, WorkflowStore: inner.(errandstore.WorkflowStore)}
		c := tripClient(t, st, &trip{}, clock)
		acked := func() {
			t.Helper()
			if n := st.gets.Swap(0); n != 0 {
				t.Fatalf("the acknowledgment read %d jobs, want none", n)
			}
		}
		if _, err := c.EnqueueWorkflow(ctx, tripSteps(t, 12), &errand.WorkflowOpts{ID: "trip-12"}); err != nil {
			t.Fatal(err)
		}
		claim := func(id string) string {
			t.Helper()
			js, err := c.Claim(ctx, &errand.ClaimOpts{Kinds: tripKinds, Owner: "remote"})
			if err != nil || len(js) != 1 || js[0].ID != id {
				t.Fatalf("claim %s: %v %v", id, js, err)
			}
			return *js[0].LeaseToken
		}
		tok := claim("trip-12.step.charge")
		st.gets.Store(0)
		if _, err := c.Ack(ctx, "trip-12.step.charge", tok); err != nil {
			t.Fatal(err)
		}
		acked()
		tok = claim("trip-12.step.reserve")
		st.gets.Store(0)
		if rs, err := c.AckMany(ctx, []errandstore.JobLease{{ID: "trip-12.step.reserve", LeaseToken: tok}}); err != nil || rs[0].Err != nil {
			t.Fatalf("ack many: %v %v", rs, err)
		}
		acked()
		if _, err := c.Fail(ctx, "trip-12.step.book", claim("trip-12.step.book"), &errand.FailOpts{Permanent: true, Message: "no seats"}); err != nil {
			t.Fatal(err)
		}
		if w := workflowState(t, c, "trip-12"); w.State != errandtype.WorkflowCompensating || w.FailedStep == nil || *w.FailedStep != "book" {
			t.Fatalf("workflow %s, failed step %v; want compensating after book", w.State, w.FailedStep)
		}
		if _, err := c.Ack(ctx, "trip-12.undo.reserve", claim("trip-12.undo.reserve")); err != nil {
			t.Fatal(err)
		}
		tok = claim("trip-12.undo.charge")
		st.gets.Store(0)
		if _, err := c.Ack(ctx, "trip-12.undo.charge", tok); err != nil {
			t.Fatal(err)
		}
		acked()
		if w := workflowState(t, c, "trip-12"); w.State != errandtype.WorkflowFailed {
			t.Fatalf("workflow %s, want failed", w.State)
		}
	})
}

// TestEnqueueWorkflowTx: a workflow enqueued in the caller's transaction
// exists, with its first step, if and only if the transaction commits.
func TestEnqueueWorkflowTx(t *testing.T) {
	eachJobStore(t, func(t *testing.T, st errandstore.TxStore[*sql.Tx], clock *errandtest.Clock) {
		ctx := t.Context()
		c := tripClient(t, st, &trip{}, clock)
		rollback := errors.New("roll back")
		err := c.InTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
			res, err := c.EnqueueWorkflowTx(ctx, tx, tripSteps(t, 13), &errand.WorkflowOpts{ID: "trip-13"})
			if err != nil {
				return err
			}
			if len(res.Jobs) != 1 || res.Jobs[0].ID != "trip-13.step.charge" {
				t.Errorf("jobs %v", res.Jobs)
			}
			return rollback
		})
		if !errors.Is(err, rollback) {
			t.Fatalf("InTx = %v", err)
		}
		if _, err := c.Workflow(ctx, "trip-13"); !errors.Is(err, errandtype.ErrNotFound) {
			t.Fatalf("rolled-back workflow: %v, want not found", err)
		}
		if _, err := c.Get(ctx, "trip-13.step.charge"); !errors.Is(err, errandtype.ErrNotFound) {
			t.Fatalf("rolled-back step: %v, want not found", err)
		}

		err = c.InTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
			_, err := c.EnqueueWorkflowTx(ctx, tx, tripSteps(t, 13), &errand.WorkflowOpts{ID: "trip-13"})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		if w := workflowState(t, c, "trip-13"); w.State != errandtype.WorkflowRunning || stepState(w, "charge") != "queued" {
			t.Fatalf("committed workflow %s, charge %s", w.State, stepState(w, "charge"))
		}
		workTrip(t, c, "trip-13.step.charge", errand.ResultSucceeded)
		getJob(t, c, "trip-13.step.reserve")
	})
}

// TestEnqueueWorkflowRefusals: what EnqueueWorkflow refuses, before
// anything is written.
func TestEnqueueWorkflowRefusals(t *testing.T) {
	st := openStore(t, nil)
	c := tripClient(t, st, &trip{}, nil)
	ctx := t.Context()
	ok := func() []errand.WorkflowStep { return tripSteps(t, 1) }
	for name, edit := range map[string]func(s []errand.WorkflowStep) []errand.WorkflowStep{
		"step id": func(s []errand.WorkflowStep) []errand.WorkflowStep {
			s[0].Opts = &errand.EnqueueOpts{ID: "x"}
			return s
		},
		"step run at": func(s []errand.WorkflowStep) []errand.WorkflowStep {
			s[0].Opts = &errand.EnqueueOpts{RunAt: time.Now()}
			return s
		},
		"step start by": func(s []errand.WorkflowStep) []errand.WorkflowStep {
			s[0].Opts = &errand.EnqueueOpts{StartBy: time.Now().Add(time.Hour)}
			return s
		},
		"step unique key": func(s []errand.WorkflowStep) []errand.WorkflowStep {
			s[0].Opts = &errand.EnqueueOpts{UniqueKey: "k"}
			return s
		},
		"compensate opts without compensate": func(s []errand.WorkflowStep) []errand.WorkflowStep {
			s[3].CompensateOpts = &errand.EnqueueOpts{}
			return s
		},
		"args not an object": func(s []errand.WorkflowStep) []errand.WorkflowStep {
			s[0].Args = errand.RawArgs{KindName: "trip_charge", JSON: json.RawMessage(`[1]`)}
			return s
		},
		"cycle":     func(s []errand.WorkflowStep) []errand.WorkflowStep { s[0].DependsOn = []string{"confirm"}; return s },
		"self":      func(s []errand.WorkflowStep) []errand.WorkflowStep { s[1].DependsOn = []string{"reserve"}; return s },
		"duplicate": func(s []errand.WorkflowStep) []errand.WorkflowStep { s[1].Name = "charge"; return s },
		"no steps":  func(s []errand.WorkflowStep) []errand.WorkflowStep { return nil },
	} {
		_, err := c.EnqueueWorkflow(ctx, edit(ok()), &errand.WorkflowOpts{ID: "refused"})
		var ie *errandtype.InputError
		if !errors.As(err, &ie) {
			t.Errorf("%s: err = %v, want an *InputError", name, err)
		}
	}
	if _, err := c.EnqueueWorkflow(ctx, ok(), &errand.WorkflowOpts{ID: strings.Repeat("w", errandstore.MaxWorkflowIDBytes+1)}); !errors.Is(err, errandtype.ErrInvalid) {
		t.Errorf("long id: %v", err)
	}
	if n := rowCounts(t, st.DB()); n[0] != 0 {
		t.Fatalf("refused workflows wrote %d jobs", n[0])
	}
	if _, err := c.Workflow(ctx, "refused"); !errors.Is(err, errandtype.ErrNotFound) {
		t.Fatalf("refused workflow: %v", err)
	}
}

// TestWorkflowFailureWaitsForParallelStep: on each store, a step that dies
// while a parallel step runs starts no compensation until the parallel
// step has finished; then the compensations run latest declared first. A
// step cancelled through the client stops its workflow as a dead one does.
func TestWorkflowFailureWaitsForParallelStep(t *testing.T) {
	eachJobStore(t, func(t *testing.T, st errandstore.TxStore[*sql.Tx], clock *errandtest.Clock) {
		ctx := t.Context()
		tr := &trip{}
		tr.bookFails.Store(true)
		c := tripClient(t, st, tr, clock)
		args := func(kind string) errand.JobArgs { return rawArgs(t, kind, map[string]int{"order": 14}) }
		steps := []errand.WorkflowStep{
			{Name: "charge", Args: args("trip_charge"), Compensate: args("trip_refund")},
			{Name: "reserve", Args: args("trip_reserve"), DependsOn: []string{"charge"}, Compensate: args("trip_release")},
			{Name: "book", Args: args("trip_book"), DependsOn: []string{"charge"}},
			{Name: "confirm", Args: args("trip_confirm"), DependsOn: []string{"reserve", "book"}},
		}
		if _, err := c.EnqueueWorkflow(ctx, steps, &errand.WorkflowOpts{ID: "trip-14"}); err != nil {
			t.Fatal(err)
		}
		workTrip(t, c, "trip-14.step.charge", errand.ResultSucceeded)
		// reserve and book are both queued: a crashed worker holds
		// reserve while book dies.
		js, err := st.JobClaimMany(ctx, &errandstore.JobClaimParams{Queues: []string{errand.DefaultQueue}, Limit: 1, Lease: time.Minute, Owner: "slow", Kinds: []string{"trip_reserve"}})
		if err != nil || len(js) != 1 {
			t.Fatalf("claim reserve: %v %v", js, err)
		}
		workTrip(t, c, "trip-14.step.book", errand.ResultDead)
		w := workflowState(t, c, "trip-14")
		if w.State != errandtype.WorkflowCompensating || compensationState(w, "charge") != "<none>" || compensationState(w, "reserve") != "<none>" {
			t.Fatalf("workflow %s, undo.charge %s, undo.reserve %s; want compensating and none yet", w.State, compensationState(w, "charge"), compensationState(w, "reserve"))
		}
		if r := workOne(t, c, nil); r.JobID != nil {
			t.Fatalf("worked %s while reserve runs", *r.JobID)
		}
		// reserve's slow worker records its success, and dies before the
		// advance: the leader's pass starts the compensations, reserve's
		// first, then charge's.
		clock.Advance(time.Second)
		if rs, err := st.JobRecordOutcomes(ctx, &errandstore.JobRecordOutcomesParams{Outcomes: []*errandstore.JobOutcome{{
			JobLease: errandstore.JobLease{ID: js[0].ID, LeaseToken: *js[0].LeaseToken}, Kind: errandstore.OutcomeSucceeded}}}); err != nil || rs[0].Err != nil {
			t.Fatalf("record reserve: %v %v", rs, err)
		}
		if n, err := errand.AdvanceOpenWorkflows(ctx, c); err != nil || n != 1 {
			t.Fatalf("leader pass changed %d (%v), want 1", n, err)
		}
		workTrip(t, c, "trip-14.undo.reserve", errand.ResultSucceeded)
		workTrip(t, c, "trip-14.undo.charge", errand.ResultSucceeded)
		w = workflowState(t, c, "trip-14")
		if w.State != errandtype.WorkflowFailed || *w.FailedStep != "book" || stepState(w, "confirm") != "<none>" {
			t.Fatalf("workflow %s, failed step %v, confirm %s", w.State, *w.FailedStep, stepState(w, "confirm"))
		}
		if got, want := tr.order(), []string{"trip_charge", "trip_book:failed", "trip_release", "trip_refund"}; !slices.Equal(got, want) {
			t.Fatalf("handlers ran %v, want %v", got, want)
		}

		// Cancelled through the client: compensations follow at once.
		if _, err := c.EnqueueWorkflow(ctx, tripSteps(t, 15), &errand.WorkflowOpts{ID: "trip-15"}); err != nil {
			t.Fatal(err)
		}
		workTrip(t, c, "trip-15.step.charge", errand.ResultSucceeded)
		if _, err := c.Cancel(ctx, "trip-15.step.reserve", &errand.CancelOpts{Operator: "ops", Reason: "customer left"}); err != nil {
			t.Fatal(err)
		}
		w = workflowState(t, c, "trip-15")
		if w.State != errandtype.WorkflowCompensating || *w.FailedStep != "reserve" || compensationState(w, "charge") != "queued" {
			t.Fatalf("workflow %s, failed step %v, undo.charge %s", w.State, w.FailedStep, compensationState(w, "charge"))
		}
		workTrip(t, c, "trip-15.undo.charge", errand.ResultSucceeded)
		if w := workflowState(t, c, "trip-15"); w.State != errandtype.WorkflowFailed {
			t.Fatalf("workflow %s, want failed", w.State)
		}
	})
}

// TestWorkflowLeadingWorkerAdvances: a leading Worker's sweep advances a
// workflow whose step's outcome was recorded by a process that died before
// advancing it.
func TestWorkflowLeadingWorkerAdvances(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "errand.db")
	clock := newTestClock()
	start := clock.Now()
	const sweepEvery = 10 * time.Second
	// The leader serves another queue: the workflow's jobs wait for it.
	w, _ := leaderProcess(t, path, clock, errand.WorkerConfig{LeaderTTL: time.Hour, SweepInterval: sweepEvery, PollOnly: true})
	// Its sweep on election is done (the sweep ticker starts after it),
	// before the workflow below exists.
	blockUntilAt(t, clock, start.Add(sweepEvery), 1)
	if !w.Leading() {
		t.Fatal("a lone worker does not lead")
	}

	st := openStoreAt(t, path, clock)
	c := tripClient(t, st, &trip{}, clock)
	if _, err := c.EnqueueWorkflow(ctx, tripSteps(t, 16), &errand.WorkflowOpts{ID: "trip-16"}); err != nil {
		t.Fatal(err)
	}
	js, err := st.JobClaimMany(ctx, &errandstore.JobClaimParams{Queues: []string{errand.DefaultQueue}, Limit: 1, Lease: time.Minute, Owner: "crashed"})
	if err != nil || len(js) != 1 || js[0].ID != "trip-16.step.charge" {
		t.Fatalf("claim: %v %v", js, err)
	}
	clock.Advance(time.Second)
	if rs, err := st.JobRecordOutcomes(ctx, &errandstore.JobRecordOutcomesParams{Outcomes: []*errandstore.JobOutcome{{
		JobLease: errandstore.JobLease{ID: js[0].ID, LeaseToken: *js[0].LeaseToken}, Kind: errandstore.OutcomeSucceeded}}}); err != nil || rs[0].Err != nil {
		t.Fatalf("record: %v %v", rs, err)
	}
	if _, err := c.Get(ctx, "trip-16.step.reserve"); !errors.Is(err, errandtype.ErrNotFound) {
		t.Fatalf("reserve before the leader's sweep: %v", err)
	}
	clock.Set(start.Add(sweepEvery))
	workerWaitFor(t, clockWait, func() bool {
		_, err := c.Get(ctx, "trip-16.step.reserve")
		return err == nil
	})
}
