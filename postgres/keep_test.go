package postgres

import (
	"context"
	"strings"
	"testing"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/postgres/pgtest"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// TestTableKeepVacuumsWhenDue: TableKeep leaves errand_jobs alone while its
// dead rows are under 10,000 plus 5% of its live ones, vacuums it once
// they pass, does nothing with NoVacuum, and says so, without vacuuming,
// when the role may not. Autovacuum is off on the table, and every write
// flushes its statistics at once, so the counts are the test's.
func TestTableKeepVacuumsWhenDue(t *testing.T) {
	ctx := t.Context()
	url := pgtest.URL(t)
	schema := pgtest.Schema(t, url)
	s, err := Open(ctx, url, &Options{Schema: schema, MaxConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c, err := s.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Release()
	exec := func(q string) {
		t.Helper()
		for _, q := range []string{s.sql(q), "SELECT pg_stat_force_next_flush()"} {
			if _, err := c.Exec(ctx, q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
	}
	vacuums := func() (n int64) {
		t.Helper()
		err := s.pool.QueryRow(ctx, `SELECT vacuum_count FROM pg_stat_user_tables WHERE relid = $1::regclass`,
			s.table("errand_jobs")).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	keep := func(s *Store) errandstore.TableKeepResult {
		t.Helper()
		r, err := s.TableKeep(ctx, &errandstore.TableKeepParams{})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	exec(`ALTER TABLE {jobs} SET (autovacuum_enabled = false)`)
	exec(`INSERT INTO {jobs} (id, queue, kind, args, state, max_attempts, available_at, created_at)
		SELECT 'j' || g, 'default', 'k', '{}', 'queued', 3, now(), now() FROM generate_series(1, 30000) g`)
	exec(`UPDATE {jobs} SET state = 'succeeded', finished_at = now() WHERE seq <= 5000`)

	// 5,000 dead of 30,000: under 11,500.
	if r := keep(s); r.Done || r.Dead != 5000 || r.Live != 30000 || r.Note != "" {
		t.Fatalf("at 5,000 dead rows of 30,000: %+v, want nothing done", r)
	}
	if n := vacuums(); n != 0 {
		t.Fatalf("%d vacuums before any was due", n)
	}

	// A store with NoVacuum leaves 15,000 dead rows alone.
	exec(`UPDATE {jobs} SET state = 'succeeded', finished_at = now() WHERE seq > 5000 AND seq <= 15000`)
	off, err := Open(ctx, url, &Options{Schema: schema, MaxConns: 1, NoVacuum: true})
	if err != nil {
		t.Fatal(err)
	}
	defer off.Close()
	if r := keep(off); r.Done || vacuums() != 0 {
		t.Fatalf("with NoVacuum: %+v, %d vacuums; want none", r, vacuums())
	}

	// A role that neither owns the table nor the database is told so.
	exec(`DO $$ BEGIN CREATE ROLE errand_keep_reader; EXCEPTION WHEN duplicate_object THEN NULL; END $$`)
	exec(`GRANT USAGE ON SCHEMA ` + s.schema + ` TO errand_keep_reader`)
	exec(`GRANT SELECT ON ALL TABLES IN SCHEMA ` + s.schema + ` TO errand_keep_reader`)
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
		_, err := c.Exec(ctx, "SET ROLE errand_keep_reader")
		return err
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	reader, err := New(ctx, pool, &Options{Schema: schema, NoMigrate: true})
	if err != nil {
		t.Fatal(err)
	}
	if r := keep(reader); r.Done || !strings.Contains(r.Note, "may not vacuum") || vacuums() != 0 {
		t.Fatalf("as a role that may not vacuum: %+v, %d vacuums; want a note and none", r, vacuums())
	}

	// 15,000 dead of 30,000: due.
	if r := keep(s); !r.Done || r.Dead != 15000 {
		t.Fatalf("at 15,000 dead rows of 30,000: %+v, want a vacuum", r)
	}
	if n := vacuums(); n != 1 {
		t.Fatalf("%d vacuums after one was due, want 1", n)
	}
	if r := keep(s); r.Done || r.Dead != 0 {
		t.Fatalf("right after the vacuum: %+v, want no dead rows and nothing done", r)
	}
}
