package errandhttp

import (
	"context"
	"testing"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandtest"
	"github.com/errandhq/errand/postgres"
	"github.com/errandhq/errand/postgres/pgtest"
)

// TestDashboardOverviewPostgres runs the overview check on PostgreSQL: the
// dashboard reads both stores through the same client calls.
func TestDashboardOverviewPostgres(t *testing.T) {
	url := pgtest.URL(t)
	clk := errandtest.NewClock(testStart)
	st, err := postgres.Open(context.Background(), url, &postgres.Options{Schema: pgtest.Schema(t, url), Clock: clk, MaxConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	c, err := errand.NewClient(st, testConfig(clk))
	if err != nil {
		t.Fatal(err)
	}
	checkOverview(t, c)
	// The job page of a dead job too: args, history, what happens next.
	body := mustGet(t, NewDashboard(c, nil), "/jobs/panic-1")
	wantContains(t, "panicked job", body, "dead after attempt 1 of 1 (class panic): replay to run again",
		"dash_panic handler gave up", "<summary>stack</summary>")
}
