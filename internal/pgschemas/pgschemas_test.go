package pgschemas

import (
	"os"
	"testing"

	"github.com/errandhq/errand/postgres/pgtest"
	"github.com/jackc/pgx/v5"
)

func TestMain(m *testing.M) {
	code := m.Run()
	Close()
	os.Exit(code)
}

// A schema a test finished with is handed on empty; one whose test changed
// what it holds is dropped, never handed on.
func TestSchemasReusedOnlyEmptyAndUnchanged(t *testing.T) {
	url := pgtest.URL(t)
	exec := func(t *testing.T, sql string) {
		t.Helper()
		conn, err := pgx.Connect(t.Context(), url)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(t.Context())
		if _, err := conn.Exec(t.Context(), sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	count := func(t *testing.T, sql string) (n int) {
		t.Helper()
		conn, err := pgx.Connect(t.Context(), url)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(t.Context())
		if err := conn.QueryRow(t.Context(), sql).Scan(&n); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		return n
	}

	var first, changed string
	t.Run("writes a job", func(t *testing.T) {
		first = Take(t, url)
		exec(t, `INSERT INTO `+first+`.errand_jobs (id, queue, kind, args, state, max_attempts, available_at, created_at)
			VALUES ('a', 'default', 'k', '{}', 'queued', 1, now(), now())`)
	})
	t.Run("takes it emptied", func(t *testing.T) {
		if got := Take(t, url); got != first {
			t.Fatalf("took %s, want the emptied %s", got, first)
		}
		if n := count(t, `SELECT count(*) FROM `+first+`.errand_jobs`); n != 0 {
			t.Fatalf("%d jobs in the schema handed on, want none", n)
		}
		changed = first
		exec(t, `CREATE FUNCTION `+changed+`.f() RETURNS int LANGUAGE sql AS 'SELECT 1'`)
	})
	t.Run("never takes a changed one", func(t *testing.T) {
		if got := Take(t, url); got == changed {
			t.Fatalf("took %s, which the test before added a function to", got)
		}
		if n := count(t, `SELECT count(*) FROM pg_namespace WHERE nspname = '`+changed+`'`); n != 0 {
			t.Fatalf("schema %s still exists, want it dropped", changed)
		}
	})
}
