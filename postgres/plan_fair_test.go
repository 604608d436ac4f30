package postgres

import (
	"strings"
	"testing"
)

// TestFairClaimPlan pins the fair claim's plan on a never-analyzed table
// where one key has a backlog of 20,000 ready jobs and 50 keys one job each,
// in both plan-cache modes: the jobs with a key are read through the fair
// index, those without one through the claim index's range of them, and
// nothing reads the whole table or sorts a key's backlog (only the
// candidates, at most the limit per key, and the keys served are sorted).
func TestFairClaimPlan(t *testing.T) {
	ctx := t.Context()
	s := openTestStore(t)
	for _, q := range []string{
		`ALTER TABLE {jobs} SET (autovacuum_enabled = false)`,
		`INSERT INTO {jobs} (id, queue, kind, args, priority, state, max_attempts, available_at, created_at, fairness_key)
			SELECT 'hot-' || g, 'default', 'k', '{}', 0, 'queued', 3, now() - g * interval '1 millisecond', now(), 'hot'
			FROM generate_series(1, 20000) g`,
		`INSERT INTO {jobs} (id, queue, kind, args, priority, state, max_attempts, available_at, created_at, fairness_key)
			SELECT 't-' || g, 'default', 'k', '{}', 0, 'queued', 3, now(), now(), 'tenant-' || g
			FROM generate_series(1, 50) g`,
		// Jobs without a key, older than every keyed one: the claim
		// index's range of them, not a walk past the keyed jobs.
		`INSERT INTO {jobs} (id, queue, kind, args, priority, state, max_attempts, available_at, created_at)
			SELECT 'none-' || g, 'default', 'k', '{}', 0, 'queued', 3, now() - interval '1 hour', now()
			FROM generate_series(1, 2000) g`,
	} {
		if _, err := s.pool.Exec(ctx, s.sql(q)); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
		plan := explainPrepared(t, conn.Conn(), mode, s.sql(fairClaimSQL),
			"timestamptz, bigint, text, text, text[], integer", `NULL, 60000000, 'w', 'default', '{k}', 10`)
		if strings.Contains(plan, "Seq Scan on errand_jobs") {
			t.Errorf("%s: plan reads the whole table:\n%s", mode, plan)
		}
		for _, index := range []string{"errand_jobs_fair", "errand_jobs_claim"} {
			if !strings.Contains(plan, index) {
				t.Errorf("%s: plan does not read %s:\n%s", mode, index, plan)
			}
		}
		for _, line := range strings.Split(plan, "\n") {
			if strings.Contains(line, "Sort Key: j.") || strings.Contains(line, "Sort Key: j_") {
				t.Errorf("%s: plan sorts jobs the index should deliver in order (%s):\n%s", mode, strings.TrimSpace(line), plan)
			}
		}
	}
	// Run it: the claim takes the backlog's first job, the first job
	// without a key and one of each of eight other keys.
	rows, err := s.pool.Query(ctx, s.sql(fairClaimSQL), nil, int64(60e6), "w", "default", nil, 10)
	if err != nil {
		t.Fatal(err)
	}
	jobs, err := scanJobs(rows, jobScanner())
	if err != nil {
		t.Fatal(err)
	}
	hot, none := 0, 0
	for _, j := range jobs {
		switch {
		case j.FairnessKey == nil:
			none++
		case *j.FairnessKey == "hot":
			hot++
		}
	}
	if len(jobs) != 10 || hot != 1 || none != 1 {
		t.Fatalf("fair claim took %d jobs, %d of the hot key and %d without one; want 10, 1, 1", len(jobs), hot, none)
	}
}
