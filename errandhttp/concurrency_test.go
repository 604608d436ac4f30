package errandhttp_test

import (
	"database/sql"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/errandhq/errand/errandhttp"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtest"
	"github.com/errandhq/errand/errandtype"
)

// TestConcurrencyLimitVisible: a concurrency limit's limit now, its kind's
// running jobs, its free slots, its bounds and why it last moved are in
// the API, the metrics and the dashboard.
func TestConcurrencyLimitVisible(t *testing.T) {
	eachStore(t, func(t *testing.T, st errandstore.TxStore[*sql.Tx], clock *errandtest.Clock) {
		s := newServer(t, st, clock, nil)
		if _, err := st.JobInsertMany(t.Context(), &errandstore.JobInsertManyParams{Jobs: []*errandstore.JobInsertParams{
			{ID: "e1", Queue: "default", Kind: "export", Args: json.RawMessage(`{}`), ArgsVersion: 1, MaxAttempts: 3},
			{ID: "e2", Queue: "default", Kind: "export", Args: json.RawMessage(`{}`), ArgsVersion: 1, MaxAttempts: 3},
		}}); err != nil {
			t.Fatal(err)
		}
		spec := errandtype.LimiterSpec{Mode: errandtype.LimiterModeConcurrency, Rate: 10, Floor: 2, Ceiling: 50, Target: 2 * time.Second}
		claim := &errandstore.JobClaimLimitedParams{Name: "concurrency:export", Spec: spec, Claim: errandstore.JobClaimParams{
			Queues: []string{"default"}, Kinds: []string{"export"}, Limit: 1, Lease: time.Minute, Owner: "w"}}
		if r, err := st.(errandstore.ConcurrencyClaimer).JobClaimLimited(t.Context(), claim); err != nil || len(r.Jobs) != 1 {
			t.Fatalf("JobClaimLimited = %+v, %v", r, err)
		}
		// A dependency's limit counts the running jobs of all its kinds.
		dep := &errandstore.JobClaimLimitedParams{Name: "concurrency:dependency:files", Spec: errandtype.LimiterSpec{Mode: errandtype.LimiterModeConcurrency, Rate: 5},
			Counts: []string{"export", "import"}, Claim: errandstore.JobClaimParams{Queues: []string{"default"}, Kinds: []string{"export"}, Limit: 1, Lease: time.Minute, Owner: "w"}}
		if r, err := st.(errandstore.ConcurrencyClaimer).JobClaimLimited(t.Context(), dep); err != nil || len(r.Jobs) != 1 {
			t.Fatalf("JobClaimLimited = %+v, %v", r, err)
		}
		sig := errandtype.LimiterSignal{Throttled: 1, Class: "http_429"}
		if _, err := st.(errandstore.LimiterStore).LimiterAdjust(t.Context(), &errandstore.LimiterAdjustParams{Name: "concurrency:export", Signal: sig}); err != nil {
			t.Fatal(err)
		}

		r := s.do(t, req{method: "GET", path: "/api/v1/limits", token: readerSecret})
		want(t, "limits", r, http.StatusOK, "")
		for _, part := range []string{`"name":"concurrency:export"`, `"mode":"concurrency"`, `"rate":9`, `"floor":2`, `"ceiling":50`, `"target_seconds":2`,
			`"tokens":7`, `"running":2`, `"reason":"throttled: 1 attempt turned away (last http_429)"`,
			`"name":"concurrency:dependency:files"`, `"tokens":3,"running":2,"counts":["export","import"]`} {
			if !strings.Contains(string(r.body), part) {
				t.Errorf("GET /api/v1/limits lacks %s: %s", part, r.body)
			}
		}
		fams := scrape(t, errandhttp.NewMetrics(s.c, &errandhttp.MetricsOptions{Clock: clock}))
		wantSeries(t, fams, "errand_concurrency_limit", "limit=concurrency:export", 9)
		wantSeries(t, fams, "errand_concurrency_running", "limit=concurrency:export", 2)
		wantSeries(t, fams, "errand_concurrency_running", "limit=concurrency:dependency:files", 2)
		wantSeries(t, fams, "errand_concurrency_limited_total", "limit=concurrency:export", 0)
		wantSeries(t, fams, "errand_adaptive_limit_floor", "limit=concurrency:export", 2)
		wantSeries(t, fams, "errand_adaptive_limit_ceiling", "limit=concurrency:export", 50)
		wantSeries(t, fams, "errand_adaptive_limit_last_move", "limit=concurrency:export,reason=throttled", float64(clock.Now().UnixMilli())/1e3)

		dash := httptest.NewServer(errandhttp.NewDashboard(s.c, nil))
		t.Cleanup(dash.Close)
		res, err := http.Get(dash.URL + "/")
		if err != nil {
			t.Fatal(err)
		}
		page, _ := io.ReadAll(res.Body)
		res.Body.Close()
		for _, part := range []string{"concurrency:export", "9 at once, 2 running; adaptive between 2 and 50", "5 at once, 2 running of export, import", "throttled: 1 attempt turned away (last http_429)"} {
			if !strings.Contains(string(page), part) {
				t.Errorf("the overview lacks %q", part)
			}
		}
	})
}
