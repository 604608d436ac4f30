package postgres_test

import (
	"slices"
	"testing"
	"time"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
)

// TestAuditMigrationKeepsReplays builds a schema as an errand before
// migration 6 left it, with replays in errand_replays, and opens it: the
// replays move to the audit with their ids, and later records follow them.
func TestAuditMigrationKeepsReplays(t *testing.T) {
	o := newOldSchema(t, 5)
	schema, conn, exec := o.name, o.conn, o.exec
	ctx := t.Context()
	at := func(s int64) time.Time { return time.Unix(s, 0).UTC() }
	exec(`INSERT INTO errand_replays (id, job_id, replay, prior_state, operator, reason, at) OVERRIDING SYSTEM VALUE VALUES
		(1, 'a', 1, 'dead', 'ana', 'fixed', $1), (2, 'b', 1, 'cancelled', 'bo', 'mistake', $2),
		(3, 'a', 2, 'dead', 'cy', 'again', $3)`, at(1), at(2), at(3))

	s := o.migrate(t)
	rs, err := s.JobReplayAudit(ctx, &errandstore.JobReplayAuditParams{JobID: "a"})
	if err != nil {
		t.Fatal(err)
	}
	want := []errandtype.ReplayRecord{
		{ID: 1, JobID: "a", Replay: 1, PriorState: errandtype.StateDead, Operator: "ana", Reason: "fixed", At: at(1)},
		{ID: 3, JobID: "a", Replay: 2, PriorState: errandtype.StateDead, Operator: "cy", Reason: "again", At: at(3)},
	}
	if !slices.Equal(rs, want) {
		t.Errorf("replay audit after migrating:\n got %+v\nwant %+v", rs, want)
	}
	if _, err := s.JobInsertMany(ctx, &errandstore.JobInsertManyParams{Jobs: []*errandstore.JobInsertParams{
		{ID: "c", Queue: "default", Kind: "k", Args: []byte(`{}`), ArgsVersion: 1, MaxAttempts: 1}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.JobCancel(ctx, &errandstore.JobCancelParams{ID: "c", Operator: "dee", Reason: "r"}); err != nil {
		t.Fatal(err)
	}
	all, err := s.AuditList(ctx, &errandstore.AuditListParams{})
	if err != nil || len(all) != 4 || all[0].ID != 4 || all[0].Action != errandtype.AuditCancel || all[2].ID != 2 || *all[2].JobID != "b" {
		t.Errorf("audit after migrating and a cancel: %+v, %v", all, err)
	}
	var gone bool
	if err := conn.QueryRow(ctx, `SELECT to_regclass($1) IS NULL`, schema+".errand_replays").Scan(&gone); err != nil || !gone {
		t.Errorf("errand_replays is still there (%v)", err)
	}
}
