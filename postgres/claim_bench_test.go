package postgres_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/postgres"
	"github.com/errandhq/errand/postgres/pgtest"
	"github.com/jackc/pgx/v5"
)

// BenchmarkClaimAck measures one job's claim and acknowledgment, each in
// its own transaction, on a queue table with no finished rows and then with
// 1,000,000 succeeded rows present. The partial claim index covers only
// claimable rows, so the two should cost the same; a claim that scanned
// finished rows would show here. Setup (the million rows, inserted by one
// INSERT ... SELECT, then VACUUM ANALYZE) takes well under a minute.
//
//	ERRAND_TEST_POSTGRES_URL=... go test -run '^$' -bench ClaimAck -benchtime 3000x ./postgres/
func BenchmarkClaimAck(b *testing.B) {
	url := pgtest.URL(b)
	ctx := context.Background()
	schema := pgtest.Schema(b, url)
	s, err := postgres.Open(ctx, url, &postgres.Options{Schema: schema, MaxConns: 2})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	jobs := pgx.Identifier{schema, "errand_jobs"}.Sanitize()
	exec := func(b *testing.B, sql string, args ...any) {
		b.Helper()
		if _, err := s.Pool().Exec(ctx, sql, args...); err != nil {
			b.Fatalf("%s: %v", sql, err)
		}
	}
	// insert adds n rows in one statement, with the columns the jobs table
	// requires (postgres/migrations/001_init.sql); the rest take defaults.
	insert := func(b *testing.B, prefix, state string, n int) {
		b.Helper()
		exec(b, `INSERT INTO `+jobs+` (id, queue, kind, args, state, attempt, max_attempts,
				available_at, created_at, attempted_at, finished_at)
			SELECT $1 || g, 'default', 'bench', '{}'::jsonb, $2::text,
				CASE WHEN $2::text = 'succeeded' THEN 1 ELSE 0 END, 3,
				now(), now(),
				CASE WHEN $2::text = 'succeeded' THEN now() END,
				CASE WHEN $2::text = 'succeeded' THEN now() END
			FROM generate_series(1, $3::int) g`, prefix, state, n)
	}
	runs := 0
	claimAck := func(b *testing.B) {
		runs++
		insert(b, fmt.Sprintf("q%d-", runs), "queued", b.N)
		exec(b, `VACUUM ANALYZE `+jobs)
		params := &errandstore.JobClaimParams{Queues: []string{errand.DefaultQueue}, Kinds: []string{"bench"},
			Limit: 1, Lease: time.Minute, Owner: "bench"}
		b.ResetTimer()
		for range b.N {
			js, err := s.JobClaimMany(ctx, params)
			if err != nil || len(js) != 1 {
				b.Fatalf("claim: %v, %v", js, err)
			}
			rs, err := s.JobRecordOutcomes(ctx, &errandstore.JobRecordOutcomesParams{Outcomes: []*errandstore.JobOutcome{{
				JobLease: errandstore.JobLease{ID: js[0].ID, LeaseToken: *js[0].LeaseToken},
				Kind:     errandstore.OutcomeSucceeded,
			}}})
			if err != nil || rs[0].Err != nil {
				b.Fatalf("ack: %+v, %v", rs, err)
			}
		}
	}

	b.Run("empty", claimAck)

	start := time.Now()
	insert(b, "done-", "succeeded", 1_000_000)
	exec(b, `VACUUM ANALYZE `+jobs)
	b.Logf("inserted 1,000,000 succeeded rows and vacuumed in %s", time.Since(start).Round(time.Millisecond))

	b.Run("1M-finished", claimAck)
}

// BenchmarkClaimBatch measures a worker's steady state: claim 100 jobs in
// one call, then acknowledge them in one call, on a table that holds only
// the jobs still to claim. What it shows is mostly round trips: a claim is
// one batch of statements (BEGIN, its sweeps and the claim), then COMMIT.
//
//	ERRAND_TEST_POSTGRES_URL=... go test -run '^$' -bench ClaimBatch -count 6 ./postgres/
func BenchmarkClaimBatch(b *testing.B) {
	const batch = 100
	url := pgtest.URL(b)
	ctx := context.Background()
	s, err := postgres.Open(ctx, url, &postgres.Options{Schema: pgtest.Schema(b, url), MaxConns: 2})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	jobs := make([]*errandstore.JobInsertParams, b.N*batch)
	for i := range jobs {
		jobs[i] = &errandstore.JobInsertParams{ID: fmt.Sprintf("b%09d", i), Queue: errand.DefaultQueue, Kind: "bench",
			Args: []byte(`{}`), ArgsVersion: 1, MaxAttempts: 3}
	}
	for i := 0; i < len(jobs); i += 1000 {
		if _, err := s.JobInsertMany(ctx, &errandstore.JobInsertManyParams{Jobs: jobs[i:min(i+1000, len(jobs))]}); err != nil {
			b.Fatal(err)
		}
	}
	params := &errandstore.JobClaimParams{Queues: []string{errand.DefaultQueue}, Kinds: []string{"bench"},
		Limit: batch, Lease: time.Minute, Owner: "bench"}
	b.ResetTimer()
	for range b.N {
		js, err := s.JobClaimMany(ctx, params)
		if err != nil || len(js) != batch {
			b.Fatalf("claim: %d jobs, %v", len(js), err)
		}
		outcomes := make([]*errandstore.JobOutcome, len(js))
		for i, j := range js {
			outcomes[i] = &errandstore.JobOutcome{JobLease: errandstore.JobLease{ID: j.ID, LeaseToken: *j.LeaseToken}, Kind: errandstore.OutcomeSucceeded}
		}
		rs, err := s.JobRecordOutcomes(ctx, &errandstore.JobRecordOutcomesParams{Outcomes: outcomes})
		if err != nil || rs[0].Err != nil {
			b.Fatalf("ack: %v", err)
		}
	}
	b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "jobs/s")
}
