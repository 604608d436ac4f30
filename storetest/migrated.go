package storetest

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
)

// MigrationsBefore is the number of the store's migrations, the files
// migrations/*.sql of the test's package, that come before the one whose
// name ends in suffix: a store's test builds a database that far, as an
// older errand left it, to migrate it.
func MigrationsBefore(t testing.TB, suffix string) int {
	t.Helper()
	files, err := filepath.Glob("migrations/*.sql")
	i := slices.IndexFunc(files, func(f string) bool { return strings.HasSuffix(f, suffix) })
	if err != nil || i < 0 {
		t.Fatalf("no migration *%s in %v (%v)", suffix, files, err)
	}
	return i
}

// CheckDebounceMigrated checks s, a store that migrated a database on
// which the job id was queued before the debounce migration: the job is
// kept, with no key and nothing absorbed, and debounce keys work.
func CheckDebounceMigrated(t testing.TB, s errandstore.Store, id string) {
	t.Helper()
	ctx := t.Context()
	old, err := s.JobGet(ctx, &errandstore.JobGetParams{ID: id})
	if err != nil || old.DebounceKey != nil || old.Absorbed != 0 || old.State != errandtype.StateQueued {
		t.Fatalf("job %s after migrating: %+v, %v; want it queued, without a key", id, old, err)
	}
	for i, id := range []string{"a", "b"} {
		p := debounced(id, "user:42", errandtype.DebounceLastWins, time.Second, i)
		rs, err := s.JobInsertMany(ctx, &errandstore.JobInsertManyParams{Jobs: []*errandstore.JobInsertParams{p}})
		if err != nil || rs[0].Job.ID != "a" || rs[0].Absorbed != (i == 1) {
			t.Fatalf("debounced insert %s after migrating: %+v, %v; want job a, absorbed %v", id, rs, err, i == 1)
		}
	}
}
