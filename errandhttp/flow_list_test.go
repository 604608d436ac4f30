package errandhttp_test

import (
	"database/sql"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandhttp"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtest"
	"github.com/errandhq/errand/errandtype"
)

// seedFlow leaves on s one job of each flow-control trace an operator looks
// for: "late" dead by its start-by, "plain" (priority 5) aged to 4, and a
// debounced job, whose id it returns, that absorbed one enqueue; "alone" is
// debounced and absorbed nothing.
func seedFlow(t *testing.T, st errandstore.TxStore[*sql.Tx], c *errand.Client[*sql.Tx], clock *errandtest.Clock) string {
	t.Helper()
	ctx := t.Context()
	enq := func(opts *errand.EnqueueOpts) *errandtype.Job {
		t.Helper()
		r, err := c.Enqueue(ctx, errand.RawArgs{KindName: "task"}, opts)
		if err != nil {
			t.Fatal(err)
		}
		return r.Job
	}
	enq(&errand.EnqueueOpts{ID: "late", Delay: 2 * time.Minute, StartBy: clock.Now().Add(time.Minute)})
	enq(&errand.EnqueueOpts{ID: "plain", Priority: 5})
	folded := enq(&errand.EnqueueOpts{Debounce: &errand.DebounceOpts{Key: "user:1", Window: time.Hour}})
	enq(&errand.EnqueueOpts{Debounce: &errand.DebounceOpts{Key: "user:1", Window: time.Hour}})
	enq(&errand.EnqueueOpts{Debounce: &errand.DebounceOpts{Key: "user:2", Window: time.Hour}, Tags: []string{"alone"}})
	clock.Advance(time.Minute)
	if _, err := st.JobSweep(ctx, &errandstore.JobSweepParams{}); err != nil {
		t.Fatal(err)
	}
	n, err := st.(errandstore.PriorityAger).JobAgePriorities(ctx, &errandstore.JobAgePrioritiesParams{Queue: errand.DefaultQueue,
		Aging: errandtype.PriorityAging{Step: time.Minute, Floor: -2}, Limit: 10})
	if err != nil || n != 1 {
		t.Fatalf("aged %d jobs, %v; want plain alone", n, err)
	}
	return folded.ID
}

// TestFlowListFilters: the dashboard's job list and GET /api/v1/jobs find
// the jobs that ended by their start-by (class), that absorbed debounced
// enqueues, and whose priority aged, and the list shows both counts.
func TestFlowListFilters(t *testing.T) {
	eachStore(t, func(t *testing.T, st errandstore.TxStore[*sql.Tx], clock *errandtest.Clock) {
		s := newServer(t, st, clock, nil)
		folded := seedFlow(t, st, s.c, clock)
		apiIDs := func(query string) []string {
			t.Helper()
			r := s.op(t, "GET", "/api/v1/jobs?"+query, nil)
			want(t, query, r, http.StatusOK, "")
			var out []string
			for _, j := range r.json(t)["jobs"].([]any) {
				out = append(out, j.(map[string]any)["id"].(string))
			}
			return out
		}
		dash := errandhttp.NewDashboard(s.c, nil)
		dashGet := func(path string) (int, string) {
			rec := httptest.NewRecorder()
			dash.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
			return rec.Code, rec.Body.String()
		}
		dashIDs := func(query string) []string {
			t.Helper()
			code, body := dashGet("/jobs?" + query)
			if code != http.StatusOK {
				t.Fatalf("GET /jobs?%s: %d\n%s", query, code, body)
			}
			var out []string
			for _, m := range regexp.MustCompile(`<td class="id"><a href="/jobs/([^"]+)">`).FindAllStringSubmatch(body, -1) {
				out = append(out, m[1])
			}
			return out
		}
		for _, c := range []struct {
			query string
			want  []string
		}{
			{"class=start_by", []string{"late"}},
			{"class=expired", nil},
			{"absorbed=true", []string{folded}},
			{"aged=true", []string{"plain"}},
			{"aged=true&state=queued", []string{"plain"}},
			{"aged=false&absorbed=false&class=", []string{"late", "plain", folded, apiIDs("tag=alone")[0]}},
		} {
			if got := apiIDs(c.query); !slices.Equal(got, c.want) {
				t.Errorf("GET /api/v1/jobs?%s = %v, want %v", c.query, got, c.want)
			}
			if got := dashIDs(c.query); !slices.Equal(got, c.want) {
				t.Errorf("dashboard /jobs?%s = %v, want %v", c.query, got, c.want)
			}
		}
		_, body := dashGet("/jobs")
		for id, cell := range map[string]string{folded: `<span class="note absorbed">absorbed 1</span>`,
			"plain": `<td class="num">4 <span class="note aged">aged from 5</span></td>`} {
			row := regexp.MustCompile(`(?s)<tr>\s*<td class="id"><a href="/jobs/` + regexp.QuoteMeta(id) + `">.*?</tr>`).FindString(body)
			if !strings.Contains(row, cell) {
				t.Errorf("job list row of %s lacks %s:\n%s", id, cell, row)
			}
		}
		_, body = dashGet("/jobs?absorbed=true&aged=true&class=start_by")
		for _, s := range []string{`name="absorbed" value="true" checked`, `name="aged" value="true" checked`, `name="class" value="start_by"`} {
			if !strings.Contains(body, s) {
				t.Errorf("filtered list's form lacks %s", s)
			}
		}
		if _, body = dashGet("/dead?class=start_by"); !strings.Contains(body, `href="/dead?class=start_by">start_by</a>`) || !strings.Contains(body, `href="/jobs/late"`) {
			t.Errorf("dead letters of class start_by lack late, or its class link:\n%s", body)
		}
		for _, bad := range []string{"class=Start%20By", "absorbed=yes", "aged=1"} {
			want(t, bad, s.op(t, "GET", "/api/v1/jobs?"+bad, nil), http.StatusBadRequest, "invalid_input")
			if code, body := dashGet("/jobs?" + bad); code != http.StatusBadRequest {
				t.Errorf("dashboard /jobs?%s: %d, want 400\n%s", bad, code, body)
			}
		}
	})
}

// TestDashboardRetention: the retention page shows each kind's ages under
// the policy the server was given, else under the newest prune the audit
// records, and says when neither is known.
func TestDashboardRetention(t *testing.T) {
	eachStore(t, func(t *testing.T, st errandstore.TxStore[*sql.Tx], clock *errandtest.Clock) {
		s := newServer(t, st, clock, nil)
		seedFlow(t, st, s.c, clock)
		page := func(opts *errandhttp.DashboardOptions) string {
			t.Helper()
			rec := httptest.NewRecorder()
			errandhttp.NewDashboard(s.c, opts).ServeHTTP(rec, httptest.NewRequest("GET", "/retention", nil))
			if rec.Code != http.StatusOK {
				t.Fatalf("GET /retention: %d\n%s", rec.Code, rec.Body)
			}
			return rec.Body.String()
		}
		row := func(kind, succeeded, dead, from string) string {
			return `<tr><td><a href="/jobs?kind=` + kind + `">` + kind + `</a></td><td>` + succeeded + `</td><td>` + dead + `</td><td>` + from + `</td></tr>`
		}
		wantAll := func(what, body string, subs ...string) {
			t.Helper()
			for _, sub := range subs {
				if !strings.Contains(body, sub) {
					t.Errorf("%s lacks %s\n%s", what, sub, body)
				}
			}
		}
		wantAll("no retention", page(nil), "This server applies no retention, and the audit records no prune", "No prune has deleted a job.")

		policy := &errand.RetentionPolicy{SucceededAge: 24 * time.Hour, DeadAge: 720 * time.Hour,
			Kinds: map[string]errand.KindRetention{"audit_log": {DeadAge: 2160 * time.Hour}}}
		wantAll("configured", page(&errandhttp.DashboardOptions{Retention: policy}),
			"deletes finished jobs every 1h while it leads the cluster",
			row("audit_log", "24h", "2160h", "its own ages"), row("task", "24h", "720h", "the default ages"))

		clock.Advance(2 * time.Hour)
		r, err := s.c.Prune(t.Context(), &errand.PruneOpts{SucceededAge: time.Minute, DeadAge: time.Hour,
			Kinds: map[string]errand.KindRetention{"receipt": {DeadAge: 48 * time.Hour}}})
		if err != nil || r.Dead != 1 {
			t.Fatalf("prune: %+v, %v; want late deleted", r, err)
		}
		wantAll("after a prune", page(nil), "The ages below are those of the newest prune in the audit",
			"by errand-retention", row("receipt", "1m", "48h", "its own ages"), row("task", "1m", "1h", "the default ages"),
			`<td class="num">0</td><td class="num">0</td><td class="num">1</td>`, "succeeded 1m, dead 1h; receipt: 1m/48h")
	})
}
