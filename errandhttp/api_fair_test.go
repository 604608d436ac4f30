package errandhttp_test

import (
	"net/http"
	"strings"
	"testing"
)

// TestAPIEnqueueFairnessKey: POST /api/v1/jobs takes fairness_key, returns
// it in the job, and refuses a bad one with a 400 naming the field.
func TestAPIEnqueueFairnessKey(t *testing.T) {
	clock := newTestClock()
	s := newServer(t, openSQLite(t, clock), clock, nil)
	r := s.op(t, "POST", "/api/v1/jobs", map[string]any{"kind": "task", "fairness_key": "tenant:42"})
	want(t, "enqueue", r, http.StatusCreated, "")
	if m := r.json(t); m["job"].(map[string]any)["fairness_key"] != "tenant:42" {
		t.Fatalf("enqueue with a fairness key: %s", r.body)
	}
	bad := s.op(t, "POST", "/api/v1/jobs", map[string]any{"kind": "task", "fairness_key": "a\u0000b"})
	if bad.status != http.StatusBadRequest || !strings.Contains(string(bad.body), "fairness_key") {
		t.Fatalf("a bad fairness key: %d %s", bad.status, bad.body)
	}
}

// TestAPIFairnessKeys: GET /api/v1/fairness-keys lists the busiest keys per
// queue, filtered by queue and limited.
func TestAPIFairnessKeys(t *testing.T) {
	clock := newTestClock()
	s := newServer(t, openSQLite(t, clock), clock, nil)
	for _, k := range []string{"a", "a", "b", "c", "c", "c"} {
		want(t, "enqueue", s.op(t, "POST", "/api/v1/jobs", map[string]any{"kind": "task", "queue": "q", "fairness_key": k}), http.StatusCreated, "")
	}
	want(t, "enqueue", s.op(t, "POST", "/api/v1/jobs", map[string]any{"kind": "task", "queue": "other", "fairness_key": "z"}), http.StatusCreated, "")
	r := s.do(t, req{method: "GET", path: "/api/v1/fairness-keys?queue=q&limit=2", token: readerSecret})
	want(t, "fairness keys", r, http.StatusOK, "")
	if got := strings.TrimSpace(string(r.body)); got != `{"fairness_keys":[{"queue":"q","fairness_key":"c","waiting":3},{"queue":"q","fairness_key":"a","waiting":2}]}` {
		t.Fatalf("fairness keys: %s", got)
	}
	want(t, "bad limit", s.do(t, req{method: "GET", path: "/api/v1/fairness-keys?limit=0", token: readerSecret}), http.StatusBadRequest, "invalid_input")
}
