package errandhttp

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandtest"
	"github.com/errandhq/errand/errandtype"
	"github.com/errandhq/errand/sqlite"
)

// The workflow tests' kinds: wfCharge records an output, wfBook fails
// permanently, wfRefund succeeds.
type wfCharge struct{}

func (wfCharge) Kind() string { return "wf_charge" }

type wfBook struct{}

func (wfBook) Kind() string { return "wf_book" }

type wfRefund struct{}

func (wfRefund) Kind() string { return "wf_refund" }

func newWorkflowClient(t *testing.T) *errand.Client[*sql.Tx] {
	t.Helper()
	clk := errandtest.NewClock(testStart)
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "errand.db"), &sqlite.Options{Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	ks := errand.NewKinds()
	errand.Handle(ks, func(ctx context.Context, _ *errandtype.Job, _ wfCharge) error {
		return errand.SetOutput(ctx, map[string]string{"charge_id": "ch_'1'"})
	}, nil)
	errand.Handle(ks, func(context.Context, *errandtype.Job, wfBook) error { return errand.Permanent(errors.New("no seats")) }, nil)
	errand.Handle(ks, func(context.Context, *errandtype.Job, wfRefund) error { return nil }, nil)
	c, err := errand.NewClient(st, &errand.Config{Kinds: ks, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestDashboardWorkflowPages(t *testing.T) {
	c := newWorkflowClient(t)
	h := NewDashboard(c, nil)
	ctx := context.Background()
	if code, _ := get(t, h, "/workflows/nope"); code != http.StatusNotFound {
		t.Fatalf("unknown workflow: status %d, want 404", code)
	}
	wantContains(t, "no workflows", mustGet(t, h, "/workflows"), "No workflows", `aria-current="page">Workflows`)
	wantContains(t, "overview without workflows", mustGet(t, h, "/"), `<section id="workflows">`, "No workflows yet.")
	if code, _ := get(t, h, "/workflows?state=dead"); code != http.StatusBadRequest {
		t.Fatalf("a job state as a workflow state: status %d, want 400", code)
	}
	if _, err := c.EnqueueWorkflow(ctx, []errand.WorkflowStep{
		{Name: "charge", Args: wfCharge{}, Compensate: wfRefund{}},
		{Name: "book", Args: wfBook{}, DependsOn: []string{"charge"}},
		{Name: "mail", Args: wfRefund{}, DependsOn: []string{"book"}},
	}, &errand.WorkflowOpts{ID: "trip<1>", Name: "trip"}); err != nil {
		t.Fatal(err)
	}
	const page = "/workflows/trip%3C1%3E"
	body := mustGet(t, h, page)
	wantContains(t, "new workflow", body, "trip&lt;1&gt;", "waiting for step charge (queued)",
		`href="/jobs/trip%3C1%3E.step.charge"`, "not enqueued yet")
	wantLacks(t, "workflow page", body, "trip<1>")
	wantContains(t, "charge row", tableRow(t, body, ">charge<"), "wf_charge", "queued", "wf_refund", "not enqueued")
	wantContains(t, "mail row", tableRow(t, body, ">mail<"), "book", "waiting", "none")
	wantContains(t, "listing", mustGet(t, h, "/workflows"), `href="/workflows/trip%3C1%3E"`, "running")

	workOne(t, c, errand.DefaultQueue) // charge succeeds, book is enqueued
	job := mustGet(t, h, "/jobs/trip%3C1%3E.step.charge")
	wantContains(t, "step's job page", job, `href="/workflows/trip%3C1%3E"`, "Output", "ch_&#39;1&#39;")
	wantLacks(t, "step's job page", job, "ch_'1'")
	wantContains(t, "after charge", mustGet(t, h, page), "waiting for step book (queued)", "1/20", "ch_&#39;1&#39;")

	workOne(t, c, errand.DefaultQueue) // book is dead: undo charge is enqueued
	body = mustGet(t, h, page)
	wantContains(t, "compensating", body, "compensating: undo charge is queued; once it has failed, rerun it as a new workflow: errand workflow rerun trip&lt;1&gt;",
		`href="/jobs/trip%3C1%3E.undo.charge"`)
	wantLacks(t, "compensating", body, "Rerun as a new workflow")
	wantContains(t, "failed step", body, "<dt>Failed step</dt><dd>book</dd>")
	wantContains(t, "compensating listing", mustGet(t, h, "/workflows?state=compensating"), "trip&lt;1&gt;")
	wantContains(t, "running listing", mustGet(t, h, "/workflows?state=running"), "No workflows in state running")
	code, confirm := post(t, h, "/replay-filter/confirm", url.Values{"kind": {"wf_book"}, "reason": {"seats added"}})
	if code != http.StatusOK {
		t.Fatalf("replay by filter while compensating: status %d\n%s", code, confirm)
	}
	wantContains(t, "replay by filter while compensating", confirm, "No dead job matches",
		"Left out: 1 dead step of workflows that have compensated", `href="/jobs/trip%3C1%3E.step.book"`)
	wantContains(t, "overview while compensating", mustGet(t, h, "/"),
		`<a class="tile" href="/workflows?state=running"><span class="n">0</span> running</a>`,
		`<a class="tile bad" href="/workflows?state=compensating"><span class="n">1</span> compensating</a>`,
		`<a class="tile" href="/workflows?state=failed"><span class="n">0</span> failed</a>`)

	workOne(t, c, errand.DefaultQueue) // undo charge succeeds: failed
	body = mustGet(t, h, page)
	wantContains(t, "failed", body, "failed: step book is dead (permanent); compensated; rerun it as a new workflow: errand workflow rerun trip&lt;1&gt;",
		`action="/workflow-rerun"`, "Rerun as a new workflow", "<dt>Compensation began</dt>")
	wantContains(t, "book row after compensation", tableRow(t, body, "<td>book</td>"), "dead", "permanent: no seats")
	wantContains(t, "charge row after compensation", tableRow(t, body, ">charge<"), "succeeded", "wf_refund", "trip&lt;1&gt;.undo.charge")
	wantContains(t, "overview after the compensation", mustGet(t, h, "/"),
		`<a class="tile" href="/workflows?state=compensating"><span class="n">0</span> compensating</a>`,
		`<a class="tile bad" href="/workflows?state=failed"><span class="n">1</span> failed</a>`)

	// The step's page says it is not replayed, offers the workflow's page
	// instead of the replay forms, and the replay action refuses it.
	stepPage := mustGet(t, h, "/jobs/trip%3C1%3E.step.book")
	wantContains(t, "compensated step's page", stepPage, "dead; it is not replayed, as its workflow trip&lt;1&gt; has begun compensating: failed: step book",
		"Rerun its workflow from")
	wantLacks(t, "compensated step's page", stepPage, "Replay…", "Fix and replay…")
	wantContains(t, "a running step's page", mustGet(t, h, "/jobs/trip%3C1%3E.step.charge"), "succeeded")
	code, done := post(t, h, "/replay", url.Values{"id": {"trip<1>.step.book"}, "reason": {"seats added"}})
	if code != http.StatusConflict {
		t.Fatalf("replay of the compensated step: status %d\n%s", code, done)
	}
	wantContains(t, "replay of the compensated step", done, "errand workflow rerun trip&lt;1&gt;")
	rerun := func(form url.Values) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPost, "/workflow-rerun", strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Sec-Fetch-Site", "same-origin")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	if rec := rerun(url.Values{"id": {"trip<1>"}, "new_id": {"trip<1>"}}); rec.Code != http.StatusBadRequest {
		t.Fatalf("rerun as itself: status %d", rec.Code)
	}
	if rec := rerun(url.Values{"id": {"nope"}}); rec.Code != http.StatusNotFound {
		t.Fatalf("rerun of an unknown workflow: status %d", rec.Code)
	}
	readOnly := NewDashboard(c, &DashboardOptions{Identity: func(*http.Request) (string, bool) { return "viewer", false }})
	wantLacks(t, "read-only workflow page", mustGet(t, readOnly, page), "Rerun as a new workflow")
	if code, _ := post(t, readOnly, "/workflow-rerun", url.Values{"id": {"trip<1>"}}); code != http.StatusForbidden {
		t.Fatalf("rerun by a reader: status %d", code)
	}
	rec := rerun(url.Values{"id": {"trip<1>"}, "new_id": {"trip<2>"}})
	if rec.Code != http.StatusSeeOther || rec.Header().Get("Location") != "/workflows/trip%3C2%3E" {
		t.Fatalf("rerun: status %d, location %q", rec.Code, rec.Header().Get("Location"))
	}
	wantContains(t, "the rerun's page", mustGet(t, h, "/workflows/trip%3C2%3E"), "<dt>Rerun of</dt>", `href="/workflows/trip%3C1%3E"`,
		"waiting for step charge (queued)")
	body = mustGet(t, h, page)
	wantContains(t, "the old workflow's page", body, "<dt>Rerun as</dt>", `href="/workflows/trip%3C2%3E"`,
		"failed: rerun as workflow trip&lt;2&gt;; see errand workflow trip&lt;2&gt;")
	wantLacks(t, "the old workflow's page", body, "Rerun as a new workflow")
	if rec := rerun(url.Values{"id": {"trip<1>"}, "new_id": {"trip<3>"}}); rec.Code != http.StatusConflict {
		t.Fatalf("a second rerun: status %d", rec.Code)
	}

	// HideArgs hides outputs too.
	hidden := NewDashboard(c, &DashboardOptions{HideArgs: true})
	wantLacks(t, "hidden output", mustGet(t, hidden, page), "ch_&#39;1&#39;")
	wantLacks(t, "hidden output on the job page", mustGet(t, hidden, "/jobs/trip%3C1%3E.step.charge"), "ch_&#39;1&#39;")
}

// The JSON of a workflow round-trips: what the API and the CLI print.
func TestWorkflowJSONShape(t *testing.T) {
	b, err := json.Marshal(&errandtype.Workflow{Steps: []errandtype.WorkflowStepView{{Name: "a", DependsOn: []string{}}}})
	if err != nil || !strings.Contains(string(b), `"failed_step":null`) || !strings.Contains(string(b), `"compensation":null`) {
		t.Fatalf("workflow JSON %s (%v)", b, err)
	}
}

// The overview counts the workflows of each state exactly, past the 100
// it once stopped at.
func TestDashboardOverviewCountsWorkflows(t *testing.T) {
	c := newWorkflowClient(t)
	h := NewDashboard(c, nil)
	for i := range 101 {
		if _, err := c.EnqueueWorkflow(context.Background(), []errand.WorkflowStep{{Name: "charge", Args: wfCharge{}}},
			&errand.WorkflowOpts{ID: fmt.Sprintf("w%d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	wantContains(t, "overview", mustGet(t, h, "/"),
		`<a class="tile" href="/workflows?state=running"><span class="n">101</span> running</a>`,
		`<a class="tile" href="/workflows?state=succeeded"><span class="n">0</span> succeeded</a>`)
	wantLacks(t, "overview", mustGet(t, h, "/"), "100+", "counted up to")
}
