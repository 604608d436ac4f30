package postgres_test

import (
	"testing"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
)

// TestUniqueScopeMigrationKeepsBehaviour builds a schema as an errand
// before migration 8 left it, with a finished job holding a unique key and
// a dead job ahead of another of its ordering key, and opens it: the
// finished job still holds its key whatever the new job's scope, and the
// dead job holds nothing back, as before.
func TestUniqueScopeMigrationKeepsBehaviour(t *testing.T) {
	o := newOldSchema(t, 7)
	schema, conn, exec := o.name, o.conn, o.exec
	ctx := t.Context()
	exec(`INSERT INTO errand_jobs (id, queue, kind, args, state, max_attempts, available_at, created_at, unique_key, ordering_key, finished_at) VALUES
		('old', 'default', 'k', '{}', 'succeeded', 1, now(), now(), 'digest:1', NULL, now()),
		('head', 'default', 'k', '{}', 'dead', 1, now(), now(), NULL, 'acct', now()),
		('next', 'default', 'k', '{}', 'queued', 1, now(), now(), NULL, 'acct', NULL)`)

	s := o.migrate(t)
	old, err := s.JobGet(ctx, &errandstore.JobGetParams{ID: "old"})
	if err != nil {
		t.Fatal(err)
	}
	if old.UniqueScope == nil || *old.UniqueScope != errandtype.UniqueAlways || old.OrderingHold {
		t.Errorf("old job after migrating: scope %v hold %v; want always, false", old.UniqueScope, old.OrderingHold)
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
	var constraints int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_constraint WHERE conrelid = $1::regclass AND contype = 'u'`,
		schema+".errand_jobs").Scan(&constraints); err != nil || constraints != 1 {
		t.Errorf("unique constraints on errand_jobs after migrating: %d, %v; want 1 (the id's)", constraints, err)
	}
}
