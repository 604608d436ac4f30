package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtest"
	"github.com/errandhq/errand/errandtype"
	"github.com/errandhq/errand/postgres/pgtest"
	"github.com/jackc/pgx/v5"
)

// copyTestJobs returns n jobs, without unique keys, whose fields vary as
// an application's do: args not in jsonb's canonical form, delays and
// run-at times finer than a microsecond, deadlines, priorities, ordering
// keys and tags. Ids start with prefix.
func copyTestJobs(prefix string, n int, now time.Time) []*errandstore.JobInsertParams {
	ps := make([]*errandstore.JobInsertParams, n)
	for i := range ps {
		p := &errandstore.JobInsertParams{ID: fmt.Sprintf("%s-%04d", prefix, i), Queue: errand.DefaultQueue, Kind: "k",
			Args: json.RawMessage(fmt.Sprintf(`{"z": %d,  "a": [1, 2.50, "caf\u00e9"], "a": null}`, i)), ArgsVersion: 1 + i%2,
			MaxAttempts: 1 + i%9, Priority: i%5 - 2}
		switch i % 4 {
		case 1:
			p.Delay = time.Duration(i)*time.Second + 1500*time.Nanosecond
		case 2:
			p.RunAt = now.Add(time.Duration(i)*time.Minute + 999*time.Nanosecond).In(time.FixedZone("x", 3600))
		case 3:
			p.MaxAge, p.OrderingKey, p.Tags = time.Hour+700*time.Nanosecond, fmt.Sprintf("o-%d", i%3), []string{"t", fmt.Sprint(i)}
			p.OrderingHold = i%8 == 3
			p.BackoffBase, p.BackoffMax = time.Second, time.Minute
		}
		ps[i] = p
	}
	return ps
}

// plainTestJobs returns n jobs, ids starting with prefix, that give every
// column COPY may leave out its default: the batches COPY writes with the
// fewest columns.
func plainTestJobs(prefix string, n int, _ time.Time) []*errandstore.JobInsertParams {
	ps := make([]*errandstore.JobInsertParams, n)
	for i := range ps {
		ps[i] = &errandstore.JobInsertParams{ID: fmt.Sprintf("%s-%04d", prefix, i), Queue: errand.DefaultQueue, Kind: "k",
			Args: json.RawMessage(`{"b": 1, "a": 2}`), ArgsVersion: 1, MaxAttempts: 25}
	}
	return ps
}

// oneOfEachTestJobs returns plain jobs but for one that sets each column
// COPY may leave out: a batch that needs every column, though most of its
// jobs hold defaults.
func oneOfEachTestJobs(prefix string, n int, now time.Time) []*errandstore.JobInsertParams {
	ps := plainTestJobs(prefix, n, now)
	for i, set := range []func(p *errandstore.JobInsertParams){
		func(p *errandstore.JobInsertParams) { p.ArgsVersion = 3 },
		func(p *errandstore.JobInsertParams) { p.Priority = -1 },
		func(p *errandstore.JobInsertParams) { p.BackoffBase = time.Second },
		func(p *errandstore.JobInsertParams) { p.BackoffMax = time.Minute },
		func(p *errandstore.JobInsertParams) { p.MaxAge = time.Hour },
		func(p *errandstore.JobInsertParams) { p.OrderingKey = "o" },
		func(p *errandstore.JobInsertParams) { p.Tags = []string{"t"} },
		func(p *errandstore.JobInsertParams) { p.OrderingKey, p.OrderingHold = "o", true },
		func(p *errandstore.JobInsertParams) { p.FairnessKey = "f" },
		func(p *errandstore.JobInsertParams) { p.Delay = time.Minute },
	} {
		set(ps[7*i+3])
	}
	return ps
}

// TestCopyMatchesInsert checks that the COPY path stores and returns what
// insertSQL does for the same jobs, field by field, apart from id and seq,
// whichever columns a batch leaves out of its COPY.
func TestCopyMatchesInsert(t *testing.T) {
	for _, c := range []struct {
		name string
		jobs func(prefix string, n int, now time.Time) []*errandstore.JobInsertParams
	}{
		{"varied", copyTestJobs},
		{"plain", plainTestJobs},
		{"one of each", oneOfEachTestJobs},
	} {
		t.Run(c.name, func(t *testing.T) { testCopyMatchesInsert(t, c.jobs) })
	}
}

func testCopyMatchesInsert(t *testing.T, jobs func(prefix string, n int, now time.Time) []*errandstore.JobInsertParams) {
	ctx := t.Context()
	s, clock := openClocked(t)
	const n = 200
	var copied, inserted []errandstore.JobInsertResult
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		if copied, err = s.copyJobs(ctx, tx, s.own, jobs("copy", n, clock.Now())); err != nil {
			return err
		}
		inserted, err = s.insert(ctx, pgxQuerier{tx}, s.own, jobs("insert", n, clock.Now()))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(copied) != n || len(inserted) != n {
		t.Fatalf("%d results from COPY, %d from INSERT; want %d each", len(copied), len(inserted), n)
	}
	for i := range n {
		c, in := copied[i].Job, inserted[i].Job
		if copied[i].Duplicate || c.ID != fmt.Sprintf("copy-%04d", i) {
			t.Fatalf("COPY result %d: %+v", i, copied[i])
		}
		if i > 0 && c.Seq <= copied[i-1].Job.Seq {
			t.Errorf("COPY result %d: seq %d after %d, want seq in the batch's order", i, c.Seq, copied[i-1].Job.Seq)
		}
		stored, err := s.JobGet(ctx, &errandstore.JobGetParams{ID: c.ID})
		if err != nil {
			t.Fatal(err)
		}
		stored.HeldBy = nil
		if !sameArgs(stored.Args, c.Args) || !reflect.DeepEqual(withoutArgs(stored), withoutArgs(c)) {
			t.Errorf("job %s: COPY returned\n\t%+v\nbut stored\n\t%+v", c.ID, c, stored)
		}
		cc, ic := withoutArgs(c), withoutArgs(in)
		cc.ID, cc.Seq, ic.ID, ic.Seq = "", 0, "", 0
		if !sameArgs(c.Args, in.Args) || !reflect.DeepEqual(cc, ic) {
			t.Errorf("job %d: COPY returned\n\t%+v\nINSERT returned\n\t%+v", i, c, in)
		}
	}
}

// openClocked opens a store on a fresh schema whose clock stands at a time
// with nanoseconds, which the store must truncate to microseconds as
// PostgreSQL does; the store closes when t ends.
func openClocked(t *testing.T) (*Store, *errandtest.Clock) {
	t.Helper()
	url := pgtest.URL(t)
	clock := errandtest.NewClock(time.Date(2026, 11, 30, 12, 0, 0, 123456789, time.UTC))
	s, err := Open(t.Context(), url, &Options{Schema: pgtest.Schema(t, url), MaxConns: 2, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, clock
}

// sameArgs reports whether a and b hold the same JSON value: COPY returns
// args as given, insertSQL as jsonb prints them.
func sameArgs(a, b json.RawMessage) bool {
	var x, y any
	return json.Unmarshal(a, &x) == nil && json.Unmarshal(b, &y) == nil && reflect.DeepEqual(x, y)
}

func withoutArgs(j *errandtype.Job) errandtype.Job {
	c := *j
	c.Args = nil
	return c
}

// TestCopyConflict checks that a COPY meeting a taken id, inside the
// caller's transaction, falls back to insertSQL and leaves the transaction
// usable: the duplicates are reported, the rest inserted, and the caller's
// later writes commit with them.
func TestCopyConflict(t *testing.T) {
	ctx := t.Context()
	s := openTestStore(t)
	existing, err := s.JobInsertMany(ctx, &errandstore.JobInsertManyParams{Jobs: copyTestJobs("old", 1, time.Now())})
	if err != nil {
		t.Fatal(err)
	}
	ps := copyTestJobs("new", copyMinJobs*2, time.Now())
	ps[10] = copyTestJobs("old", 1, time.Now())[0]  // an existing job's id
	ps[100] = copyTestJobs("new", 6, time.Now())[5] // the id of job 5 of the batch
	var rs []errandstore.JobInsertResult
	err = s.InTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
		var err error
		if rs, err = s.JobInsertManyTx(ctx, tx, &errandstore.JobInsertManyParams{Jobs: ps}); err != nil {
			return err
		}
		_, err = s.JobInsertManyTx(ctx, tx, &errandstore.JobInsertManyParams{Jobs: copyTestJobs("after", 1, time.Now())})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range rs {
		switch i {
		case 10:
			if !r.Duplicate || r.Job.ID != "old-0000" || r.Job.Seq != existing[0].Job.Seq {
				t.Errorf("job 10: %+v, want a duplicate of %+v", r, existing[0].Job)
			}
		case 100:
			if !r.Duplicate || r.Job.ID != "new-0005" {
				t.Errorf("job 100: %+v, want a duplicate of new-0005", r)
			}
		default:
			if r.Duplicate || r.Job.ID != ps[i].ID {
				t.Errorf("job %d: %+v, want new job %s", i, r, ps[i].ID)
			}
		}
	}
	for _, id := range []string{"new-0000", "new-0127", "after-0000"} {
		if _, err := s.JobGet(ctx, &errandstore.JobGetParams{ID: id}); err != nil {
			t.Errorf("JobGet(%s) after commit: %v", id, err)
		}
	}
}

// TestCopySeqsPlan checks that the query taking a COPY's seqs looks the
// sequence up once, not once per seq: nextval's argument is a parameter
// of the plan, not pg_get_serial_sequence's call.
func TestCopySeqsPlan(t *testing.T) {
	ctx := t.Context()
	s := openTestStore(t)
	rows, err := s.pool.Query(ctx, "EXPLAIN (VERBOSE, COSTS OFF) "+s.sql(copySeqsSQL), s.nowArg(), 100, s.table("errand_jobs"))
	if err != nil {
		t.Fatal(err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	plan := strings.Join(lines, "\n")
	if !strings.Contains(plan, "nextval(") {
		t.Fatalf("no nextval in the plan:\n%s", plan)
	}
	for _, l := range lines {
		if strings.Contains(l, "nextval(") && strings.Contains(l, "pg_get_serial_sequence") {
			t.Errorf("the sequence is looked up for every nextval:\n%s", plan)
			break
		}
	}
	var seqs []int64
	if err := s.pool.QueryRow(ctx, s.sql(copySeqsSQL), s.nowArg(), 100, s.table("errand_jobs")).Scan(new(time.Time), &seqs); err != nil {
		t.Fatal(err)
	}
	if len(seqs) != 100 || seqs[0] >= seqs[99] {
		t.Errorf("took %d seqs, %v..., want 100 ascending", len(seqs), seqs[:min(len(seqs), 3)])
	}
}
