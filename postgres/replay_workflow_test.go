package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
	"github.com/errandhq/errand/postgres/pgtest"
	"github.com/jackc/pgx/v5"
)

// TestReplayWaitsForWorkflowAdvance: a replay of a dead step that meets an
// advance of its workflow under way (the workflow's row locked FOR UPDATE)
// waits for it, and decides on the row the advance wrote. When the advance
// enqueued a compensation, the replay is refused and writes nothing;
// checked before the wait, it would queue the step beside the
// compensations that undo what it builds on. When the advance only
// stopped the workflow (a step still in flight), the replay resumes it.
func TestReplayWaitsForWorkflowAdvance(t *testing.T) {
	for _, compensated := range []bool{true, false} {
		t.Run(fmt.Sprintf("compensated=%v", compensated), func(t *testing.T) { testReplayWaitsForAdvance(t, compensated) })
	}
}

func testReplayWaitsForAdvance(t *testing.T, compensated bool) {
	ctx := t.Context()
	s := openTestStore(t)
	tmpl := &errandstore.JobTemplate{Kind: "k", Queue: "q", Args: json.RawMessage(`{}`), ArgsVersion: 1, MaxAttempts: 1}
	if _, err := s.WorkflowInsert(ctx, &errandstore.WorkflowInsertParams{ID: "w", Steps: []errandstore.WorkflowStepDef{{Name: "a", Job: tmpl}}}); err != nil {
		t.Fatal(err)
	}
	step := errandstore.WorkflowStepJobID("w", "a")
	if _, err := s.pool.Exec(ctx, s.sql(`UPDATE {jobs} SET state = 'dead', attempt = 1, finished_at = now() WHERE id = $1`), step); err != nil {
		t.Fatal(err)
	}

	// The advance, on a connection of its own (the store's pool has two,
	// for the replay): it has locked the workflow's row and is deciding.
	// Another connection watches the replay wait.
	conn := func() *pgx.Conn {
		c, err := pgx.Connect(ctx, pgtest.URL(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close(context.Background()) })
		return c
	}
	advance, err := conn().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	watch := conn()
	defer advance.Rollback(ctx)
	var state string
	if err := advance.QueryRow(ctx, s.workflowSQL(s.own, `SELECT state FROM {workflows} WHERE id = 'w' FOR UPDATE`)).Scan(&state); err != nil || state != "running" {
		t.Fatalf("workflow %q (%v), want running", state, err)
	}

	replayed := make(chan error, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, err := s.JobReplay(ctx, &errandstore.JobReplayParams{ID: step, Operator: "ops", Reason: "fixed"})
		replayed <- err
	}()
	waitForShareLock(t, watch, done)
	if _, err := advance.Exec(ctx, s.workflowSQL(s.own, `UPDATE {workflows} SET state = 'compensating', failed_step = 'a',
		compensation_started_at = CASE WHEN $1 THEN now() END WHERE id = 'w'`), compensated); err != nil {
		t.Fatal(err)
	}
	if err := advance.Commit(ctx); err != nil {
		t.Fatal(err)
	}

	err = <-replayed
	var replays int
	if err := s.pool.QueryRow(ctx, s.sql(`SELECT state, replays FROM {jobs} WHERE id = $1`), step).Scan(&state, &replays); err != nil {
		t.Fatal(err)
	}
	if !compensated {
		if err != nil || state != "queued" || replays != 1 {
			t.Fatalf("replay of a stopped workflow's step = %v, the step %s with %d replays; want it queued", err, state, replays)
		}
		return
	}
	if !errors.Is(err, errandstore.ErrWorkflowCompensated) {
		t.Fatalf("replay after the workflow began compensating = %v, want ErrWorkflowCompensated", err)
	}
	if state != "dead" || replays != 0 {
		t.Fatalf("refused step is %s with %d replays, want dead with 0", state, replays)
	}
	var audits int
	if err := s.pool.QueryRow(ctx, s.sql(`SELECT count(*) FROM {audit} WHERE job_id = $1`), step).Scan(&audits); err != nil && !errors.Is(err, pgx.ErrNoRows) {
		t.Fatal(err)
	}
	if audits != 0 {
		t.Fatalf("refused replay left %d audit records", audits)
	}
}

// TestBulkReplayFillsPageAfterHeldStep: a bulk replay's page that meets a
// step whose workflow began compensating (enqueued a compensation) after
// the page was selected skips
// the step and fills the page from the jobs after it: a short page would
// tell the client there were no more, and leave them dead.
func TestBulkReplayFillsPageAfterHeldStep(t *testing.T) {
	ctx := t.Context()
	s := openTestStore(t)
	tmpl := &errandstore.JobTemplate{Kind: "k", Queue: "q", Args: json.RawMessage(`{}`), ArgsVersion: 1, MaxAttempts: 1}
	if _, err := s.WorkflowInsert(ctx, &errandstore.WorkflowInsertParams{ID: "w", Steps: []errandstore.WorkflowStepDef{{Name: "a", Job: tmpl}}}); err != nil {
		t.Fatal(err)
	}
	var plain []*errandstore.JobInsertParams
	for _, id := range []string{"p1", "p2", "p3"} {
		plain = append(plain, &errandstore.JobInsertParams{ID: id, Queue: "q", Kind: "k", Args: json.RawMessage(`{}`), ArgsVersion: 1, MaxAttempts: 1})
	}
	if _, err := s.JobInsertMany(ctx, &errandstore.JobInsertManyParams{Jobs: plain}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.pool.Exec(ctx, s.sql(`UPDATE {jobs} SET state = 'dead', attempt = 1, finished_at = now()`)); err != nil {
		t.Fatal(err)
	}
	advance, err := pgx.Connect(ctx, pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer advance.Close(context.Background())
	watch, err := pgx.Connect(ctx, pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer watch.Close(context.Background())
	tx, err := advance.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, s.workflowSQL(s.own, `SELECT 1 FROM {workflows} WHERE id = 'w' FOR UPDATE`)); err != nil {
		t.Fatal(err)
	}

	type result struct {
		js  []*errandtype.Job
		err error
	}
	replayed := make(chan result, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		js, err := s.JobReplayMany(ctx, &errandstore.JobReplayManyParams{Limit: 2, Operator: "ops", Reason: "fixed", Bulk: "b1"})
		replayed <- result{js, err}
	}()
	waitForShareLock(t, watch, done)
	if _, err := tx.Exec(ctx, s.workflowSQL(s.own, `UPDATE {workflows} SET state = 'compensating', failed_step = 'a', compensation_started_at = now() WHERE id = 'w'`)); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	r := <-replayed
	if r.err != nil {
		t.Fatal(r.err)
	}
	var got []string
	for _, j := range r.js {
		got = append(got, j.ID)
	}
	if len(got) != 2 || got[0] != "p1" || got[1] != "p2" {
		t.Fatalf("bulk replay of 2 replayed %v, want [p1 p2]", got)
	}
}

// waitForShareLock waits until a statement taking a FOR SHARE lock waits
// for it, as a replay meeting an advance of its workflow does; until then
// the replay could not have got past the workflow. It fails the test if
// the replay ends (done) first.
func waitForShareLock(t *testing.T, watch *pgx.Conn, done <-chan struct{}) {
	t.Helper()
	for blocked := false; !blocked; {
		select {
		case <-done:
			t.Fatal("the replay returned while the advance held the workflow")
		case <-time.After(5 * time.Millisecond):
		}
		err := watch.QueryRow(t.Context(), `SELECT EXISTS (SELECT 1 FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%FOR SHARE%')`).Scan(&blocked)
		if err != nil {
			t.Fatal(err)
		}
	}
}
