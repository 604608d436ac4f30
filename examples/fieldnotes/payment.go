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
		if stored, err := storedPurchase(ctx, tx, documentID, key); stored != nil || err != nil {
			return stored, err
		}
	}
	price, err := purchasable(ctx, tx, documentID)
	if err != nil {
		return nil, err
	}
	now := a.now(ctx)
	resp, err := a.pay(ctx, tx, documentID, price, now)
	if err != nil {
		return nil, err
	}
	body, err := json.Marshal(resp)
	if err != nil {
		return nil, err
	}
	if key != "" {
		if _, err := tx.ExecContext(ctx, `INSERT INTO idempotency_keys (key, document_id, payment_id, status, body, created_at)
			VALUES (?, ?, ?, ?, ?, ?)`, key, documentID, resp.PaymentID, http.StatusCreated, string(body), now); err != nil {
			return nil, fmt.Errorf("store idempotency key: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("commit payment: %w", err)
	}
	return &purchase{Status: http.StatusCreated, Body: body, PaymentID: resp.PaymentID}, nil
}

// storedPurchase returns the response stored under an idempotency key, or
// nil when the key is new. A key used for another document is refused.
func storedPurchase(ctx context.Context, tx *sql.Tx, documentID, key string) (*purchase, error) {
	var doc, paymentID, body string
	var status int
	err := tx.QueryRowContext(ctx, `SELECT document_id, payment_id, status, body FROM idempotency_keys WHERE key = ?`, key).
		Scan(&doc, &paymentID, &status, &body)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("look up idempotency key: %w", err)
	case doc != documentID:
		return nil, &refusal{http.StatusUnprocessableEntity, fmt.Sprintf("Idempotency-Key %q was used to purchase %s; use a new key for %s", key, doc, documentID)}
	}
	return &purchase{Status: status, Body: []byte(body), PaymentID: paymentID, Replayed: true}, nil
}

// purchasable returns the price of a document that exists, is not paid
// for yet, and that the wallet can pay; anything else is a *refusal.
func purchasable(ctx context.Context, tx *sql.Tx, documentID string) (price int64, err error) {
	err = tx.QueryRowContext(ctx, `SELECT price_cents FROM documents WHERE id = ?`, documentID).Scan(&price)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, &refusal{http.StatusNotFound, fmt.Sprintf("no document %q to purchase", documentID)}
	}
	if err != nil {
		return 0, fmt.Errorf("read document: %w", err)
	}
	var paid string
	err = tx.QueryRowContext(ctx, `SELECT id FROM payments WHERE document_id = ?`, documentID).Scan(&paid)
	if err == nil {
		return 0, &refusal{http.StatusConflict, fmt.Sprintf("%s is already purchased (payment %s)", documentID, paid)}
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return 0, fmt.Errorf("read payments: %w", err)
	}
	var balance int64
	if err := tx.QueryRowContext(ctx, `SELECT balance_cents FROM wallet WHERE id = 1`).Scan(&balance); err != nil {
		return 0, fmt.Errorf("read wallet: %w", err)
	}
	if balance < price {
		return 0, &refusal{http.StatusConflict, fmt.Sprintf("the wallet holds %d cents and %s costs %d", balance, documentID, price)}
	}
	return price, nil
}

// pay debits the wallet, records the payment and enqueues its receipt, all
// in tx: the receipt job exists if and only if the payment commits.
func (a *app) pay(ctx context.Context, tx *sql.Tx, documentID string, price int64, now string) (*purchaseResponse, error) {
	var balance int64
	if err := tx.QueryRowContext(ctx, `UPDATE wallet SET balance_cents = balance_cents - ? WHERE id = 1
		RETURNING balance_cents`, price).Scan(&balance); err != nil {
		return nil, fmt.Errorf("debit wallet: %w", err)
	}
	paymentID := "pay_" + strings.ToLower(rand.Text())
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
	return &purchaseResponse{PaymentID: paymentID, JobID: res.Job.ID, BalanceCents: balance}, nil
}
