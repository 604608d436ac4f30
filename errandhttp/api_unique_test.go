package errandhttp_test

import (
	"net/http"
	"testing"

	"github.com/errandhq/errand"
)

// TestAPIUniqueScope: POST /api/v1/jobs takes a unique scope and window; a
// duplicate within them answers 200 with the holder; a replay that would
// take back a key another job holds answers 409 unique_conflict.
func TestAPIUniqueScope(t *testing.T) {
	clock := newTestClock()
	s := newServer(t, openSQLite(t, clock), clock, nil)
	body := map[string]any{"kind": "sync", "unique_key": "sync:acct-7", "unique_scope": "until_finished",
		"unique_window": "1h", "max_attempts": 1, "ordering_key": "acct-7", "ordering_on_dead": "hold"}
	r := s.op(t, "POST", "/api/v1/jobs", body)
	want(t, "enqueue", r, http.StatusCreated, "")
	job := r.json(t)["job"].(map[string]any)
	first := job["id"].(string)
	if job["unique_scope"] != "until_finished" || job["unique_window_start"] != "2026-11-29T12:00:00Z" || job["ordering_hold"] != true {
		t.Fatalf("enqueued: %s", r.body)
	}
	dup := s.op(t, "POST", "/api/v1/jobs", body)
	want(t, "duplicate", dup, http.StatusOK, "")
	if m := dup.json(t); m["duplicate"] != true || m["job"].(map[string]any)["id"] != first {
		t.Fatalf("duplicate: %s", dup.body)
	}
	for name, bad := range map[string]map[string]any{
		"bad scope":      {"kind": "sync", "unique_key": "k", "unique_scope": "queued"},
		"scope, no key":  {"kind": "sync", "unique_scope": "until_finished"},
		"bad hold":       {"kind": "sync", "ordering_key": "k", "ordering_on_dead": "maybe"},
		"window too low": {"kind": "sync", "unique_key": "k", "unique_window": "1us"},
	} {
		want(t, name, s.op(t, "POST", "/api/v1/jobs", bad), http.StatusBadRequest, "invalid_input")
	}

	// Kill the first job: its key is free, a second job takes it, and a
	// replay of the first is refused.
	js, err := s.c.Claim(t.Context(), &errand.ClaimOpts{Queue: errand.DefaultQueue, Kinds: []string{"sync"}, Owner: "w"})
	if err != nil || len(js) != 1 || js[0].ID != first {
		t.Fatalf("claim: %v %v", js, err)
	}
	f := s.op(t, "POST", "/api/v1/jobs/"+first+"/fail", map[string]any{"lease_token": *js[0].LeaseToken, "class": "boom", "message": "boom"})
	want(t, "fail", f, http.StatusOK, "")
	second := s.op(t, "POST", "/api/v1/jobs", body)
	want(t, "enqueue after death", second, http.StatusCreated, "")
	replay := s.op(t, "POST", "/api/v1/jobs/"+first+"/replay", map[string]any{"reason": "fixed"})
	want(t, "replay", replay, http.StatusConflict, "unique_conflict")
}
