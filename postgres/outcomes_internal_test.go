package postgres

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
	"github.com/jackc/pgx/v5"
)

// awkward are values a text array literal must quote or escape to keep.
var awkward = []string{"", "plain", `a"quote`, `back\slash`, `\"`, "comma,brace{}", " spaced ", "NULL", "ünï©ødé", "tab\tnewline\n"}

// TestTextArrayReadsBack: the server reads textArray's literal as the
// strings it was made of, in their order.
func TestTextArrayReadsBack(t *testing.T) {
	ctx := t.Context()
	s := openTestStore(t)
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

// claimJobs enqueues a job of each id in queue q and claims them all.
func claimJobs(t *testing.T, s *Store, ids ...string) []*errandtype.Job {
	t.Helper()
	var params []*errandstore.JobInsertParams
	for _, id := range ids {
		params = append(params, &errandstore.JobInsertParams{ID: id, Queue: "q", Kind: "k", Args: json.RawMessage(`{}`), ArgsVersion: 1, MaxAttempts: 3})
	}
	if _, err := s.JobInsertMany(t.Context(), &errandstore.JobInsertManyParams{Jobs: params}); err != nil {
		t.Fatal(err)
	}
	jobs, err := s.JobClaimMany(t.Context(), &errandstore.JobClaimParams{Queues: []string{"q"}, Limit: len(ids), Lease: time.Minute, Owner: "w"})
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != len(ids) {
		t.Fatalf("claimed %d jobs, want %d", len(jobs), len(ids))
	}
	return jobs
}

// TestPlainOutcomesOfAwkwardIDs: a batch of successes, whose ids travel
// as array literals, records each outcome on its own job and answers it
// in the batch's order, whatever the ids hold; a stale token in the batch
// loses its lease alone.
func TestPlainOutcomesOfAwkwardIDs(t *testing.T) {
	ctx := t.Context()
	s := openTestStore(t)
	jobs := claimJobs(t, s, "plain", `a"quote`, `back\slash`, `\"`, "comma,brace{}", "NULL", "ünï©ødé")
	// In reverse order of id, so that the store's sorting by id matters,
	// with a stale token for the second.
	slices.SortFunc(jobs, func(a, b *errandtype.Job) int { return strings.Compare(b.ID, a.ID) })
	const stale = 1
	outcomes := make([]*errandstore.JobOutcome, len(jobs))
	for i, j := range jobs {
		token := *j.LeaseToken
		if i == stale {
			token = "not-the-token"
		}
		outcomes[i] = &errandstore.JobOutcome{JobLease: errandstore.JobLease{ID: j.ID, LeaseToken: token}, Kind: errandstore.OutcomeSucceeded}
	}
	rs, err := s.JobRecordOutcomes(ctx, &errandstore.JobRecordOutcomesParams{Outcomes: outcomes})
	if err != nil {
		t.Fatal(err)
	}
	for i, j := range jobs {
		got, err := s.JobGet(ctx, &errandstore.JobGetParams{ID: j.ID})
		if err != nil {
			t.Fatal(err)
		}
		want := errandtype.StateSucceeded
		if i == stale {
			want = errandtype.StateRunning
			if !errors.Is(rs[i].Err, errandtype.ErrLeaseLost) {
				t.Errorf("outcome %d (%q) with a stale token: %+v, want its lease lost", i, j.ID, rs[i])
			}
		} else if rs[i].Err != nil || rs[i].State != errandtype.StateSucceeded {
			t.Errorf("outcome %d (%q): %+v, want succeeded", i, j.ID, rs[i])
		}
		if got.State != want {
			t.Errorf("job %q is %s, want %s", j.ID, got.State, want)
		}
	}
}

// TestOutcomeRowsDecodeAsStored: the results of a mixed batch (a success,
// a retry and a snooze after a delay, a death, a stale token), decoded
// from the rows' wire values, say what the jobs now hold; and the rows
// read through Scan, in the text format, decode the same.
func TestOutcomeRowsDecodeAsStored(t *testing.T) {
	ctx := t.Context()
	s := openTestStore(t)
	jobs := claimJobs(t, s, "ok", "again", "later", "gone", "stale")
	fail := &errandtype.AttemptError{Attempt: 1, Class: "error", Message: "boom"}
	kinds := map[string]*errandstore.JobOutcome{
		"ok":    {Kind: errandstore.OutcomeSucceeded},
		"again": {Kind: errandstore.OutcomeRetry, Delay: 90 * time.Second, Error: fail},
		"later": {Kind: errandstore.OutcomeSnooze, Delay: time.Hour},
		"gone":  {Kind: errandstore.OutcomeDead, Error: fail},
		"stale": {Kind: errandstore.OutcomeSucceeded},
	}
	var outcomes []*errandstore.JobOutcome
	for _, j := range jobs {
		o := kinds[j.ID]
		o.JobLease = errandstore.JobLease{ID: j.ID, LeaseToken: *j.LeaseToken}
		if j.ID == "stale" {
			o.LeaseToken = "not-the-token"
		}
		outcomes = append(outcomes, o)
	}
	rs, err := s.JobRecordOutcomes(ctx, &errandstore.JobRecordOutcomesParams{Outcomes: outcomes})
	if err != nil {
		t.Fatal(err)
	}
	for i, o := range outcomes {
		got, err := s.JobGet(ctx, &errandstore.JobGetParams{ID: o.ID})
		if err != nil {
			t.Fatal(err)
		}
		if o.ID == "stale" {
			if !errors.Is(rs[i].Err, errandtype.ErrLeaseLost) {
				t.Errorf("%s: %+v, want its lease lost", o.ID, rs[i])
			}
			continue
		}
		if rs[i].Err != nil || rs[i].State != got.State || !rs[i].AvailableAt.Equal(got.AvailableAt) || rs[i].AvailableAt.Location() != time.UTC {
			t.Errorf("%s: result %+v, the job holds %s available at %s", o.ID, rs[i], got.State, got.AvailableAt)
		}
	}

	// The same rows in the text format go through Scan.
	query := `SELECT o.ord, o.state, o.at FROM (VALUES (2::bigint, 'retrying', '2001-02-03 04:05:06.7Z'::timestamptz), (1, 'succeeded', '2026-12-03 10:00:00.123456Z'::timestamptz)) AS o(ord, state, at)`
	decode := func(formats pgx.QueryResultFormats) []errandstore.OutcomeResult {
		t.Helper()
		rows, err := s.pool.Query(ctx, query, formats)
		if err != nil {
			t.Fatal(err)
		}
		got := make([]errandstore.OutcomeResult, 2)
		if err := scanOutcomeRows(rows, got, func(ord int64) (int, error) { return int(ord) - 1, nil }); err != nil {
			t.Fatal(err)
		}
		return got
	}
	binary, text := decode(pgx.QueryResultFormats{pgx.BinaryFormatCode}), decode(pgx.QueryResultFormats{pgx.TextFormatCode})
	for i := range binary {
		if binary[i].State != text[i].State || !binary[i].AvailableAt.Equal(text[i].AvailableAt) || binary[i].State == "" {
			t.Errorf("row %d: %+v from the wire values, %+v through Scan", i, binary[i], text[i])
		}
	}
	if want := time.Date(2026, 12, 3, 10, 0, 0, 123456000, time.UTC); !binary[0].AvailableAt.Equal(want) || binary[0].State != errandtype.StateSucceeded {
		t.Errorf("row 1: %+v, want succeeded at %s", binary[0], want)
	}
	// A state the store does not have is an error, not a result.
	rows, err := s.pool.Query(ctx, `SELECT 1::bigint, 'lost', now()`, pgx.QueryResultFormats{pgx.BinaryFormatCode})
	if err != nil {
		t.Fatal(err)
	}
	if err := scanOutcomeRows(rows, make([]errandstore.OutcomeResult, 1), func(int64) (int, error) { return 0, nil }); err == nil {
		t.Error("a row with state 'lost' decoded without an error")
	}
}
