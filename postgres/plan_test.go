package postgres

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/postgres/pgtest"
	"github.com/jackc/pgx/v5"
)

// TestQueryPlans pins the plans of the queries on the hot path and of those
// that must stay cheap on a large table, after a bulk load and ANALYZE:
// each reads the index made for it.
func TestQueryPlans(t *testing.T) {
	ctx := t.Context()
	s := openTestStore(t)
	// 20,000 waiting jobs: half ready, half scheduled over the next hours,
	// a quarter with one of 50 ordering keys.
	for b := range 20 {
		ps := make([]*errandstore.JobInsertParams, 1000)
		for i := range ps {
			p := &errandstore.JobInsertParams{ID: fmt.Sprintf("j%d-%d", b, i), Queue: errand.DefaultQueue,
				Kind: "k", Args: json.RawMessage(`{}`), ArgsVersion: 1, MaxAttempts: 3}
			if b%2 == 1 {
				p.Delay = time.Duration(i) * time.Second
			}
			if b%4 == 0 {
				p.OrderingKey = fmt.Sprintf("key-%d", i%50)
			}
			ps[i] = p
		}
		if _, err := s.JobInsertMany(ctx, &errandstore.JobInsertManyParams{Jobs: ps}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.pool.Exec(ctx, s.sql(`ANALYZE {jobs}`)); err != nil {
		t.Fatal(err)
	}
	pruneWhere, pruneArgs := dialect.PruneWhere(errandstore.PruneGroups(&errandstore.JobPruneParams{SucceededAge: time.Hour, DeadAge: time.Hour}), 4)
	// Retention by kind: one kind's group and the default's group that
	// leaves it out filter the same index walk by kind.
	kindWhere, kindArgs := dialect.PruneWhere(errandstore.PruneGroups(&errandstore.JobPruneParams{SucceededAge: 24 * time.Hour,
		Kinds: map[string]errandstore.KindRetention{"k": {SucceededAge: time.Hour}}}), 4)
	for _, c := range []struct {
		name  string
		query string
		args  []any
		want  []string
	}{
		{"prune one kind's finished jobs", s.pruneSQL(kindWhere[0]), append([]any{"succeeded", time.Now(), 1000}, kindArgs[0]...),
			[]string{"errand_jobs_finished"}},
		{"prune the other kinds' finished jobs", s.pruneSQL(kindWhere[1]), append([]any{"succeeded", time.Now(), 1000}, kindArgs[1]...),
			[]string{"errand_jobs_finished"}},
		{"claim from one queue", claimOneSQL, []any{nil, int64(1e6), "w", errand.DefaultQueue, []string{"k"}, 10},
			[]string{"Index Scan using errand_jobs_claim"}},
		{"job with what holds it", `SELECT ` + readColumns + ` FROM {jobs} j WHERE id = $1`, []any{"j0-7"},
			[]string{"Index Scan using errand_jobs_ordering"}},
		{"next due", nextDueSQL, []any{nil, []string{errand.DefaultQueue}, []string{"k"}},
			[]string{"Index Scan using errand_jobs_claim"}},
		// Retention deletes finished jobs oldest first, and seeks the
		// workflow and the batch of each to keep those of open ones.
		{"prune finished jobs", s.pruneSQL(pruneWhere[0]), append([]any{"succeeded", time.Now(), 1000}, pruneArgs[0]...),
			[]string{"errand_jobs_finished"}},
		// Retention's look for batches and workflows with no job left
		// seeks each one's jobs: no scan of errand_jobs.
		{"prune batches with no job left", s.batchSQL(s.own, pruneBatchesSQL), []any{time.Now(), 1000},
			[]string{"errand_jobs_batch", "errand_jobs_id_key"}},
		{"prune workflows with no job left", s.workflowSQL(s.own, pruneWorkflowsSQL), []any{time.Now(), 1000},
			[]string{"errand_jobs_workflow"}},
	} {
		rows, err := s.pool.Query(ctx, "EXPLAIN "+s.sql(c.query), c.args...)
		if err != nil {
			t.Fatalf("%s: explain: %v", c.name, err)
		}
		var b strings.Builder
		for rows.Next() {
			var line string
			if err := rows.Scan(&line); err != nil {
				t.Fatal(err)
			}
			b.WriteString(line + "\n")
		}
		rows.Close()
		plan := b.String()
		if strings.Contains(plan, "Seq Scan on errand_jobs") {
			t.Errorf("%s: plan scans errand_jobs:\n%s", c.name, plan)
		}
		for _, w := range c.want {
			if !strings.Contains(plan, w) {
				t.Errorf("%s: plan lacks %q:\n%s", c.name, w, plan)
			}
		}
	}
}

// TestClaimPlanWithoutStatistics pins the claim's plan on a table that was
// bulk-loaded and never analyzed, as a table is right after a large bulk
// enqueue and before autovacuum gets to it: 1,000,000 ready jobs, in an
// order uncorrelated with the claim order, and (in the second case) the
// statistics of an ANALYZE taken when the table held a few jobs. A claim
// naming its kinds, as a worker's does, kept its plan at 200,000 and
// 600,000 jobs and lost it at 1,000,000 (to errand_jobs_state and a sort
// of every waiting job, see wantedKind), so the test loads a million. Whether
// the planner uses the values of the claim's parameters (a custom plan) or
// not (the generic plan a prepared statement may switch to, which assumes
// a LIMIT of a tenth of the rows), the claim must walk the partial claim
// index in claim order and stop at the limit: no sort of what it reads
// (only, for several queues, of each queue's first few), no scan of the
// whole table.
func TestClaimPlanWithoutStatistics(t *testing.T) {
	url := pgtest.URL(t)
	ctx := t.Context()
	for _, staleStats := range []bool{false, true} {
		name := "never-analyzed"
		if staleStats {
			name = "analyzed-when-small"
		}
		t.Run(name, func(t *testing.T) {
			s, err := Open(ctx, url, &Options{Schema: pgtest.Schema(t, url), MaxConns: 2})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			load := func(prefix string, n int) string {
				return fmt.Sprintf(`INSERT INTO {jobs} (id, queue, kind, args, priority, state, max_attempts, available_at, created_at)
					SELECT '%s' || g, CASE WHEN g %% 10 = 0 THEN 'other' ELSE 'default' END, 'k', '{}',
						(g::bigint * 7919) %% 3, 'queued', 3, now() - ((g::bigint * 104729) %% 86400) * interval '1 second', now()
					FROM generate_series(1, %d) g`, prefix, n)
			}
			steps := []string{`ALTER TABLE {jobs} SET (autovacuum_enabled = false)`} // no analyze behind the test's back
			if staleStats {
				steps = append(steps, load("small-", 500), `ANALYZE {jobs}`)
			}
			steps = append(steps, load("bulk-", 1_000_000))
			for _, q := range steps {
				if _, err := s.pool.Exec(ctx, s.sql(q)); err != nil {
					t.Fatalf("%s: %v", q, err)
				}
			}
			conn, err := s.pool.Acquire(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Release()
			for _, c := range []struct {
				name, query, types, args string
			}{
				{"one queue", claimOneSQL, "timestamptz, bigint, text, text, text[], integer", `NULL, 60000000, 'w', 'default', '{k}', 10`},
				{"one queue, every kind", claimOneSQL, "timestamptz, bigint, text, text, text[], integer", `NULL, 60000000, 'w', 'default', NULL, 100`},
				// A worker's claim names its kinds, and errand_jobs_state
				// (state, queue, kind) then matches three of its conditions.
				{"one queue, a worker's batch", claimOneSQL, "timestamptz, bigint, text, text, text[], integer", `NULL, 60000000, 'w', 'default', '{k}', 100`},
				{"one queue, a large batch", claimOneSQL, "timestamptz, bigint, text, text, text[], integer", `NULL, 60000000, 'w', 'default', '{k,l}', 1000`},
				{"many queues", claimManySQL, "timestamptz, bigint, text, text[], text[], integer", `NULL, 60000000, 'w', '{default,other}', NULL, 10`},
				{"many queues, a worker's batch", claimManySQL, "timestamptz, bigint, text, text[], text[], integer", `NULL, 60000000, 'w', '{default,other}', '{k}', 100`},
				{"retries left out", claimOneSkipSQL, "timestamptz, bigint, text, text, text[], integer, text[]", `NULL, 60000000, 'w', 'default', '{k}', 100, '{k}'`},
				{"next due", nextDueSQL, "timestamptz, text[], text[]", `NULL, '{default,other}', '{k}'`},
			} {
				for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
					plan := explainPrepared(t, conn.Conn(), mode, s.sql(c.query), c.types, c.args)
					if !strings.Contains(plan, "Index Scan using errand_jobs_claim") {
						t.Errorf("%s, %s: plan does not walk errand_jobs_claim:\n%s", c.name, mode, plan)
					}
					if strings.Contains(plan, "Seq Scan on errand_jobs") {
						t.Errorf("%s, %s: plan reads the whole table:\n%s", c.name, mode, plan)
					}
					// The only sort allowed is of the candidates the
					// per-queue walks return (at most the limit per queue).
					for _, line := range strings.Split(plan, "\n") {
						if strings.Contains(line, "Sort Key:") && !strings.Contains(line, "Sort Key: c.priority") {
							t.Errorf("%s, %s: plan sorts jobs the index should deliver in order:\n%s", c.name, mode, plan)
						}
					}
				}
			}
		})
	}
}

// explainPrepared prepares query with parameter types under plan_cache_mode
// mode and returns the plan EXPLAIN EXECUTE shows for args.
func explainPrepared(t *testing.T, conn *pgx.Conn, mode, query, types, args string) string {
	t.Helper()
	ctx := t.Context()
	for _, q := range []string{"DEALLOCATE ALL", "SET plan_cache_mode = " + mode,
		"PREPARE claim_plan(" + types + ") AS " + query} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	rows, err := conn.Query(ctx, "EXPLAIN EXECUTE claim_plan("+args+")", pgx.QueryExecModeSimpleProtocol)
	if err != nil {
		t.Fatalf("explain: %v", err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatalf("explain: %v", err)
	}
	return strings.Join(lines, "\n")
}

// TestSweepPlanWithDeadEntries pins the sweeps' plans on a table whose lease
// index holds only dead entries, as it does, never vacuumed, after every job
// ran: no bitmap scan, which would visit every dead entry's heap page in
// every sweep and never mark one dead (see sweepPlans). The statements run
// as a claim's batch queues them, in one transaction, each sweep under
// EXPLAIN.
func TestSweepPlanWithDeadEntries(t *testing.T) {
	ctx := t.Context()
	s := openTestStore(t)
	for _, q := range []string{
		`ALTER TABLE {jobs} SET (autovacuum_enabled = false)`,
		`INSERT INTO {jobs} (id, queue, kind, args, state, max_attempts, attempt, available_at, created_at, lease_until, lease_token, deadline)
			SELECT 'j' || g, 'default', 'k', '{}', 'running', 3, 1, now(), now(), now() - interval '1 hour', 't' || g, now() + interval '1 hour'
			FROM generate_series(1, 20000) g`,
		`UPDATE {jobs} SET state = 'succeeded', finished_at = now(), lease_until = NULL, lease_token = NULL`,
	} {
		if _, err := s.pool.Exec(ctx, s.sql(q)); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	b := &pgx.Batch{}
	s.queueSweep(b, s.nowArg())
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	swept := 0
	for _, q := range b.QueuedQueries {
		if strings.HasPrefix(q.SQL, "SET") {
			if _, err := tx.Exec(ctx, q.SQL, q.Arguments...); err != nil {
				t.Fatalf("%s: %v", q.SQL, err)
			}
			continue
		}
		swept++
		rows, err := tx.Query(ctx, "EXPLAIN "+q.SQL, q.Arguments...)
		if err != nil {
			t.Fatalf("explain: %v", err)
		}
		lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		if plan := strings.Join(lines, "\n"); strings.Contains(plan, "Bitmap") {
			t.Errorf("a sweep takes a bitmap scan:\n%s\n%s", q.SQL, plan)
		}
	}
	if swept != 2 {
		t.Fatalf("explained %d sweep statements, want 2", swept)
	}
}
