package errandhttp_test

import (
	"database/sql"
	"encoding/json"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandhttp"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtest"
	"github.com/errandhq/errand/errandtype"
)

// checkoutBody is a three-step workflow in the API's JSON: kinds no Go
// handler knows, as any language would send them.
func checkoutBody(id string) map[string]any {
	return map[string]any{"id": id, "name": "checkout", "steps": []map[string]any{
		{"name": "charge", "kind": "charge_card", "args": map[string]int{"order": 7}, "max_attempts": 3,
			"compensate": map[string]any{"kind": "refund_card", "args": map[string]int{"order": 7}, "queue": "refunds"}},
		{"name": "reserve", "kind": "reserve_stock", "depends_on": []string{"charge"}},
		{"name": "ship", "kind": "ship_order", "depends_on": []string{"charge", "reserve"}, "queue": "shipping"},
	}}
}

func TestAPIWorkflowEnqueue(t *testing.T) {
	eachStore(t, func(t *testing.T, st errandstore.TxStore[*sql.Tx], clock *errandtest.Clock) {
		s := newServer(t, st, clock, nil)
		for _, tt := range []struct {
			name string
			body any
			line string
		}{
			{"no steps", map[string]any{"id": "w"}, "steps"},
			{"no kind", map[string]any{"steps": []map[string]any{{"name": "a"}}}, "steps[0] (a).kind"},
			{"args not an object", map[string]any{"steps": []map[string]any{{"name": "a", "kind": "k", "args": []int{1}}}}, "must be a JSON object"},
			{"unknown field", map[string]any{"steps": []map[string]any{{"name": "a", "kind": "k", "run_at": "2026-01-01T00:00:00Z"}}}, "unknown field"},
			{"unknown dependency", map[string]any{"steps": []map[string]any{{"name": "a", "kind": "k", "depends_on": []string{"b"}}}}, `depends on \"b\"`},
			{"two steps of a name", map[string]any{"steps": []map[string]any{{"name": "a", "kind": "k"}, {"name": "a", "kind": "k"}}}, "names two steps"},
			{"bad compensation", map[string]any{"steps": []map[string]any{{"name": "a", "kind": "k", "compensate": map[string]any{"kind": "u", "max_attempts": -1}}}}, "workflow step a: compensation: max_attempts"},
			{"id too long", map[string]any{"id": strings.Repeat("x", errandstore.MaxWorkflowIDBytes+1), "steps": []map[string]any{{"name": "a", "kind": "k"}}}, "workflow id"},
		} {
			r := s.op(t, "POST", "/api/v1/workflows", tt.body)
			want(t, tt.name, r, http.StatusBadRequest, "invalid_input")
			if !strings.Contains(string(r.body), tt.line) {
				t.Errorf("%s: %s; want a message containing %q", tt.name, r.body, tt.line)
			}
		}
		if n := s.jobCount(t); n != 0 {
			t.Fatalf("bad workflows wrote %d jobs", n)
		}
		if ws, err := s.c.Workflows(t.Context(), nil); err != nil || len(ws) != 0 {
			t.Fatalf("bad workflows wrote workflows: %v (%v)", ws, err)
		}
		if r := s.do(t, req{method: "POST", path: "/api/v1/workflows", token: readerSecret, body: checkoutBody("w1")}); r.status != http.StatusForbidden {
			t.Fatalf("a reader enqueued a workflow: %d %s", r.status, r.body)
		}

		r := s.op(t, "POST", "/api/v1/workflows", checkoutBody("order-7"))
		want(t, "enqueue", r, http.StatusCreated, "")
		var res struct {
			Workflow  errandtype.Workflow `json:"workflow"`
			Jobs      []*errandtype.Job   `json:"jobs"`
			Duplicate bool                `json:"duplicate"`
		}
		if err := json.Unmarshal(r.body, &res); err != nil {
			t.Fatal(err)
		}
		wf := res.Workflow
		if res.Duplicate || wf.ID != "order-7" || wf.Name != "checkout" || wf.State != errandtype.WorkflowRunning || len(wf.Steps) != 3 ||
			len(res.Jobs) != 1 || res.Jobs[0].ID != "order-7.step.charge" {
			t.Fatalf("enqueue answered %s", r.body)
		}
		if c := wf.Steps[0].Compensation; c == nil || c.Kind != "refund_card" || c.JobID != "order-7.undo.charge" || c.Enqueued {
			t.Fatalf("charge's compensation = %+v", c)
		}
		j := s.job(t, "order-7.step.charge")
		var args struct {
			Order    int                         `json:"order"`
			Workflow errandstore.WorkflowContext `json:"workflow"`
		}
		if err := json.Unmarshal(j.Args, &args); err != nil {
			t.Fatal(err)
		}
		if j.MaxAttempts != 3 || j.WorkflowID == nil || *j.WorkflowID != "order-7" || args.Order != 7 ||
			args.Workflow.ID != "order-7" || args.Workflow.Step != "charge" {
			t.Fatalf("charge's job = %+v, args %s", j, j.Args)
		}
		// The same id again, or the same Idempotency-Key: the existing
		// workflow, nothing enqueued.
		want(t, "enqueue again", s.op(t, "POST", "/api/v1/workflows", checkoutBody("order-7")), http.StatusOK, "")
		again := s.do(t, req{method: "POST", path: "/api/v1/workflows", token: operatorSecret,
			body: checkoutBody(""), header: map[string]string{errandhttp.IdempotencyHeader: "order-7"}})
		want(t, "enqueue with the key", again, http.StatusOK, "")
		if again.header.Get("Idempotent-Replayed") != "true" || again.json(t)["duplicate"] != true {
			t.Fatalf("enqueue with the key: %v %s", again.header, again.body)
		}
		want(t, "key and id differ", s.do(t, req{method: "POST", path: "/api/v1/workflows", token: operatorSecret,
			body: checkoutBody("x"), header: map[string]string{errandhttp.IdempotencyHeader: "y"}}), http.StatusBadRequest, "invalid_input")
		if n := s.jobCount(t); n != 1 {
			t.Fatalf("%d jobs after the duplicates, want 1", n)
		}
	})
}

// TestAPIWorkflowIdempotencyConflict reuses an Idempotency-Key: for the
// same workflow it answers the existing one, for a different one 409
// idempotency_conflict, writing nothing either way.
func TestAPIWorkflowIdempotencyConflict(t *testing.T) {
	eachStore(t, func(t *testing.T, st errandstore.TxStore[*sql.Tx], clock *errandtest.Clock) {
		s := newServer(t, st, clock, nil)
		post := func(body map[string]any) response {
			return s.do(t, req{method: "POST", path: "/api/v1/workflows", token: operatorSecret,
				body: body, header: map[string]string{errandhttp.IdempotencyHeader: "order-8"}})
		}
		want(t, "first", post(checkoutBody("")), http.StatusCreated, "")
		// Run the first step, then cancel the second: the first step's job
		// and its compensation's are there to compare.
		r := s.op(t, "POST", "/api/v1/queues/default/claim", map[string]any{"kinds": []string{"charge_card"}})
		want(t, "claim", r, http.StatusOK, "")
		var claimed struct {
			Jobs []errandtype.Envelope `json:"jobs"`
		}
		if err := json.Unmarshal(r.body, &claimed); err != nil || len(claimed.Jobs) != 1 {
			t.Fatalf("claimed %s (%v)", r.body, err)
		}
		want(t, "ack", s.op(t, "POST", "/api/v1/jobs/order-8.step.charge/ack", map[string]any{"lease_token": claimed.Jobs[0].LeaseToken}), http.StatusOK, "")
		if _, err := st.(errandstore.WorkflowStore).WorkflowAdvance(t.Context(), &errandstore.WorkflowAdvanceParams{IDs: []string{"order-8"}}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.c.Cancel(t.Context(), "order-8.step.reserve", &errand.CancelOpts{Operator: "ops", Reason: "test"}); err != nil {
			t.Fatal(err)
		}
		if j := s.job(t, "order-8.undo.charge"); j.Queue != "refunds" {
			t.Fatalf("charge's compensation = %+v", j)
		}
		same := post(checkoutBody(""))
		want(t, "same workflow", same, http.StatusOK, "")
		if same.header.Get("Idempotent-Replayed") != "true" || same.json(t)["duplicate"] != true {
			t.Fatalf("same workflow: %v %s", same.header, same.body)
		}
		// Written in another order, with the defaults spelt out: the same.
		spelt := checkoutBody("")
		spelt["steps"].([]map[string]any)[0]["args"] = map[string]any{"order": 7, "workflow": nil}
		spelt["steps"].([]map[string]any)[0]["queue"] = errand.DefaultQueue
		want(t, "same workflow, defaults spelt out", post(spelt), http.StatusOK, "")

		for _, tt := range []struct {
			name   string
			change func(b map[string]any)
		}{
			{"other name", func(b map[string]any) { b["name"] = "refund" }},
			{"other args of a started step", func(b map[string]any) { b["steps"].([]map[string]any)[0]["args"] = map[string]int{"order": 8} }},
			{"other queue of a started step", func(b map[string]any) { b["steps"].([]map[string]any)[0]["queue"] = "fast" }},
			{"other kind", func(b map[string]any) { b["steps"].([]map[string]any)[1]["kind"] = "hold_stock" }},
			{"other dependencies", func(b map[string]any) { b["steps"].([]map[string]any)[2]["depends_on"] = []string{"reserve"} }},
			{"no compensation", func(b map[string]any) { delete(b["steps"].([]map[string]any)[0], "compensate") }},
			{"other compensation", func(b map[string]any) {
				b["steps"].([]map[string]any)[0]["compensate"] = map[string]any{"kind": "void_card"}
			}},
			{"other args of a started compensation", func(b map[string]any) {
				b["steps"].([]map[string]any)[0]["compensate"] = map[string]any{"kind": "refund_card", "args": map[string]int{"order": 8}, "queue": "refunds"}
			}},
			{"one step more", func(b map[string]any) {
				b["steps"] = append(b["steps"].([]map[string]any), map[string]any{"name": "mail", "kind": "mail"})
			}},
		} {
			b := checkoutBody("")
			tt.change(b)
			r := post(b)
			want(t, tt.name, r, http.StatusConflict, "idempotency_conflict")
			if !strings.Contains(string(r.body), `Idempotency-Key \"order-8\" was used for a different workflow`) {
				t.Errorf("%s: %s", tt.name, r.body)
			}
		}
		if n := s.jobCount(t); n != 3 {
			t.Fatalf("%d jobs after the reused keys, want 3 (charge, reserve and charge's compensation)", n)
		}
		ws, err := s.c.Workflows(t.Context(), nil)
		if err != nil || len(ws) != 1 || ws[0].Name != "checkout" || len(ws[0].Steps) != 3 || ws[0].State != errandtype.WorkflowCompensating {
			t.Fatalf("workflows after the reused keys: %v (%v)", ws, err)
		}
	})
}

func TestAPIWorkflowGetAndList(t *testing.T) {
	eachStore(t, func(t *testing.T, st errandstore.TxStore[*sql.Tx], clock *errandtest.Clock) {
		s := newServer(t, st, clock, nil)
		want(t, "unknown workflow", s.do(t, req{method: "GET", path: "/api/v1/workflows/nope", token: readerSecret}), http.StatusNotFound, "not_found")
		r := s.do(t, req{method: "GET", path: "/api/v1/workflows", token: readerSecret})
		want(t, "empty list", r, http.StatusOK, "")
		if strings.TrimSpace(string(r.body)) != `{"next_cursor":null,"workflows":[]}` {
			t.Fatalf("empty list: %s", r.body)
		}
		want(t, "enqueue w1", s.op(t, "POST", "/api/v1/workflows", checkoutBody("w1")), http.StatusCreated, "")
		clock.Advance(1e9)
		want(t, "enqueue w2", s.op(t, "POST", "/api/v1/workflows", checkoutBody("w2")), http.StatusCreated, "")
		if _, err := s.c.Cancel(t.Context(), "w1.step.charge", &errand.CancelOpts{Operator: "ops", Reason: "test"}); err != nil {
			t.Fatal(err)
		}

		r = s.do(t, req{method: "GET", path: "/api/v1/workflows/w1", token: readerSecret})
		want(t, "get", r, http.StatusOK, "")
		var wf errandtype.Workflow
		if err := json.Unmarshal(r.body, &wf); err != nil {
			t.Fatal(err)
		}
		if wf.ID != "w1" || wf.State != errandtype.WorkflowFailed || wf.FailedStep == nil || *wf.FailedStep != "charge" ||
			wf.Steps[0].State == nil || *wf.Steps[0].State != errandtype.StateCancelled || wf.Steps[1].State != nil {
			t.Fatalf("get after cancelling the first step: %s", r.body)
		}
		want(t, "get with a query", s.do(t, req{method: "GET", path: "/api/v1/workflows/w1?x=1", token: readerSecret}), http.StatusBadRequest, "invalid_input")

		list := func(query string) []string {
			t.Helper()
			r := s.do(t, req{method: "GET", path: "/api/v1/workflows" + query, token: readerSecret})
			want(t, "list "+query, r, http.StatusOK, "")
			var l struct {
				Workflows []errandtype.Workflow `json:"workflows"`
			}
			if err := json.Unmarshal(r.body, &l); err != nil {
				t.Fatal(err)
			}
			ids := []string{}
			for _, w := range l.Workflows {
				ids = append(ids, w.ID)
			}
			return ids
		}
		for _, tt := range []struct{ query, want string }{
			{"", "w2 w1"},
			{"?limit=1", "w2"},
			{"?state=failed", "w1"},
			{"?state=running", "w2"},
			{"?state=running,failed", "w2 w1"},
			{"?state=succeeded", ""},
		} {
			if got := strings.Join(list(tt.query), " "); got != tt.want {
				t.Errorf("list%s = %q, want %q", tt.query, got, tt.want)
			}
		}
		// Pages: a full page has a next_cursor, which continues the list.
		r = s.do(t, req{method: "GET", path: "/api/v1/workflows?limit=1", token: readerSecret})
		var first struct {
			Workflows []errandtype.Workflow `json:"workflows"`
			Next      *string               `json:"next_cursor"`
		}
		if err := json.Unmarshal(r.body, &first); err != nil || len(first.Workflows) != 1 || first.Next == nil {
			t.Fatalf("first page: %s (%v)", r.body, err)
		}
		if got := strings.Join(list("?limit=1&cursor="+url.QueryEscape(*first.Next)), " "); got != "w1" {
			t.Fatalf("second page = %q, want w1", got)
		}
		for _, q := range []string{"?state=dead", "?limit=0", "?limit=x", "?sate=running", "?cursor=w2"} {
			want(t, "list"+q, s.do(t, req{method: "GET", path: "/api/v1/workflows" + q, token: readerSecret}), http.StatusBadRequest, "invalid_input")
		}
	})
}

func TestAPIJobOutput(t *testing.T) {
	eachStore(t, func(t *testing.T, st errandstore.TxStore[*sql.Tx], clock *errandtest.Clock) {
		s := newServer(t, st, clock, nil)
		want(t, "enqueue", s.op(t, "POST", "/api/v1/workflows", checkoutBody("o1")), http.StatusCreated, "")
		r := s.op(t, "POST", "/api/v1/queues/default/claim", map[string]any{"kinds": []string{"charge_card"}})
		want(t, "claim", r, http.StatusOK, "")
		var claimed struct {
			Jobs []errandtype.Envelope `json:"jobs"`
		}
		if err := json.Unmarshal(r.body, &claimed); err != nil || len(claimed.Jobs) != 1 {
			t.Fatalf("claimed %s (%v)", r.body, err)
		}
		env := claimed.Jobs[0]
		path := "/api/v1/jobs/" + env.ID + "/output"

		want(t, "wrong token", s.op(t, "POST", path, map[string]any{"lease_token": "nope", "output": map[string]string{"charge": "ch_1"}}),
			http.StatusConflict, "lease_lost")
		want(t, "no output", s.op(t, "POST", path, map[string]any{"lease_token": env.LeaseToken}), http.StatusBadRequest, "invalid_input")
		want(t, "too large", s.op(t, "POST", path, map[string]any{"lease_token": env.LeaseToken,
			"output": strings.Repeat("x", errandstore.MaxOutputBytes)}), http.StatusBadRequest, "invalid_input")
		if j := s.job(t, env.ID); j.Output != nil {
			t.Fatalf("refused outputs wrote %s", j.Output)
		}
		if r := s.do(t, req{method: "POST", path: path, token: readerSecret, body: map[string]any{"lease_token": env.LeaseToken, "output": 1}}); r.status != http.StatusForbidden {
			t.Fatalf("a reader recorded an output: %d %s", r.status, r.body)
		}
		want(t, "output", s.op(t, "POST", path, map[string]any{"lease_token": env.LeaseToken, "output": map[string]string{"charge": "ch_1"}}), http.StatusOK, "")
		if j := s.job(t, env.ID); !strings.Contains(string(j.Output), `"ch_1"`) {
			t.Fatalf("output recorded as %s", j.Output)
		}
		want(t, "ack", s.op(t, "POST", "/api/v1/jobs/"+env.ID+"/ack", map[string]any{"lease_token": env.LeaseToken}), http.StatusOK, "")
		want(t, "output after the ack", s.op(t, "POST", path, map[string]any{"lease_token": env.LeaseToken, "output": 2}), http.StatusConflict, "lease_lost")

		// The next step receives the output in its args once the workflow
		// advances.
		if _, err := st.(errandstore.WorkflowStore).WorkflowAdvance(t.Context(), &errandstore.WorkflowAdvanceParams{IDs: []string{"o1"}}); err != nil {
			t.Fatal(err)
		}
		var args struct {
			Workflow errandstore.WorkflowContext `json:"workflow"`
		}
		if err := json.Unmarshal(s.job(t, "o1.step.reserve").Args, &args); err != nil {
			t.Fatal(err)
		}
		out, ok, err := errand.StepOutput[map[string]string](args.Workflow, "charge")
		if err != nil || !ok || out["charge"] != "ch_1" {
			t.Fatalf("reserve's workflow context = %+v (%v, %v)", args.Workflow, ok, err)
		}
		r = s.do(t, req{method: "GET", path: "/api/v1/workflows/o1", token: readerSecret})
		if !strings.Contains(string(r.body), `"ch_1"`) {
			t.Fatalf("workflow does not show the step's output: %s", r.body)
		}
	})
}

// TestAPIWorkflowReplayAndRerun: once a workflow has enqueued a
// compensation, a replay of its step is 409 workflow_compensated naming the
// rerun, and writes nothing; the workflow's JSON says the same in "next".
// POST /api/v1/workflows/{id}/rerun refuses an open workflow, then starts
// the new one, and answers a retry with the same workflow.
func TestAPIWorkflowReplayAndRerun(t *testing.T) {
	eachStore(t, func(t *testing.T, st errandstore.TxStore[*sql.Tx], clock *errandtest.Clock) {
		s := newServer(t, st, clock, nil)
		want(t, "enqueue", s.op(t, "POST", "/api/v1/workflows", checkoutBody("w1")), http.StatusCreated, "")
		work := func(queue, kind, id string) {
			t.Helper()
			r := s.op(t, "POST", "/api/v1/queues/"+queue+"/claim", map[string]any{"kinds": []string{kind}})
			var claimed struct {
				Jobs []errandtype.Envelope `json:"jobs"`
			}
			if err := json.Unmarshal(r.body, &claimed); err != nil || len(claimed.Jobs) != 1 || claimed.Jobs[0].ID != id {
				t.Fatalf("claim %s: %s (%v)", id, r.body, err)
			}
			want(t, "ack "+id, s.op(t, "POST", "/api/v1/jobs/"+id+"/ack", map[string]any{"lease_token": claimed.Jobs[0].LeaseToken}), http.StatusOK, "")
			if _, err := st.(errandstore.WorkflowStore).WorkflowAdvance(t.Context(), &errandstore.WorkflowAdvanceParams{}); err != nil {
				t.Fatal(err)
			}
		}
		get := func(id string) (wf struct {
			errandtype.Workflow
			Next string `json:"next"`
		}) {
			t.Helper()
			r := s.do(t, req{method: "GET", path: "/api/v1/workflows/" + id, token: readerSecret})
			want(t, "get "+id, r, http.StatusOK, "")
			if err := json.Unmarshal(r.body, &wf); err != nil {
				t.Fatal(err)
			}
			return wf
		}
		work("default", "charge_card", "w1.step.charge")
		clock.Advance(time.Second)
		if _, err := s.c.Cancel(t.Context(), "w1.step.reserve", &errand.CancelOpts{Operator: "ops", Reason: "test"}); err != nil {
			t.Fatal(err)
		}
		if wf := get("w1"); wf.State != errandtype.WorkflowCompensating || wf.CompensationStartedAt == nil ||
			wf.Next != "compensating: undo charge is queued; once it has failed, rerun it as a new workflow: errand workflow rerun w1" {
			t.Fatalf("compensating workflow: %s, %v: %q", wf.State, wf.CompensationStartedAt, wf.Next)
		}

		before := s.job(t, "w1.step.reserve")
		r := s.op(t, "POST", "/api/v1/jobs/w1.step.reserve/replay", map[string]any{"reason": "fixed"})
		want(t, "replay of a compensated step", r, http.StatusConflict, "workflow_compensated")
		if !strings.Contains(string(r.body), "errand workflow rerun w1") {
			t.Fatalf("replay refusal does not name the rerun: %s", r.body)
		}
		if after := s.job(t, "w1.step.reserve"); !reflect.DeepEqual(before, after) {
			t.Fatalf("refused replay changed the step:\n%+v\n%+v", before, after)
		}
		want(t, "rerun while compensating", s.op(t, "POST", "/api/v1/workflows/w1/rerun", nil), http.StatusConflict, "wrong_state")

		work("refunds", "refund_card", "w1.undo.charge")
		if wf := get("w1"); wf.State != errandtype.WorkflowFailed ||
			wf.Next != "failed: step reserve is cancelled; compensated; rerun it as a new workflow: errand workflow rerun w1" {
			t.Fatalf("failed workflow: %s: %q", wf.State, wf.Next)
		}
		want(t, "replay once failed", s.op(t, "POST", "/api/v1/jobs/w1.step.reserve/replay", map[string]any{"reason": "fixed"}), http.StatusConflict, "workflow_compensated")

		want(t, "rerun by a reader", s.do(t, req{method: "POST", path: "/api/v1/workflows/w1/rerun", token: readerSecret}), http.StatusForbidden, "")
		want(t, "rerun of an unknown workflow", s.op(t, "POST", "/api/v1/workflows/nope/rerun", nil), http.StatusNotFound, "not_found")
		want(t, "rerun as itself", s.op(t, "POST", "/api/v1/workflows/w1/rerun", map[string]any{"id": "w1"}), http.StatusBadRequest, "invalid_input")
		want(t, "rerun with an unknown field", s.op(t, "POST", "/api/v1/workflows/w1/rerun", map[string]any{"name": "x"}), http.StatusBadRequest, "invalid_input")
		var res struct {
			Workflow struct {
				errandtype.Workflow
				Next string `json:"next"`
			} `json:"workflow"`
			Jobs      []*errandtype.Job `json:"jobs"`
			Duplicate bool              `json:"duplicate"`
		}
		r = s.op(t, "POST", "/api/v1/workflows/w1/rerun", map[string]any{"id": "w1b"})
		want(t, "rerun", r, http.StatusCreated, "")
		if err := json.Unmarshal(r.body, &res); err != nil {
			t.Fatal(err)
		}
		if res.Duplicate || res.Workflow.ID != "w1b" || res.Workflow.RerunOf == nil || *res.Workflow.RerunOf != "w1" ||
			len(res.Jobs) != 1 || res.Jobs[0].ID != "w1b.step.charge" || res.Workflow.Next != "waiting for step charge (queued)" {
			t.Fatalf("rerun answered %s", r.body)
		}
		r = s.op(t, "POST", "/api/v1/workflows/w1/rerun", map[string]any{"id": "w1b"})
		want(t, "rerun again", r, http.StatusOK, "")
		if r.json(t)["duplicate"] != true || len(r.json(t)["jobs"].([]any)) != 0 {
			t.Fatalf("rerun again answered %s", r.body)
		}
		if wf := get("w1"); wf.RerunAs == nil || *wf.RerunAs != "w1b" || wf.Next != "failed: rerun as workflow w1b; see errand workflow w1b" {
			t.Fatalf("the old workflow after the rerun: %+v", wf)
		}
		want(t, "second rerun", s.op(t, "POST", "/api/v1/workflows/w1/rerun", map[string]any{"id": "w1c"}), http.StatusConflict, "wrong_state")
	})
}

// coreStore is a real store seen through the required interfaces alone: a
// store that keeps no workflows.
type coreStore struct {
	errandstore.TxStore[*sql.Tx]
}

// A server whose store keeps no workflows refuses an output with a 400
// that says so, and serves no workflow gauges.
func TestAPIJobOutputWithoutWorkflows(t *testing.T) {
	clock := newTestClock()
	s := newServer(t, coreStore{openSQLite(t, clock)}, clock, nil)
	r := s.op(t, "POST", "/api/v1/jobs/j1/output", map[string]any{"lease_token": "t", "output": 1})
	want(t, "output", r, http.StatusBadRequest, "invalid_input")
	if !strings.Contains(string(r.body), "does not keep outputs") {
		t.Errorf("output refused with %s, want the store named", r.body)
	}
	fams := scrape(t, errandhttp.NewMetrics(s.c, &errandhttp.MetricsOptions{Clock: clock}))
	if _, ok := fams["errand_workflows"]; ok {
		t.Error("errand_workflows served for a store without workflows")
	}
}
