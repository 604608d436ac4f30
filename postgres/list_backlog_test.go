package postgres

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
	"github.com/errandhq/errand/postgres/pgtest"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// queryCounter counts the queries run on a pool.
type queryCounter struct{ n atomic.Int64 }

func (c *queryCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.n.Add(1)
	return ctx
}

func (c *queryCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// TestListBesideBacklog lists queued jobs of a backlog of 200,000 and of a
// few beside a history of 200,000 succeeded ones: the backlog's page comes
// from the walk of the next jobs in seq order alone, one query that reads a
// few hundred pages, not the backlog (fetched and sorted, every one of them
// was read for each page); the few come from the fetch through their index
// after the walk came up short. Both lists are the first page in seq order.
func TestListBesideBacklog(t *testing.T) {
	ctx := t.Context()
	url := pgtest.URL(t)
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	counter := &queryCounter{}
	cfg.ConnConfig.Tracer = counter
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	s, err := New(ctx, pool, &Options{Schema: pgtest.Schema(t, url)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, q := range []string{
		`ALTER TABLE {jobs} SET (autovacuum_enabled = false)`,
		// The backlog in queue b, the history and then a few queued in queue h.
		`INSERT INTO {jobs} (id, queue, kind, args, state, attempt, max_attempts, available_at, created_at, finished_at)
			SELECT 'b' || g, 'b', 'k', '{}', 'queued', 0, 3, now(), now(), NULL FROM generate_series(1, 200000) g`,
		`INSERT INTO {jobs} (id, queue, kind, args, state, attempt, max_attempts, available_at, created_at, finished_at)
			SELECT 'h' || g, 'h', 'k', '{}', 'succeeded', 1, 3, now(), now(), now() FROM generate_series(1, 200000) g`,
		`INSERT INTO {jobs} (id, queue, kind, args, state, attempt, max_attempts, available_at, created_at)
			SELECT 'w' || g, 'h', 'k', '{}', 'queued', 0, 3, now(), now() FROM generate_series(1, 50) g`,
		`VACUUM ANALYZE {jobs}`,
	} {
		if _, err := s.pool.Exec(ctx, s.sql(q)); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	queued := []errandtype.JobState{errandtype.StateQueued}
	for _, c := range []struct {
		queue   string
		first   string
		n       int
		queries int64
	}{
		{"b", "b1", 100, 1},
		{"h", "w1", 50, 2},
	} {
		before := counter.n.Load()
		js, err := s.JobList(ctx, &errandstore.JobListParams{States: queued, Queue: c.queue, Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		if queries := counter.n.Load() - before; queries != c.queries {
			t.Errorf("queue %s: %d queries, want %d", c.queue, queries, c.queries)
		}
		if len(js) != c.n || len(js) > 0 && js[0].ID != c.first {
			t.Fatalf("queue %s: %d jobs (%v), want %d from %s", c.queue, len(js), ids(js), c.n, c.first)
		}
		for i := 1; i < len(js); i++ {
			if js[i].Seq <= js[i-1].Seq {
				t.Fatalf("queue %s: the page is not in seq order at %d", c.queue, i)
			}
		}
	}
	q, args, _ := jobListSQL(&errandstore.JobListParams{States: queued, Queue: "b", Limit: 100}, true)
	plan := explainAnalyzed(t, s, "the walk over the backlog", q, args)
	if m := regexpBuffers.FindStringSubmatch(plan); m == nil || atoi(m[1])+atoi(m[2]) > 500 {
		t.Errorf("the walk over the backlog reads more than 500 pages:\n%s", plan)
	}
}

// ids are the first few jobs' ids, for a message.
func ids(js []*errandtype.Job) []string {
	var out []string
	for _, j := range js[:min(len(js), 3)] {
		out = append(out, j.ID)
	}
	return out
}
