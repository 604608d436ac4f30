package errandhttp_test

import (
	"database/sql"
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

// TestAPIStartBy: a job's start_by is enqueued, read back, and shown on its
// dashboard page with the class its deadline ends it with; one before
// run_at is refused and nothing written.
func TestAPIStartBy(t *testing.T) {
	eachStore(t, func(t *testing.T, st errandstore.TxStore[*sql.Tx], clock *errandtest.Clock) {
		s := newServer(t, st, clock, nil)
		startBy := clock.Now().Add(10 * time.Minute)
		r := s.op(t, "POST", "/api/v1/jobs", map[string]any{"kind": "task", "id": "s1", "start_by": startBy, "max_age": "1h"})
		want(t, "enqueue with start_by", r, http.StatusCreated, "")
		j := s.job(t, "s1")
		if j.StartBy == nil || !j.StartBy.Equal(startBy) || j.Deadline == nil || !j.Deadline.Equal(startBy) {
			t.Fatalf("job: start_by %v, deadline %v; want both %v", j.StartBy, j.Deadline, startBy)
		}
		if page := dashboardPage(t, s, "/jobs/s1"); !strings.Contains(page, "Start by") || !strings.Contains(page, "dies with class start_by") {
			t.Fatalf("job page shows no start-by:\n%s", page)
		}
		bad := s.op(t, "POST", "/api/v1/jobs", map[string]any{"kind": "task", "id": "s2",
			"run_at": clock.Now().Add(time.Hour), "start_by": startBy})
		want(t, "start_by before run_at", bad, http.StatusBadRequest, "invalid_input")
		if !strings.Contains(string(bad.body), "start_by") {
			t.Fatalf("refusal does not name start_by: %s", bad.body)
		}
		want(t, "no job for a refused start_by", s.op(t, "GET", "/api/v1/jobs/s2", nil), http.StatusNotFound, "not_found")
	})
}

// TestAPIAgedPriority: an aged job's enqueued priority is in the API's job
// as base_priority and on its dashboard page.
func TestAPIAgedPriority(t *testing.T) {
	eachStore(t, func(t *testing.T, st errandstore.TxStore[*sql.Tx], clock *errandtest.Clock) {
		s := newServer(t, st, clock, nil)
		want(t, "enqueue", s.op(t, "POST", "/api/v1/jobs", map[string]any{"kind": "task", "id": "a1", "priority": 5}), http.StatusCreated, "")
		clock.Advance(3 * time.Minute)
		if _, err := st.(errandstore.PriorityAger).JobAgePriorities(t.Context(), &errandstore.JobAgePrioritiesParams{
			Queue: "default", Aging: errandtype.PriorityAging{Step: time.Minute}, Limit: 10}); err != nil {
			t.Fatal(err)
		}
		r := s.op(t, "GET", "/api/v1/jobs/a1", nil)
		want(t, "get", r, http.StatusOK, "")
		if m := r.json(t); m["priority"] != 2.0 || m["base_priority"] != 5.0 {
			t.Fatalf("aged job: %s; want priority 2, base_priority 5", r.body)
		}
		if page := dashboardPage(t, s, "/jobs/a1"); !strings.Contains(page, "aged from 5") {
			t.Fatalf("job page does not show the aging:\n%s", page)
		}
	})
}

// dashboardPage renders path of the dashboard of s's client.
func dashboardPage(t *testing.T, s *server, path string) string {
	t.Helper()
	rec := httptest.NewRecorder()
	errandhttp.NewDashboard(s.c, nil).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, rec.Code, rec.Body)
	}
	return rec.Body.String()
}
