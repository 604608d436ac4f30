package errand_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/sqlite"
)

// openExampleStore opens a SQLite store in a fresh directory; cleanup removes
// both.
func openExampleStore() (store *sqlite.Store, cleanup func()) {
	dir, err := os.MkdirTemp("", "errand-example-")
	if err != nil {
		log.Fatal(err)
	}
	store, err = sqlite.Open(context.Background(), filepath.Join(dir, "app.db"), nil)
	if err != nil {
		log.Fatal(err)
	}
	return store, func() {
		store.Close()
		os.RemoveAll(dir)
	}
}

// A job is enqueued, then a one-shot worker claims it, runs its handler and
// records the outcome.
func ExampleClient_WorkOne() {
	ctx := context.Background()
	store, closeStore := openExampleStore()
	defer closeStore()

	type receiptArgs struct {
		PaymentID string `json:"payment_id"`
	}
	client, err := errand.NewClient(store, errand.Config{Kinds: []errand.Kind{{
		Name: "send_receipt",
		Handler: errand.HandlerFunc(func(ctx context.Context, job *errand.Job) error {
			var args receiptArgs
			if err := json.Unmarshal(job.Args, &args); err != nil {
				return errand.Permanent(err) // malformed args never get better
			}
			fmt.Printf("sending the receipt for %s, attempt %d\n", args.PaymentID, job.Attempt)
			return nil
		}),
	}}})
	if err != nil {
		log.Fatal(err)
	}

	r, err := client.Enqueue(ctx, "send_receipt", receiptArgs{PaymentID: "pay_42"}, nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("enqueued:", r.Job.Kind, r.Job.State, string(r.Job.Args))

	for range 2 {
		res, err := client.WorkOne(ctx, errand.WorkOneOpts{})
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println("work one:", res.Result)
	}
	// Output:
	// enqueued: send_receipt queued {"payment_id":"pay_42"}
	// sending the receipt for pay_42, attempt 1
	// work one: succeeded
	// work one: idle
}

// The job is enqueued in the application's own transaction: it exists if and
// only if the payment does.
func ExampleClient_EnqueueTx() {
	ctx := context.Background()
	store, closeStore := openExampleStore()
	defer closeStore()
	client, err := errand.NewClient(store, errand.Config{})
	if err != nil {
		log.Fatal(err)
	}
	db := store.DB() // the application's handle too: one writer serves both
	if _, err := db.ExecContext(ctx, `CREATE TABLE payments (id TEXT PRIMARY KEY, amount INTEGER)`); err != nil {
		log.Fatal(err)
	}

	pay := func(id string, commit bool) {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			log.Fatal(err)
		}
		defer tx.Rollback() // a no-op after Commit
		if _, err := tx.ExecContext(ctx, `INSERT INTO payments (id, amount) VALUES (?, 1250)`, id); err != nil {
			log.Fatal(err)
		}
		// The job's id is derived from the payment's, so a retried request
		// cannot enqueue a second receipt.
		_, err = client.EnqueueTx(ctx, tx, "send_receipt", map[string]string{"payment_id": id},
			&errand.EnqueueOpts{ID: "receipt:" + id})
		if err != nil {
			log.Fatal(err)
		}
		if commit {
			if err := tx.Commit(); err != nil {
				log.Fatal(err)
			}
			// Idle workers start the job now rather than at their next
			// poll: in this process, and in others when the store can
			// announce new jobs (PostgreSQL).
			client.Wake()
		}
	}
	pay("pay_1", true)
	pay("pay_2", false) // rolled back

	for _, id := range []string{"receipt:pay_1", "receipt:pay_2"} {
		job, err := client.Get(ctx, id)
		switch {
		case errors.Is(err, errand.ErrNotFound):
			fmt.Println(id, "does not exist")
		case err != nil:
			log.Fatal(err)
		default:
			fmt.Println(id, "is", job.State)
		}
	}
	// Output:
	// receipt:pay_1 is queued
	// receipt:pay_2 does not exist
}

// A worker crashes after its effect committed and before it acknowledged
// the job. The job runs again, and the ledger makes the effect happen once.
func ExampleOnce() {
	ctx := context.Background()
	store, closeStore := openExampleStore()
	defer closeStore()
	db := store.DB()
	if _, err := db.ExecContext(ctx, `CREATE TABLE receipts (payment_id TEXT)`); err != nil {
		log.Fatal(err)
	}

	var client *errand.Client[*sql.Tx]
	handler := func(ctx context.Context, job *errand.Job) error {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback() // a no-op after Commit
		ran, err := errand.Once(ctx, tx, job, "", func() error {
			_, err := tx.ExecContext(ctx, `INSERT INTO receipts (payment_id) VALUES ('pay_42')`)
			return err
		})
		if err != nil {
			return err
		}
		if err := tx.Commit(); err != nil {
			return err
		}
		fmt.Printf("attempt %d: effect ran: %v\n", job.Attempt, ran)
		if job.Attempt == 1 {
			return errors.New("worker lost before acknowledging")
		}
		return nil
	}
	client, err := errand.NewClient(store, errand.Config{Kinds: []errand.Kind{
		{Name: "send_receipt", Handler: errand.HandlerFunc(handler)},
	}})
	if err != nil {
		log.Fatal(err)
	}
	// A short backoff so that the example's retry is due at once.
	opts := &errand.EnqueueOpts{BackoffBase: time.Millisecond, BackoffMax: time.Millisecond}
	if _, err := client.Enqueue(ctx, "send_receipt", nil, opts); err != nil {
		log.Fatal(err)
	}
	for range 2 {
		res, err := client.WorkOne(ctx, errand.WorkOneOpts{})
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println("work one:", res.Result)
		time.Sleep(2 * time.Millisecond) // wait out the backoff
	}
	var receipts int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM receipts`).Scan(&receipts); err != nil {
		log.Fatal(err)
	}
	fmt.Println("receipts:", receipts)
	// Output:
	// attempt 1: effect ran: true
	// work one: retrying
	// attempt 2: effect ran: false
	// work one: succeeded
	// receipts: 1
}

// A job that failed permanently is replayed by an operator once the cause is
// fixed. The replay keeps the job's id and history and is audited.
func ExampleClient_Replay() {
	ctx := context.Background()
	store, closeStore := openExampleStore()
	defer closeStore()

	cardUpdated := false
	client, err := errand.NewClient(store, errand.Config{Kinds: []errand.Kind{{
		Name: "charge",
		Handler: errand.HandlerFunc(func(ctx context.Context, job *errand.Job) error {
			if !cardUpdated {
				return errand.Permanent(errand.WithClass("card_expired", errors.New("card expired in 10/2026")))
			}
			return nil
		}),
	}}})
	if err != nil {
		log.Fatal(err)
	}
	if _, err := client.Enqueue(ctx, "charge", nil, &errand.EnqueueOpts{ID: "charge:pay_42"}); err != nil {
		log.Fatal(err)
	}
	res, err := client.WorkOne(ctx, errand.WorkOneOpts{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("work one: %s (%s: %s)\n", res.Result, res.Class, res.Error)

	cardUpdated = true
	job, err := client.Replay(ctx, "charge:pay_42", errand.ReplayOpts{Operator: "ana", Reason: "customer updated the card"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("replayed %s: %s, attempt %d, replays %d, %d error(s) kept\n", job.ID, job.State, job.Attempt, job.Replays, len(job.Errors))

	res, err = client.WorkOne(ctx, errand.WorkOneOpts{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("work one:", res.Result)

	audit, err := client.ReplayAudit(ctx, "charge:pay_42")
	if err != nil {
		log.Fatal(err)
	}
	for _, a := range audit {
		fmt.Printf("audit: replay %d by %s, was %s: %s\n", a.Replay, a.Operator, a.PriorState, a.Reason)
	}

	// Only dead or cancelled jobs can be replayed.
	_, err = client.Replay(ctx, "charge:pay_42", errand.ReplayOpts{Operator: "ana", Reason: "again"})
	fmt.Println(errors.Is(err, errand.ErrWrongState))
	// Output:
	// work one: dead (card_expired: card expired in 10/2026)
	// replayed charge:pay_42: queued, attempt 0, replays 1, 1 error(s) kept
	// work one: succeeded
	// audit: replay 1 by ana, was dead: customer updated the card
	// true
}

// A long-running worker runs jobs until stopped, and one worker of the
// cluster leads: it sweeps expired leases and prunes the worker registry.
// Stop drains the worker and resigns its leadership.
func ExampleWorker() {
	ctx := context.Background()
	store, closeStore := openExampleStore()
	defer closeStore()
	done := make(chan string, 1)
	client, err := errand.NewClient(store, errand.Config{Kinds: []errand.Kind{{
		Name: "send_receipt",
		Handler: errand.HandlerFunc(func(ctx context.Context, job *errand.Job) error {
			done <- job.ID
			return nil
		}),
	}}})
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	worker, err := client.NewWorker(errand.WorkerConfig{Queues: map[string]int{"default": 4}})
	if err != nil {
		log.Fatal(err)
	}
	if err := worker.Start(ctx); err != nil {
		log.Fatal(err)
	}
	if _, err := client.Enqueue(ctx, "send_receipt", nil, &errand.EnqueueOpts{ID: "receipt:pay_1"}); err != nil {
		log.Fatal(err)
	}
	fmt.Println("ran", <-done)

	for !worker.Leading() {
		time.Sleep(10 * time.Millisecond)
	}
	leader, err := client.Leader(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("this worker leads:", leader.Holder == worker.ID())

	stopCtx, cancel := context.WithTimeout(ctx, 30*time.Second) // the grace period
	defer cancel()
	if err := worker.Stop(stopCtx); err != nil {
		log.Fatal(err)
	}
	if _, err := client.Leader(ctx); errors.Is(err, errand.ErrNotFound) {
		fmt.Println("no leader once it stopped")
	}
	// Output:
	// ran receipt:pay_1
	// this worker leads: true
	// no leader once it stopped
}
