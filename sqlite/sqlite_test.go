package sqlite_test

import (
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/sqlite"
	"github.com/errandhq/errand/storetest"
)

// TestStore runs the conformance suite on real database files.
func TestStore(t *testing.T) {
	storetest.Exercise(t, storetest.Harness[*sql.Tx]{
		Open: func(t *testing.T, clock errand.Clock) errand.TxStore[*sql.Tx] {
			return open(t, filepath.Join(t.TempDir(), "errand.db"), clock)
		},
		OpenSecond: func(t *testing.T, first errand.TxStore[*sql.Tx], clock errand.Clock) errand.TxStore[*sql.Tx] {
			return open(t, first.(*sqlite.Store).Path(), clock)
		},
	})
}

func open(t *testing.T, path string, clock errand.Clock) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(t.Context(), path, &sqlite.Options{Clock: clock})
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	return s
}
