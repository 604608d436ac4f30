package postgres_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/errandhq/errand/postgres"
	"github.com/errandhq/errand/postgres/pgtest"
	"github.com/jackc/pgx/v5"
)

// oldSchema is a new schema as an errand at schema version left it: only
// migrations 1 to version applied, inside the open transaction tx. The
// caller adds rows with exec, commits tx and opens the schema with the
// current store, which migrates it the rest of the way.
type oldSchema struct {
	url, name string
	conn      *pgx.Conn
	tx        pgx.Tx
	exec      func(q string, args ...any)
}

func newOldSchema(t *testing.T, version int) *oldSchema {
	t.Helper()
	url := pgtest.URL(t)
	o := &oldSchema{url: url, name: pgtest.Schema(t, url)}
	ctx := t.Context()
	var err error
	if o.conn, err = pgx.Connect(ctx, url); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { o.conn.Close(ctx) })
	files, err := filepath.Glob("migrations/*.sql")
	if err != nil || len(files) <= version {
		t.Fatalf("migrations: %v %v", files, err)
	}
	if o.tx, err = o.conn.Begin(ctx); err != nil {
		t.Fatal(err)
	}
	o.exec = func(q string, args ...any) {
		t.Helper()
		if _, err := o.tx.Exec(ctx, q, args...); err != nil {
			t.Fatalf("%.60s: %v", q, err)
		}
	}
	ident := pgx.Identifier{o.name}.Sanitize()
	o.exec(`CREATE SCHEMA ` + ident)
	o.exec(`SET LOCAL search_path TO ` + ident)
	o.exec(`CREATE TABLE errand_migrations (version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`)
	for i, f := range files[:version] {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		o.exec(string(b))
		o.exec(`INSERT INTO errand_migrations (version, name) VALUES ($1, $2)`, i+1, filepath.Base(f))
	}
	return o
}

// migrate commits the old schema and opens it with the current store,
// which migrates it the rest of the way; the store closes with the test.
func (o *oldSchema) migrate(t *testing.T) *postgres.Store {
	t.Helper()
	if err := o.tx.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
	s, err := postgres.Open(t.Context(), o.url, &postgres.Options{Schema: o.name})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}
