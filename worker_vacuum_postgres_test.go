package errand_test

import (
	"context"
	"testing"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandtype"
	"github.com/errandhq/errand/postgres"
	"github.com/errandhq/errand/postgres/pgtest"
)

// TestLeaderVacuumsPostgresJobsTable: a worker that leads vacuums
// errand_jobs once it holds more dead rows than autovacuum should have let
// it (here 15,000 of 30,000, with autovacuum off on the table), without
// being asked.
func TestLeaderVacuumsPostgresJobsTable(t *testing.T) {
	url := pgtest.URL(t)
	ctx := t.Context()
	s, err := postgres.Open(ctx, url, &postgres.Options{Schema: pgtest.Schema(t, url), MaxConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	v := s.SQL(nil)
	t.Cleanup(func() { v.Close() })
	table := s.Schema() + ".errand_jobs"
	conn, err := s.Pool().Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`ALTER TABLE ` + table + ` SET (autovacuum_enabled = false)`,
		`INSERT INTO ` + table + ` (id, queue, kind, args, state, max_attempts, available_at, created_at, finished_at)
			SELECT 'j' || g, 'default', 'k', '{}', 'succeeded', 3, now(), now(), now() FROM generate_series(1, 30000) g`,
		`UPDATE ` + table + ` SET finished_at = now() WHERE seq <= 15000`,
		`SELECT pg_stat_force_next_flush()`, // the update's dead rows, counted now
	} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	conn.Release()

	c := newClient(t, v, &errand.Config{Kinds: kindsOf([]testKind{{Name: "k",
		Handler: errand.HandlerFunc(func(context.Context, *errandtype.Job) error { return nil })}})})
	w, err := c.NewWorker(&errand.WorkerConfig{Queues: map[string]int{errand.DefaultQueue: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer w.Stop(context.Background())
	deadline := time.Now().Add(30 * time.Second)
	for {
		var n int64
		if err := s.Pool().QueryRow(ctx, `SELECT vacuum_count FROM pg_stat_user_tables WHERE relid = $1::regclass`, table).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no vacuum of %s 30s after the worker started (leading: %v)", table, w.Leading())
		}
		time.Sleep(50 * time.Millisecond)
	}
}
