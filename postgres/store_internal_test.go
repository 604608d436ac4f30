package postgres

import (
	"testing"

	"github.com/errandhq/errand/postgres/pgtest"
)

// openTestStore opens a store of two connections on a fresh schema of the
// test database, closed when the test ends; it skips the test without
// one.
func openTestStore(t testing.TB) *Store {
	t.Helper()
	url := pgtest.URL(t)
	s, err := Open(t.Context(), url, &Options{Schema: pgtest.Schema(t, url), MaxConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}
