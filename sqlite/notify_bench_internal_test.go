package sqlite

import (
	"database/sql"
	"path/filepath"
	"testing"
)

// BenchmarkDataVersion measures one check of the cross-process wake-up: a
// PRAGMA data_version through the listener's prepared statement on its own
// read-only connection, as ListenQueues makes them, on a migrated file.
//
//	go test -run '^$' -bench DataVersion -count 6 ./sqlite/
func BenchmarkDataVersion(b *testing.B) {
	path := filepath.Join(b.TempDir(), "errand.db")
	s, err := Open(b.Context(), path, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	db, err := sql.Open("sqlite3", dsn(s.path, s.opts, true))
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	stmt, err := db.PrepareContext(b.Context(), `PRAGMA data_version`)
	if err != nil {
		b.Fatal(err)
	}
	defer stmt.Close()
	for b.Loop() {
		if _, err := dataVersion(b.Context(), stmt); err != nil {
			b.Fatal(err)
		}
	}
}
