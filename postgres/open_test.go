package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
	"github.com/errandhq/errand/postgres"
	"github.com/errandhq/errand/postgres/pgtest"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// TestOpenNamesTheServerThatDoesNotAnswer opens a store on a server that
// accepts the connection and then says nothing: Open gives up after the
// URL's connect_timeout and names the address that did not answer.
func TestOpenNamesTheServerThatDoesNotAnswer(t *testing.T) {
	addr := pgtest.SilentServer(t)
	for _, query := range []string{"connect_timeout=1", "connect_timeout=1&sslmode=disable"} {
		// The bound only keeps a broken Open from hanging the test.
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		s, err := postgres.Open(ctx, "postgres://u@"+addr+"/app?"+query, nil)
		expired := ctx.Err() != nil
		cancel()
		if err == nil {
			s.Close()
			t.Fatalf("%s: Open on a silent server succeeded", query)
		}
		if expired {
			t.Fatalf("%s: Open was still waiting after a minute: %v", query, err)
		}
		if msg := err.Error(); !strings.Contains(msg, "no answer from "+addr) {
			t.Errorf("%s: Open: %v, want it to say there was no answer from %s", query, err, addr)
		}
	}
}

// TestOpenSaysWhatToCheck opens a store where no server listens, and as a
// role and a database the server does not have: each error is one line
// that names the address, says what the connection met, and what to
// check, and still wraps the driver's error.
func TestOpenSaysWhatToCheck(t *testing.T) {
	url := pgtest.URL(t)
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	server := fmt.Sprintf("%s:%d", cfg.Host, cfg.Port)
	for _, tc := range []struct{ url, met string }{
		{"postgres://u@127.0.0.1:1/app?sslmode=disable", "cannot connect to 127.0.0.1:1 (connection refused)"},
		{fmt.Sprintf("postgres://no_such_role_errand@%s/%s?sslmode=disable", server, cfg.Database), `role "no_such_role_errand" does not exist`},
		{fmt.Sprintf("postgres://%s@%s/no_such_db_errand?sslmode=disable", cfg.User, server), `database "no_such_db_errand" does not exist`},
	} {
		s, err := postgres.Open(t.Context(), tc.url, nil)
		if err == nil {
			s.Close()
			t.Fatalf("Open(%s) succeeded", tc.url)
		}
		msg := err.Error()
		if !strings.Contains(msg, tc.met) || !strings.Contains(msg, "check that the server runs there and that the URL names its database and a role that may log in") ||
			!strings.Contains(msg, "cannot connect to ") || strings.Contains(msg, "\n") {
			t.Errorf("Open(%s): %q, want one line saying it met %q and what to check", tc.url, msg, tc.met)
		}
		if strings.Count(msg, tc.met) != 1 {
			t.Errorf("Open(%s): %q repeats what it met", tc.url, msg)
		}
		var cerr *pgconn.ConnectError
		if !errors.As(err, &cerr) {
			t.Errorf("Open(%s): %v does not wrap the driver's *pgconn.ConnectError", tc.url, err)
		}
	}
}

// TestNoMigrateCreatesNothing opens schemas that errand has not migrated
// without migrating: a missing schema stays missing, an empty one stays
// empty, and both are refused with ErrNoSchema; older and newer versions
// are refused too.
func TestNoMigrateCreatesNothing(t *testing.T) {
	url := pgtest.URL(t)
	schema := pgtest.Schema(t, url)
	ctx := t.Context()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	noMigrate := func() (*postgres.Store, error) {
		return postgres.Open(ctx, url, &postgres.Options{Schema: schema, MaxConns: 2, NoMigrate: true})
	}
	schemaExists := func() bool {
		var ok bool
		if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)`, schema).Scan(&ok); err != nil {
			t.Fatal(err)
		}
		return ok
	}
	tables := func() int {
		var n int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_tables WHERE schemaname = $1`, schema).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	refused := func(what string, want ...string) {
		t.Helper()
		s, err := noMigrate()
		if err == nil {
			s.Close()
			t.Fatalf("%s: Open with NoMigrate succeeded", what)
		}
		for _, w := range want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: Open: %v, want it to contain %q", what, err, w)
			}
		}
	}

	s, err := noMigrate()
	if !errors.Is(err, errandtype.ErrNoSchema) {
		if s != nil {
			s.Close()
		}
		t.Fatalf("missing schema: Open = %v, want ErrNoSchema", err)
	}
	if !strings.Contains(err.Error(), schema) {
		t.Errorf("missing schema: %v does not name %s", err, schema)
	}
	if schemaExists() {
		t.Fatalf("Open with NoMigrate created schema %s", schema)
	}

	if _, err := conn.Exec(ctx, `CREATE SCHEMA `+pgx.Identifier{schema}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	if _, err := noMigrate(); !errors.Is(err, errandtype.ErrNoSchema) {
		t.Fatalf("empty schema: Open = %v, want ErrNoSchema", err)
	}
	if n := tables(); n != 0 {
		t.Fatalf("Open with NoMigrate created %d tables in an empty schema", n)
	}

	open(t, url, schema, nil).Close()
	s, err = noMigrate()
	if err != nil {
		t.Fatalf("migrated schema: %v", err)
	}
	if _, err := s.JobGet(ctx, &errandstore.JobGetParams{ID: "none"}); !errors.Is(err, errandtype.ErrNotFound) {
		t.Errorf("JobGet on a migrated schema: %v, want ErrNotFound", err)
	}
	v, err := s.SchemaVersion(ctx)
	s.Close()
	if err != nil {
		t.Fatal(err)
	}

	migrations := pgx.Identifier{schema, "errand_migrations"}.Sanitize()
	if _, err := conn.Exec(ctx, `DELETE FROM `+migrations+` WHERE version = $1`, v); err != nil {
		t.Fatal(err)
	}
	refused("older schema", "errand migrate")
	var n int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM `+migrations+` WHERE version = $1`, v).Scan(&n); err != nil || n != 0 {
		t.Errorf("Open with NoMigrate applied migration %d (%v)", v, err)
	}
	if _, err := conn.Exec(ctx, `INSERT INTO `+migrations+` (version, name) VALUES ($1, 'm'), (999, '999_future.sql')`, v); err != nil {
		t.Fatal(err)
	}
	refused("newer schema", "999", "upgrade errand")
}
