package sqlite_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/sqlite"
	"github.com/errandhq/errand/storetest"
)

// TestStore runs the conformance suite on real database files.
func TestStore(t *testing.T) {
	storetest.Exercise(t, storetest.Harness{
		Open: func(t *testing.T, clock errand.Clock) errand.Store {
			return open(t, filepath.Join(t.TempDir(), "errand.db"), clock)
		},
		OpenSecond: func(t *testing.T, first errand.Store, clock errand.Clock) errand.Store {
			return open(t, first.(*sqlite.Store).Path(), clock)
		},
		BeginTx: func(ctx context.Context, s errand.Store) (storetest.Tx, error) {
			tx, err := s.(*sqlite.Store).DB().BeginTx(ctx, nil)
			if err != nil {
				return nil, fmt.Errorf("begin: %w", err)
			}
			return storetest.SQLTx(tx), nil
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
