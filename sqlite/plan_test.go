package sqlite

import (
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/errandhq/errand/errandstore"
)

// TestQueryPlans pins the plans of the queries on the hot path and of those
// that must stay cheap on a large table: each reads the index made for it,
// in the order it needs, with no sort.
func TestQueryPlans(t *testing.T) {
	s, err := Open(t.Context(), filepath.Join(t.TempDir(), "errand.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, c := range []struct {
		name    string
		query   string
		want    []string
		notWant []string
	}{
		{
			name:  "claim from one queue",
			query: strings.SplitN(claimSQL(1, 2, 0), "RETURNING", 2)[0],
			want: []string{
				"SEARCH j USING INDEX errand_jobs_claim (queue=?)",
				"SEARCH o USING INDEX errand_jobs_ordering (ordering_key=?)",
			},
			notWant: []string{"TEMP B-TREE", "errand_jobs_due", "errand_jobs_state"},
		},
		{
			name:  "claim leaving out a kind's retries",
			query: strings.SplitN(claimSQL(1, 2, 1), "RETURNING", 2)[0],
			want: []string{
				"SEARCH j USING INDEX errand_jobs_claim (queue=?)",
			},
			notWant: []string{"TEMP B-TREE", "errand_jobs_due", "errand_jobs_state"},
		},
		{
			name:    "next due",
			query:   nextDueSQL + " AND kind IN (?, ?) ORDER BY available_at LIMIT 1",
			want:    []string{"SEARCH errand_jobs USING INDEX errand_jobs_due (queue=? AND available_at>?)"},
			notWant: []string{"TEMP B-TREE"},
		},
		// A duplicate's holder and a replay's conflicting holder are found
		// by seeking the unique index, whose predicate both repeat.
		{
			name:  "find a duplicate",
			query: duplicateSQL,
			want: []string{
				"USING INDEX sqlite_autoindex_errand_jobs_1 (id=?)",
				"USING INDEX errand_jobs_unique (unique_key=? AND unique_window_us=?)",
			},
			notWant: []string{"SCAN errand_jobs"},
		},
		{
			name:    "find the holder of a key",
			query:   uniqueHolderSQL,
			want:    []string{"USING INDEX errand_jobs_unique (unique_key=? AND unique_window_us=?)"},
			notWant: []string{"SCAN errand_jobs"},
		},
		// A batch of outcomes of one kind is one statement: each job
		// found by its id, never a scan.
		{
			name:    "outcomes of one kind",
			query:   strings.SplitN(outcomeGroupSQL("state = ?, finished_at = ?", ""), "RETURNING", 2)[0],
			want:    []string{"SEARCH errand_jobs USING INDEX sqlite_autoindex_errand_jobs_1 (id=?)"},
			notWant: []string{"SCAN errand_jobs"},
		},
		// A claim sweeps first: each sweep statement must seek the partial
		// index of the rows it may change, never read the waiting rows.
		{
			name:    "sweep expired final attempts",
			query:   sweepLeaseDeadSQL,
			want:    []string{"SEARCH errand_jobs USING INDEX errand_jobs_lease (lease_until<?)"},
			notWant: []string{"errand_jobs_state", "SCAN"},
		},
		{
			// With RETURNING, SQLite collects the rows to change from
			// the index alone, then updates them.
			name:    "sweep expired attempts",
			query:   sweepLeaseRetrySQL,
			want:    []string{"SEARCH errand_jobs USING COVERING INDEX errand_jobs_lease (lease_until<?)"},
			notWant: []string{"errand_jobs_state", "SCAN"},
		},
		{
			// Read after every commit by a listening worker: only the
			// pending requests, never the running jobs.
			name:    "pending cancel requests",
			query:   pendingCancelsSQL,
			want:    []string{"SCAN errand_jobs USING INDEX errand_jobs_cancel"},
			notWant: []string{"errand_jobs_state", "errand_jobs_lease"},
		},
		// Retention deletes finished jobs oldest first, and seeks the
		// workflow and the batch of each to keep those of open ones.
		{
			name:  "prune finished jobs",
			query: strings.SplitN(pruneSQL(pruneSQLConds()), "RETURNING", 2)[0],
			want: []string{
				"SEARCH j USING INDEX errand_jobs_finished (state=? AND finished_at>? AND finished_at<?)",
				"SEARCH w USING INDEX sqlite_autoindex_errand_workflows_1 (id=?)",
				"SEARCH b USING INDEX sqlite_autoindex_errand_batches_1 (id=?)",
				"SEARCH f USING COVERING INDEX sqlite_autoindex_errand_jobs_1 (id=?)",
			},
			notWant: []string{"SCAN", "TEMP B-TREE"},
		},
		// Retention looks at the finished batches and workflows oldest
		// first, and for each seeks its jobs: no scan of errand_jobs.
		{
			name:  "prune batches with no job left",
			query: pruneBatchesSQL,
			want: []string{
				"SEARCH b USING INDEX errand_batches_completed (completed_at>? AND completed_at<?)",
				"USING COVERING INDEX errand_jobs_batch (batch_id=?)",
				"USING COVERING INDEX sqlite_autoindex_errand_jobs_1 (id=?)",
			},
			notWant: []string{"SCAN", "TEMP B-TREE"},
		},
		{
			name:  "prune workflows with no job left",
			query: pruneWorkflowsSQL,
			want: []string{
				"SEARCH w USING INDEX errand_workflows_finished (finished_at<?)",
				"USING COVERING INDEX errand_jobs_workflow (workflow_id=?)",
			},
			notWant: []string{"SCAN", "TEMP B-TREE"},
		},
		// The last hour's failures: the finished jobs of the hour, the
		// running and retrying ones, and the queued ones with an error,
		// each through its index; each entry of an earlier delivery cycle
		// seeks its job's audit records.
		{
			name:  "insights: failures",
			query: insightsFailuresSQL,
			want: []string{
				"SEARCH j USING INTEGER PRIMARY KEY (rowid=?)",
				"SEARCH errand_jobs USING COVERING INDEX errand_jobs_finished (state=? AND finished_at>?)",
				"SEARCH errand_jobs USING COVERING INDEX errand_jobs_state (state=?)",
				"SCAN errand_jobs USING INDEX errand_jobs_requeued",
				"SEARCH a USING INDEX errand_audit_job (job_id=?)",
			},
			notWant: []string{"SCAN errand_jobs\n", "SCAN j", "SCAN a"},
		},
		{
			name:    "sweep deadlines",
			query:   sweepDeadlineSQL,
			want:    []string{"SEARCH errand_jobs USING INDEX errand_jobs_deadline (deadline>? AND deadline<?)"},
			notWant: []string{"errand_jobs_state", "SCAN"},
		},
	} {
		plan := explain(t, s, c.query)
		for _, w := range c.want {
			if !strings.Contains(plan, w) {
				t.Errorf("%s: plan lacks %q:\n%s", c.name, w, plan)
			}
		}
		for _, w := range c.notWant {
			if strings.Contains(plan, w) {
				t.Errorf("%s: plan has %q:\n%s", c.name, w, plan)
			}
		}
	}
}

// explain returns the query plan of q, one step a line, with every
// parameter bound to a placeholder value.
func explain(t *testing.T, s *Store, q string) string {
	t.Helper()
	n := strings.Count(q, "?")
	// A query with numbered parameters (?1, ?2) has as many as its highest.
	if ms := regexp.MustCompile(`\?(\d+)`).FindAllStringSubmatch(q, -1); ms != nil {
		n = 0
		for _, m := range ms {
			i, _ := strconv.Atoi(m[1])
			n = max(n, i)
		}
	}
	args := make([]any, n)
	for i := range args {
		args[i] = i
	}
	rows, err := s.db.QueryContext(t.Context(), "EXPLAIN QUERY PLAN "+q, args...)
	if err != nil {
		t.Fatalf("explain %s: %v", q, err)
	}
	defer rows.Close()
	var b strings.Builder
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		b.WriteString(detail + "\n")
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// pruneSQLConds is dialect.PruneConds' prunable for a prune of every state.
func pruneSQLConds() string {
	_, prunable, _ := dialect.PruneConds(errandstore.PruneGroups(&errandstore.JobPruneParams{SucceededAge: time.Hour, DeadAge: time.Hour}), time.Now(), 4)
	return prunable
}
