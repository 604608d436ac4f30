package postgres_test

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandtype"
	"github.com/errandhq/errand/postgres"
	"github.com/errandhq/errand/postgres/pgtest"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// repeatableReadPool is a pool whose transactions default to REPEATABLE
// READ, as a server whose default_transaction_isolation says so.
func repeatableReadPool(t *testing.T, url string) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.RuntimeParams["default_transaction_isolation"] = "repeatable read"
	pool, err := pgxpool.NewWithConfig(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// TestOwnTransactionsReadCommitted: on a server whose transactions default
// to REPEATABLE READ, the store's own transactions that wait for a lock
// and then read what its holder wrote still see it. Eight processes that
// open a new schema at once migrate it once, and 32 enqueues of one
// debounce key at once leave one job.
func TestOwnTransactionsReadCommitted(t *testing.T) {
	ctx := t.Context()
	url := pgtest.URL(t)
	schema := pgtest.Schema(t, url)
	var wg sync.WaitGroup
	stores := make([]*postgres.Store, 8)
	for i := range stores {
		pool := repeatableReadPool(t, url)
		wg.Go(func() {
			st, err := postgres.New(ctx, pool, &postgres.Options{Schema: schema})
			if err != nil {
				t.Errorf("open %d: %v", i, err)
				return
			}
			stores[i] = st
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	c, err := errand.NewClient(stores[0], &errand.Config{AllowUnknownKinds: true})
	if err != nil {
		t.Fatal(err)
	}
	const n = 32
	opts := &errand.EnqueueOpts{Debounce: &errand.DebounceOpts{Key: "user:42", Window: time.Hour}}
	start := make(chan struct{})
	for range n {
		wg.Go(func() {
			<-start
			if _, err := c.Enqueue(ctx, errand.RawArgs{KindName: "reindex"}, opts); err != nil {
				t.Errorf("enqueue: %v", err)
			}
		})
	}
	close(start)
	wg.Wait()
	js, err := c.List(ctx, &errand.ListOpts{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	if len(js) != 1 || js[0].Absorbed != n-1 {
		t.Fatalf("%d jobs (%+v); want one, having absorbed %d enqueues", len(js), js, n-1)
	}
}

// TestDebounceInRepeatableReadRefused: a job with a debounce key enqueued
// in a caller's REPEATABLE READ transaction is refused with an error that
// says what to change, and nothing is written; READ COMMITTED and
// SERIALIZABLE transactions enqueue it.
func TestDebounceInRepeatableReadRefused(t *testing.T) {
	ctx := t.Context()
	st, c := anyKindClient(t)
	opts := &errand.EnqueueOpts{Debounce: &errand.DebounceOpts{Key: "user:42", Window: time.Hour}}
	enqueueIn := func(iso pgx.TxIsoLevel) error {
		return pgx.BeginTxFunc(ctx, st.Pool(), pgx.TxOptions{IsoLevel: iso}, func(tx pgx.Tx) error {
			_, err := c.EnqueueTx(ctx, tx, errand.RawArgs{KindName: "reindex"}, opts)
			return err
		})
	}
	err := enqueueIn(pgx.RepeatableRead)
	var ie *errandtype.InputError
	if !errors.As(err, &ie) || !strings.Contains(err.Error(), "REPEATABLE READ") || !strings.Contains(err.Error(), "READ COMMITTED") {
		t.Fatalf("a debounced enqueue in a REPEATABLE READ transaction: %v; want an *InputError naming the isolation to use", err)
	}
	if js, err := c.List(ctx, &errand.ListOpts{}); err != nil || len(js) != 0 {
		t.Fatalf("after the refusal: %d jobs, %v; want none", len(js), err)
	}
	for _, iso := range []pgx.TxIsoLevel{pgx.ReadCommitted, pgx.Serializable} {
		if err := enqueueIn(iso); err != nil {
			t.Errorf("a debounced enqueue in a %s transaction: %v", iso, err)
		}
	}
	if js, err := c.List(ctx, &errand.ListOpts{}); err != nil || len(js) != 1 || js[0].Absorbed != 1 {
		t.Fatalf("%+v, %v; want one job that absorbed the second enqueue", js, err)
	}
}
