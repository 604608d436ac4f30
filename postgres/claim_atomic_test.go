package postgres

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
)

// TestClaimGivesBackUnreadableRows: a claim commits before its rows are
// read, so a row that does not decode (here one whose history is not a
// list) must not be left running with an attempt spent and nobody working
// it, nor keep the rest of the claim from running. It is given back,
// queued again a minute later with its attempt uncounted and the reason in
// its history; the other job is claimed. Plain and fair claims alike.
func TestClaimGivesBackUnreadableRows(t *testing.T) {
	t.Run("plain", func(t *testing.T) {
		testClaimGivesBackUnreadableRows(t, "", (*Store).JobClaimMany)
	})
	t.Run("fair", func(t *testing.T) {
		testClaimGivesBackUnreadableRows(t, "tenant", (*Store).JobClaimFair)
	})
}

func testClaimGivesBackUnreadableRows(t *testing.T, fairnessKey string, claim func(*Store, context.Context, *errandstore.JobClaimParams) ([]*errandtype.Job, error)) {
	ctx := t.Context()
	s := openTestStore(t)
	var jobs []*errandstore.JobInsertParams
	for _, id := range []string{"good", "poison"} {
		jobs = append(jobs, &errandstore.JobInsertParams{ID: id, Queue: "q", Kind: "k", Args: json.RawMessage(`{}`), ArgsVersion: 1, MaxAttempts: 3, FairnessKey: fairnessKey})
	}
	if _, err := s.JobInsertMany(ctx, &errandstore.JobInsertManyParams{Jobs: jobs}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.pool.Exec(ctx, s.sql(`UPDATE {jobs} SET errors = '{"x": 1}'::jsonb WHERE id = 'poison'`)); err != nil {
		t.Fatal(err)
	}
	before := time.Now()
	claimed, err := claim(s, ctx, &errandstore.JobClaimParams{Queues: []string{"q"}, Limit: 10, Lease: time.Minute, Owner: "w"})
	if err != nil {
		t.Fatal(err)
	}
	if len(claimed) != 1 || claimed[0].ID != "good" || claimed[0].Attempt != 1 {
		t.Fatalf("claimed %d jobs (%+v), want good alone at attempt 1", len(claimed), claimed)
	}
	var (
		state, class string
		attempt      int
		leased       bool
		availableAt  time.Time
	)
	if err := s.pool.QueryRow(context.Background(), s.sql(`SELECT state, attempt, lease_token IS NOT NULL, available_at, coalesce(last_error->>'class', '')
		FROM {jobs} WHERE id = 'poison'`)).Scan(&state, &attempt, &leased, &availableAt, &class); err != nil {
		t.Fatal(err)
	}
	if state != "queued" || attempt != 0 || leased || class != errandstore.ClassUnreadable {
		t.Errorf("poison after the claim: %s attempt %d leased %t class %q, want queued attempt 0 unleased class %q",
			state, attempt, leased, class, errandstore.ClassUnreadable)
	}
	if wait := availableAt.Sub(before); wait < errandstore.UnreadableRetryDelay-5*time.Second || wait > errandstore.UnreadableRetryDelay+5*time.Second {
		t.Errorf("poison available %v after the claim, want about %v", wait, errandstore.UnreadableRetryDelay)
	}
	again, err := claim(s, ctx, &errandstore.JobClaimParams{Queues: []string{"q"}, Limit: 10, Lease: time.Minute, Owner: "w"})
	if err != nil || len(again) != 0 {
		t.Errorf("second claim: %d jobs, err %v; want none while the poison waits", len(again), err)
	}
}
