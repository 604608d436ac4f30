package errandhttp

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtest"
	"github.com/errandhq/errand/errandtype"
)

// asAna is a dashboard whose every visitor is the operator ana.
var asAna = &DashboardOptions{Identity: func(*http.Request) (string, bool) { return "ana", true }}

// hiddenValue returns the value of the confirmation form's hidden input
// name.
func hiddenValue(t *testing.T, body, name string) string {
	t.Helper()
	m := regexp.MustCompile(`<input type="hidden" name="` + name + `" value="([^"]*)">`).FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no hidden %s in\n%s", name, body)
	}
	return strings.NewReplacer("&#34;", `"`, "&#43;", "+", "&lt;", "<", "&gt;", ">", "&#39;", "'", "&amp;", "&").Replace(m[1])
}

func TestDashboardReplayByFilter(t *testing.T) {
	clk := errandtest.NewClock(testStart)
	c := newSQLiteClient(t, clk)
	for _, id := range []string{"f-1", "f-2", "f-3"} {
		enqueue(t, c, failArgs{Note: "smtp refused"}, &errand.EnqueueOpts{ID: id, Queue: "mail"})
		workOne(t, c, "mail")
	}
	enqueue(t, c, failArgs{Note: "other queue"}, &errand.EnqueueOpts{ID: "f-other", Queue: "billing"})
	workOne(t, c, "billing")
	h := NewDashboard(c, &DashboardOptions{Identity: asAna.Identity, MaxBatch: 2})

	body := mustGet(t, h, "/dead")
	wantContains(t, "dead letters", body, `action="/replay-filter/confirm"`, "at most 2, oldest first", `name="class"`)

	// The dry run lists at most MaxBatch jobs and changes nothing.
	code, body := post(t, h, "/replay-filter/confirm", url.Values{"kind": {"dash_fail"}, "queue": {"mail"}, "class": {"permanent"}, "reason": {"smtp fixed"}})
	if code != http.StatusOK {
		t.Fatalf("confirm: %d\n%s", code, body)
	}
	wantContains(t, "confirm", body, "Replay these 2 dead jobs as <strong>ana</strong>", "f-1", "f-2", "stops at the most one replay takes (2)",
		`action="/replay-filter"`, `<input type="hidden" name="limit" value="2">`)
	wantLacks(t, "confirm", body, "f-3", "f-other")
	if j, _ := replayed(t, c, "f-1"); j.State != errandtype.StateDead {
		t.Fatalf("the dry run replayed f-1")
	}
	// A job that dies after the dry run is not replayed by its
	// confirmation.
	until := hiddenValue(t, body, "until")
	clk.Advance(time.Second)
	enqueue(t, c, failArgs{Note: "late"}, &errand.EnqueueOpts{ID: "f-0", Queue: "mail", Priority: -1})
	workOne(t, c, "mail")

	form := url.Values{"kind": {"dash_fail"}, "queue": {"mail"}, "class": {"permanent"}, "reason": {"smtp fixed"}, "until": {until}, "limit": {"2"}}
	for name, bad := range map[string]url.Values{
		"no reason":   {"kind": {"dash_fail"}, "until": {until}, "limit": {"2"}},
		"big limit":   {"reason": {"x"}, "until": {until}, "limit": {"3"}},
		"no until":    {"reason": {"x"}, "limit": {"1"}},
		"bad class":   {"reason": {"x"}, "until": {until}, "limit": {"1"}, "class": {"a b"}},
		"zero limit":  {"reason": {"x"}, "until": {until}, "limit": {"0"}},
		"bad until":   {"reason": {"x"}, "until": {"yesterday"}, "limit": {"1"}},
		"empty limit": {"reason": {"x"}, "until": {until}},
	} {
		if code, body := post(t, h, "/replay-filter", bad); code != http.StatusBadRequest {
			t.Errorf("%s: status %d, want 400\n%s", name, code, body)
		}
	}
	reader := NewDashboard(c, &DashboardOptions{Identity: func(*http.Request) (string, bool) { return "viewer", false }})
	if code, _ := post(t, reader, "/replay-filter", form); code != http.StatusForbidden {
		t.Errorf("reader: status %d, want 403", code)
	}
	wantLacks(t, "dead letters for a reader", mustGet(t, reader, "/dead"), "/replay-filter")
	if rs, err := c.Audit(context.Background(), nil); err != nil || len(rs) != 0 {
		t.Fatalf("refused requests wrote %d audit records (%v)", len(rs), err)
	}

	code, body = post(t, h, "/replay-filter", form)
	if code != http.StatusOK {
		t.Fatalf("replay: %d\n%s", code, body)
	}
	wantContains(t, "result", body, "Replayed 2 jobs as <strong>ana</strong>")
	for id, want := range map[string]errandtype.JobState{"f-1": errandtype.StateQueued, "f-2": errandtype.StateQueued, "f-3": errandtype.StateDead, "f-0": errandtype.StateDead, "f-other": errandtype.StateDead} {
		if j, _ := replayed(t, c, id); j.State != want {
			t.Errorf("%s is %s, want %s", id, j.State, want)
		}
	}
	rs, err := c.Audit(context.Background(), &errand.AuditOpts{Action: errandtype.AuditBulkReplay})
	if err != nil || len(rs) != 2 || rs[0].Operator != "ana" || rs[0].Reason != "smtp fixed" {
		t.Fatalf("audit %+v, %v", rs, err)
	}
}

func TestDashboardFixAndReplay(t *testing.T) {
	clk := errandtest.NewClock(testStart)
	c := newSQLiteClient(t, clk)
	seed(t, c)
	h := NewDashboard(c, asAna)

	body := mustGet(t, h, "/jobs/dead-1")
	wantContains(t, "dead job", body, `action="/replay-args/confirm"`, `<textarea name="args"`, "&#34;note&#34;: &#34;card declined&#34;")

	newArgs := `{ "note": "card <ok>" }`
	code, body := post(t, h, "/replay-args/confirm", url.Values{"id": {"dead-1"}, "args": {newArgs}, "reason": {"typo in note"}})
	if code != http.StatusOK {
		t.Fatalf("confirm: %d\n%s", code, body)
	}
	wantContains(t, "confirm", body, "with new args as <strong>ana</strong>", "card declined", "card &lt;ok&gt;", `action="/replay-args"`)
	if j, _ := replayed(t, c, "dead-1"); j.State != errandtype.StateDead {
		t.Fatal("the confirm page replayed the job")
	}
	for name, bad := range map[string]url.Values{
		"no reason":       {"id": {"dead-1"}, "args": {newArgs}},
		"bad json":        {"id": {"dead-1"}, "args": {`{"note":`}, "reason": {"x"}},
		"wrong args type": {"id": {"dead-1"}, "args": {`{"note": 7}`}, "reason": {"x"}},
		"no job":          {"args": {newArgs}, "reason": {"x"}},
	} {
		if code, body := post(t, h, "/replay-args", bad); code != http.StatusBadRequest {
			t.Errorf("%s: status %d, want 400\n%s", name, code, body)
		}
	}
	if code, _ := post(t, h, "/replay-args", url.Values{"id": {"retry-1"}, "args": {"{}"}, "reason": {"x"}}); code != http.StatusConflict {
		t.Errorf("fix-and-replay of a retrying job: status %d, want 409", code)
	}
	hidden := NewDashboard(c, &DashboardOptions{Identity: asAna.Identity, HideArgs: true})
	if code, _ := post(t, hidden, "/replay-args", url.Values{"id": {"dead-1"}, "args": {newArgs}, "reason": {"x"}}); code != http.StatusForbidden {
		t.Errorf("fix-and-replay with hidden args: status %d, want 403", code)
	}
	wantLacks(t, "job page with hidden args", mustGet(t, hidden, "/jobs/dead-1"), "<textarea")

	code, body = post(t, h, "/replay-args", url.Values{"id": {"dead-1"}, "args": {hiddenValue(t, body, "args")}, "reason": {"typo in note"}})
	if code != http.StatusOK {
		t.Fatalf("replay: %d\n%s", code, body)
	}
	j, _ := replayed(t, c, "dead-1")
	if j.State != errandtype.StateQueued || string(j.Args) != `{"note":"card <ok>"}` {
		t.Fatalf("after fix-and-replay: %s %s", j.State, j.Args)
	}
	// The job page shows the action with the old and new args.
	body = mustGet(t, h, "/jobs/dead-1")
	row := tableRow(t, body, "typo in note")
	wantContains(t, "audit row", row, "replay_args", "<td>ana</td>", "<td>dead</td>", "old_args", "card declined", "card \\u003cok\\u003e")
}

func TestDashboardAuditPage(t *testing.T) {
	clk := errandtest.NewClock(testStart)
	c := newSQLiteClient(t, clk)
	seed(t, c)
	h := NewDashboard(c, asAna)
	ctx := context.Background()
	if _, err := c.Replay(ctx, "dead-1", &errand.ReplayOpts{Operator: "ana", Reason: "first " + hostile}); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Hour)
	if _, err := c.Replay(ctx, "panic-1", &errand.ReplayOpts{Operator: "bo", Reason: "second"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Cancel(ctx, "later-1", &errand.CancelOpts{Operator: "bo", Reason: "third"}); err != nil {
		t.Fatal(err)
	}

	body := mustGet(t, h, "/audit")
	wantContains(t, "audit", body, `aria-current="page">Audit`, "first", "second", "third", `<a href="/jobs/later-1">`)
	wantLacks(t, "audit", body, hostile)
	if i, j := strings.Index(body, "third"), strings.Index(body, "first"); i > j {
		t.Error("the audit is not newest first")
	}
	body = mustGet(t, h, "/audit?action=cancel")
	wantContains(t, "cancels", body, "third", `<option value="cancel" selected>`)
	wantLacks(t, "cancels", body, "second")
	body = mustGet(t, h, "/audit?job=panic-1")
	wantContains(t, "one job", body, "second")
	wantLacks(t, "one job", body, "third")
	body = mustGet(t, h, "/audit?since=2026-11-30+14:30")
	wantLacks(t, "since", body, "first")
	wantContains(t, "since", body, "second", "third")
	body = mustGet(t, h, "/audit?until=2026-11-30T14:30:00Z")
	wantContains(t, "until", body, "first")
	wantLacks(t, "until", body, "second")

	// Pages of two, older by the link.
	body = mustGet(t, h, "/audit?limit=2")
	wantContains(t, "first page", body, "third", "second", `rel="next"`)
	wantLacks(t, "first page", body, "first ")
	next := regexp.MustCompile(`<a href="\?([^"]+)" rel="next">`).FindStringSubmatch(body)
	body = mustGet(t, h, "/audit?"+strings.ReplaceAll(next[1], "&amp;", "&"))
	wantContains(t, "second page", body, "first", "Newest")
	wantLacks(t, "second page", body, "third", `rel="next"`)

	for _, path := range []string{"/audit?limit=0", "/audit?limit=x", "/audit?action=explode", "/audit?since=yesterday", "/audit?before=-1"} {
		if code, _ := get(t, h, path); code != http.StatusBadRequest {
			t.Errorf("GET %s: status %d, want 400", path, code)
		}
	}
	wantContains(t, "empty audit", mustGet(t, NewDashboard(newSQLiteClient(t, clk), nil), "/audit"), "No operator action yet.")
}

func TestDashboardSchedulesPage(t *testing.T) {
	clk := errandtest.NewClock(testStart)
	c := newSQLiteClient(t, clk)
	h := NewDashboard(c, nil)
	wantContains(t, "no schedules", mustGet(t, h, "/schedules"), "No schedules.", `aria-current="page">Schedules`)

	ss := c.Store().(errandstore.ScheduleStore)
	ctx := context.Background()
	if _, err := ss.ScheduleUpsert(ctx, &errandstore.ScheduleUpsertParams{Name: "nightly-<b>", Spec: "0 3 * * *", Kind: "dash_ok", Queue: "reports",
		Missed: errandtype.MissedCatchUp, NextFireAt: testStart.Add(13 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
	body := mustGet(t, h, "/schedules")
	row := tableRow(t, body, "nightly-&lt;b&gt;")
	wantContains(t, "schedule row", row, "0 3 * * *", "dash_ok", "reports", "2026-12-01 03:00:00 UTC", "in 13h00m", "none yet", string(errandtype.MissedCatchUp))
	wantLacks(t, "schedules", body, "nightly-<b>")
}

func TestDashboardBatchPage(t *testing.T) {
	clk := errandtest.NewClock(testStart)
	c := newSQLiteClient(t, clk)
	h := NewDashboard(c, nil)
	if code, _ := get(t, h, "/batches/nope"); code != http.StatusNotFound {
		t.Fatalf("unknown batch: status %d, want 404", code)
	}
	ctx := context.Background()
	if _, err := c.EnqueueBatch(ctx, []errand.EnqueueParams{
		{Args: errand.RawArgs{KindName: "dash_ok"}, Opts: &errand.EnqueueOpts{ID: "m-1"}},
		{Args: errand.RawArgs{KindName: "dash_ok"}, Opts: &errand.EnqueueOpts{ID: "m-2"}},
	}, &errand.BatchOpts{ID: "imp<1>", Callback: errand.RawArgs{KindName: "dash_ok"}}); err != nil {
		t.Fatal(err)
	}
	wantContains(t, "member links its batch", mustGet(t, h, "/jobs/m-1"), `href="/batches/imp%3C1%3E"`)
	body := mustGet(t, h, "/batches/imp%3C1%3E")
	wantContains(t, "open batch", body, "imp&lt;1&gt;", "not yet: 2 of 2 unfinished", "enqueued when the batch completes")
	wantLacks(t, "batch page", body, "imp<1>")
	for _, id := range []string{"m-1", "m-2"} {
		if _, err := c.Cancel(ctx, id, &errand.CancelOpts{Operator: "ops", Reason: "test"}); err != nil {
			t.Fatal(err)
		}
	}
	wantContains(t, "completed batch", mustGet(t, h, "/batches/imp%3C1%3E"), "0 succeeded, 0 dead, 2 cancelled",
		`href="/jobs/imp%3C1%3E.callback"`)
}
