package postgres_test

import (
	"strings"
	"testing"
	"time"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/postgres/pgtest"
)

// TestBatchCompleteCompareAndSet: two stores both find batch b1 finished
// and open, and reach its completion while the test holds b1's row; once
// it lets go, one completes the batch and the other's compare-and-set
// finds it completed and does nothing. The order is set by a lock the test
// waits on, not by timing.
func TestBatchCompleteCompareAndSet(t *testing.T) {
	dbURL := pgtest.URL(t)
	schema := pgtest.Schema(t, dbURL)
	app := "errand-bcas-" + strings.TrimPrefix(schema, "errand_t_")
	first, second := openNamed(t, dbURL, schema, app, nil), openNamed(t, dbURL, schema, app, nil)
	ctx := t.Context()
	p := &errandstore.BatchInsertParams{ID: "b1", Callback: &errandstore.BatchCallback{Kind: "done", Queue: "callbacks", Args: []byte(`{}`), ArgsVersion: 1, MaxAttempts: 1}}
	for _, id := range []string{"m1", "m2"} {
		p.Jobs = append(p.Jobs, &errandstore.JobInsertParams{ID: id, Queue: "q", Kind: "k", Args: []byte(`{}`), ArgsVersion: 1, MaxAttempts: 1})
	}
	if _, err := first.BatchInsert(ctx, p); err != nil {
		t.Fatal(err)
	}
	jobs, err := first.JobClaimMany(ctx, &errandstore.JobClaimParams{Queues: []string{"q"}, Limit: 2, Lease: time.Minute, Owner: "w"})
	if err != nil || len(jobs) != 2 {
		t.Fatalf("claim: %d jobs, %v", len(jobs), err)
	}
	var outs []*errandstore.JobOutcome
	for _, j := range jobs {
		outs = append(outs, &errandstore.JobOutcome{JobLease: errandstore.JobLease{ID: j.ID, LeaseToken: *j.LeaseToken}, Kind: errandstore.OutcomeSucceeded})
	}
	if _, err := first.JobRecordOutcomes(ctx, &errandstore.JobRecordOutcomesParams{Outcomes: outs}); err != nil {
		t.Fatal(err)
	}

	lock, err := openForWorker(t, dbURL, schema).Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Rollback(ctx)
	if _, err := lock.Exec(ctx, `SELECT 1 FROM `+schema+`.errand_batches WHERE id = 'b1' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	completed := make(chan int, 2)
	for _, s := range []errandstore.BatchStore{first, second} {
		go func() {
			done, err := s.BatchComplete(ctx, &errandstore.BatchCompleteParams{IDs: []string{"b1"}})
			if err != nil {
				t.Errorf("BatchComplete: %v", err)
			}
			completed <- len(done)
		}()
	}
	waitFor(t, "both completions waiting on b1's row", func() bool {
		var n int
		if err := lock.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1 AND wait_event_type = 'Lock'`, app).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == 2
	})
	if err := lock.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if n := <-completed + <-completed; n != 1 {
		t.Fatalf("%d completions of b1, want exactly 1", n)
	}
}
