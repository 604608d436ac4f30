package postgres_test

import (
	"slices"
	"testing"
	"time"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
	"github.com/jackc/pgx/v5"
)

// TestWorkflowMigrationKeepsJobs migrates a schema at version 13 that
// holds a job in every state, two of them in a batch: after migration 14
// every job reads back as it was, outside any workflow and without output,
// and each that may run again is claimed (the running one, whose lease
// expired, at once; the dead and cancelled ones once replayed).
func TestWorkflowMigrationKeepsJobs(t *testing.T) {
	o := newOldSchema(t, 13)
	schema, conn, exec := o.name, o.conn, o.exec
	ctx := t.Context()
	exec(`INSERT INTO errand_batches (id, total, created_at) VALUES ('b1', 2, now())`)
	exec(`INSERT INTO errand_jobs (id, queue, kind, args, state, attempt, max_attempts, available_at, created_at,
			lease_token, lease_until, lease_owner, attempted_at, finished_at, batch_id) VALUES
		('queued', 'default', 'k', '{}', 'queued', 0, 3, now() - interval '1 hour', now() - interval '1 hour', NULL, NULL, NULL, NULL, NULL, 'b1'),
		('running', 'default', 'k', '{}', 'running', 1, 3, now() - interval '1 hour', now() - interval '1 hour', 'tok', now() - interval '1 hour', 'old-worker', now() - interval '1 hour', NULL, NULL),
		('retrying', 'default', 'k', '{}', 'retrying', 1, 3, now() - interval '1 hour', now() - interval '1 hour', NULL, NULL, NULL, now() - interval '1 hour', NULL, NULL),
		('succeeded', 'default', 'k', '{}', 'succeeded', 1, 3, now() - interval '1 hour', now() - interval '1 hour', NULL, NULL, NULL, now() - interval '1 hour', now() - interval '1 hour', 'b1'),
		('dead', 'default', 'k', '{}', 'dead', 3, 3, now() - interval '1 hour', now() - interval '1 hour', NULL, NULL, NULL, now() - interval '1 hour', now() - interval '1 hour', NULL),
		('cancelled', 'default', 'k', '{}', 'cancelled', 0, 3, now() - interval '1 hour', now() - interval '1 hour', NULL, NULL, NULL, NULL, now() - interval '1 hour', NULL)`)

	s := o.migrate(t)
	var applied int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM `+pgx.Identifier{schema}.Sanitize()+`.errand_migrations WHERE version = 14`).Scan(&applied); err != nil || applied != 1 {
		t.Fatalf("migration 14 recorded %d times, %v; want once", applied, err)
	}
	checkMigratedJobs(t, s)
}

// checkMigratedJobs checks the jobs TestWorkflowMigrationKeepsJobs left in
// store s before its migration.
func checkMigratedJobs(t *testing.T, s errandstore.Store) {
	t.Helper()
	ctx := t.Context()
	for _, st := range []errandtype.JobState{errandtype.StateQueued, errandtype.StateRunning, errandtype.StateRetrying,
		errandtype.StateSucceeded, errandtype.StateDead, errandtype.StateCancelled} {
		j, err := s.JobGet(ctx, &errandstore.JobGetParams{ID: string(st)})
		if err != nil {
			t.Fatalf("job %s after migrating: %v", st, err)
		}
		inBatch := st == errandtype.StateQueued || st == errandtype.StateSucceeded
		if j.State != st || j.WorkflowID != nil || j.Output != nil || (j.BatchID != nil) != inBatch {
			t.Errorf("job %s after migrating: state %s, workflow %v, output %s, batch %v", st, j.State, j.WorkflowID, j.Output, j.BatchID)
		}
	}
	if b, err := s.(errandstore.BatchStore).BatchGet(ctx, &errandstore.BatchGetParams{ID: "b1"}); err != nil || b.Total != 2 {
		t.Errorf("batch after migrating: %+v, %v", b, err)
	}
	claim := func() []string {
		t.Helper()
		js, err := s.JobClaimMany(ctx, &errandstore.JobClaimParams{Queues: []string{"default"}, Limit: 10, Lease: time.Minute, Owner: "new-worker"})
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, j := range js {
			if j.WorkflowID != nil || j.Output != nil {
				t.Errorf("claimed job %s: workflow %v, output %s", j.ID, j.WorkflowID, j.Output)
			}
			ids = append(ids, j.ID)
		}
		slices.Sort(ids)
		return ids
	}
	// The running job's lease expired long ago: claimed again too.
	if got := claim(); !slices.Equal(got, []string{"queued", "retrying", "running"}) {
		t.Fatalf("claimed %v, want [queued retrying running]", got)
	}
	for _, id := range []string{"dead", "cancelled"} {
		if _, err := s.JobReplay(ctx, &errandstore.JobReplayParams{ID: id, Operator: "ops", Reason: "migrated"}); err != nil {
			t.Fatalf("replay %s: %v", id, err)
		}
	}
	if got := claim(); !slices.Equal(got, []string{"cancelled", "dead"}) {
		t.Fatalf("claimed %v after the replays, want [cancelled dead]", got)
	}
	if rs, err := s.(errandstore.WorkflowStore).WorkflowAdvance(ctx, &errandstore.WorkflowAdvanceParams{}); err != nil || len(rs) != 0 {
		t.Errorf("leader's workflow pass after migrating: %d results, %v", len(rs), err)
	}
}
