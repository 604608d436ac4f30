package main

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/errandhq/errand"
)

// receiptArgs are the receipt job's args: ids and the amount, not documents.
type receiptArgs struct {
	PaymentID   string `json:"payment_id"`
	DocumentID  string `json:"document_id"`
	AmountCents int64  `json:"amount_cents"`
}

// Kind names the job kind these args belong to.
func (receiptArgs) Kind() string { return receiptKind }

// purchaseResponse is the body of a successful purchase.
type purchaseResponse struct {
	PaymentID    string `json:"payment_id"`
	JobID        string `json:"job_id"`
	BalanceCents int64  `json:"balance_cents"`
}

// purchase is what a purchase returned: the HTTP status and body, exactly as
// first sent when an Idempotency-Key replays it.
type purchase struct {
	Status    int
	Body      []byte
	PaymentID string
	// Replayed reports that the response was the stored one for the key.
	Replayed bool
}

// refusal is a purchase the business rules refuse. Nothing was written.
type refusal struct {
	Status  int
	Message string
}

func (r *refusal) Error() string { return r.Message }

// purchase pays for a document and enqueues its receipt, in one transaction:
// the wallet debit, the payment row, the receipt job (whose id is the
// payment id) and, when key is set, the stored response all commit together
// or not at all. A retried request with the same key returns the stored
// response and debits nothing.
//
// The transaction holds errand's single writer connection, so nothing in it
// may call an errand method that is not a Tx form.
func (a *app) purchase(ctx context.Context, documentID, key string) (*purchase, error) {
	tx, err := a.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("begin payment: %w", err)
	}
	defer tx.Rollback()

	if key != "" {
		var doc, paymentID, body string
		var status int
		err := tx.QueryRowContext(ctx, `SELECT document_id, payment_id, status, body FROM idempotency_keys WHERE key = ?`, key).
			Scan(&doc, &paymentID, &status, &body)
		switch {
		case err == nil && doc != documentID:
			return nil, &refusal{http.StatusUnprocessableEntity, fmt.Sprintf("Idempotency-Key %q was used to purchase %s; use a new key for %s", key, doc, documentID)}
		case err == nil:
			return &purchase{Status: status, Body: []byte(body), PaymentID: paymentID, Replayed: true}, nil
		case !errors.Is(err, sql.ErrNoRows):
			return nil, fmt.Errorf("look up idempotency key: %w", err)
		}
	}

	var price int64
	err = tx.QueryRowContext(ctx, `SELECT price_cents FROM documents WHERE id = ?`, documentID).Scan(&price)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, &refusal{http.StatusNotFound, fmt.Sprintf("no document %q to purchase", documentID)}
	}
	if err != nil {
		return nil, fmt.Errorf("read document: %w", err)
	}
	var paid string
	err = tx.QueryRowContext(ctx, `SELECT id FROM payments WHERE document_id = ?`, documentID).Scan(&paid)
	if err == nil {
		return nil, &refusal{http.StatusConflict, fmt.Sprintf("%s is already purchased (payment %s)", documentID, paid)}
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("read payments: %w", err)
	}
	var balance int64
	if err := tx.QueryRowContext(ctx, `SELECT balance_cents FROM wallet WHERE id = 1`).Scan(&balance); err != nil {
		return nil, fmt.Errorf("read wallet: %w", err)
	}
	if balance < price {
		return nil, &refusal{http.StatusConflict, fmt.Sprintf("the wallet holds %d cents and %s costs %d", balance, documentID, price)}
	}

	if err := tx.QueryRowContext(ctx, `UPDATE wallet SET balance_cents = balance_cents - ? WHERE id = 1
		RETURNING balance_cents`, price).Scan(&balance); err != nil {
		return nil, fmt.Errorf("debit wallet: %w", err)
	}
	paymentID := "pay_" + strings.ToLower(rand.Text())
	now := a.now(ctx)
	if _, err := tx.ExecContext(ctx, `INSERT INTO payments (id, document_id, amount_cents, created_at) VALUES (?, ?, ?, ?)`,
		paymentID, documentID, price, now); err != nil {
		return nil, fmt.Errorf("record payment: %w", err)
	}
	res, err := a.client.EnqueueTx(ctx, tx,
		receiptArgs{PaymentID: paymentID, DocumentID: documentID, AmountCents: price},
		&errand.EnqueueOpts{
			ID:          paymentID,
			MaxAttempts: receiptMaxAttempts,
			BackoffBase: receiptBackoffBase,
			BackoffMax:  receiptBackoffMax,
		})
	if err != nil {
		return nil, fmt.Errorf("enqueue receipt: %w", err)
	}
	body, err := json.Marshal(purchaseResponse{PaymentID: paymentID, JobID: res.Job.ID, BalanceCents: balance})
	if err != nil {
		return nil, err
	}
	if key != "" {
		if _, err := tx.ExecContext(ctx, `INSERT INTO idempotency_keys (key, document_id, payment_id, status, body, created_at)
			VALUES (?, ?, ?, ?, ?, ?)`, key, documentID, paymentID, http.StatusCreated, string(body), now); err != nil {
			return nil, fmt.Errorf("store idempotency key: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("commit payment: %w", err)
	}
	return &purchase{Status: http.StatusCreated, Body: body, PaymentID: paymentID}, nil
}
