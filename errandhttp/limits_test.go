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

// TestLimitsVisible: the cluster's rate limits and retry budgets, as the
// workers left them in the database, are in the API, the metrics and the
// dashboard's overview.
func TestLimitsVisible(t *testing.T) {
	eachStore(t, func(t *testing.T, st errandstore.TxStore[*sql.Tx], clock *errandtest.Clock) {
		s := newServer(t, st, clock, nil)
		ls, ok := st.(errandstore.LimiterStore)
		if !ok {
			t.Fatalf("%T keeps no limits", st)
		}
		rate := errandtype.LimiterSpec{Mode: errandtype.LimiterModeRate, Rate: 20, Burst: 2}
		budget := errandtype.LimiterSpec{Mode: errandtype.LimiterModeRetryBudget, Ratio: 0.1, Min: 3, Window: time.Minute}
		for _, want := range []int{5, 1} {
			if _, err := ls.LimiterTake(t.Context(), &errandstore.LimiterTakeParams{Takes: []errandstore.LimiterTake{
				{Name: "queue:default", Spec: rate, Want: want}, {Name: "retry:mail", Spec: budget, Want: want}}}); err != nil {
				t.Fatal(err)
			}
		}

		r := s.do(t, req{method: "GET", path: "/api/v1/limits", token: readerSecret})
		want(t, "limits", r, http.StatusOK, "")
		var body struct {
			Limits []errandtype.LimiterRecord `json:"limits"`
		}
		if err := json.Unmarshal(r.body, &body); err != nil {
			t.Fatal(err)
		}
		if len(body.Limits) != 2 || body.Limits[0].Name != "queue:default" || body.Limits[0].Spec != rate || body.Limits[0].Denied != 1 ||
			body.Limits[1].Name != "retry:mail" || body.Limits[1].Spec != budget || body.Limits[1].Denied != 1 {
			t.Fatalf("GET /api/v1/limits = %s", r.body)
		}
		if !strings.Contains(string(r.body), `"window_seconds":60`) {
			t.Errorf("a budget's window is not in seconds: %s", r.body)
		}

		fams := scrape(t, errandhttp.NewMetrics(s.c, &errandhttp.MetricsOptions{Clock: clock}))
		wantSeries(t, fams, "errand_rate_limit_tokens", "limit=queue:default", 0)
		wantSeries(t, fams, "errand_rate_limit_per_second", "limit=queue:default", 20)
		wantSeries(t, fams, "errand_rate_limited_total", "limit=queue:default", 1)
		wantSeries(t, fams, "errand_retry_budget_tokens", "kind=mail", 0)
		wantSeries(t, fams, "errand_retry_budget_exhausted", "kind=mail", 1)
		wantSeries(t, fams, "errand_retry_budget_held_back_total", "kind=mail", 1)

		dash := httptest.NewServer(errandhttp.NewDashboard(s.c, nil))
		t.Cleanup(dash.Close)
		res, err := http.Get(dash.URL + "/")
		if err != nil {
			t.Fatal(err)
		}
		page, _ := io.ReadAll(res.Body)
		res.Body.Close()
		for _, part := range []string{"Rate limits, retry budgets and concurrency limits", "queue:default", "20/s, burst 2", "retry:mail", "0.1 per first attempt over 1m0s, min 3"} {
			if !strings.Contains(string(page), part) {
				t.Errorf("the overview lacks %q", part)
			}
		}
	})
}

// TestAdaptiveLimitVisible: an adaptive limit's rate now, its bounds, its
// hold and why it last moved are in the API, the metrics and the
// dashboard.
func TestAdaptiveLimitVisible(t *testing.T) {
	eachStore(t, func(t *testing.T, st errandstore.TxStore[*sql.Tx], clock *errandtest.Clock) {
		s := newServer(t, st, clock, nil)
		ls := st.(errandstore.LimiterStore)
		spec := errandtype.LimiterSpec{Mode: errandtype.LimiterModeRate, Rate: 100, Burst: 10, Floor: 5, Ceiling: 500}
		if _, err := ls.LimiterTake(t.Context(), &errandstore.LimiterTakeParams{Takes: []errandstore.LimiterTake{{Name: "kind:hook", Spec: spec}}}); err != nil {
			t.Fatal(err)
		}
		sig := errandtype.LimiterSignal{Throttled: 2, Class: "http_429", RetryAfter: 30 * time.Second}
		if _, err := ls.LimiterAdjust(t.Context(), &errandstore.LimiterAdjustParams{Name: "kind:hook", Signal: sig}); err != nil {
			t.Fatal(err)
		}

		r := s.do(t, req{method: "GET", path: "/api/v1/limits", token: readerSecret})
		want(t, "limits", r, http.StatusOK, "")
		for _, part := range []string{`"rate":90`, `"floor":5`, `"ceiling":500`, `"reason":"throttled: 2 attempts turned away (last http_429); held 30s by the provider's reset time"`, `"peak":100`, `"decreases":1`} {
			if !strings.Contains(string(r.body), part) {
				t.Errorf("GET /api/v1/limits lacks %s: %s", part, r.body)
			}
		}
		fams := scrape(t, errandhttp.NewMetrics(s.c, &errandhttp.MetricsOptions{Clock: clock}))
		wantSeries(t, fams, "errand_rate_limit_per_second", "limit=kind:hook", 90)
		wantSeries(t, fams, "errand_adaptive_limit_floor", "limit=kind:hook", 5)
		wantSeries(t, fams, "errand_adaptive_limit_ceiling", "limit=kind:hook", 500)
		wantSeries(t, fams, "errand_adaptive_limit_held_seconds", "limit=kind:hook", 30)
		wantSeries(t, fams, "errand_adaptive_limit_decreases_total", "limit=kind:hook", 1)
		wantSeries(t, fams, "errand_adaptive_limit_last_move", "limit=kind:hook,reason=throttled", float64(clock.Now().UnixMilli())/1e3)

		dash := httptest.NewServer(errandhttp.NewDashboard(s.c, nil))
		t.Cleanup(dash.Close)
		res, err := http.Get(dash.URL + "/")
		if err != nil {
			t.Fatal(err)
		}
		page, _ := io.ReadAll(res.Body)
		res.Body.Close()
		for _, part := range []string{"90/s, burst 9; adaptive between 5 and 500/s", "throttled: 2 attempts turned away (last http_429)", "<strong>claims held</strong>, ending in 30s"} {
			if !strings.Contains(string(page), part) {
				t.Errorf("the overview lacks %q", part)
			}
		}
	})
}
