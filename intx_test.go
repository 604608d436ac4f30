package errand_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandtype"
)

// InTx commits the application's writes and its jobs together, then wakes
// the workers: an idle worker whose poll is an hour away starts the job at
// once. A failing or panicking fn leaves neither the writes nor the jobs.
func TestInTx(t *testing.T) {
	ctx := t.Context()
	st := openWorkerStore(t)
	mustExec(t, st.DB(), `CREATE TABLE payments (id TEXT PRIMARY KEY)`)
	c := handlerClient(t, st, func(context.Context, *errandtype.Job) error { return nil })
	events, cancel := c.Subscribe()
	defer cancel()
	w, err := c.NewWorker(&errand.WorkerConfig{PollInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer w.Stop(context.Background())
	// The worker has looked once and found nothing: only a wake-up can
	// start the next job within the hour.
	waitFor(t, 30*time.Second, "the worker's first idle claim", func() bool { return w.Stats().IdleClaims > 0 })

	pay := func(id string, fail bool) error {
		return c.InTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
			if _, err := tx.ExecContext(ctx, `INSERT INTO payments (id) VALUES (?)`, id); err != nil {
				return err
			}
			if _, err := c.EnqueueTx(ctx, tx, errand.RawArgs{KindName: "task"}, &errand.EnqueueOpts{ID: "receipt:" + id}); err != nil {
				return err
			}
			if fail {
				return errors.New("card declined")
			}
			return nil
		})
	}
	if err := pay("pay_1", false); err != nil {
		t.Fatalf("InTx: %v", err)
	}
	select {
	case e := <-events:
		if e.Job.ID != "receipt:pay_1" || e.Result != errand.ResultSucceeded {
			t.Fatalf("event %+v, want receipt:pay_1 succeeded", e)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the job enqueued in InTx did not run: the worker was not woken after the commit")
	}

	if err := pay("pay_2", true); err == nil || err.Error() != "card declined" {
		t.Fatalf("InTx with a failing fn = %v, want its error", err)
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("InTx swallowed the panic")
			}
		}()
		_ = c.InTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
			if _, err := c.EnqueueTx(ctx, tx, errand.RawArgs{KindName: "task"}, &errand.EnqueueOpts{ID: "receipt:pay_3"}); err != nil {
				return err
			}
			panic("boom")
		})
	}()
	for _, id := range []string{"receipt:pay_2", "receipt:pay_3"} {
		if _, err := c.Get(ctx, id); !errors.Is(err, errandtype.ErrNotFound) {
			t.Errorf("Get(%s) = %v; want ErrNotFound after a rollback", id, err)
		}
	}
	if n := count(t, st.DB(), `SELECT count(*) FROM payments`); n != 1 {
		t.Fatalf("%d payments, want the committed one", n)
	}
}
