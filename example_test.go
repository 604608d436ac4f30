package errand_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandtype"
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

// ReceiptArgs are the args of a send_receipt job. The type names its kind,
// so a job's kind and its args cannot disagree.
type ReceiptArgs struct {
	PaymentID string `json:"payment_id"`
}

func (ReceiptArgs) Kind() string { return "send_receipt" }

// A handler is registered for an args type; the worker decodes each job's
// args into it. A job is enqueued with its args, then a one-shot worker
// claims it, runs the handler and records the outcome.
func ExampleHandle() {
	ctx := context.Background()
	store, closeStore := openExampleStore()
	defer closeStore()

	kinds := errand.NewKinds()
	errand.Handle(kinds, func(ctx context.Context, job *errandtype.Job, args ReceiptArgs) error {
		fmt.Printf("sending the receipt for %s, attempt %d\n", args.PaymentID, job.Attempt)
		return nil
	}, &errand.KindOpts{MaxAttempts: 5, Timeout: 30 * time.Second})
	client, err := errand.NewClient(store, &errand.Config{Kinds: kinds})
	if err != nil {
		log.Fatal(err)
	}

	r, err := client.Enqueue(ctx, ReceiptArgs{PaymentID: "pay_42"}, nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("enqueued:", r.Job.Kind, r.Job.State, string(r.Job.Args), "max attempts", r.Job.MaxAttempts)

	for range 2 {
		res, err := client.WorkOne(ctx, &errand.WorkOneOpts{})
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println("work one:", res.Result)
	}
	// Output:
	// enqueued: send_receipt queued {"payment_id":"pay_42"} max attempts 5
	// sending the receipt for pay_42, attempt 1
	// work one: succeeded
	// work one: idle
}

// InvoiceArgs is at version 2 of its JSON: version 1 named the customer
// "client". Jobs enqueued by an older producer are upgraded before they are
// decoded; a job from a newer producer is dead-lettered with class
// "unknown_version" rather than misread.
type InvoiceArgs struct {
	Customer string `json:"customer"`
}

func (InvoiceArgs) Kind() string     { return "send_invoice" }
func (InvoiceArgs) ArgsVersion() int { return 2 }

func (InvoiceArgs) UpgradeArgs(from int, args json.RawMessage) (json.RawMessage, error) {
	var v1 struct {
		Client string `json:"client"`
	}
	if err := json.Unmarshal(args, &v1); err != nil {
		return nil, err
	}
	return json.Marshal(InvoiceArgs{Customer: v1.Client})
}

// Args carry a version: a handler reads older versions through the args
// type's upgrade and refuses newer ones.
func ExampleVersionedArgs() {
	ctx := context.Background()
	store, closeStore := openExampleStore()
	defer closeStore()

	kinds := errand.NewKinds()
	errand.Handle(kinds, func(ctx context.Context, job *errandtype.Job, args InvoiceArgs) error {
		fmt.Printf("invoice for %s (enqueued at version %d)\n", args.Customer, job.ArgsVersion)
		return nil
	}, nil)
	client, err := errand.NewClient(store, &errand.Config{Kinds: kinds})
	if err != nil {
		log.Fatal(err)
	}
	// Jobs as older and newer producers would have enqueued them.
	for _, args := range []errand.RawArgs{
		{KindName: "send_invoice", JSON: json.RawMessage(`{"client": "Ada"}`), Version: 1},
		{KindName: "send_invoice", JSON: json.RawMessage(`{"customer": "Grace"}`), Version: 2},
		{KindName: "send_invoice", JSON: json.RawMessage(`{"customer": {"id": 7}}`), Version: 3},
	} {
		if _, err := client.Enqueue(ctx, args, nil); err != nil {
			log.Fatal(err)
		}
	}
	for range 3 {
		res, err := client.WorkOne(ctx, &errand.WorkOneOpts{})
		if err != nil {
			log.Fatal(err)
		}
		line := "work one: " + string(res.Result)
		if res.Class != "" {
			line += ", class " + res.Class
		}
		fmt.Println(line)
	}
	// Output:
	// invoice for Ada (enqueued at version 1)
	// work one: succeeded
	// invoice for Grace (enqueued at version 2)
	// work one: succeeded
	// work one: dead, class unknown_version
}

// A handler's error decides what happens next: Permanent dead-letters at
// once, WithClass names the failure, RetryAfter honours a provider's hint,
// Snooze comes back later without using an attempt, and a plain error is
// retried with backoff.
func Example_failures() {
	ctx := context.Background()
	store, closeStore := openExampleStore()
	defer closeStore()

	kinds := errand.NewKinds()
	errand.Handle(kinds, func(ctx context.Context, job *errandtype.Job, args chargeArgs) error {
		switch args.Outcome {
		case "declined":
			return errand.Permanent(errand.WithClass("card_declined", errors.New("the card was declined")))
		case "rate_limited":
			return errand.RetryAfter(time.Minute, errand.WithClass("rate_limited", errors.New("429: try again in 60s")))
		case "not_yet":
			return errand.Snooze(time.Hour)
		case "flaky":
			return errors.New("connection reset")
		}
		return nil
	}, nil)
	client, err := errand.NewClient(store, &errand.Config{Kinds: kinds})
	if err != nil {
		log.Fatal(err)
	}
	for _, outcome := range []string{"ok", "declined", "rate_limited", "not_yet", "flaky"} {
		if _, err := client.Enqueue(ctx, chargeArgs{Outcome: outcome}, nil); err != nil {
			log.Fatal(err)
		}
		res, err := client.WorkOne(ctx, &errand.WorkOneOpts{})
		if err != nil {
			log.Fatal(err)
		}
		job, err := client.Get(ctx, *res.JobID)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%-12s -> %-9s class %-13q attempt %d\n", outcome, res.Result, res.Class, job.Attempt)
	}
	// Output:
	// ok           -> succeeded class ""            attempt 1
	// declined     -> dead      class "card_declined" attempt 1
	// rate_limited -> retrying  class "rate_limited" attempt 1
	// not_yet      -> snoozed   class ""            attempt 0
	// flaky        -> retrying  class "error"       attempt 1
}

type chargeArgs struct {
	Outcome string `json:"outcome"`
}

func (chargeArgs) Kind() string { return "charge" }

// The job is enqueued in the application's own transaction: it exists if and
// only if the payment does.
func ExampleClient_EnqueueTx() {
	ctx := context.Background()
	store, closeStore := openExampleStore()
	defer closeStore()
	client, err := errand.NewClient(store, &errand.Config{})
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
		_, err = client.EnqueueTx(ctx, tx, ReceiptArgs{PaymentID: id}, &errand.EnqueueOpts{ID: "receipt:" + id})
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
		case errors.Is(err, errandtype.ErrNotFound):
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

	kinds := errand.NewKinds()
	errand.Handle(kinds, func(ctx context.Context, job *errandtype.Job, args ReceiptArgs) error {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback() // a no-op after Commit
		ran, err := errand.Once(ctx, tx, job, "", func() error {
			_, err := tx.ExecContext(ctx, `INSERT INTO receipts (payment_id) VALUES (?)`, args.PaymentID)
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
	}, nil)
	client, err := errand.NewClient(store, &errand.Config{Kinds: kinds})
	if err != nil {
		log.Fatal(err)
	}
	// A short backoff so that the example's retry is due at once.
	opts := &errand.EnqueueOpts{BackoffBase: time.Millisecond, BackoffMax: time.Millisecond}
	if _, err := client.Enqueue(ctx, ReceiptArgs{PaymentID: "pay_42"}, opts); err != nil {
		log.Fatal(err)
	}
	for range 2 {
		res, err := client.WorkOne(ctx, &errand.WorkOneOpts{})
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

// An effect outside the database (an email provider, a payment API) is
// begun, completed or released in the ledger, fenced by the job's lease. A
// delivery after a crash learns whether an earlier one finished the effect,
// or began it and vanished (then it asks the remote side before acting
// again).
func ExampleRemoteEffect() {
	ctx := context.Background()
	store, closeStore := openExampleStore()
	defer closeStore()

	kinds := errand.NewKinds()
	errand.Handle(kinds, func(ctx context.Context, job *errandtype.Job, args ReceiptArgs) error {
		err := errand.RemoteEffect(ctx, job, "email:"+args.PaymentID, func(ctx context.Context, status errandtype.EffectStatus) error {
			if status == errandtype.EffectAbandoned {
				fmt.Println("an earlier delivery vanished: checking the provider for email:" + args.PaymentID)
			}
			fmt.Printf("attempt %d sends the email (%s)\n", job.Attempt, status)
			return nil
		})
		if err != nil {
			return err
		}
		if job.Attempt == 1 {
			return errors.New("worker lost before acknowledging")
		}
		fmt.Printf("attempt %d: the email went out already\n", job.Attempt)
		return nil
	}, nil)
	client, err := errand.NewClient(store, &errand.Config{Kinds: kinds})
	if err != nil {
		log.Fatal(err)
	}
	opts := &errand.EnqueueOpts{BackoffBase: time.Millisecond, BackoffMax: time.Millisecond}
	if _, err := client.Enqueue(ctx, ReceiptArgs{PaymentID: "pay_7"}, opts); err != nil {
		log.Fatal(err)
	}
	for range 2 {
		res, err := client.WorkOne(ctx, &errand.WorkOneOpts{})
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println("work one:", res.Result)
		time.Sleep(2 * time.Millisecond) // wait out the backoff
	}
	// Output:
	// attempt 1 sends the email (begun)
	// work one: retrying
	// attempt 2: the email went out already
	// work one: succeeded
}

// A job that failed permanently is replayed by an operator once the cause is
// fixed. The replay keeps the job's id and history and is audited.
func ExampleClient_Replay() {
	ctx := context.Background()
	store, closeStore := openExampleStore()
	defer closeStore()

	cardUpdated := false
	kinds := errand.NewKinds()
	errand.Handle(kinds, func(ctx context.Context, job *errandtype.Job, args chargeArgs) error {
		if !cardUpdated {
			return errand.Permanent(errand.WithClass("card_expired", errors.New("card expired in 10/2026")))
		}
		return nil
	}, nil)
	client, err := errand.NewClient(store, &errand.Config{Kinds: kinds})
	if err != nil {
		log.Fatal(err)
	}
	if _, err := client.Enqueue(ctx, chargeArgs{}, &errand.EnqueueOpts{ID: "charge:pay_42"}); err != nil {
		log.Fatal(err)
	}
	res, err := client.WorkOne(ctx, &errand.WorkOneOpts{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("work one: %s (%s: %s)\n", res.Result, res.Class, res.Error)

	cardUpdated = true
	job, err := client.Replay(ctx, "charge:pay_42", &errand.ReplayOpts{Operator: "ana", Reason: "customer updated the card"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("replayed %s: %s, attempt %d, replays %d, %d error(s) kept\n", job.ID, job.State, job.Attempt, job.Replays, len(job.Errors))

	res, err = client.WorkOne(ctx, &errand.WorkOneOpts{})
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
	_, err = client.Replay(ctx, "charge:pay_42", &errand.ReplayOpts{Operator: "ana", Reason: "again"})
	fmt.Println(errors.Is(err, errandtype.ErrWrongState))
	// Output:
	// work one: dead (card_expired: card expired in 10/2026)
	// replayed charge:pay_42: queued, attempt 0, replays 1, 1 error(s) kept
	// work one: succeeded
	// audit: replay 1 by ana, was dead: customer updated the card
	// true
}

// A long-running worker runs jobs until stopped, and one worker of the
// cluster leads: it sweeps expired leases and prunes the worker registry.
// Subscribe delivers each outcome as it is recorded; Stop drains the worker
// and resigns its leadership.
func ExampleWorker() {
	ctx := context.Background()
	store, closeStore := openExampleStore()
	defer closeStore()
	kinds := errand.NewKinds()
	errand.Handle(kinds, func(ctx context.Context, job *errandtype.Job, args ReceiptArgs) error {
		return nil
	}, nil)
	client, err := errand.NewClient(store, &errand.Config{Kinds: kinds})
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	events, cancel := client.Subscribe()
	defer cancel()
	worker, err := client.NewWorker(&errand.WorkerConfig{Queues: map[string]int{"default": 4}})
	if err != nil {
		log.Fatal(err)
	}
	if err := worker.Start(ctx); err != nil {
		log.Fatal(err)
	}
	if _, err := client.Enqueue(ctx, ReceiptArgs{PaymentID: "pay_1"}, &errand.EnqueueOpts{ID: "receipt:pay_1"}); err != nil {
		log.Fatal(err)
	}
	e := <-events
	fmt.Println(e.Job.ID, e.Result, "on attempt", e.Attempt)

	for !worker.Leading() {
		time.Sleep(10 * time.Millisecond)
	}
	leader, err := client.Leader(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("this worker leads:", leader.Holder == worker.ID())

	stopCtx, stop := context.WithTimeout(ctx, 30*time.Second) // the grace period
	defer stop()
	if err := worker.Stop(stopCtx); err != nil {
		log.Fatal(err)
	}
	if _, err := client.Leader(ctx); errors.Is(err, errandtype.ErrNotFound) {
		fmt.Println("no leader once it stopped")
	}
	// Output:
	// receipt:pay_1 succeeded on attempt 1
	// this worker leads: true
	// no leader once it stopped
}

// A producer that relays jobs it does not define (a command line, an HTTP
// API) enqueues raw JSON with the kind named at run time. A client that
// declares no kinds accepts any; one that declares kinds refuses others,
// so a typo fails at once.
func ExampleRawArgs() {
	ctx := context.Background()
	store, closeStore := openExampleStore()
	defer closeStore()

	producer, err := errand.NewClient(store, &errand.Config{})
	if err != nil {
		log.Fatal(err)
	}
	r, err := producer.Enqueue(ctx, errand.RawArgs{KindName: "export_order", JSON: json.RawMessage(`{"order": 7}`)}, nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(r.Job.Kind, string(r.Job.Args))

	kinds := errand.NewKinds()
	errand.Declare[ReceiptArgs](kinds, nil)
	strict, err := errand.NewClient(store, &errand.Config{Kinds: kinds})
	if err != nil {
		log.Fatal(err)
	}
	_, err = strict.Enqueue(ctx, errand.RawArgs{KindName: "send_reciept"}, nil)
	fmt.Println(err)
	// Output:
	// export_order {"order": 7}
	// kind: "send_reciept" is not one of this client's kinds (send_receipt); fix the name, declare the kind in Config.Kinds, or set Config.AllowUnknownKinds for a client that enqueues for other programs
}
