package errandhttp_test

import (
	"database/sql"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandhttp"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtest"
	"github.com/errandhq/errand/errandtype"
)

// importBody is a batch of three in the API's JSON, with a callback: kinds
// no Go handler knows, as any language would send them.
func importBody(id string) map[string]any {
	return map[string]any{"id": id, "jobs": []map[string]any{
		{"id": id + "-r1", "kind": "import_row", "args": map[string]int{"row": 1}, "max_attempts": 3},
		{"kind": "import_row", "args": map[string]int{"row": 2}, "queue": "imports", "tags": []string{"bulk"}},
		{"kind": "import_row", "args": map[string]int{"row": 3}, "delay": "1h", "unique_key": id + "-row-3", "unique_scope": "until_finished"},
	}, "callback": map[string]any{"kind": "import_done", "args": map[string]int{"import": 7}, "queue": "callbacks", "max_attempts": 5}}
}

type batchAnswer struct {
	Batch     errandstore.Batch `json:"batch"`
	Jobs      []*errandtype.Job `json:"jobs"`
	Duplicate bool              `json:"duplicate"`
}

func TestAPIBatchEnqueue(t *testing.T) {
	eachStore(t, func(t *testing.T, st errandstore.TxStore[*sql.Tx], clock *errandtest.Clock) {
		s := newServer(t, st, clock, nil)
		job := map[string]any{"kind": "k"}
		for _, tt := range []struct {
			name string
			body any
			line string
		}{
			{"no jobs", map[string]any{"id": "b"}, "jobs: are missing"},
			{"no kind", map[string]any{"jobs": []map[string]any{job, {"args": map[string]int{"n": 1}}}}, "jobs[1].kind"},
			{"run_at and delay", map[string]any{"jobs": []map[string]any{{"kind": "k", "run_at": "2030-01-01T00:00:00Z", "delay": "1s"}}}, "jobs[0].run_at: is set, and so is delay; give run_at or delay"},
			{"negative delay", map[string]any{"jobs": []map[string]any{{"kind": "k", "delay": "-1s"}}}, "jobs[0].delay: must not be negative"},
			{"bad member option", map[string]any{"jobs": []map[string]any{job, {"kind": "k", "max_attempts": -1}}}, "job 1: max_attempts"},
			{"eager member", map[string]any{"jobs": []map[string]any{job, {"kind": "k", "eager": true}}}, "job 1: Eager"},
			{"unknown member field", map[string]any{"jobs": []map[string]any{{"kind": "k", "steps": 1}}}, "unknown field"},
			{"callback without kind", map[string]any{"jobs": []map[string]any{job}, "callback": map[string]any{"queue": "q"}}, "callback.kind"},
			{"callback args not an object", map[string]any{"jobs": []map[string]any{job}, "callback": map[string]any{"kind": "d", "args": []int{1}}}, "callback.args"},
			{"callback with an id", map[string]any{"jobs": []map[string]any{job}, "callback": map[string]any{"kind": "d", "id": "x"}}, "unknown field"},
			{"callback with run_at", map[string]any{"jobs": []map[string]any{job}, "callback": map[string]any{"kind": "d", "run_at": "2030-01-01T00:00:00Z"}}, "unknown field"},
			{"callback with a unique key", map[string]any{"jobs": []map[string]any{job}, "callback": map[string]any{"kind": "d", "unique_key": "x"}}, "unknown field"},
			{"bad callback option", map[string]any{"jobs": []map[string]any{job}, "callback": map[string]any{"kind": "d", "max_attempts": -1}}, "callback: max_attempts"},
			{"id too long", map[string]any{"id": strings.Repeat("x", errandstore.MaxBatchIDBytes+1), "jobs": []map[string]any{job}}, "batch id"},
			{"two members of an id", map[string]any{"jobs": []map[string]any{{"kind": "k", "id": "same"}, {"kind": "k", "id": "same"}}}, "same"},
		} {
			r := s.op(t, "POST", "/api/v1/batches", tt.body)
			want(t, tt.name, r, http.StatusBadRequest, "invalid_input")
			if !strings.Contains(string(r.body), tt.line) {
				t.Errorf("%s: %s; want a message containing %q", tt.name, r.body, tt.line)
			}
		}
		if n := s.jobCount(t); n != 0 {
			t.Fatalf("bad batches wrote %d jobs", n)
		}
		if bs, err := s.c.Batches(t.Context(), nil); err != nil || len(bs) != 0 {
			t.Fatalf("bad batches wrote batches: %v (%v)", bs, err)
		}
		if r := s.do(t, req{method: "POST", path: "/api/v1/batches", token: readerSecret, body: importBody("b0")}); r.status != http.StatusForbidden {
			t.Fatalf("a reader enqueued a batch: %d %s", r.status, r.body)
		}

		r := s.op(t, "POST", "/api/v1/batches", importBody("imp-7"))
		want(t, "enqueue", r, http.StatusCreated, "")
		var res batchAnswer
		if err := json.Unmarshal(r.body, &res); err != nil {
			t.Fatal(err)
		}
		b := res.Batch
		if res.Duplicate || b.ID != "imp-7" || b.Total != 3 || b.Counts[errandtype.StateQueued] != 3 || b.CompletedAt != nil ||
			b.Callback == nil || b.Callback.Kind != "import_done" || b.Callback.Queue != "callbacks" || b.Callback.MaxAttempts != 5 || len(res.Jobs) != 3 {
			t.Fatalf("enqueue answered %s", r.body)
		}
		for i, j := range res.Jobs {
			if j.BatchID == nil || *j.BatchID != "imp-7" || j.Kind != "import_row" {
				t.Fatalf("member %d = %+v", i, j)
			}
		}
		if j := s.job(t, "imp-7-r1"); j.MaxAttempts != 3 || string(j.Args) != `{"row":1}` && string(j.Args) != `{"row": 1}` {
			t.Fatalf("first member = %+v, args %s", j, j.Args)
		}
		if j := res.Jobs[1]; j.Queue != "imports" || len(j.Tags) != 1 {
			t.Fatalf("second member = %+v", j)
		}
		if j := res.Jobs[2]; j.UniqueKey == nil || *j.UniqueKey != "imp-7-row-3" || !j.AvailableAt.After(clock.Now()) {
			t.Fatalf("third member = %+v", j)
		}

		// The same id again, or the same Idempotency-Key: the existing
		// batch, nothing enqueued.
		r = s.op(t, "POST", "/api/v1/batches", importBody("imp-7"))
		want(t, "enqueue again", r, http.StatusOK, "")
		if err := json.Unmarshal(r.body, &res); err != nil || !res.Duplicate || res.Jobs == nil || len(res.Jobs) != 0 || res.Batch.ID != "imp-7" {
			t.Fatalf("enqueue again answered %s (%v)", r.body, err)
		}
		again := s.do(t, req{method: "POST", path: "/api/v1/batches", token: operatorSecret,
			body: importBody("imp-7"), header: map[string]string{errandhttp.IdempotencyHeader: "imp-7"}})
		want(t, "enqueue with the key", again, http.StatusOK, "")
		if again.header.Get("Idempotent-Replayed") != "true" || again.json(t)["duplicate"] != true {
			t.Fatalf("enqueue with the key: %v %s", again.header, again.body)
		}
		want(t, "key and id differ", s.do(t, req{method: "POST", path: "/api/v1/batches", token: operatorSecret,
			body: importBody("x"), header: map[string]string{errandhttp.IdempotencyHeader: "y"}}), http.StatusBadRequest, "invalid_input")
		if n := s.jobCount(t); n != 3 {
			t.Fatalf("%d jobs after the duplicates, want 3", n)
		}

		// A batch without a callback, from the key alone.
		r = s.do(t, req{method: "POST", path: "/api/v1/batches", token: operatorSecret,
			body: map[string]any{"jobs": []map[string]any{job}}, header: map[string]string{errandhttp.IdempotencyHeader: "plain"}})
		want(t, "enqueue without a callback", r, http.StatusCreated, "")
		if err := json.Unmarshal(r.body, &res); err != nil || res.Batch.ID != "plain" || res.Batch.Callback != nil || len(res.Jobs) != 1 {
			t.Fatalf("enqueue without a callback answered %s (%v)", r.body, err)
		}
	})
}

// TestAPIBatchIdempotencyConflict reuses an Idempotency-Key: for the same
// batch it answers the existing one, for a different one 409
// idempotency_conflict, writing nothing either way.
func TestAPIBatchIdempotencyConflict(t *testing.T) {
	eachStore(t, func(t *testing.T, st errandstore.TxStore[*sql.Tx], clock *errandtest.Clock) {
		s := newServer(t, st, clock, nil)
		post := func(body map[string]any) response {
			return s.do(t, req{method: "POST", path: "/api/v1/batches", token: operatorSecret,
				body: body, header: map[string]string{errandhttp.IdempotencyHeader: "imp-8"}})
		}
		body := func() map[string]any {
			b := importBody("imp-8")
			delete(b, "id")
			return b
		}
		want(t, "first", post(body()), http.StatusCreated, "")
		want(t, "same batch", post(body()), http.StatusOK, "")
		// Written with the defaults spelt out: the same.
		spelt := body()
		spelt["jobs"].([]map[string]any)[0]["queue"] = errand.DefaultQueue
		spelt["callback"].(map[string]any)["args"] = map[string]any{"import": 7, "batch": nil}
		want(t, "same batch, defaults spelt out", post(spelt), http.StatusOK, "")
		for _, tt := range []struct {
			name   string
			change func(b map[string]any)
		}{
			{"one job more", func(b map[string]any) { b["jobs"] = append(b["jobs"].([]map[string]any), map[string]any{"kind": "k"}) }},
			{"other args of a member with an id", func(b map[string]any) { b["jobs"].([]map[string]any)[0]["args"] = map[string]int{"row": 9} }},
			{"other kind of a member with an id", func(b map[string]any) { b["jobs"].([]map[string]any)[0]["kind"] = "export_row" }},
			// No job has the id, and every member of the batch is there:
			// it was never one of them.
			{"a member's id never in the batch", func(b map[string]any) { b["jobs"].([]map[string]any)[1]["id"] = "imp-8-new" }},
			{"no callback", func(b map[string]any) { delete(b, "callback") }},
			{"other callback kind", func(b map[string]any) { b["callback"].(map[string]any)["kind"] = "export_done" }},
			{"other callback args", func(b map[string]any) { b["callback"].(map[string]any)["args"] = map[string]int{"import": 8} }},
			{"other callback queue", func(b map[string]any) { b["callback"].(map[string]any)["queue"] = "default" }},
		} {
			b := body()
			tt.change(b)
			r := post(b)
			want(t, tt.name, r, http.StatusConflict, "idempotency_conflict")
			if !strings.Contains(string(r.body), `Idempotency-Key \"imp-8\" was used for a different batch`) {
				t.Errorf("%s: %s", tt.name, r.body)
			}
		}
		if n := s.jobCount(t); n != 3 {
			t.Fatalf("%d jobs after the reused keys, want 3", n)
		}
	})
}

func TestAPIBatchList(t *testing.T) {
	eachStore(t, func(t *testing.T, st errandstore.TxStore[*sql.Tx], clock *errandtest.Clock) {
		s := newServer(t, st, clock, nil)
		r := s.do(t, req{method: "GET", path: "/api/v1/batches", token: readerSecret})
		want(t, "empty list", r, http.StatusOK, "")
		if strings.TrimSpace(string(r.body)) != `{"batches":[],"next_cursor":null}` {
			t.Fatalf("empty list: %s", r.body)
		}
		want(t, "enqueue b1", s.op(t, "POST", "/api/v1/batches", map[string]any{"id": "b1", "jobs": []map[string]any{{"kind": "k"}}}), http.StatusCreated, "")
		clock.Advance(1e9)
		want(t, "enqueue b2", s.op(t, "POST", "/api/v1/batches", importBody("b2")), http.StatusCreated, "")
		// b1's one member is cancelled: the batch completes.
		if _, err := s.c.Cancel(t.Context(), s.batchMember(t, "b1"), &errand.CancelOpts{Operator: "ops", Reason: "test"}); err != nil {
			t.Fatal(err)
		}
		if b, err := s.c.Batch(t.Context(), "b1"); err != nil || b.CompletedAt == nil {
			t.Fatalf("b1 after its member was cancelled: %+v (%v)", b, err)
		}

		list := func(query string) []errandstore.Batch {
			t.Helper()
			r := s.do(t, req{method: "GET", path: "/api/v1/batches" + query, token: readerSecret})
			want(t, "list "+query, r, http.StatusOK, "")
			var l struct {
				Batches []errandstore.Batch `json:"batches"`
			}
			if err := json.Unmarshal(r.body, &l); err != nil {
				t.Fatal(err)
			}
			return l.Batches
		}
		for _, tt := range []struct{ query, want string }{
			{"", "b2 b1"},
			{"?limit=1", "b2"},
			{"?state=open", "b2"},
			{"?state=completed", "b1"},
			{"?state=completed&limit=5", "b1"},
		} {
			ids := []string{}
			for _, b := range list(tt.query) {
				ids = append(ids, b.ID)
			}
			if got := strings.Join(ids, " "); got != tt.want {
				t.Errorf("list%s = %q, want %q", tt.query, got, tt.want)
			}
		}
		bs := list("")
		if b := bs[0]; b.Total != 3 || b.Counts[errandtype.StateQueued] != 3 || b.Callback == nil || b.Callback.Kind != "import_done" {
			t.Errorf("listed b2 = %+v", b)
		}
		if b := bs[1]; b.Final == nil || b.Final.Cancelled != 1 || b.Counts[errandtype.StateCancelled] != 1 {
			t.Errorf("listed b1 = %+v", b)
		}
		// Pages: a full page has a next_cursor, which continues the list.
		page := func(query string) (ids []string, next *string) {
			t.Helper()
			r := s.do(t, req{method: "GET", path: "/api/v1/batches" + query, token: readerSecret})
			want(t, "page "+query, r, http.StatusOK, "")
			var l struct {
				Batches []errandstore.Batch `json:"batches"`
				Next    *string             `json:"next_cursor"`
			}
			if err := json.Unmarshal(r.body, &l); err != nil {
				t.Fatal(err)
			}
			for _, b := range l.Batches {
				ids = append(ids, b.ID)
			}
			return ids, l.Next
		}
		ids, next := page("?limit=1")
		if !slices.Equal(ids, []string{"b2"}) || next == nil {
			t.Fatalf("first page: %v, next %v", ids, next)
		}
		if ids, last := page("?limit=1&cursor=" + url.QueryEscape(*next)); !slices.Equal(ids, []string{"b1"}) || last == nil {
			t.Fatalf("second page: %v, next %v", ids, last)
		} else if ids, end := page("?limit=1&cursor=" + url.QueryEscape(*last)); len(ids) != 0 || end != nil {
			t.Fatalf("past the last: %v, next %v", ids, end)
		}
		if _, next := page("?limit=5"); next != nil {
			t.Fatalf("a short page has next_cursor %q", *next)
		}
		for _, q := range []string{"?state=running", "?state=open,completed", "?limit=0", "?limit=x", "?sate=open", "?cursor=b2", "?cursor=12.", "?cursor=x.b2"} {
			want(t, "list"+q, s.do(t, req{method: "GET", path: "/api/v1/batches" + q, token: readerSecret}), http.StatusBadRequest, "invalid_input")
		}
	})
}

// batchMember returns the id of a member of batch id.
func (s *server) batchMember(t *testing.T, id string) string {
	t.Helper()
	js, err := s.c.List(t.Context(), &errand.ListOpts{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range js {
		if j.BatchID != nil && *j.BatchID == id {
			return j.ID
		}
	}
	t.Fatalf("batch %s has no member", id)
	return ""
}
