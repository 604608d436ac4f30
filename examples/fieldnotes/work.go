package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandtype"
)

// deliverer is the send_receipt handler: it writes the receipt to the sink
// table through errand's effect ledger, in a transaction of its own that
// commits before errand records the acknowledgment. A crash between the two
// leaves a delivered receipt and a job that will run again; the ledger makes
// that second run a no-op.
type deliverer struct {
	db *sql.DB
	// unavailable makes every delivery fail with the retryable class
	// receipt_unavailable, as when the receipt service is down.
	unavailable bool
	// afterEffect runs once the receipt has committed and before the
	// handler returns (before the acknowledgment).
	afterEffect func()
	// beforeDelivery runs first, as the handler starts; delivered hears
	// what the handler returns. Tests set them.
	beforeDelivery func()
	delivered      func(err error)
}

// deliver is the send_receipt handler.
func (d *deliverer) deliver(ctx context.Context, job *errandtype.Job, args receiptArgs) error {
	if d.beforeDelivery != nil {
		d.beforeDelivery()
	}
	err := d.deliverOnce(ctx, job, args)
	if d.delivered != nil {
		d.delivered(err)
	}
	return err
}

func (d *deliverer) deliverOnce(ctx context.Context, job *errandtype.Job, args receiptArgs) error {
	if d.unavailable {
		return errand.WithClass("receipt_unavailable", errors.New("receipt service unavailable (--unavailable)"))
	}
	tx, err := d.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin receipt: %w", err)
	}
	defer tx.Rollback()
	now := time.Now()
	// The ledger records the job id in tx and runs the insert only the
	// first time; ON CONFLICT keeps the sink keyed by the job id as well.
	_, err = errand.Once(ctx, tx, job, "", func() error {
		_, err := tx.ExecContext(ctx, `INSERT INTO receipts (job_id, payment_id, document_id, amount_cents, attempt, delivered_at)
			VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (job_id) DO NOTHING`,
			job.ID, args.PaymentID, args.DocumentID, args.AmountCents, job.Attempt, now.UTC().Format(time.RFC3339Nano))
		return err
	})
	if err != nil {
		// ErrLeaseLost: another worker owns the job now; roll back and let
		// errand report lease_lost.
		return fmt.Errorf("deliver receipt: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit receipt: %w", err)
	}
	if d.afterEffect != nil {
		d.afterEffect()
	}
	return nil
}

// workLine is the one line work prints.
type workLine struct {
	// Result is errand's: idle, succeeded, retrying, dead or lease_lost.
	Result errand.Result `json:"result"`
	JobID  *string       `json:"job_id"`
	// Attempt is the attempt that ran, null when idle (no job, as JobID).
	Attempt *int `json:"attempt"`
	// Acknowledged reports that errand recorded the job as succeeded.
	Acknowledged bool `json:"acknowledged"`
}

// workOne claims at most one receipt job with a one-second lease, runs it
// and records the outcome.
func workOne(ctx context.Context, client *errand.Client[*sql.Tx]) (*workLine, error) {
	r, err := client.WorkOne(ctx, &errand.WorkOneOpts{Lease: receiptLease})
	if err != nil {
		return nil, err
	}
	l := &workLine{
		Result:       r.Result,
		JobID:        r.JobID,
		Acknowledged: r.Result == errand.ResultSucceeded,
	}
	if r.JobID != nil {
		l.Attempt = &r.Attempt
	}
	return l, nil
}

func runWork(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlags("work", "work DB [--crash-after-effect] [--unavailable]", stdout)
	crash := fs.Bool("crash-after-effect", false, "SIGKILL this process after the receipt commits, before the acknowledgment")
	unavailable := fs.Bool("unavailable", false, "fail delivery with the retryable class receipt_unavailable")
	pos, err := fs.parse(args, "DB")
	if err != nil {
		return err
	}
	a, err := openApp(ctx, pos[0], nil, true)
	if err != nil {
		return err
	}
	defer a.close()
	d := &deliverer{db: a.db, unavailable: *unavailable}
	if *crash {
		d.afterEffect = func() {
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			time.Sleep(time.Hour) // the signal is on its way
		}
	}
	client, err := newReceiptClient(a.store, d)
	if err != nil {
		return err
	}
	line, err := workOne(ctx, client)
	if err != nil {
		return err
	}
	return json.NewEncoder(stdout).Encode(line)
}
