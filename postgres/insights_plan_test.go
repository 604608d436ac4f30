package postgres

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
	"github.com/errandhq/errand/postgres/pgtest"
	"github.com/jackc/pgx/v5"
)

// loadInsightsJobs bulk-loads 100,000 jobs over the last day into a table
// autovacuum never analyzes: 62% succeeded, 25% queued with no history, 5%
// dead after three failures, 5% retrying after one, 1% running, and 2%
// replayed and queued again after two failures, with their audit and 2,000
// cancels. With analyze, it then analyzes the tables.
func loadInsightsJobs(tb testing.TB, s *Store, analyze bool) {
	tb.Helper()
	steps := []string{`ALTER TABLE {jobs} SET (autovacuum_enabled = false)`,
		`INSERT INTO {jobs} (id, queue, kind, args, state, attempt, max_attempts, available_at, created_at,
			attempted_at, finished_at, last_error, errors, replays)
		SELECT 'j' || g, 'q' || g % 4, 'k' || g % 7, '{"n":1}', st, 1, 3, t - interval '1 second', t - interval '2 seconds',
			t - interval '1 second', CASE WHEN st IN ('succeeded', 'dead') THEN t END,
			CASE WHEN nerr > 0 THEN jsonb_build_object('class', 'error', 'message', 'failed', 'at', t) END,
			CASE WHEN nerr > 0 THEN (SELECT jsonb_agg(jsonb_build_object('attempt', i, 'replay', 0,
				'at', t - (nerr - i) * interval '1 second', 'class', 'error', 'message', 'failed')) FROM generate_series(1, nerr) i)
				ELSE '[]' END,
			CASE WHEN g % 100 >= 98 THEN 1 ELSE 0 END
		FROM (SELECT g, now() - ((g::bigint * 104729) % 86400) * interval '1 second' AS t,
				CASE WHEN g % 100 < 60 THEN 'succeeded' WHEN g % 100 < 85 THEN 'queued' WHEN g % 100 < 90 THEN 'dead'
					WHEN g % 100 < 95 THEN 'retrying' WHEN g % 100 < 96 THEN 'running' WHEN g % 100 < 98 THEN 'succeeded'
					ELSE 'queued' END AS st,
				CASE WHEN g % 100 < 85 THEN 0 WHEN g % 100 < 90 THEN 3 WHEN g % 100 < 95 THEN 1 WHEN g % 100 < 98 THEN 0
					ELSE 2 END AS nerr
			FROM generate_series(1, 100000) g) x`,
		// The audit of the replays, and of as many cancels.
		`INSERT INTO {audit} (action, job_id, operator, reason, at, prior_state, replay)
			SELECT 'replay', id, 'ana', 'fixed', created_at, 'dead', 1 FROM {jobs} WHERE replays = 1
			UNION ALL
			SELECT 'cancel', 'c' || g, 'ana', 'r', now(), 'queued', 0 FROM generate_series(1, 2000) g`,
	}
	if analyze {
		steps = append(steps, `ANALYZE {jobs}`, `ANALYZE {audit}`)
	}
	for _, q := range steps {
		if _, err := s.pool.Exec(context.Background(), s.sql(q)); err != nil {
			tb.Fatalf("%s: %v", q, err)
		}
	}
}

// TestInsightsPlanWithoutStatistics runs the queries of the insights and
// of the queue statistics on 100,000 jobs, before and after the table is
// analyzed, in the transactions their store methods read in, and requires
// that none is JIT-compiled: once the table was analyzed, the planner
// charged the depth query for a subplan per waiting job, its estimate
// passed jit_above_cost, and compiling took 270 ms of a 40 ms query.
func TestInsightsPlanWithoutStatistics(t *testing.T) {
	onLoadedStores(t, func(t *testing.T, s *Store) {
		now := time.Now()
		for _, q := range []struct {
			name, sql string
			args      []any
		}{
			{"depth", insightsDepthSQL, []any{now}},
			{"finished", insightsFinishedSQL, []any{now.Add(-time.Minute), now.Add(-5 * time.Minute), now.Add(-time.Hour), now.Add(-24 * time.Hour)}},
			{"failures", insightsFailuresSQL, []any{now.Add(-errandstore.InsightsWindow)}},
			{"samples", insightsSamplesSQL, []any{now.Add(-errandstore.InsightsWindow), errandstore.DefaultInsightsSample}},
			{"queue counts", queueCountsSQL, nil},
			{"queue ages", queueAgesSQL, []any{nil}},
		} {
			text := explainAnalyzed(t, s, q.name, q.sql, q.args)
			if strings.Contains(text, "JIT:") {
				t.Errorf("%s: JIT-compiled:\n%s", q.name, text)
			}
			// The queued jobs with an error are found through their
			// index, not among every queued job.
			if q.name == "failures" && !strings.Contains(text, "errand_jobs_requeued") {
				t.Errorf("%s: the queued jobs are not read through errand_jobs_requeued:\n%s", q.name, text)
			}
		}
	})
}

// explainAnalyzed runs query under EXPLAIN (ANALYZE, BUFFERS) in the
// transaction the operators' reads take (see operatorTx), logs the plan
// when verbose, and returns it.
func explainAnalyzed(t *testing.T, s *Store, name, query string, args []any) string {
	t.Helper()
	var plan []string
	err := s.insightsTx(t.Context(), func(tx pgx.Tx) error {
		rows, err := tx.Query(t.Context(), "EXPLAIN (ANALYZE, BUFFERS) "+s.sql(query), args...)
		if err != nil {
			return err
		}
		plan, err = pgx.CollectRows(rows, pgx.RowTo[string])
		return err
	})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	text := strings.Join(plan, "\n")
	if testing.Verbose() {
		t.Logf("%s:\n%s", name, text)
	}
	return text
}

// onLoadedStores runs fn on a store of 100,000 jobs (loadInsightsJobs)
// never analyzed, and on one analyzed.
func onLoadedStores(t *testing.T, fn func(t *testing.T, s *Store)) {
	url := pgtest.URL(t)
	for _, analyze := range []bool{false, true} {
		name := "never-analyzed"
		if analyze {
			name = "analyzed"
		}
		t.Run(name, func(t *testing.T) {
			s, err := Open(t.Context(), url, &Options{Schema: pgtest.Schema(t, url), MaxConns: 2})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			loadInsightsJobs(t, s, analyze)
			fn(t, s)
		})
	}
}

// BenchmarkJobInsights reads the insights and the queue statistics of
// 100,000 jobs, on a table never analyzed and on an analyzed one.
func BenchmarkJobInsights(b *testing.B) {
	url := pgtest.URL(b)
	for _, analyze := range []bool{false, true} {
		name := "never-analyzed"
		if analyze {
			name = "analyzed"
		}
		b.Run(name, func(b *testing.B) {
			ctx := context.Background()
			s, err := Open(ctx, url, &Options{Schema: pgtest.Schema(b, url), MaxConns: 2})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			loadInsightsJobs(b, s, analyze)
			b.Run("insights", func(b *testing.B) {
				for b.Loop() {
					if _, err := s.JobInsights(ctx, &errandstore.JobInsightsParams{}); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run("queue-stats", func(b *testing.B) {
				for b.Loop() {
					if _, err := s.QueueStats(ctx, &errandstore.QueueStatsParams{}); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}

// TestRequeuedIndexOffTheHotPath checks that enqueuing, claiming,
// acknowledging and retrying jobs adds nothing to errand_jobs_requeued:
// after 2,000 jobs went through, the index is still its one metapage. A
// replay adds its job.
func TestRequeuedIndexOffTheHotPath(t *testing.T) {
	url := pgtest.URL(t)
	ctx := t.Context()
	s, err := Open(ctx, url, &Options{Schema: pgtest.Schema(t, url), MaxConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	size := func() int64 {
		var n int64
		if err := s.pool.QueryRow(ctx, `SELECT pg_relation_size($1::regclass)`, s.table("errand_jobs_requeued")).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	empty := size()
	p := &errandstore.JobInsertManyParams{}
	for i := range 2000 {
		p.Jobs = append(p.Jobs, &errandstore.JobInsertParams{ID: fmt.Sprint("j", i), Queue: "default", Kind: "k", Args: []byte(`{}`), ArgsVersion: 1, MaxAttempts: 2})
	}
	if _, err := s.JobInsertMany(ctx, p); err != nil {
		t.Fatal(err)
	}
	claim := func() []*errandtype.Job {
		js, err := s.JobClaimMany(ctx, &errandstore.JobClaimParams{Queues: []string{"default"}, Limit: 2000, Lease: time.Minute, Owner: "w"})
		if err != nil {
			t.Fatal(err)
		}
		return js
	}
	record := func(js []*errandtype.Job, kind errandstore.OutcomeKind) {
		o := &errandstore.JobRecordOutcomesParams{}
		for _, j := range js {
			out := &errandstore.JobOutcome{JobLease: errandstore.JobLease{ID: j.ID, LeaseToken: *j.LeaseToken}, Kind: kind}
			if kind != errandstore.OutcomeSucceeded {
				out.Error = &errandtype.AttemptError{Attempt: j.Attempt, Class: errand.ClassError, Message: "failed"}
			}
			o.Outcomes = append(o.Outcomes, out)
		}
		if _, err := s.JobRecordOutcomes(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	js := claim()
	record(js[:1000], errandstore.OutcomeSucceeded)
	record(js[1000:], errandstore.OutcomeRetry)
	js = claim()
	record(js[:500], errandstore.OutcomeSucceeded)
	record(js[500:], errandstore.OutcomeDead)
	if got := size(); got != empty {
		t.Errorf("errand_jobs_requeued grew from %d to %d bytes on the hot path", empty, got)
	}
	if _, err := s.JobReplay(ctx, &errandstore.JobReplayParams{ID: js[500].ID, Operator: "ana", Reason: "r"}); err != nil {
		t.Fatal(err)
	}
	if got := size(); got == empty {
		t.Errorf("errand_jobs_requeued holds no replayed job (%d bytes)", got)
	}
}

// TestPrunePlanWithoutStatistics checks that a prune's batch reads the
// oldest finished jobs of a state through errand_jobs_finished in order,
// and stops at the batch's size, on a table of 100,000 jobs that was never
// analyzed as well as on an analyzed one: without statistics the planner
// took the 62,000 succeeded jobs for 56, read them all and sorted them, for
// every batch of 1,000.
func TestPrunePlanWithoutStatistics(t *testing.T) {
	onLoadedStores(t, func(t *testing.T, s *Store) {
		ctx := t.Context()
		var err error
		now := time.Now()
		groups := errandstore.PruneGroups(&errandstore.JobPruneParams{SucceededAge: time.Hour, DeadAge: 2 * time.Hour})
		where, condArgs := dialect.PruneWhere(groups, 4)
		var plan []string
		err = s.pruneTx(ctx, func(tx pgx.Tx) error {
			rows, err := tx.Query(ctx, "EXPLAIN "+s.pruneSQL(where[0]),
				append([]any{string(errandtype.StateSucceeded), micro(now.Add(-time.Hour)), errandstore.MaxPruneBatch}, condArgs[0]...)...)
			if err != nil {
				return err
			}
			plan, err = pgx.CollectRows(rows, pgx.RowTo[string])
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		text := strings.Join(plan, "\n")
		if !strings.Contains(text, "Index Scan using errand_jobs_finished") || strings.Contains(text, "Sort") {
			t.Errorf("the prune does not walk errand_jobs_finished in order:\n%s", text)
		}
	})
}
