package sqlite

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/errandhq/errand/errandstore"
)

// TestStmtCache checks that the claim's statement is prepared once for the
// store and reused, that it still claims after another connection changed
// the schema (SQLite prepares it again), and that the cache stays within
// its bound.
func TestStmtCache(t *testing.T) {
	path := filepath.Join(t.TempDir(), "errand.db")
	s, err := Open(t.Context(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	claim := func(id string) {
		t.Helper()
		if _, err := s.JobInsertMany(t.Context(), &errandstore.JobInsertManyParams{Jobs: []*errandstore.JobInsertParams{{
			ID: id, Queue: "q", Kind: "k", Args: []byte(`{}`), MaxAttempts: 1, ArgsVersion: 1,
		}}}); err != nil {
			t.Fatal(err)
		}
		jobs, err := s.JobClaimMany(t.Context(), &errandstore.JobClaimParams{Queues: []string{"q"}, Kinds: []string{"k"}, Limit: 10, Lease: time.Minute, Owner: "w"})
		if err != nil {
			t.Fatal(err)
		}
		if len(jobs) != 1 || jobs[0].ID != id {
			t.Fatalf("claimed %v, want %s", jobs, id)
		}
	}
	claim("a")
	q := claimSQL(1, 1, 0)
	first := s.cache.get(q)
	if first == nil {
		t.Fatal("the claim's statement is not cached after a claim")
	}
	other, err := Open(t.Context(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if _, err := other.DB().ExecContext(t.Context(), `CREATE INDEX app_idx ON errand_jobs (created_at)`); err != nil {
		t.Fatal(err)
	}
	claim("b")
	if s.cache.get(q) != first {
		t.Error("a second claim prepared its statement again")
	}

	for i := range 2 * stmtCacheMax {
		s.cache.miss(fmt.Sprintf("SELECT %d", i))
	}
	s.cache.prepareMissed(t.Context(), s.db)
	s.cache.mu.Lock()
	n := len(s.cache.stmts)
	s.cache.mu.Unlock()
	if n > stmtCacheMax {
		t.Errorf("cache holds %d statements, want at most %d", n, stmtCacheMax)
	}
}
