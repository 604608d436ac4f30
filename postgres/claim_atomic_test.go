package postgres

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/errandhq/errand/errandstore"
)

// TestClaimIsAllOrNothing: a claim whose rows cannot all be handed to the
// caller (here a row whose history does not decode) changes nothing, so no
// job is left running with an attempt spent and nobody working it.
func TestClaimIsAllOrNothing(t *testing.T) {
	ctx := t.Context()
	s := openTestStore(t)
	var jobs []*errandstore.JobInsertParams
	for _, id := range []string{"good", "poison"} {
		jobs = append(jobs, &errandstore.JobInsertParams{ID: id, Queue: "q", Kind: "k", Args: json.RawMessage(`{}`), ArgsVersion: 1, MaxAttempts: 3})
	}
	if _, err := s.JobInsertMany(ctx, &errandstore.JobInsertManyParams{Jobs: jobs}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.pool.Exec(ctx, s.sql(`UPDATE {jobs} SET errors = '{"x": 1}'::jsonb WHERE id = 'poison'`)); err != nil {
		t.Fatal(err)
	}
	claimed, err := s.JobClaimMany(ctx, &errandstore.JobClaimParams{Queues: []string{"q"}, Limit: 10, Lease: time.Minute, Owner: "w"})
	if err == nil {
		t.Fatalf("claim of an undecodable row succeeded: %d jobs", len(claimed))
	}
	for _, id := range []string{"good", "poison"} {
		var state string
		var attempt int
		if err := s.pool.QueryRow(context.Background(), s.sql(`SELECT state, attempt FROM {jobs} WHERE id = $1`), id).Scan(&state, &attempt); err != nil {
			t.Fatal(err)
		}
		if state != "queued" || attempt != 0 {
			t.Errorf("job %s after the failed claim: %s attempt %d, want queued attempt 0", id, state, attempt)
		}
	}
}
