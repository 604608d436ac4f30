package postgres_test

import (
	"testing"

	"github.com/errandhq/errand/storetest"
)

// TestDebounceMigrationKeepsJobs builds a schema as it was before the
// debounce migration, with a queued job, and opens it.
func TestDebounceMigrationKeepsJobs(t *testing.T) {
	o := newOldSchema(t, storetest.MigrationsBefore(t, "_debounce.sql"))
	o.exec(`INSERT INTO errand_jobs (id, queue, kind, args, state, max_attempts, available_at, created_at)
		VALUES ('old', 'default', 'reindex', '{"n":0}', 'queued', 1, now(), now())`)
	storetest.CheckDebounceMigrated(t, o.migrate(t), "old")
}
