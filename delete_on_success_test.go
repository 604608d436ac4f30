package errand_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtest"
	"github.com/errandhq/errand/errandtype"
)

// TestDeleteOnSuccess: a job of a kind with DeleteOnSuccess is gone once it
// succeeds, and its id free; the jobs read after they succeed are kept (a
// batch's member, a job whose unique key holds while succeeded), and so
// are failures and the jobs of other kinds.
func TestDeleteOnSuccess(t *testing.T) {
	eachJobStore(t, func(t *testing.T, s errandstore.TxStore[*sql.Tx], clock *errandtest.Clock) {
		ctx := context.Background()
		ok := errand.HandlerFunc(func(context.Context, *errandtype.Job) error { return nil })
		kinds := errand.NewKinds()
		kinds.HandleRaw("gone", ok, &errand.KindOpts{DeleteOnSuccess: true})
		kinds.HandleRaw("fails", errand.HandlerFunc(func(context.Context, *errandtype.Job) error {
			return errand.Permanent(errors.New("no"))
		}), &errand.KindOpts{DeleteOnSuccess: true})
		kinds.HandleRaw("kept", ok, nil)
		c := newClient(t, s, &errand.Config{Kinds: kinds})

		enqueue := func(kind, id string, unique *errand.UniqueOpts) {
			t.Helper()
			if _, err := c.Enqueue(ctx, errand.RawArgs{KindName: kind}, &errand.EnqueueOpts{ID: id, Unique: unique}); err != nil {
				t.Fatalf("enqueue %s: %v", id, err)
			}
		}
		enqueue("gone", "plain", nil)
		enqueue("gone", "until-finished", &errand.UniqueOpts{Key: "k1", Scope: errandtype.UniqueUntilFinished})
		enqueue("gone", "always", &errand.UniqueOpts{Key: "k2"})
		enqueue("fails", "fails", nil)
		enqueue("kept", "other", nil)
		b, err := c.EnqueueBatch(ctx, []errand.EnqueueParams{{Args: errand.RawArgs{KindName: "gone"}, Opts: &errand.EnqueueOpts{ID: "member"}}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		for range 6 {
			r, err := c.WorkOne(ctx, nil)
			if err != nil || r.JobID == nil {
				t.Fatalf("work one: %+v, %v", r, err)
			}
			want := errand.ResultSucceeded
			if r.Kind == "fails" {
				want = errand.ResultDead
			}
			if r.Result != want {
				t.Errorf("job %s: result %s, want %s", *r.JobID, r.Result, want)
			}
		}

		for _, id := range []string{"plain", "until-finished"} {
			if j, err := c.Get(ctx, id); !errors.Is(err, errandtype.ErrNotFound) {
				t.Errorf("job %s after it succeeded: %+v, %v; want not found", id, j, err)
			}
		}
		for id, want := range map[string]errandtype.JobState{"always": "succeeded", "member": "succeeded", "fails": "dead", "other": "succeeded"} {
			if j, err := c.Get(ctx, id); err != nil || j.State != want {
				t.Errorf("job %s: %+v, %v; want it kept, %s", id, j, err, want)
			}
		}
		if got, err := c.Batch(ctx, b.Batch.ID); err != nil || got.CompletedAt == nil {
			t.Errorf("batch of a deleting kind: %+v, %v; want completed", got, err)
		}
		if r, err := c.Enqueue(ctx, errand.RawArgs{KindName: "gone"}, &errand.EnqueueOpts{ID: "plain"}); err != nil || r.Duplicate {
			t.Errorf("enqueue of a deleted job's id: %+v, %v; want a new job", r, err)
		}
	})
}

// TestWorkerDeletesOnSuccess: a Worker draining a kind with DeleteOnSuccess,
// its outcomes written in batches, leaves no job behind and counts every
// success.
func TestWorkerDeletesOnSuccess(t *testing.T) {
	eachJobStore(t, func(t *testing.T, s errandstore.TxStore[*sql.Tx], clock *errandtest.Clock) {
		ctx := context.Background()
		kinds := errand.NewKinds()
		kinds.HandleRaw("gone", errand.HandlerFunc(func(context.Context, *errandtype.Job) error { return nil }), &errand.KindOpts{DeleteOnSuccess: true})
		c := newClient(t, s, &errand.Config{Kinds: kinds})
		const n = 300
		ps := make([]errand.EnqueueParams, n)
		for i := range ps {
			ps[i] = errand.EnqueueParams{Args: errand.RawArgs{KindName: "gone"}}
		}
		if _, err := c.EnqueueMany(ctx, ps); err != nil {
			t.Fatal(err)
		}
		w, err := c.NewWorker(&errand.WorkerConfig{Queues: map[string]int{errand.DefaultQueue: 100}})
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Start(ctx); err != nil {
			t.Fatal(err)
		}
		defer w.Stop(ctx)
		waitFor(t, 30*time.Second, "the worker to finish the jobs", func() bool { return w.Stats().JobsCompleted == n })
		if st := w.Stats(); st.LeasesLost != 0 || st.OutcomeWrites >= n {
			t.Errorf("stats %+v: want no lease lost, and outcomes written in batches", st)
		}
		stats, err := c.Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range stats {
			for state, k := range q.Counts {
				if k != 0 {
					t.Errorf("queue %s holds %d %s jobs after the drain; want none", q.Queue, k, state)
				}
			}
		}
	})
}
