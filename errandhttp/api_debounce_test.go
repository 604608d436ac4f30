package errandhttp_test

import (
	"net/http"
	"testing"
)

// TestAPIDebounce: POST /api/v1/jobs takes a debounce key; a second
// enqueue of it answers 200 with the pending job, absorbed, which took the
// newest args; bad debounce fields answer 400 invalid_input.
func TestAPIDebounce(t *testing.T) {
	clock := newTestClock()
	s := newServer(t, openSQLite(t, clock), clock, nil)
	body := func(n int) map[string]any {
		return map[string]any{"kind": "reindex", "args": map[string]int{"user": 42, "n": n},
			"debounce_key": "user:42", "debounce_window": "10s"}
	}
	r := s.op(t, "POST", "/api/v1/jobs", body(1))
	want(t, "enqueue", r, http.StatusCreated, "")
	first := r.json(t)["job"].(map[string]any)
	if first["debounce_key"] != "user:42" || first["absorbed"] != 0.0 || first["available_at"] != "2026-11-29T12:00:10Z" {
		t.Fatalf("enqueued: %s", r.body)
	}
	clock.Advance(5e9)
	again := s.op(t, "POST", "/api/v1/jobs", body(2))
	want(t, "absorbed", again, http.StatusOK, "")
	m := again.json(t)
	job := m["job"].(map[string]any)
	if m["absorbed"] != true || m["duplicate"] != true || job["id"] != first["id"] || job["absorbed"] != 1.0 ||
		job["args"].(map[string]any)["n"] != 2.0 || job["available_at"] != "2026-11-29T12:00:15Z" {
		t.Fatalf("absorbed: %s", again.body)
	}
	for name, bad := range map[string]map[string]any{
		"window, no key":   {"kind": "reindex", "debounce_window": "1s"},
		"no window":        {"kind": "reindex", "debounce_key": "k"},
		"bad mode":         {"kind": "reindex", "debounce_key": "k", "debounce_window": "1s", "debounce_mode": "sooner"},
		"with unique key":  {"kind": "reindex", "debounce_key": "k", "debounce_window": "1s", "unique_key": "u"},
		"first wins, max":  {"kind": "reindex", "debounce_key": "k", "debounce_window": "1s", "debounce_mode": "first_wins", "debounce_max_wait": "1m"},
		"last wins, delay": {"kind": "reindex", "debounce_key": "k", "debounce_window": "1s", "delay": "1m"},
	} {
		want(t, name, s.op(t, "POST", "/api/v1/jobs", bad), http.StatusBadRequest, "invalid_input")
	}
}
