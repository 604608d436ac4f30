package postgres

import (
	"strings"
	"testing"
	"time"

	"github.com/errandhq/errand/errandtype"
)

// TestBatchListPlans pins the plans of the batch listing on a table of
// 20,000 batches, most of them completed, after ANALYZE: each page walks
// an index on created_at backwards and stops at the limit, without a sort.
func TestBatchListPlans(t *testing.T) {
	ctx := t.Context()
	s := openTestStore(t)
	if _, err := s.pool.Exec(ctx, s.batchSQL(s.own, `INSERT INTO {batches} (id, total, created_at, completed_at)
		SELECT 'b' || i, 10, now() - i * interval '1 second',
			CASE WHEN i % 50 = 0 THEN NULL ELSE now() END
		FROM generate_series(1, 20000) i`)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.pool.Exec(ctx, s.batchSQL(s.own, `ANALYZE {batches}`)); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		query string
		want  string
	}{
		{"every batch", batchListSQL("", false), "Index Scan Backward using errand_batches_created"},
		{"open batches", batchListSQL(errandtype.BatchOpen, false), "Index Scan Backward using errand_batches_open"},
		{"completed batches", batchListSQL(errandtype.BatchCompleted, false), "Index Scan Backward using errand_batches_created"},
		{"a next page", batchListSQL("", true), "Index Scan Backward using errand_batches_created"},
		{"a next page of open batches", batchListSQL(errandtype.BatchOpen, true), "Index Scan Backward using errand_batches_open"},
	} {
		args := []any{100}
		if strings.Contains(c.query, "$3") { // a next page, from the middle
			args = append(args, time.Now().Add(-5000*time.Second), "b5000")
		}
		rows, err := s.pool.Query(ctx, "EXPLAIN "+s.batchSQL(s.own, c.query), args...)
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
		if !strings.Contains(plan, c.want) || strings.Contains(plan, "Sort") {
			t.Errorf("%s: plan lacks %q or sorts:\n%s", c.name, c.want, plan)
		}
	}
}
