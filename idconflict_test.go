package errand_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
)

// wantConflict checks that err is an *IDConflictError of id naming fields.
func wantConflict(t *testing.T, what string, err error, id string, fields ...string) {
	t.Helper()
	var ice *errand.IDConflictError
	if !errors.Is(err, errand.ErrIDConflict) || !errors.As(err, &ice) || ice.ID != id || !slices.Equal(ice.Fields, fields) {
		t.Fatalf("%s: err = %v, want an *IDConflictError of %s naming %v", what, err, id, fields)
	}
}

// jobIDs lists every job's id, in enqueue order.
func jobIDs(t *testing.T, c *errand.Client[*sql.Tx]) []string {
	t.Helper()
	js, err := c.List(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, j := range js {
		out = append(out, j.ID)
	}
	return out
}

// TestEnqueueIDConflict: a duplicate id whose job differs from the one the
// enqueue would have made is an *IDConflictError naming the fields, with
// nothing written, from Enqueue, EnqueueMany and EnqueueTx alike; the same
// job, FirstWins, or a duplicate found by a unique key return the existing
// job.
func TestEnqueueIDConflict(t *testing.T) {
	bothStores(t, func(t *testing.T, st errandstore.TxStore[*sql.Tx]) {
		ctx := t.Context()
		c := newClient(t, st, &errand.Config{})
		charge := func(args string) errand.RawArgs { return errand.RawArgs{KindName: "charge", JSON: []byte(args)} }
		opts := func(edit func(o *errand.EnqueueOpts)) *errand.EnqueueOpts {
			o := &errand.EnqueueOpts{ID: "pay-1", Queue: "pay", MaxAttempts: 5, Tags: []string{"eu"}}
			if edit != nil {
				edit(o)
			}
			return o
		}
		if _, err := c.Enqueue(ctx, charge(`{"amount": 100, "currency": "EUR"}`), opts(nil)); err != nil {
			t.Fatal(err)
		}
		// The same job, spelt otherwise and with the attempt budget left to
		// the defaults, which another client may resolve otherwise.
		same, err := c.Enqueue(ctx, charge(`{"currency":"EUR","amount":1e2}`), opts(func(o *errand.EnqueueOpts) { o.MaxAttempts = 0 }))
		if err != nil || !same.Duplicate {
			t.Fatalf("the same job again: %+v, %v", same, err)
		}

		_, err = c.Enqueue(ctx, charge(`{"amount": 200, "currency": "EUR"}`), opts(func(o *errand.EnqueueOpts) { o.Priority = 3; o.Tags = nil }))
		wantConflict(t, "other args, priority and tags", err, "pay-1", "args", "priority", "tags")
		_, err = c.Enqueue(ctx, charge(`{"amount": 100, "currency": "EUR"}`), opts(func(o *errand.EnqueueOpts) { o.MaxAttempts = 6; o.Queue = "" }))
		wantConflict(t, "another budget and the default queue", err, "pay-1", "queue", "max_attempts")

		first, err := c.Enqueue(ctx, charge(`{"amount": 200}`), opts(func(o *errand.EnqueueOpts) { o.FirstWins = true }))
		if err != nil || !first.Duplicate || string(first.Job.Args) == `{"amount":200}` {
			t.Fatalf("FirstWins: %+v, %v; want the first job", first, err)
		}

		// Among several jobs, the conflict refuses the whole call: the new
		// job is not written, nor the second of two jobs of one id.
		_, err = c.EnqueueMany(ctx, []errand.EnqueueParams{
			{Args: charge(`{}`), Opts: &errand.EnqueueOpts{ID: "pay-2"}},
			{Args: charge(`{"amount": 300}`), Opts: opts(nil)},
		})
		wantConflict(t, "EnqueueMany", err, "pay-1", "args")
		_, err = c.EnqueueMany(ctx, []errand.EnqueueParams{
			{Args: charge(`{"amount": 1}`), Opts: &errand.EnqueueOpts{ID: "pay-3"}},
			{Args: charge(`{"amount": 2}`), Opts: &errand.EnqueueOpts{ID: "pay-3"}},
		})
		wantConflict(t, "one id twice in one call", err, "pay-3", "args")
		err = c.InTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
			_, err := c.EnqueueTx(ctx, tx, charge(`{"amount": 400}`), opts(nil))
			return err
		})
		wantConflict(t, "EnqueueTx", err, "pay-1", "args")

		// A unique key dedupes jobs whose args differ: not a conflict.
		if _, err := c.Enqueue(ctx, charge(`{"n": 1}`), &errand.EnqueueOpts{ID: "sync-1", UniqueKey: "sync"}); err != nil {
			t.Fatal(err)
		}
		byKey, err := c.Enqueue(ctx, charge(`{"n": 2}`), &errand.EnqueueOpts{ID: "sync-2", UniqueKey: "sync"})
		if err != nil || !byKey.Duplicate || byKey.Job.ID != "sync-1" {
			t.Fatalf("a held unique key: %+v, %v; want sync-1", byKey, err)
		}
		_, err = c.Enqueue(ctx, charge(`{"n": 1}`), &errand.EnqueueOpts{ID: "sync-1", Unique: &errand.UniqueOpts{Key: "sync", Scope: errandtype.UniqueUntilFinished}})
		wantConflict(t, "the id with another unique scope", err, "sync-1", "unique_scope")

		if got := jobIDs(t, c); !slices.Equal(got, []string{"pay-1", "sync-1"}) {
			t.Fatalf("jobs = %v, want pay-1 and sync-1 alone", got)
		}
	})
}

// TestEnqueueBatchAndWorkflowIDConflict: a batch or workflow id reused for
// a different one is an *IDConflictError naming what differs, with
// nothing written; the same one, or FirstWins, returns the existing one.
func TestEnqueueBatchAndWorkflowIDConflict(t *testing.T) {
	bothStores(t, func(t *testing.T, st errandstore.TxStore[*sql.Tx]) {
		ctx := t.Context()
		c := newClient(t, st, &errand.Config{})
		members := func(row int) []errand.EnqueueParams {
			ps := memberParams(2)
			ps[0].Opts = &errand.EnqueueOpts{ID: "imp-row-1"}
			ps[0].Args = memberArgs{N: 100 + row}
			return ps
		}
		bopts := func(queue string, firstWins bool) *errand.BatchOpts {
			return &errand.BatchOpts{ID: "imp", Callback: doneArgs{}, CallbackOpts: &errand.EnqueueOpts{Queue: queue}, FirstWins: firstWins}
		}
		if _, err := c.EnqueueBatch(ctx, members(1), bopts("done", false)); err != nil {
			t.Fatal(err)
		}
		if r, err := c.EnqueueBatch(ctx, members(1), bopts("done", false)); err != nil || !r.Duplicate {
			t.Fatalf("the same batch again: %+v, %v", r, err)
		}
		_, err := c.EnqueueBatch(ctx, members(2), bopts("later", false))
		wantConflict(t, "other member args and callback queue", err, "imp", "callback.queue", "jobs[0].args")
		_, err = c.EnqueueBatch(ctx, append(members(1), memberParams(1)...), bopts("done", false))
		wantConflict(t, "one job more", err, "imp", "jobs")
		if r, err := c.EnqueueBatch(ctx, members(2), bopts("later", true)); err != nil || !r.Duplicate {
			t.Fatalf("FirstWins: %+v, %v", r, err)
		}

		steps := func(amount int, undo string) []errand.WorkflowStep {
			return []errand.WorkflowStep{
				{Name: "charge", Args: errand.RawArgs{KindName: "charge", JSON: []byte(fmt.Sprintf(`{"amount": %d}`, amount))},
					Compensate: errand.RawArgs{KindName: undo}},
				{Name: "ship", Args: errand.RawArgs{KindName: "ship"}, DependsOn: []string{"charge"}},
			}
		}
		wopts := &errand.WorkflowOpts{ID: "order-1", Name: "checkout"}
		if _, err := c.EnqueueWorkflow(ctx, steps(1, "refund"), wopts); err != nil {
			t.Fatal(err)
		}
		if r, err := c.EnqueueWorkflow(ctx, steps(1, "refund"), wopts); err != nil || !r.Duplicate {
			t.Fatalf("the same workflow again: %+v, %v", r, err)
		}
		// The first step is enqueued: its args are compared. The
		// compensation is not: its kind is.
		_, err = c.EnqueueWorkflow(ctx, steps(2, "void"), &errand.WorkflowOpts{ID: "order-1", Name: "refund"})
		wantConflict(t, "other workflow", err, "order-1", "name", "steps[0].args", "steps[0].compensate.kind")
		if r, err := c.EnqueueWorkflow(ctx, steps(2, "void"), &errand.WorkflowOpts{ID: "order-1", FirstWins: true}); err != nil || !r.Duplicate {
			t.Fatalf("FirstWins: %+v, %v", r, err)
		}

		if got := jobIDs(t, c); len(got) != 3 {
			t.Fatalf("jobs = %v, want the batch's two and the workflow's first step", got)
		}
		_, err = c.EnqueueWorkflow(ctx, steps(1, "refund"), &errand.WorkflowOpts{FirstWins: true})
		var ie *errandtype.InputError
		if !errors.As(err, &ie) || ie.Field != "first_wins" {
			t.Fatalf("FirstWins without an id: %v, want an *InputError of first_wins", err)
		}
	})
}
