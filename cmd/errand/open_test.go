//go:build unix

package main

import (
	"bytes"
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/errandhq/errand/internal/rowscan"
	"github.com/errandhq/errand/postgres/pgtest"
	"github.com/jackc/pgx/v5"
)

// sqliteQuery returns the first column of every row q returns on the SQLite
// file at path, read through a plain connection of the test's own.
func sqliteQuery(t *testing.T, path, q string) []string {
	t.Helper()
	db, err := sql.Open("sqlite3", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(q)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	defer rows.Close()
	out, err := rowscan.All(rows, func(row rowscan.Row) (v string, err error) {
		return v, row.Scan(&v)
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// sqliteExec runs statements on the SQLite file at path.
func sqliteExec(t *testing.T, path string, stmts ...string) {
	t.Helper()
	db, err := sql.Open("sqlite3", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, q := range stmts {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// readingCommands are the subcommands that open a database errand must
// already have migrated.
var readingCommands = [][]string{
	{"jobs"}, {"stats"}, {"workers"}, {"inspect", "x"}, {"replay", "x", "--reason", "r"}, {"cancel", "x", "--reason", "r"},
	{"jobs", "--json"}, {"stats", "--json"},
}

// TestReadingCommandsLeaveOtherDatabasesAlone points the reading commands
// at another application's SQLite file: each exits 1 with one line saying
// there is no errand database there, and the file stays byte for byte as
// it was, in rollback-journal mode, without errand's tables or a WAL.
func TestReadingCommandsLeaveOtherDatabasesAlone(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "other-app.db")
	sqliteExec(t, db, `CREATE TABLE invoices (id INTEGER PRIMARY KEY, total INTEGER)`, `INSERT INTO invoices (total) VALUES (42)`)
	before, err := os.ReadFile(db)
	if err != nil {
		t.Fatal(err)
	}
	for _, args := range readingCommands {
		r := bin(t, append(args, "--db", db)...)
		want := "no errand database at " + db + " (no errand tables); pass --db"
		if r.code != 1 || r.stdout != "" || strings.Count(r.stderr, "\n") != 1 || !strings.Contains(r.stderr, want) {
			t.Errorf("errand %q on another application's database: %s\nwant exit 1 and one line containing %q", args, r, want)
		}
		after, err := os.ReadFile(db)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(before, after) {
			t.Fatalf("errand %q changed %s", args, db)
		}
		if es, _ := os.ReadDir(dir); len(es) != 1 {
			t.Fatalf("errand %q left files next to the database: %v", args, es)
		}
	}
	if mode := sqliteQuery(t, db, `PRAGMA journal_mode`); len(mode) != 1 || mode[0] != "delete" {
		t.Errorf("journal mode %v, want delete", mode)
	}
	if tables := sqliteQuery(t, db, `SELECT name FROM sqlite_master WHERE name LIKE 'errand%'`); len(tables) != 0 {
		t.Errorf("errand's tables appeared: %v", tables)
	}
}

// TestReadingCommandsRefuseAnOlderSchema: a database an older errand
// migrated is not read by a newer one's reading commands, which say how to
// migrate it instead of failing on a column they expect.
func TestReadingCommandsRefuseAnOlderSchema(t *testing.T) {
	db := tempDB(t)
	ok(t, cli(t, "migrate", "--db", db))
	sqliteExec(t, db, `DELETE FROM errand_migrations WHERE version = (SELECT max(version) FROM errand_migrations)`)
	for _, args := range readingCommands {
		r := cli(t, append(args, "--db", db)...)
		if r.code != 1 || !strings.Contains(r.stderr, "run errand migrate") {
			t.Errorf("errand %q on an older schema: %s", args, r)
		}
	}
}

// TestPostgresMistypedSchema runs the reading commands with ERRAND_SCHEMA
// naming a schema that does not exist: each exits 1 naming the schema and
// ERRAND_SCHEMA, and the schema is still not there.
func TestPostgresMistypedSchema(t *testing.T) {
	t.Parallel()
	db, schema := pgDB(t) // named, not created
	for _, args := range readingCommands {
		r := bin(t, append(args, "--db", db)...)
		if r.code != 1 || r.stdout != "" || strings.Count(r.stderr, "\n") != 1 ||
			!strings.Contains(r.stderr, `no errand tables in schema "`+schema+`"`) || !strings.Contains(r.stderr, "ERRAND_SCHEMA") {
			t.Errorf("errand %q on a missing schema: %s", args, r)
		}
	}
	var exists bool
	if err := pgPool(t).QueryRow(context.Background(), `SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)`, schema).Scan(&exists); err != nil {
		t.Fatal(err)
	}
	if exists {
		t.Fatalf("a reading command created schema %s", pgx.Identifier{schema}.Sanitize())
	}
	// enqueue creates it, after which the reading commands work.
	enqueue(t, db, "k", "--id", "j1")
	if r := ok(t, cli(t, "jobs", "--db", db)); !strings.Contains(r.stdout, "j1") {
		t.Errorf("jobs after enqueue: %s", r)
	}
}

// TestSilentPostgresServer points a command at a server that accepts the
// connection and never answers: it exits 1 after connect_timeout with one
// line naming the address.
func TestSilentPostgresServer(t *testing.T) {
	t.Parallel()
	addr := pgtest.SilentServer(t)
	r := bin(t, "stats", "--db", "postgres://u@"+addr+"/app?connect_timeout=1")
	if r.code != 1 || r.stdout != "" || strings.Count(r.stderr, "\n") != 1 || !strings.Contains(r.stderr, "no answer from "+addr) {
		t.Errorf("stats on a silent server: %s\nwant exit 1 and one line saying there was no answer from %s", r, addr)
	}
}
