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
