package postgres_test

import (
	"context"
	"database/sql"
	"log"
	"os"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/postgres"
	"github.com/jackc/pgx/v5"
	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" driver for database/sql
)

type ReceiptArgs struct {
	PaymentID string `json:"payment_id"`
}

func (ReceiptArgs) Kind() string { return "send_receipt" }

// On PostgreSQL the client is typed by pgx.Tx: the receipt job commits with
// the payment in the application's own pgx transaction, and a transaction
// of another type does not compile. InTx wakes workers in every process
// (LISTEN/NOTIFY) once the transaction commits.
func Example_pgxTx() {
	ctx := context.Background()
	store, err := postgres.Open(ctx, os.Getenv("DATABASE_URL"), nil) // migrates under an advisory lock
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	client, err := errand.NewClient(store, &errand.Config{}) // *errand.Client[pgx.Tx]
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close() // sends pending wake-ups to other processes

	err = client.InTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `UPDATE wallets SET balance = balance - 1250 WHERE id = $1`, "w_1"); err != nil {
			return err
		}
		_, err := client.EnqueueTx(ctx, tx, ReceiptArgs{PaymentID: "pay_42"}, &errand.EnqueueOpts{ID: "receipt:pay_42"})
		return err
	})
	if err != nil {
		log.Fatal(err)
	}
}

// An application on database/sql uses the store's database/sql view, whose
// transactions are *sql.Tx.
func Example_databaseSQL() {
	ctx := context.Background()
	url := os.Getenv("DATABASE_URL")
	store, err := postgres.Open(ctx, url, nil)
	if err != nil {
		log.Fatal(err)
	}
	db, err := sql.Open("pgx", url)
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	view := store.SQL(db)                                   // a TxStore[*sql.Tx] over the same schema
	defer view.Close()                                      // closes the store too, not db
	client, err := errand.NewClient(view, &errand.Config{}) // *errand.Client[*sql.Tx]
	if err != nil {
		log.Fatal(err)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := client.EnqueueTx(ctx, tx, ReceiptArgs{PaymentID: "pay_43"}, nil); err != nil {
		log.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		log.Fatal(err)
	}
	client.Wake() // a transaction of your own: wake the workers after it commits
}
