package sqlite

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/errandhq/errand/errandtype"
)

// TestBatchListPlans pins the plans of the batch listing: each page reads
// an index on created_at in order, without a sort, and the counts seek
// the members' index.
func TestBatchListPlans(t *testing.T) {
	s, err := Open(t.Context(), filepath.Join(t.TempDir(), "errand.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, c := range []struct {
		name  string
		query string
		want  string
	}{
		{"every batch", batchListSQL("", false), "SCAN errand_batches USING INDEX errand_batches_created"},
		{"open batches", batchListSQL(errandtype.BatchOpen, false), "SCAN errand_batches USING INDEX errand_batches_open"},
		{"completed batches", batchListSQL(errandtype.BatchCompleted, false), "SCAN errand_batches USING INDEX errand_batches_created"},
		{"a next page", batchListSQL("", true), "SEARCH errand_batches USING INDEX errand_batches_created ((created_at,id)<(?,?))"},
		{"a next page of open batches", batchListSQL(errandtype.BatchOpen, true), "SEARCH errand_batches USING INDEX errand_batches_open ((created_at,id)<(?,?))"},
		{"members' counts", batchListCountsSQL, "USING COVERING INDEX errand_jobs_batch (batch_id=?)"},
	} {
		plan := explain(t, s, c.query)
		if !strings.Contains(plan, c.want) {
			t.Errorf("%s: plan lacks %q:\n%s", c.name, c.want, plan)
		}
		if strings.Contains(plan, "TEMP B-TREE FOR ORDER BY") || strings.Contains(plan, "SCAN errand_jobs") {
			t.Errorf("%s: plan sorts or scans the jobs:\n%s", c.name, plan)
		}
	}
}
