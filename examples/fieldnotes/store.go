package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/sqlite"
)

// The receipt job and its policy (issue 3): one job per payment, a
// one-second lease, at most three attempts per delivery cycle, equal jitter
// from 250ms capped at 30s, explicit replay after exhaustion.
const (
	receiptKind        = "send_receipt"
	receiptLease       = time.Second
	receiptMaxAttempts = 3
	receiptBackoffBase = 250 * time.Millisecond
	receiptBackoffMax  = 30 * time.Second
)

// The seed that init writes once.
const (
	demoAuthor          = "demo-author"
	startingBalanceCent = 10000
)

var seedDocuments = []struct {
	id, title string
	price     int64
}{
	{"document-7", "Field notes from the salt marsh", 500},
	{"document-8", "Tide tables, annotated", 500},
}

// schema is the application's own tables. They live in the same SQLite file
// as errand's, so a payment and its receipt job commit in one transaction.
// IF NOT EXISTS and the seed's ON CONFLICT DO NOTHING make init safe to run
// again: it never resets money.
const schema = `
CREATE TABLE IF NOT EXISTS documents (
    id          TEXT    PRIMARY KEY,
    title       TEXT    NOT NULL,
    price_cents INTEGER NOT NULL CHECK (price_cents > 0)
);
CREATE TABLE IF NOT EXISTS wallet (
    id            INTEGER PRIMARY KEY CHECK (id = 1),
    author        TEXT    NOT NULL,
    balance_cents INTEGER NOT NULL CHECK (balance_cents >= 0)
);
-- One purchase per document: the demo has one author.
CREATE TABLE IF NOT EXISTS payments (
    id           TEXT    PRIMARY KEY,
    document_id  TEXT    NOT NULL UNIQUE REFERENCES documents (id),
    amount_cents INTEGER NOT NULL,
    created_at   TEXT    NOT NULL
);
-- The first response to a purchase that carried an Idempotency-Key, written
-- in the payment's own transaction.
CREATE TABLE IF NOT EXISTS idempotency_keys (
    key         TEXT    PRIMARY KEY,
    document_id TEXT    NOT NULL,
    payment_id  TEXT    NOT NULL REFERENCES payments (id),
    status      INTEGER NOT NULL,
    body        TEXT    NOT NULL,
    created_at  TEXT    NOT NULL
);
-- The fake receipt sink: one row per delivered receipt, keyed by the job id.
CREATE TABLE IF NOT EXISTS receipts (
    job_id       TEXT    PRIMARY KEY,
    payment_id   TEXT    NOT NULL,
    document_id  TEXT    NOT NULL,
    amount_cents INTEGER NOT NULL,
    attempt      INTEGER NOT NULL,
    delivered_at TEXT    NOT NULL
);
`

// app is an open Field Notes database: errand's store, the application's
// handle on the same file, and a client that enqueues receipt jobs.
type app struct {
	store  *sqlite.Store
	db     *sql.DB
	client *errand.Client[*sql.Tx]
}

// openApp opens the database at path. Every command but init requires a
// database that init created: sqlite.Open would otherwise create an empty
// file at a mistyped path.
func openApp(ctx context.Context, path string, opts *sqlite.Options, requireInit bool) (*app, error) {
	if requireInit {
		if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%s does not exist; create it with fieldnotes init %s", path, path)
		}
	}
	store, err := sqlite.Open(ctx, path, opts)
	if err != nil {
		return nil, err
	}
	a := &app{store: store, db: store.DB()}
	if a.client, err = newReceiptClient(store, nil); err != nil {
		store.Close()
		return nil, err
	}
	if requireInit {
		var n int
		err := a.db.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'wallet'`).Scan(&n)
		if err == nil && n == 0 {
			err = fmt.Errorf("%s has no Field Notes tables; run fieldnotes init %s first", path, path)
		}
		if err != nil {
			store.Close()
			return nil, err
		}
	}
	return a, nil
}

func (a *app) close() error { return a.store.Close() }

// newReceiptClient returns an errand client that knows the send_receipt
// kind, delivering receipts with d when d is not nil.
func newReceiptClient(store errandstore.TxStore[*sql.Tx], d *deliverer) (*errand.Client[*sql.Tx], error) {
	kinds := errand.NewKinds()
	opts := &errand.KindOpts{
		MaxAttempts: receiptMaxAttempts,
		RetryPolicy: &errand.RetryPolicy{Base: receiptBackoffBase, Max: receiptBackoffMax},
	}
	if d != nil {
		errand.Handle(kinds, d.deliver, opts)
	} else {
		errand.Declare[receiptArgs](kinds, opts)
	}
	return errand.NewClient(store, &errand.Config{Kinds: kinds})
}

// migrate creates the application's tables and seeds them once.
func (a *app) migrate(ctx context.Context) error {
	tx, err := a.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("init: %w", err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, schema); err != nil {
		return fmt.Errorf("init: create tables: %w", err)
	}
	for _, d := range seedDocuments {
		if _, err := tx.ExecContext(ctx, `INSERT INTO documents (id, title, price_cents) VALUES (?, ?, ?)
			ON CONFLICT (id) DO NOTHING`, d.id, d.title, d.price); err != nil {
			return fmt.Errorf("init: seed documents: %w", err)
		}
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO wallet (id, author, balance_cents) VALUES (1, ?, ?)
		ON CONFLICT (id) DO NOTHING`, demoAuthor, startingBalanceCent); err != nil {
		return fmt.Errorf("init: seed wallet: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("init: %w", err)
	}
	return nil
}

// balance returns the wallet's balance in cents.
func (a *app) balance(ctx context.Context) (int64, error) {
	var b int64
	if err := a.db.QueryRowContext(ctx, `SELECT balance_cents FROM wallet WHERE id = 1`).Scan(&b); err != nil {
		return 0, fmt.Errorf("read wallet: %w", err)
	}
	return b, nil
}

// now is the store's clock, formatted for the application's tables.
func (a *app) now(ctx context.Context) string {
	t, err := a.store.Now(ctx)
	if err != nil {
		t = time.Now()
	}
	return t.UTC().Format(time.RFC3339Nano)
}
