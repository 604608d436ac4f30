package postgres

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/postgres/pgtest"
)

// awkward are values a text array literal must quote or escape to keep.
var awkward = []string{"", "plain", `a"quote`, `back\slash`, `\"`, "comma,brace{}", " spaced ", "NULL", "ünï©ødé", "tab\tnewline\n"}

// TestTextArrayReadsBack: the server reads textArray's literal as the
// strings it was made of, in their order.
func TestTextArrayReadsBack(t *testing.T) {
	url := pgtest.URL(t)
	ctx := t.Context()
	s, err := Open(ctx, url, &Options{Schema: pgtest.Schema(t, url), MaxConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, vals := range [][]string{{}, {""}, awkward} {
		var got []string
		if err := s.pool.QueryRow(ctx, `SELECT coalesce($1::text[], '{}')`, textArray(vals)).Scan(&got); err != nil {
			t.Fatalf("%q: %v", vals, err)
		}
		if !slices.Equal(got, vals) && !(len(got) == 0 && len(vals) == 0) {
			t.Fatalf("sent %q, the server read %q", vals, got)
		}
	}
}

// TestPlainOutcomesOfAwkwardIDs: a batch of successes, whose ids travel
// as array literals, records each outcome on its own job and answers it
// in the batch's order, whatever the ids hold; a stale token in the batch
// loses its lease alone.
func TestPlainOutcomesOfAwkwardIDs(t *testing.T) {
	url := pgtest.URL(t)
	ctx := t.Context()
	s, err := Open(ctx, url, &Options{Schema: pgtest.Schema(t, url), MaxConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ids := []string{"plain", `a"quote`, `back\slash`, `\"`, "comma,brace{}", "NULL", "ünï©ødé"}
	var params []*errand.JobInsertParams
	for _, id := range ids {
		params = append(params, &errand.JobInsertParams{ID: id, Queue: "q", Kind: "k", Args: json.RawMessage(`{}`), ArgsVersion: 1, MaxAttempts: 3})
	}
	if _, err := s.JobInsertMany(ctx, &errand.JobInsertManyParams{Jobs: params}); err != nil {
		t.Fatal(err)
	}
	jobs, err := s.JobClaimMany(ctx, &errand.JobClaimParams{Queues: []string{"q"}, Limit: len(ids), Lease: time.Minute, Owner: "w"})
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != len(ids) {
		t.Fatalf("claimed %d jobs, want %d", len(jobs), len(ids))
	}
	// In reverse order of id, so that the store's sorting by id matters,
	// with a stale token for the second.
	slices.SortFunc(jobs, func(a, b *errand.Job) int { return strings.Compare(b.ID, a.ID) })
	const stale = 1
	outcomes := make([]*errand.JobOutcome, len(jobs))
	for i, j := range jobs {
		token := *j.LeaseToken
		if i == stale {
			token = "not-the-token"
		}
		outcomes[i] = &errand.JobOutcome{JobLease: errand.JobLease{ID: j.ID, LeaseToken: token}, Kind: errand.OutcomeSucceeded}
	}
	rs, err := s.JobRecordOutcomes(ctx, &errand.JobRecordOutcomesParams{Outcomes: outcomes})
	if err != nil {
		t.Fatal(err)
	}
	for i, j := range jobs {
		got, err := s.JobGet(ctx, &errand.JobGetParams{ID: j.ID})
		if err != nil {
			t.Fatal(err)
		}
		want := errand.StateSucceeded
		if i == stale {
			want = errand.StateRunning
			if !errors.Is(rs[i].Err, errand.ErrLeaseLost) {
				t.Errorf("outcome %d (%q) with a stale token: %+v, want its lease lost", i, j.ID, rs[i])
			}
		} else if rs[i].Err != nil || rs[i].State != errand.StateSucceeded {
			t.Errorf("outcome %d (%q): %+v, want succeeded", i, j.ID, rs[i])
		}
		if got.State != want {
			t.Errorf("job %q is %s, want %s", j.ID, got.State, want)
		}
	}
}
