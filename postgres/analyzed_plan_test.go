package postgres

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
	"github.com/jackc/pgx/v5"
)

// analyzedWithNoneRunning returns a store whose table of 20,000 waiting
// jobs was analyzed while none ran, as autovacuum finds a queue between
// bursts (or, unless analyze, never analyzed), and the first claim of
// 1,000 of them made after that.
func analyzedWithNoneRunning(t *testing.T, analyze bool) (*Store, []*errandtype.Job) {
	t.Helper()
	ctx := t.Context()
	s := openTestStore(t)
	for b := range 20 {
		ps := make([]*errandstore.JobInsertParams, 1000)
		for i := range ps {
			ps[i] = &errandstore.JobInsertParams{ID: fmt.Sprintf("j%d-%d", b, i), Queue: errand.DefaultQueue,
				Kind: "k", Args: json.RawMessage(`{}`), ArgsVersion: 1, MaxAttempts: 3}
		}
		if _, err := s.JobInsertMany(ctx, &errandstore.JobInsertManyParams{Jobs: ps}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.pool.Exec(ctx, s.sql(`ALTER TABLE {jobs} SET (autovacuum_enabled = false)`)); err != nil {
		t.Fatal(err)
	}
	if analyze {
		if _, err := s.pool.Exec(ctx, s.sql(`ANALYZE {jobs}`)); err != nil {
			t.Fatal(err)
		}
	}
	jobs, err := s.JobClaimMany(ctx, &errandstore.JobClaimParams{Queues: []string{errand.DefaultQueue}, Kinds: []string{"k"},
		Owner: "w", Lease: time.Minute, Limit: 1000})
	if err != nil || len(jobs) != 1000 {
		t.Fatalf("claimed %d jobs, %v", len(jobs), err)
	}
	return s, jobs
}

// explainRolledBack runs query under EXPLAIN ANALYZE in a transaction it
// rolls back, after the statements of before, and returns the plan.
func explainRolledBack(t *testing.T, s *Store, before []string, query string, args ...any) string {
	t.Helper()
	ctx := t.Context()
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	for _, q := range before {
		if _, err := tx.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	rows, err := tx.Query(ctx, "EXPLAIN (ANALYZE, BUFFERS) "+query, args...)
	if err != nil {
		t.Fatalf("explain: %v\n%s", err, query)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(lines, "\n")
}

// TestFencedWritesAfterAnalyze pins the plans of the writes fenced by a
// lease (outcomes in each of their forms, heartbeats, the effect ledger's
// check) on a table analyzed while no job ran and then holding 1,000
// running jobs, and on one never analyzed: each looks its jobs up by id.
// With the fence's state and time as constants (see leaseRows), the
// planner trusted the statistics, expected one running job, read the
// running jobs first and matched every one against every outcome of the
// batch; with its conditions as equalities (see leaseFence), it read the
// whole table to hash or sort it.
func TestFencedWritesAfterAnalyze(t *testing.T) {
	for _, analyze := range []bool{true, false} {
		t.Run(fmt.Sprintf("analyzed=%v", analyze), func(t *testing.T) { testFencedWrites(t, analyze) })
	}
}

func testFencedWrites(t *testing.T, analyze bool) {
	s, jobs := analyzedWithNoneRunning(t, analyze)
	outcomes := func(from, n int, kind errandstore.OutcomeKind, del func(i int) bool) *errandstore.JobRecordOutcomesParams {
		p := &errandstore.JobRecordOutcomesParams{}
		for i, j := range jobs[from : from+n] {
			o := &errandstore.JobOutcome{JobLease: errandstore.JobLease{ID: j.ID, LeaseToken: *j.LeaseToken}, Kind: kind, Delete: del(i)}
			if kind.AppendsError() {
				o.Error = &errandtype.AttemptError{Attempt: 1, Class: "error", Message: "m"}
			}
			p.Outcomes = append(p.Outcomes, o)
		}
		return p
	}
	none := func(int) bool { return false }
	writes := map[string]*errandstore.JobRecordOutcomesParams{
		"successes kept":    outcomes(0, 500, errandstore.OutcomeSucceeded, none),
		"successes deleted": outcomes(0, 500, errandstore.OutcomeSucceeded, func(int) bool { return true }),
		"some deleted":      outcomes(0, 500, errandstore.OutcomeSucceeded, func(i int) bool { return i%2 == 0 }),
		"failures":          outcomes(500, 500, errandstore.OutcomeRetry, none),
	}
	plans := map[string]string{}
	for name, p := range writes {
		c, err := newOutcomeColumns(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, follow := range []bool{false, true} {
			q, args := s.outcomesStatement(&c, follow)
			plans[fmt.Sprintf("%s, follow %v", name, follow)] = explainRolledBack(t, s, nil, q, args...)
		}
	}
	ids, tokens := make([]string, len(jobs)), make([]string, len(jobs))
	for i, j := range jobs {
		ids[i], tokens[i] = j.ID, *j.LeaseToken
	}
	plans["heartbeat"] = explainRolledBack(t, s, nil, s.sql(heartbeatSQL), s.nowArg(), int64(60e6), ids, tokens)
	plans["owns the job"] = explainRolledBack(t, s, nil, s.sql(ownsJobSQL), s.nowArg(), ids[0], tokens[0])
	joinFiltered := regexp.MustCompile(`Rows Removed by Join Filter: (\d+)`)
	for name, plan := range plans {
		if testing.Verbose() {
			t.Logf("%s:\n%s", name, plan)
		}
		removed := 0
		for _, m := range joinFiltered.FindAllStringSubmatch(plan, -1) {
			n, _ := strconv.Atoi(m[1])
			removed += n
		}
		if !strings.Contains(plan, "Index Scan using errand_jobs_id_key") || strings.Contains(plan, "Seq Scan on errand_jobs") || removed > 0 {
			t.Errorf("%s: does not look each job up by its id (%d pairs of job and lease thrown away):\n%s", name, removed, plan)
		}
	}
}

// TestClaimWithoutJIT runs a claim's batch, as a worker sends it, on a
// table analyzed while its 20,000 jobs waited: the claim is not
// JIT-compiled (see claimNoJIT).
func TestClaimWithoutJIT(t *testing.T) {
	s, _ := analyzedWithNoneRunning(t, true)
	p := &errandstore.JobClaimParams{Queues: []string{errand.DefaultQueue}, Kinds: []string{"k"}, Owner: "w", Lease: time.Minute, Limit: 500}
	next := &errandstore.JobNextDueParams{Queues: p.Queues, Kinds: p.Kinds}
	b := s.claimBatch(p, next, true, true)
	var before []string
	claims := 0
	for _, q := range b.QueuedQueries {
		switch {
		case q.SQL == "BEGIN":
		case strings.HasPrefix(q.SQL, "SET"):
			before = append(before, q.SQL)
		case strings.HasPrefix(q.SQL, "UPDATE") && strings.Contains(q.SQL, "lease_owner"):
			claims++
			plan := explainRolledBack(t, s, before, q.SQL, q.Arguments...)
			if testing.Verbose() {
				t.Logf("claim:\n%s", plan)
			}
			if strings.Contains(plan, "JIT:") {
				t.Errorf("the claim is JIT-compiled:\n%s", plan)
			}
		}
	}
	if claims != 1 {
		t.Fatalf("found %d claims in the batch, want 1", claims)
	}
}
