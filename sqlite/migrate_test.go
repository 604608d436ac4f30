package sqlite_test

import (
	"database/sql"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
	"github.com/errandhq/errand/internal/rowscan"
	"github.com/errandhq/errand/sqlite"
)

// exec runs statements on the file at path through a plain connection of
// the test's own, as another application (or an older errand) would.
func exec(t *testing.T, path string, stmts ...string) {
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

// query returns the first column of every row q returns on the file.
func query(t *testing.T, path, q string) []string {
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

// schemaAt makes an errand database at schema version `version`, as an
// older errand left it, and records the extra versions as applied too.
func schemaAt(t *testing.T, version int, extra ...int) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "errand.db")
	files, err := filepath.Glob("migrations/*.sql")
	if err != nil || len(files) < version {
		t.Fatalf("migrations: %v %v", files, err)
	}
	stmts := []string{`CREATE TABLE errand_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)`}
	for i, f := range files[:version] {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		stmts = append(stmts, string(b))
		extra = append(extra, i+1)
	}
	for _, v := range extra {
		stmts = append(stmts, `INSERT INTO errand_migrations (version, name, applied_at) VALUES (`+strconv.Itoa(v)+`, 'm', 0)`)
	}
	exec(t, path, stmts...)
	return path
}

// TestNewerSchemaRefusedBeforeMigrating opens a database that a newer
// errand migrated (version 99 recorded) but that lacks migrations this
// errand knows (3 and up): Open refuses it and applies nothing.
func TestNewerSchemaRefusedBeforeMigrating(t *testing.T) {
	path := schemaAt(t, 2, 99)
	s, err := sqlite.Open(t.Context(), path, nil)
	if err == nil {
		s.Close()
		t.Fatal("Open on a database at version 99 succeeded")
	}
	if !strings.Contains(err.Error(), "version 99") || !strings.Contains(err.Error(), "upgrade errand") {
		t.Errorf("Open: %v, want it to name version 99 and say upgrade errand", err)
	}
	if vs := query(t, path, `SELECT version FROM errand_migrations ORDER BY version`); strings.Join(vs, ",") != "1,2,99" {
		t.Errorf("versions recorded after a refused open: %v, want 1,2,99", vs)
	}
	if tables := query(t, path, `SELECT name FROM sqlite_master WHERE name = 'errand_leaders'`); len(tables) > 0 {
		t.Error("migration 3 ran on a refused database")
	}
}

// TestAuditMigrationKeepsReplays opens a database whose replays an errand
// before migration 6 recorded in errand_replays: they move to the audit
// with their ids, and later actions follow them.
func TestAuditMigrationKeepsReplays(t *testing.T) {
	path := schemaAt(t, 5)
	exec(t, path,
		`INSERT INTO errand_replays (id, job_id, replay, prior_state, operator, reason, at) VALUES
			(1, 'a', 1, 'dead', 'ana', 'fixed', 1000000), (2, 'b', 1, 'cancelled', 'bo', 'mistake', 2000000),
			(3, 'a', 2, 'dead', 'cy', 'again', 3000000)`)
	s, err := sqlite.Open(t.Context(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rs, err := s.JobReplayAudit(t.Context(), &errandstore.JobReplayAuditParams{JobID: "a"})
	if err != nil {
		t.Fatal(err)
	}
	want := []errandtype.ReplayRecord{
		{ID: 1, JobID: "a", Replay: 1, PriorState: errandtype.StateDead, Operator: "ana", Reason: "fixed", At: time.UnixMicro(1000000).UTC()},
		{ID: 3, JobID: "a", Replay: 2, PriorState: errandtype.StateDead, Operator: "cy", Reason: "again", At: time.UnixMicro(3000000).UTC()},
	}
	if !slices.Equal(rs, want) {
		t.Errorf("replay audit after migrating:\n got %+v\nwant %+v", rs, want)
	}
	all, err := s.AuditList(t.Context(), &errandstore.AuditListParams{})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 3 || all[0].ID != 3 || all[2].ID != 1 || all[1].Action != errandtype.AuditReplay || *all[1].JobID != "b" {
		t.Errorf("audit after migrating: %+v", all)
	}
	if tables := query(t, path, `SELECT name FROM sqlite_master WHERE name = 'errand_replays'`); len(tables) > 0 {
		t.Error("errand_replays is still there")
	}
	if _, err := s.JobInsertMany(t.Context(), &errandstore.JobInsertManyParams{Jobs: []*errandstore.JobInsertParams{
		{ID: "c", Queue: "default", Kind: "k", Args: []byte(`{}`), ArgsVersion: 1, MaxAttempts: 1}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.JobCancel(t.Context(), &errandstore.JobCancelParams{ID: "c", Operator: "dee", Reason: "r"}); err != nil {
		t.Fatal(err)
	}
	if all, err = s.AuditList(t.Context(), &errandstore.AuditListParams{Limit: 1}); err != nil || len(all) != 1 || all[0].ID != 4 {
		t.Errorf("the next record after migrating: %+v, %v; want id 4", all, err)
	}
}

// TestUniqueScopeMigrationKeepsBehaviour opens a database that an errand
// before migration 8 filled: a finished job keeps holding its unique key
// (every state, as before), a dead job holds nothing back of its ordering
// key, the rows keep their seqs, and a new job's seq follows the highest
// ever given, a pruned job's too.
func TestUniqueScopeMigrationKeepsBehaviour(t *testing.T) {
	path := schemaAt(t, 7)
	exec(t, path,
		`INSERT INTO errand_jobs (seq, id, queue, kind, args, state, max_attempts, available_at, created_at, unique_key, ordering_key, finished_at) VALUES
			(5, 'old', 'default', 'k', '{}', 'succeeded', 1, 0, 0, 'digest:1', NULL, 10),
			(6, 'head', 'default', 'k', '{}', 'dead', 1, 0, 0, NULL, 'acct', 10),
			(7, 'next', 'default', 'k', '{}', 'queued', 1, 0, 0, NULL, 'acct', NULL),
			(9, 'pruned', 'default', 'k', '{}', 'succeeded', 1, 0, 0, NULL, NULL, 10)`,
		`DELETE FROM errand_jobs WHERE id = 'pruned'`)
	s, err := sqlite.Open(t.Context(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := t.Context()
	old, err := s.JobGet(ctx, &errandstore.JobGetParams{ID: "old"})
	if err != nil {
		t.Fatal(err)
	}
	if old.Seq != 5 || old.UniqueScope == nil || *old.UniqueScope != errandtype.UniqueAlways || old.OrderingHold {
		t.Errorf("old job after migrating: seq %d scope %v hold %v; want 5, always, false", old.Seq, old.UniqueScope, old.OrderingHold)
	}
	rs, err := s.JobInsertMany(ctx, &errandstore.JobInsertManyParams{Jobs: []*errandstore.JobInsertParams{
		{ID: "new", Queue: "default", Kind: "k", Args: []byte(`{}`), ArgsVersion: 1, MaxAttempts: 1}}})
	if err != nil || rs[0].Job.Seq != 10 {
		t.Fatalf("new job after migrating: seq %d, %v; want seq 10 (seqs %v)", rs[0].Job.Seq, err, query(t, path, `SELECT name || '=' || seq FROM sqlite_sequence`))
	}
	for _, scope := range []errandtype.UniqueScope{0, errandtype.UniqueUntilFinished} {
		rs, err := s.JobInsertMany(ctx, &errandstore.JobInsertManyParams{Jobs: []*errandstore.JobInsertParams{
			{ID: "again", Queue: "default", Kind: "k", Args: []byte(`{}`), ArgsVersion: 1, MaxAttempts: 1, UniqueKey: "digest:1", UniqueScope: scope}}})
		if err != nil || !rs[0].Duplicate || rs[0].Job.ID != "old" {
			t.Fatalf("insert with the old job's key (scope %v): %+v, %v; want the duplicate of old", scope, rs, err)
		}
	}
	if held, err := s.JobGet(ctx, &errandstore.JobGetParams{ID: "next"}); err != nil || held.HeldBy != nil {
		t.Fatalf("job behind a dead head: %+v, %v; want it free", held, err)
	}
	// A row written without the new columns, as an older errand still
	// running against the file would write it, holds its key as before.
	exec(t, path, `INSERT INTO errand_jobs (id, queue, kind, args, state, max_attempts, available_at, created_at, unique_key)
		VALUES ('raw', 'default', 'k', '{}', 'succeeded', 1, 0, 0, 'raw:1')`)
	rs, err = s.JobInsertMany(ctx, &errandstore.JobInsertManyParams{Jobs: []*errandstore.JobInsertParams{
		{ID: "raw-again", Queue: "default", Kind: "k", Args: []byte(`{}`), ArgsVersion: 1, MaxAttempts: 1, UniqueKey: "raw:1", UniqueScope: errandtype.UniqueUntilFinished}}})
	if err != nil || !rs[0].Duplicate || rs[0].Job.ID != "raw" {
		t.Fatalf("insert with the key of a row written without a scope: %+v, %v; want the duplicate of raw", rs, err)
	}
	// The rebuild keeps every index: the migrated file has those of a
	// database created new.
	const indexes = `SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'errand_jobs' AND name NOT LIKE 'sqlite_%' ORDER BY name`
	fresh := filepath.Join(t.TempDir(), "fresh.db")
	fs, err := sqlite.Open(ctx, fresh, nil)
	if err != nil {
		t.Fatal(err)
	}
	fs.Close()
	idx, want := query(t, path, indexes), query(t, fresh, indexes)
	if !slices.Equal(idx, want) || !slices.Contains(idx, "errand_jobs_unique") {
		t.Errorf("indexes after migrating: %v, want %v", idx, want)
	}
}
