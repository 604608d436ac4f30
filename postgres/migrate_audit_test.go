package postgres_test

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/postgres"
	"github.com/errandhq/errand/postgres/pgtest"
	"github.com/jackc/pgx/v5"
)

// TestAuditMigrationKeepsReplays builds a schema as an errand before
// migration 6 left it, with replays in errand_replays, and opens it: the
// replays move to the audit with their ids, and later records follow them.
func TestAuditMigrationKeepsReplays(t *testing.T) {
	url := pgtest.URL(t)
	schema := pgtest.Schema(t, url)
	ctx := t.Context()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	files, err := filepath.Glob("migrations/*.sql")
	if err != nil || len(files) < 6 {
		t.Fatalf("migrations: %v %v", files, err)
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	exec := func(q string, args ...any) {
		t.Helper()
		if _, err := tx.Exec(ctx, q, args...); err != nil {
			t.Fatalf("%.60s: %v", q, err)
		}
	}
	ident := pgx.Identifier{schema}.Sanitize()
	exec(`CREATE SCHEMA ` + ident)
	exec(`SET LOCAL search_path TO ` + ident)
	exec(`CREATE TABLE errand_migrations (version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`)
	for i, f := range files[:5] {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		exec(string(b))
		exec(`INSERT INTO errand_migrations (version, name) VALUES ($1, $2)`, i+1, filepath.Base(f))
	}
	at := func(s int64) time.Time { return time.Unix(s, 0).UTC() }
	exec(`INSERT INTO errand_replays (id, job_id, replay, prior_state, operator, reason, at) OVERRIDING SYSTEM VALUE VALUES
		(1, 'a', 1, 'dead', 'ana', 'fixed', $1), (2, 'b', 1, 'cancelled', 'bo', 'mistake', $2),
		(3, 'a', 2, 'dead', 'cy', 'again', $3)`, at(1), at(2), at(3))
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}

	s, err := postgres.Open(ctx, url, &postgres.Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rs, err := s.JobReplayAudit(ctx, &errand.JobReplayAuditParams{JobID: "a"})
	if err != nil {
		t.Fatal(err)
	}
	want := []errand.ReplayRecord{
		{ID: 1, JobID: "a", Replay: 1, PriorState: errand.StateDead, Operator: "ana", Reason: "fixed", At: at(1)},
		{ID: 3, JobID: "a", Replay: 2, PriorState: errand.StateDead, Operator: "cy", Reason: "again", At: at(3)},
	}
	if !slices.Equal(rs, want) {
		t.Errorf("replay audit after migrating:\n got %+v\nwant %+v", rs, want)
	}
	if _, err := s.JobInsertMany(ctx, &errand.JobInsertManyParams{Jobs: []*errand.JobInsertParams{
		{ID: "c", Queue: "default", Kind: "k", Args: []byte(`{}`), ArgsVersion: 1, MaxAttempts: 1}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.JobCancel(ctx, &errand.JobCancelParams{ID: "c", Operator: "dee", Reason: "r"}); err != nil {
		t.Fatal(err)
	}
	all, err := s.AuditList(ctx, &errand.AuditListParams{})
	if err != nil || len(all) != 4 || all[0].ID != 4 || all[0].Action != errand.AuditCancel || all[2].ID != 2 || *all[2].JobID != "b" {
		t.Errorf("audit after migrating and a cancel: %+v, %v", all, err)
	}
	var gone bool
	if err := conn.QueryRow(ctx, `SELECT to_regclass($1) IS NULL`, schema+".errand_replays").Scan(&gone); err != nil || !gone {
		t.Errorf("errand_replays is still there (%v)", err)
	}
}
