package postgres

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/postgres/pgtest"
)

// TestQueryPlans pins the plans of the queries on the hot path and of those
// that must stay cheap on a large table, after a bulk load and ANALYZE:
// each reads the index made for it.
func TestQueryPlans(t *testing.T) {
	url := pgtest.URL(t)
	ctx := t.Context()
	s, err := Open(ctx, url, &Options{Schema: pgtest.Schema(t, url), MaxConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// 20,000 waiting jobs: half ready, half scheduled over the next hours,
	// a quarter with one of 50 ordering keys.
	for b := range 20 {
		ps := make([]*errand.JobInsertParams, 1000)
		for i := range ps {
			p := &errand.JobInsertParams{ID: fmt.Sprintf("j%d-%d", b, i), Queue: errand.DefaultQueue,
				Kind: "k", Args: json.RawMessage(`{}`), ArgsVersion: 1, MaxAttempts: 3}
			if b%2 == 1 {
				p.Delay = time.Duration(i) * time.Second
			}
			if b%4 == 0 {
				p.OrderingKey = fmt.Sprintf("key-%d", i%50)
			}
			ps[i] = p
		}
		if _, err := s.JobInsertMany(ctx, &errand.JobInsertManyParams{Jobs: ps}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.pool.Exec(ctx, s.sql(`ANALYZE {jobs}`)); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		query string
		args  []any
		want  []string
	}{
		{"claim from one queue", claimOneSQL, []any{nil, int64(1e6), "w", errand.DefaultQueue, []string{"k"}, 10},
			[]string{"Index Scan using errand_jobs_claim"}},
		{"job with what holds it", `SELECT ` + readColumns + ` FROM {jobs} j WHERE id = $1`, []any{"j0-7"},
			[]string{"Index Scan using errand_jobs_ordering"}},
		{"next due", nextDueSQL, []any{nil, []string{errand.DefaultQueue}, []string{"k"}},
			[]string{"Index Scan using errand_jobs_due"}},
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
		for _, w := range c.want {
			if !strings.Contains(plan, w) {
				t.Errorf("%s: plan lacks %q:\n%s", c.name, w, plan)
			}
		}
	}
}
