package postgres_test

import (
	"testing"
	"time"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
)

// TestStateIndexMigrationKeepsJobs builds a schema as an errand before
// migration 24 left it, with a job in every state and a dead one without a
// finished_at, and opens it: every job is still listed and counted by its
// state, the dead one is given the time of its last attempt as its finish,
// errand_jobs_state is gone, and a finished job without a finished_at is
// refused from then on.
func TestStateIndexMigrationKeepsJobs(t *testing.T) {
	o := newOldSchema(t, 23)
	schema, conn, exec := o.name, o.conn, o.exec
	ctx := t.Context()
	attempted := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	exec(`INSERT INTO errand_jobs (id, queue, kind, args, state, attempt, max_attempts, available_at, created_at, attempted_at, finished_at, lease_until)
		VALUES ('q', 'a', 'k', '{}', 'queued', 0, 3, now(), now(), NULL, NULL, NULL),
			('r', 'a', 'k', '{}', 'running', 1, 3, now(), now(), now(), NULL, now() + interval '1 hour'),
			('t', 'a', 'k', '{}', 'retrying', 1, 3, now(), now(), now(), NULL, NULL),
			('s', 'b', 'k', '{}', 'succeeded', 1, 3, now(), now(), now(), now(), NULL),
			('d', 'b', 'k', '{}', 'dead', 3, 3, now(), now(), now(), now(), NULL),
			('c', 'b', 'l', '{}', 'cancelled', 0, 3, now(), now(), NULL, now(), NULL),
			('old', 'b', 'l', '{}', 'dead', 3, 3, now(), now() - interval '1 day', $1, NULL, NULL)`, attempted)

	s := o.migrate(t)
	want := map[errandtype.JobState][]string{
		errandtype.StateQueued: {"q"}, errandtype.StateRunning: {"r"}, errandtype.StateRetrying: {"t"},
		errandtype.StateSucceeded: {"s"}, errandtype.StateDead: {"d", "old"}, errandtype.StateCancelled: {"c"},
	}
	for st, ids := range want {
		js, err := s.JobList(ctx, &errandstore.JobListParams{States: []errandtype.JobState{st}})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, j := range js {
			got = append(got, j.ID)
		}
		if len(got) != len(ids) || (len(ids) > 0 && got[0] != ids[0]) || (len(ids) > 1 && got[1] != ids[1]) {
			t.Errorf("%s jobs after migrating: %v, want %v", st, got, ids)
		}
	}
	stats, err := s.QueueStats(ctx, &errandstore.QueueStatsParams{})
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]map[errandtype.JobState]int{}
	for _, q := range stats {
		counts[q.Queue] = q.Counts
	}
	wantCounts := map[string]map[errandtype.JobState]int{
		"a": {errandtype.StateQueued: 1, errandtype.StateRunning: 1, errandtype.StateRetrying: 1},
		"b": {errandtype.StateSucceeded: 1, errandtype.StateDead: 2, errandtype.StateCancelled: 1},
	}
	for q, byState := range wantCounts {
		for st, n := range byState {
			if counts[q][st] != n {
				t.Errorf("queue %s, %s jobs counted after migrating: %d, want %d (%+v)", q, st, counts[q][st], n, stats)
			}
		}
	}
	j, err := s.JobGet(ctx, &errandstore.JobGetParams{ID: "old"})
	if err != nil {
		t.Fatal(err)
	}
	if j.FinishedAt == nil || !j.FinishedAt.Equal(attempted) {
		t.Errorf("the dead job without a finish finished at %v, want its last attempt's %v", j.FinishedAt, attempted)
	}
	var gone bool
	if err := conn.QueryRow(ctx, `SELECT to_regclass($1) IS NULL`, schema+".errand_jobs_state").Scan(&gone); err != nil || !gone {
		t.Errorf("errand_jobs_state is still there (%v)", err)
	}
	if _, err := conn.Exec(ctx, `UPDATE `+schema+`.errand_jobs SET finished_at = NULL WHERE id = 's'`); err == nil {
		t.Error("a succeeded job was left without a finished_at")
	}
}
