package errandhttp_test

import (
	"net/http"
	"strings"
	"testing"
)

// TestAPIPauseResume: an operator pauses and resumes a queue and a kind
// with a reason, as the audit records; a reader may list the pauses but
// not change them; a reason is required and a bad name refused.
func TestAPIPauseResume(t *testing.T) {
	clock := newTestClock()
	s := newServer(t, openSQLite(t, clock), clock, nil)

	want(t, "pause without a reason", s.op(t, "POST", "/api/v1/queues/emails/pause", map[string]any{}), http.StatusBadRequest, "invalid_input")
	want(t, "pause by a reader", s.do(t, req{method: "POST", path: "/api/v1/queues/emails/pause", token: readerSecret, body: map[string]any{"reason": "x"}}), http.StatusForbidden, "")
	want(t, "pause of a bad name", s.op(t, "POST", "/api/v1/kinds/bad%20name%01/pause", map[string]any{"reason": "x"}), http.StatusBadRequest, "invalid_input")

	r := s.op(t, "POST", "/api/v1/queues/emails/pause", map[string]any{"reason": "provider outage"})
	want(t, "pause", r, http.StatusOK, "")
	if m := r.json(t); m["changed"] != true || m["pause"].(map[string]any)["reason"] != "provider outage" || m["pause"].(map[string]any)["operator"] != "alice" {
		t.Fatalf("pause: %s", r.body)
	}
	if m := s.op(t, "POST", "/api/v1/queues/emails/pause", map[string]any{"reason": "again"}).json(t); m["changed"] != false {
		t.Fatalf("second pause: %v", m)
	}
	want(t, "pause a kind", s.op(t, "POST", "/api/v1/kinds/mail/pause", map[string]any{"reason": "bad deploy"}), http.StatusOK, "")
	list := s.do(t, req{method: "GET", path: "/api/v1/pauses", token: readerSecret})
	want(t, "list", list, http.StatusOK, "")
	if b := string(list.body); !strings.Contains(b, `"scope":"queue","name":"emails"`) || !strings.Contains(b, `"scope":"kind","name":"mail"`) {
		t.Fatalf("list: %s", b)
	}
	if m := s.op(t, "POST", "/api/v1/queues/emails/resume", map[string]any{"reason": "back"}).json(t); m["changed"] != true {
		t.Fatalf("resume: %v", m)
	}
	if m := s.op(t, "POST", "/api/v1/kinds/mail/resume", map[string]any{"reason": "fixed"}).json(t); m["changed"] != true {
		t.Fatalf("resume kind: %v", m)
	}
	if m := s.op(t, "POST", "/api/v1/kinds/mail/resume", map[string]any{"reason": "fixed"}).json(t); m["changed"] != false {
		t.Fatalf("second resume: %v", m)
	}
	audit := string(s.op(t, "GET", "/api/v1/audit", nil).body)
	if strings.Count(audit, `"action":"pause"`) != 2 || strings.Count(audit, `"action":"resume"`) != 2 {
		t.Fatalf("audit: %s", audit)
	}
	if b := string(s.op(t, "GET", "/api/v1/pauses", nil).body); b != `{"pauses":[]}`+"\n" && strings.TrimSpace(b) != `{"pauses":[]}` {
		t.Fatalf("list after resumes: %s", b)
	}
}
