package errandhttp

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/errandhq/errand"
)

func TestDashboardBatchesPage(t *testing.T) {
	c := newWorkflowClient(t)
	h := NewDashboard(c, nil)
	ctx := context.Background()
	wantContains(t, "no batches", mustGet(t, h, "/batches"), "No batches", `aria-current="page">Batches`)
	for _, q := range []string{"?state=running", "?limit=0", "?limit=x"} {
		if code, _ := get(t, h, "/batches"+q); code != http.StatusBadRequest {
			t.Fatalf("/batches%s: status %d, want 400", q, code)
		}
	}
	if _, err := c.EnqueueBatch(ctx, []errand.EnqueueParams{
		{Args: errand.RawArgs{KindName: "wf_refund"}, Opts: &errand.EnqueueOpts{ID: "r1"}},
		{Args: errand.RawArgs{KindName: "wf_refund"}, Opts: &errand.EnqueueOpts{ID: "r2"}},
	}, &errand.BatchOpts{ID: "imp<1>", Callback: errand.RawArgs{KindName: "wf_refund", JSON: json.RawMessage(`{}`)}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.EnqueueBatch(ctx, []errand.EnqueueParams{
		{Args: errand.RawArgs{KindName: "wf_refund"}, Opts: &errand.EnqueueOpts{ID: "r3"}},
	}, &errand.BatchOpts{ID: "b2"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Cancel(ctx, "r1", &errand.CancelOpts{Operator: "ops", Reason: "dup"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Cancel(ctx, "r2", &errand.CancelOpts{Operator: "ops", Reason: "dup"}); err != nil {
		t.Fatal(err)
	}

	all := mustGet(t, h, "/batches")
	wantContains(t, "batches", all,
		`<a href="/batches/imp%3C1%3E">imp&lt;1&gt;</a>`, `<a href="/batches/b2">b2</a>`,
		`<a href="/jobs/imp%3C1%3E.callback">imp&lt;1&gt;.callback</a>`, `<span class="zero">open</span>`)
	if strings.Contains(all, "imp<1>") {
		t.Fatal("a batch id is not escaped")
	}
	// The test clock stands still: batches of one time are listed by id,
	// descending.
	if strings.Index(all, "/batches/b2") < strings.Index(all, "/batches/imp%3C1%3E") {
		t.Fatal("batches of one time are not listed by id, descending")
	}
	open := mustGet(t, h, "/batches?state=open")
	wantContains(t, "open batches", open, `/batches/b2"`, `<option value="open" selected>open</option>`)
	if strings.Contains(open, "/batches/imp%3C1%3E") {
		t.Fatal("a completed batch is listed as open")
	}
	done := mustGet(t, h, "/batches?state=completed")
	wantContains(t, "completed batches", done, "/batches/imp%3C1%3E", `<td class="num">2</td>`)
	if strings.Contains(done, `/batches/b2"`) {
		t.Fatal("an open batch is listed as completed")
	}
	wantContains(t, "a page of one", mustGet(t, h, "/batches?limit=1"), "Show more", "/batches?limit=2")
	wantContains(t, "a batch's page", mustGet(t, h, "/batches/b2"), `aria-current="page">Batches`)
}
