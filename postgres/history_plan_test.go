package postgres

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
)

// TestOperatorReadsBesideHistory runs the operators' reads of a few jobs
// (lists by state, the insights' depth and failures, the queue counts) on a table of 1,000,000 succeeded jobs and a
// few thousand others, newest last, as a queue's table is after months of
// work: first never analyzed, then vacuumed and analyzed. No index holds
// every state (migration 024), so each read must reach its jobs through the
// partial index of their states, never by walking the history in seq order
// or scanning it. Once the table is analyzed the reads of a few jobs stay
// under 500 pages, and the queue counts, which count the history too, read
// it through the finished index alone. (The bulk replay's select walks the
// dead jobs in seq order, as it did with the index of every state: dead
// jobs to replay come in the thousands after an outage.)
func TestOperatorReadsBesideHistory(t *testing.T) {
	ctx := t.Context()
	s := openTestStore(t)
	for _, q := range []string{
		`ALTER TABLE {jobs} SET (autovacuum_enabled = false)`,
		`INSERT INTO {jobs} (id, queue, kind, args, state, attempt, max_attempts, available_at, created_at, attempted_at, finished_at)
			SELECT 'h' || g, 'q' || g % 4, 'k' || g % 7, '{"n":1}', 'succeeded', 1, 3, t, t, t, t
			FROM (SELECT g, now() - interval '30 days' + g * interval '2 seconds' AS t FROM generate_series(1, 1000000) g) x`,
		// Dead jobs through the history, then the unfinished ones.
		`INSERT INTO {jobs} (id, queue, kind, args, state, attempt, max_attempts, available_at, created_at, attempted_at, finished_at, last_error, errors)
			SELECT 'd' || g, 'q' || g % 4, 'k' || g % 7, '{}', 'dead', 3, 3, now(), now(), now(), now() - g * interval '1 minute',
				'{"class":"error","message":"m","at":"2026-01-01T00:00:00Z"}', '[]'
			FROM generate_series(1, 2000) g`,
		`INSERT INTO {jobs} (id, queue, kind, args, state, attempt, max_attempts, available_at, created_at, attempted_at, lease_until, lease_token)
			SELECT 'r' || g, 'q' || g % 4, 'k' || g % 7, '{}', 'running', 1, 3, now(), now(), now(), now() + interval '1 minute', 't'
			FROM generate_series(1, 300) g`,
		`INSERT INTO {jobs} (id, queue, kind, args, state, attempt, max_attempts, available_at, created_at)
			SELECT 'w' || g, 'q' || g % 4, 'k' || g % 7, '{}', CASE WHEN g % 5 = 0 THEN 'retrying' ELSE 'queued' END,
				CASE WHEN g % 5 = 0 THEN 1 ELSE 0 END, 3, now() + (g % 3) * interval '1 hour', now()
			FROM generate_series(1, 2500) g`,
	} {
		if _, err := s.pool.Exec(ctx, s.sql(q)); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	// The lists' queries after their walk of the next jobs came up short
	// (see JobList).
	list := func(states ...errandtype.JobState) (string, []any) {
		q, args, _ := jobListSQL(&errandstore.JobListParams{States: states, Limit: 100}, false)
		return q, args
	}
	type read struct {
		name    string
		sql     string
		args    []any
		history bool // reads the history too, through the finished index
	}
	queued, queuedArgs := list(errandtype.StateQueued)
	running, runningArgs := list(errandtype.StateRunning)
	dead, deadArgs := list(errandtype.StateDead)
	unfinished, unfinishedArgs := list(errandstore.UnfinishedStates...)
	byQueue, byQueueArgs, _ := jobListSQL(&errandstore.JobListParams{States: []errandtype.JobState{errandtype.StateRetrying}, Queue: "q1", Limit: 100}, false)
	now := time.Now()
	reads := []read{
		{"list queued", queued, queuedArgs, false},
		{"list running", running, runningArgs, false},
		{"list dead", dead, deadArgs, false},
		{"list unfinished", unfinished, unfinishedArgs, false},
		{"list retrying of a queue", byQueue, byQueueArgs, false},
		{"insights depth", insightsDepthSQL, []any{now}, false},
		{"insights failures", insightsFailuresSQL, []any{now.Add(-errandstore.InsightsWindow)}, false},
		{"queue counts", queueCountsSQL, nil, true},
	}
	for _, vacuumed := range []bool{false, true} {
		if vacuumed {
			if _, err := s.pool.Exec(ctx, s.sql(`VACUUM ANALYZE {jobs}`)); err != nil {
				t.Fatal(err)
			}
		}
		for _, r := range reads {
			plan := explainAnalyzed(t, s, fmt.Sprintf("vacuumed %v, %s", vacuumed, r.name), r.sql, r.args)
			// The first Buffers line is the whole query's.
			pages := 0
			if m := regexpBuffers.FindStringSubmatch(plan); m != nil {
				pages = atoi(m[1]) + atoi(m[2])
			}
			switch {
			case strings.Contains(plan, "Seq Scan on errand_jobs"):
				t.Errorf("vacuumed %v, %s: reads the whole table:\n%s", vacuumed, r.name, plan)
			case !r.history && strings.Contains(plan, "Index Scan using errand_jobs_pkey"):
				t.Errorf("vacuumed %v, %s: walks the history in seq order:\n%s", vacuumed, r.name, plan)
			case !r.history && vacuumed && pages > 500:
				t.Errorf("vacuumed %v, %s: read %d pages for a few thousand jobs:\n%s", vacuumed, r.name, pages, plan)
			case r.history && vacuumed && !strings.Contains(plan, "Index Only Scan using errand_jobs_finished"):
				t.Errorf("vacuumed %v, %s: the history is not counted from the finished index alone:\n%s", vacuumed, r.name, plan)
			}
		}
	}
}

// regexpBuffers finds the first Buffers line of an EXPLAIN (ANALYZE,
// BUFFERS), the whole query's: pages found in the cache, pages read.
var regexpBuffers = regexp.MustCompile(`Buffers: shared(?: hit=(\d+))?(?: read=(\d+))?`)

// atoi is strconv.Atoi for a number the pattern matched, 0 for none.
func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}
