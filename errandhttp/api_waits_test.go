package errandhttp_test

import (
	"net/http"
	"strings"
	"testing"
)

// TestAPIWaitsAreBounded: a delay or a retry_after past errandstore.MaxDelay is
// a 400 naming the field, with nothing written.
func TestAPIWaitsAreBounded(t *testing.T) {
	clock := newTestClock()
	s := newServer(t, openSQLite(t, clock), clock, nil)
	r := s.op(t, "POST", "/api/v1/jobs", map[string]any{"kind": "k", "delay": "900000h"})
	if want(t, "delay", r, http.StatusBadRequest, "invalid_input"); !strings.HasPrefix(r.errorMessage(), "delay: ") {
		t.Fatalf("delay: %s", r.errorMessage())
	}
	r = s.op(t, "POST", "/api/v1/jobs/job-1/fail", map[string]any{"lease_token": "t", "retry_after": "900000h"})
	if want(t, "retry_after", r, http.StatusBadRequest, "invalid_input"); !strings.HasPrefix(r.errorMessage(), "retry_after: ") {
		t.Fatalf("retry_after: %s", r.errorMessage())
	}
	if n := s.jobCount(t); n != 0 {
		t.Fatalf("%d jobs, want none", n)
	}
}
