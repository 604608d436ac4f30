package errand_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtest"
	"github.com/errandhq/errand/errandtype"
)

// TestCallerIDsNeverTakeErrandsOwn: on each store, a caller may not give a
// job an id in a shape errand keeps for the jobs it enqueues itself (a
// batch's callback, a workflow's step or compensation, a dead job's
// on-dead job), nor a batch id or step name that would give two of
// errand's jobs one id, nor an id "." or ".." that no URL can name;
// nothing refused is written, near misses are accepted, and the callback,
// the step and the hook then run as errand's own, the hook even of a job
// whose id is as long as an id may be.
func TestCallerIDsNeverTakeErrandsOwn(t *testing.T) {
	eachJobStore(t, func(t *testing.T, st errandstore.TxStore[*sql.Tx], clock *errandtest.Clock) {
		ctx := t.Context()
		ks := errand.NewKinds()
		ks.HandleRaw("work", errand.HandlerFunc(func(ctx context.Context, job *errandtype.Job) error { return nil }), nil)
		ks.HandleRaw("charge", errand.HandlerFunc(func(ctx context.Context, job *errandtype.Job) error {
			return errand.Permanent(errors.New("card declined"))
		}), &errand.KindOpts{OnDead: func(job *errandtype.Job) (errand.JobArgs, *errand.EnqueueOpts) {
			return errand.RawArgs{KindName: "refund", JSON: json.RawMessage(`{}`)}, nil
		}})
		ks.HandleRaw("refund", errand.HandlerFunc(func(ctx context.Context, job *errandtype.Job) error { return nil }), nil)
		errand.Handle(ks, func(ctx context.Context, job *errandtype.Job, a doneArgs) error { return nil }, nil)
		c := newClient(t, st, &errand.Config{Kinds: ks, Clock: clock})
		work := errand.RawArgs{KindName: "work", JSON: json.RawMessage(`{}`)}
		refused := func(what string, err error, field string) {
			t.Helper()
			var ie *errandtype.InputError
			if !errors.As(err, &ie) || ie.Field != field {
				t.Errorf("%s: %v, want an *InputError on %s", what, err, field)
			}
		}

		for _, id := range []string{
			"b.callback", "a.b.callback",
			"w.step.a", "w.undo.a", "a.b.step.c", "w.step.step",
			"j.dead.0", "j.dead.12", "a.dead.b.dead.3",
			".", "..", // dot segments: no URL path can name them
		} {
			opts := &errand.EnqueueOpts{ID: id}
			_, err := c.Enqueue(ctx, work, opts)
			refused("Enqueue "+id, err, "id")
			refused("CheckEnqueue "+id, errand.CheckEnqueue(work, opts), "id")
			_, err = c.EnqueueBatch(ctx, []errand.EnqueueParams{{Args: work}, {Args: work, Opts: opts}}, nil)
			refused("batch member "+id, err, "id")
		}
		for _, id := range []string{"x.step", "x.undo", "a.b.step", ".", ".."} {
			_, err := c.EnqueueBatch(ctx, []errand.EnqueueParams{{Args: work}}, &errand.BatchOpts{ID: id, Callback: doneArgs{}})
			refused("batch id "+id, err, "batch id")
		}
		for _, name := range []string{"a.b", ".", "callback."} {
			_, err := c.EnqueueWorkflow(ctx, []errand.WorkflowStep{{Name: name, Args: work}}, &errand.WorkflowOpts{ID: "w"})
			refused("step name "+name, err, "workflow step 0 name")
		}
		for _, id := range []string{".", ".."} {
			_, err := c.EnqueueWorkflow(ctx, []errand.WorkflowStep{{Name: "a", Args: work}}, &errand.WorkflowOpts{ID: id})
			refused("workflow id "+id, err, "workflow id")
		}
		if js, err := c.List(ctx, &errand.ListOpts{Limit: 100}); err != nil || len(js) != 0 {
			t.Fatalf("refused ids wrote %d jobs (%v)", len(js), err)
		}

		// Near misses are ordinary ids.
		for _, id := range []string{"callback", "b.callbacks", "b.step", ".step.a", "w.step.", "w.steps.a",
			"j.dead.x", "j.dead.", "dead.0", ".dead.0", "step.a", "...", "./a", ".a",
			".callback", "j.dead.007", "j.dead.99999999999"} {
			if _, err := c.Enqueue(ctx, work, &errand.EnqueueOpts{ID: id}); err != nil {
				t.Errorf("Enqueue %q: %v", id, err)
			}
		}

		// errand's own jobs, under their ids.
		if _, err := c.EnqueueBatch(ctx, []errand.EnqueueParams{{Args: work}}, &errand.BatchOpts{ID: "b", Callback: doneArgs{Import: 9}}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.EnqueueWorkflow(ctx, []errand.WorkflowStep{{Name: "a", Args: work}, {Name: "callback", Args: work, DependsOn: []string{"a"}}},
			&errand.WorkflowOpts{ID: "w"}); err != nil {
			t.Fatal(err)
		}
		long := strings.Repeat("j", errandstore.MaxIDBytes)
		for _, id := range []string{"j", long} {
			if _, err := c.Enqueue(ctx, errand.RawArgs{KindName: "charge", JSON: json.RawMessage(`{}`)}, &errand.EnqueueOpts{ID: id}); err != nil {
				t.Fatal(err)
			}
		}
		for range 100 {
			if r := workOne(t, c, nil); r.JobID == nil {
				break
			}
		}
		want := map[string]string{
			errandstore.BatchCallbackJobID("b"):            "import_done",
			errandstore.WorkflowStepJobID("w", "a"):        "work",
			errandstore.WorkflowStepJobID("w", "callback"): "work",
			errand.DeadHookJobID("j", 0):                   "refund",
			errand.DeadHookJobID(long, 0):                  "refund",
		}
		for id, kind := range want {
			j := getJob(t, c, id)
			if j.Kind != kind || j.State != errandtype.StateSucceeded {
				t.Errorf("%s: %s %s, want %s succeeded", id, j.Kind, j.State, kind)
			}
		}
		if w, err := c.Workflow(ctx, "w"); err != nil || w.State != errandtype.WorkflowSucceeded {
			t.Fatalf("workflow w: %+v (%v), want succeeded", w, err)
		}
	})
}
