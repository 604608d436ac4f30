package sqlite_test

import (
	"testing"

	"github.com/errandhq/errand/sqlite"
	"github.com/errandhq/errand/storetest"
)

// TestDebounceMigrationKeepsJobs builds a database as it was before the
// debounce migration, with a queued job, and opens it.
func TestDebounceMigrationKeepsJobs(t *testing.T) {
	path := schemaAt(t, storetest.MigrationsBefore(t, "_debounce.sql"))
	exec(t, path, `INSERT INTO errand_jobs (id, queue, kind, args, state, max_attempts, available_at, created_at)
		VALUES ('old', 'default', 'reindex', '{"n":0}', 'queued', 1, 0, 0)`)
	s, err := sqlite.Open(t.Context(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	storetest.CheckDebounceMigrated(t, s, "old")
}
