package errandhttp

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandtest"
)

// TestDashboardJobSearch: the jobs page searches args and tags, keeps the
// search in its page links, and refuses a search of args it hides.
func TestDashboardJobSearch(t *testing.T) {
	c := newSQLiteClient(t, errandtest.NewClock(testStart))
	enqueue(t, c, failArgs{Note: "user-42"}, &errand.EnqueueOpts{ID: "a", Tags: []string{"eu"}})
	enqueue(t, c, failArgs{Note: "user-7"}, &errand.EnqueueOpts{ID: "b", Tags: []string{"eu"}})
	enqueue(t, c, failArgs{Note: "user-42"}, &errand.EnqueueOpts{ID: "c", Tags: []string{"us"}})
	h := NewDashboard(c, &DashboardOptions{PageSize: 1})
	body := mustGet(t, h, "/jobs?args_has="+url.QueryEscape(`{"note":"user-42"}`))
	wantContains(t, "search page 1", body, `href="/jobs/a"`, "args_has=%7B%22note%22%3A%22user-42%22%7D")
	if strings.Contains(body, `href="/jobs/b"`) || strings.Contains(body, `href="/jobs/c"`) {
		t.Errorf("search page 1 holds more than job a:\n%s", body)
	}
	body = mustGet(t, h, "/jobs?tag=eu&after=1")
	wantContains(t, "tag page 2", body, `href="/jobs/b"`)
	if code, body := get(t, h, "/jobs?args_has="+url.QueryEscape(`{"note":["x"]}`)); code != http.StatusBadRequest || !strings.Contains(body, "array") {
		t.Errorf("array filter: %d\n%s", code, body)
	}
	hidden := NewDashboard(c, &DashboardOptions{HideArgs: true})
	if code, body := get(t, hidden, "/jobs?args_has="+url.QueryEscape(`{"note":"user-42"}`)); code != http.StatusBadRequest || !strings.Contains(body, "hides") {
		t.Errorf("args search on a dashboard that hides args: %d\n%s", code, body)
	}
}
