package errandhttp

import (
	"context"
	"net/http"
	"net/url"
	"testing"

	"github.com/errandhq/errand/errandtest"
)

// TestDashboardPauseResume: an operator pauses a queue from the overview;
// the overview shows it paused, its waiting jobs as paused rather than
// ready, who paused it and why, and resumes it; a read-only visitor sees
// no form and is refused.
func TestDashboardPauseResume(t *testing.T) {
	c := newSQLiteClient(t, errandtest.NewClock(testStart))
	seed(t, c)
	h := NewDashboard(c, &DashboardOptions{Identity: func(*http.Request) (string, bool) { return "ana", true }})
	readOnly := NewDashboard(c, &DashboardOptions{Identity: func(*http.Request) (string, bool) { return "grafana", false }})

	body := mustGet(t, h, "/")
	wantContains(t, "overview", body, "Nothing is paused.", `action="/pause"`)
	if code, _ := post(t, h, "/pause", url.Values{"do": {"pause"}, "scope": {"queue"}, "name": {"mail"}}); code != http.StatusBadRequest {
		t.Fatalf("pause without a reason: %d", code)
	}
	if code, _ := post(t, readOnly, "/pause", url.Values{"do": {"pause"}, "scope": {"queue"}, "name": {"mail"}, "reason": {"x"}}); code != http.StatusForbidden {
		t.Fatalf("pause by a read-only visitor: %d", code)
	}
	code, _ := post(t, h, "/pause", url.Values{"do": {"pause"}, "scope": {"queue"}, "name": {"mail"}, "reason": {"provider outage"}})
	if code != http.StatusSeeOther {
		t.Fatalf("pause: %d", code)
	}
	body = mustGet(t, h, "/")
	wantContains(t, "overview of a paused queue", body, `<a class="warn" href="#pauses">paused</a>`, "provider outage", "<td>ana</td>", `name="do" value="resume"`, "> paused</a>")
	wantLacks(t, "read-only overview", mustGet(t, readOnly, "/"), `action="/pause"`)

	if code, _ := post(t, h, "/pause", url.Values{"do": {"resume"}, "scope": {"queue"}, "name": {"mail"}, "reason": {"back"}}); code != http.StatusSeeOther {
		t.Fatalf("resume: %d", code)
	}
	if ps, err := c.Pauses(context.Background()); err != nil || len(ps) != 0 {
		t.Fatalf("pauses after the resume: %+v, %v", ps, err)
	}
	wantContains(t, "overview after the resume", mustGet(t, h, "/"), "Nothing is paused.")
}
