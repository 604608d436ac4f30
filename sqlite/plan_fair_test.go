package sqlite

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestFairClaimPlan pins the fair claim's plan: the keys are found by seeks
// of the fair index (never a scan of a key's jobs), each key's jobs and
// those without a key by a seek of it in claim order, the turns by their
// primary key; the only sorts are of the candidates (at most the limit per
// key) for the ranking and the pick.
func TestFairClaimPlan(t *testing.T) {
	s, err := Open(t.Context(), filepath.Join(t.TempDir(), "errand.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	plan := explain(t, s, strings.SplitN(fairClaimSQL(2, 1), "RETURNING", 2)[0])
	for _, w := range []string{
		"SEARCH errand_jobs USING INDEX errand_jobs_fair (queue=? AND fairness_key>?)",
		"SEARCH j USING INDEX errand_jobs_fair (queue=? AND fairness_key=?)",
		"SEARCH t USING PRIMARY KEY (queue=? AND fairness_key=?)",
		"SEARCH o USING INDEX errand_jobs_ordering (ordering_key=?)",
	} {
		if !strings.Contains(plan, w) {
			t.Errorf("plan lacks %q:\n%s", w, plan)
		}
	}
	for _, w := range []string{"errand_jobs_claim", "errand_jobs_due", "SCAN errand_jobs", "SCAN j"} {
		if strings.Contains(plan, w) {
			t.Errorf("plan has %q:\n%s", w, plan)
		}
	}
	if n := strings.Count(plan, "SEARCH j USING INDEX errand_jobs_fair"); n != 2 {
		t.Errorf("plan reads jobs through errand_jobs_fair %d times, want 2 (the keys' jobs, those without a key):\n%s", n, plan)
	}
}
