package errandhttp_test

import (
	"context"
	"database/sql"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandhttp"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtest"
	"github.com/errandhq/errand/errandtype"
)

// breakerServer serves the API, the dashboard and /metrics of a client
// whose kind send_email depends on smtp, with smtp's breaker open: three
// failures at the clock's time, opening it for 30 seconds.
func breakerServer(t *testing.T, s errandstore.TxStore[*sql.Tx], clock *errandtest.Clock) (*server, *errandtype.Job) {
	t.Helper()
	kinds := errand.NewKinds()
	kinds.HandleRaw("send_email", nil, &errand.KindOpts{Dependency: "smtp"})
	c, err := errand.NewClient(s, &errand.Config{Kinds: kinds, Clock: clock,
		Breakers: map[string]*errandtype.BreakerPolicy{"smtp": {Threshold: 3, Cooldown: 30 * time.Second}}})
	if err != nil {
		t.Fatal(err)
	}
	bs := s.(errandstore.BreakerStore)
	for range 3 {
		if _, err := bs.BreakerUpdate(context.Background(), &errandstore.BreakerUpdateParams{Dependency: "smtp",
			Event: errandstore.BreakerFailure, Policy: errandtype.BreakerPolicy{Threshold: 3, Cooldown: 30 * time.Second},
			Message: "dial smtp: connection refused"}); err != nil {
			t.Fatal(err)
		}
	}
	// The client's first claim records send_email's dependency, for
	// every reader.
	if _, err := c.Claim(context.Background(), &errand.ClaimOpts{Queue: "nothing_here", Kinds: []string{"send_email"}, Owner: "w"}); err != nil {
		t.Fatal(err)
	}
	h, err := errandhttp.New(c, &errandhttp.Options{
		Auth:      &errandhttp.AuthOptions{Tokens: testTokens},
		Dashboard: errandhttp.NewDashboard(c, nil),
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	r, err := c.Enqueue(context.Background(), errand.RawArgs{KindName: "send_email"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return &server{Server: srv, c: c}, r.Job
}

// Breakers are visible in the API, the dashboard (the overview and a
// waiting job's next step) and /metrics, and an operator can reset one,
// with a reason, audited.
func TestBreakerVisibility(t *testing.T) {
	eachStore(t, func(t *testing.T, s errandstore.TxStore[*sql.Tx], clock *errandtest.Clock) {
		srv, job := breakerServer(t, s, clock)
		until := clock.Now().Add(30 * time.Second).UTC().Format(time.RFC3339)

		r := srv.op(t, http.MethodGet, "/api/v1/breakers", nil)
		want(t, "GET /api/v1/breakers", r, http.StatusOK, "")
		list := r.json(t)["breakers"].([]any)
		if len(list) != 1 {
			t.Fatalf("breakers: %s", r.body)
		}
		b := list[0].(map[string]any)
		if b["dependency"] != "smtp" || b["state"] != "open" || b["failures"] != 3.0 || b["trips"] != 1.0 || b["open_until"] != until ||
			b["last_error"] != "dial smtp: connection refused" {
			t.Errorf("breaker %s", r.body)
		}

		home := srv.op(t, http.MethodGet, "/", nil)
		want(t, "GET /", home, http.StatusOK, "")
		for _, s := range []string{"Circuit breakers", "smtp", "st-open", "dial smtp: connection refused"} {
			if !strings.Contains(string(home.body), s) {
				t.Errorf("overview lacks %q", s)
			}
		}
		page := srv.op(t, http.MethodGet, "/jobs/"+job.ID, nil)
		want(t, "GET job", page, http.StatusOK, "")
		if !strings.Contains(string(page.body), "its dependency smtp is down (circuit breaker open until") {
			t.Errorf("job page does not say the job waits for its breaker:\n%s", page.body)
		}

		fams := scrape(t, errandhttp.NewMetrics(srv.c, &errandhttp.MetricsOptions{Clock: clock}))
		wantSeries(t, fams, "errand_breaker_state", "dependency=smtp", 2)
		wantSeries(t, fams, "errand_breaker_failures", "dependency=smtp", 3)
		wantSeries(t, fams, "errand_breaker_trips_total", "dependency=smtp", 1)

		want(t, "reset without a reason", srv.op(t, http.MethodPost, "/api/v1/breakers/smtp/reset", map[string]any{}), http.StatusBadRequest, "invalid_input")
		want(t, "reset of an unknown dependency", srv.op(t, http.MethodPost, "/api/v1/breakers/smpt/reset", map[string]any{"reason": "typo"}), http.StatusNotFound, "not_found")
		r = srv.op(t, http.MethodPost, "/api/v1/breakers/smtp/reset", map[string]any{"reason": "relay fixed"})
		want(t, "reset", r, http.StatusOK, "")
		if r.json(t)["state"] != "closed" {
			t.Errorf("reset answered %s", r.body)
		}
		audit := srv.op(t, http.MethodGet, "/api/v1/audit?action=breaker_reset", nil)
		if !strings.Contains(string(audit.body), `"operator":"alice"`) || !strings.Contains(string(audit.body), `"reason":"relay fixed"`) {
			t.Errorf("audit after the reset: %s", audit.body)
		}
		page = srv.op(t, http.MethodGet, "/jobs/"+job.ID, nil)
		if strings.Contains(string(page.body), "circuit breaker") {
			t.Errorf("job page still mentions the closed breaker")
		}
	})
}

// TestAPIClaimsHonourBreakers: with smtp's breaker open, a remote worker's
// claim through the API gets nothing of send_email (204); after the
// cool-down it gets one probe, however many jobs wait, and the probe's
// failure reported through the API opens the breaker again, until an
// operator resets it.
func TestAPIClaimsHonourBreakers(t *testing.T) {
	eachStore(t, func(t *testing.T, s errandstore.TxStore[*sql.Tx], clock *errandtest.Clock) {
		srv, _ := breakerServer(t, s, clock)
		if _, err := srv.c.Enqueue(context.Background(), errand.RawArgs{KindName: "send_email"}, nil); err != nil {
			t.Fatal(err)
		}
		claim := func() response {
			t.Helper()
			return srv.op(t, "POST", "/api/v1/queues/default/claim", map[string]any{"kinds": []string{"send_email"}, "max_jobs": 10})
		}
		want(t, "claim with the breaker open", claim(), http.StatusNoContent, "")
		clock.Advance(30 * time.Second)
		r := claim()
		want(t, "claim after the cool-down", r, http.StatusOK, "")
		jobs := r.json(t)["jobs"].([]any)
		if len(jobs) != 1 {
			t.Fatalf("claim after the cool-down took %d jobs; want 1 probe", len(jobs))
		}
		probe := jobs[0].(map[string]any)
		want(t, "claim while the probe runs", claim(), http.StatusNoContent, "")
		want(t, "fail the probe", srv.op(t, "POST", "/api/v1/jobs/"+probe["id"].(string)+"/fail",
			map[string]any{"lease_token": probe["lease_token"], "message": "dial smtp: connection refused"}), http.StatusOK, "")
		if st := srv.op(t, "GET", "/api/v1/breakers", nil).String(); !strings.Contains(st, `"state":"open"`) {
			t.Fatalf("breakers after the probe failed: %s; want smtp open", st)
		}
		want(t, "claim after the probe failed", claim(), http.StatusNoContent, "")
		want(t, "reset", srv.op(t, "POST", "/api/v1/breakers/smtp/reset", map[string]any{"reason": "relay fixed"}), http.StatusOK, "")
		want(t, "claim after the reset", claim(), http.StatusOK, "")
	})
}

// TestBreakerHeldJobsAreNotReady: a server whose client declares no kinds
// (errand serve without --dependency) learns from the store that a worker
// elsewhere declared send_email's dependency smtp, whose breaker is open:
// the job's API answer names the breaker, the statistics and /metrics
// leave it out of the oldest ready age and count it held, readiness is
// not degraded by its wait, and the dashboard's job page says why it
// waits.
func TestBreakerHeldJobsAreNotReady(t *testing.T) {
	eachStore(t, func(t *testing.T, s errandstore.TxStore[*sql.Tx], clock *errandtest.Clock) {
		ctx := context.Background()
		kinds := errand.NewKinds()
		kinds.HandleRaw("send_email", nil, &errand.KindOpts{Dependency: "smtp"})
		worker, err := errand.NewClient(s, &errand.Config{Kinds: kinds, Clock: clock})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := worker.Claim(ctx, &errand.ClaimOpts{Queue: "nothing_here", Kinds: []string{"send_email"}, Owner: "w"}); err != nil {
			t.Fatal(err)
		}
		plain, err := errand.NewClient(s, &errand.Config{Clock: clock, AllowUnknownKinds: true})
		if err != nil {
			t.Fatal(err)
		}
		h, err := errandhttp.New(plain, &errandhttp.Options{Auth: &errandhttp.AuthOptions{Tokens: testTokens},
			Dashboard: errandhttp.NewDashboard(plain, nil)})
		if err != nil {
			t.Fatal(err)
		}
		srv := &server{Server: httptest.NewServer(h), c: plain}
		t.Cleanup(srv.Close)
		job := enqueue(t, plain, "send_email", nil)
		clock.Advance(time.Hour)
		readyz := errandhttp.NewReadyz(plain, &errandhttp.ReadyOptions{Clock: clock, MaxOldestReadyAge: 10 * time.Minute})
		for range 3 {
			if _, err := s.(errandstore.BreakerStore).BreakerUpdate(ctx, &errandstore.BreakerUpdateParams{Dependency: "smtp",
				Event: errandstore.BreakerFailure, Policy: errandtype.BreakerPolicy{Threshold: 3}}); err != nil {
				t.Fatal(err)
			}
		}

		r := srv.op(t, http.MethodGet, "/api/v1/jobs/"+job.ID, nil)
		want(t, "GET job", r, http.StatusOK, "")
		if got := r.json(t)["held_by_breaker"]; got != "smtp" {
			t.Errorf("job answer's held_by_breaker = %v; want smtp:\n%s", got, r.body)
		}
		r = srv.op(t, http.MethodGet, "/api/v1/stats", nil)
		want(t, "GET stats", r, http.StatusOK, "")
		q := r.json(t)["queues"].([]any)[0].(map[string]any)
		if q["oldest_ready_age_seconds"] != nil || len(q["breaker_held_kinds"].([]any)) != 1 {
			t.Errorf("stats: oldest_ready_age_seconds %v, breaker_held_kinds %v; want null and send_email's", q["oldest_ready_age_seconds"], q["breaker_held_kinds"])
		}
		fams := scrape(t, errandhttp.NewMetrics(plain, &errandhttp.MetricsOptions{Clock: clock}))
		wantSeries(t, fams, "errand_queue_oldest_ready_age_seconds", "queue=default", 0)
		wantSeries(t, fams, "errand_queue_breaker_held_jobs", "queue=default,kind=send_email,dependency=smtp", 1)
		rec := httptest.NewRecorder()
		readyz.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
		if rec.Code != http.StatusOK {
			t.Errorf("readyz with only a held job waiting an hour: %d %s; want 200", rec.Code, rec.Body)
		}
		page := srv.op(t, http.MethodGet, "/jobs/"+job.ID, nil)
		if !strings.Contains(string(page.body), "its dependency smtp is down (circuit breaker open until") {
			t.Errorf("job page does not say the job waits for its breaker:\n%s", page.body)
		}

		// Once the breaker is reset, the job is ready, an hour old.
		if _, err := plain.ResetBreaker(ctx, "smtp", "ana", "relay fixed"); err != nil {
			t.Fatal(err)
		}
		clock.Advance(errandhttp.DefaultReadyCacheFor)
		rec = httptest.NewRecorder()
		readyz.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
		if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), "oldest_ready_age") {
			t.Errorf("readyz with a ready job waiting an hour: %d %s; want 503 for its age", rec.Code, rec.Body)
		}
	})
}
