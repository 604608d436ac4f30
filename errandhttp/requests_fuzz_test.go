package errandhttp_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandhttp"
	"github.com/errandhq/errand/errandtype"
)

// The enqueue endpoints, by the first byte of a fuzz input.
var fuzzEnqueuePaths = []string{"/api/v1/jobs", "/api/v1/batches", "/api/v1/workflows"}

// FuzzEnqueueBody posts arbitrary bodies to the enqueue endpoints of a
// handler over SQLite. A 2xx answer names jobs that exist, of the kinds the
// body asked for, and the store grew by exactly those; a 4xx answer is a
// JSON error with a message, and the store is unchanged.
func FuzzEnqueueBody(f *testing.F) {
	for _, seed := range []struct {
		path uint8
		body string
	}{
		{0, `{"kind":"task","args":{"n":1}}`},
		{0, `{"id":"pay-1","kind":"task","queue":"mail","priority":3,"delay":"2s","max_attempts":5,"tags":["a","b"]}`},
		{0, `{"kind":"task","run_at":"2026-12-01T10:00:00Z","backoff_base":"1s","backoff_max":"1m","max_age":"1h"}`},
		{0, `{"kind":"task","unique_key":"k","unique_scope":"until_finished","unique_window":"1h"}`},
		{0, `{"kind":"task","priority":-5,"max_attempts":1}`},
		{0, `{"kind":"task","ordering_key":"acct-1","ordering_on_dead":"hold","fairness_key":"tenant-1"}`},
		{0, `{"kind":"task","run_at":"2026-12-01T10:00:00Z","delay":"1s"}`},
		{0, `{"kind":"task","delay":"-1s"}`},
		{0, `{"kind":"task","delay":"soon"}`},
		{0, `{"kind":"task","args":[1]}`},
		{0, `{"kind":"task","unique_window":"1h"}`},
		{0, `{"kind":"task","nope":1}`},
		{0, `{"kind":""}`},
		{0, `{}`},
		{0, ``},
		{0, `null`},
		{0, `{"kind":"task"} {"kind":"task"}`},
		{0, `{"id":"` + strings.Repeat("x", 300) + `","kind":"task"}`},
		{1, `{"jobs":[{"kind":"task"},{"kind":"task","args":{"row":2}}],"callback":{"kind":"task"}}`},
		{1, `{"id":"b-1","jobs":[{"kind":"task"}]}`},
		{1, `{"jobs":[]}`},
		{1, `{"jobs":[{"kind":"task"},{"kind":""}]}`},
		{1, `{"jobs":[{"kind":"task"}],"callback":{"kind":"task","args":[]}}`},
		{2, `{"name":"order","steps":[{"name":"a","kind":"task"},{"name":"b","kind":"task","depends_on":["a"]}]}`},
		{2, `{"name":"order","steps":[{"name":"a","kind":"task","compensate":{"kind":"task"}}]}`},
		{2, `{"name":"loop","steps":[{"name":"a","kind":"task","depends_on":["a"]}]}`},
		{2, `{"name":"x","steps":[{"name":"a","kind":"task","depends_on":["missing"]}]}`},
		{2, `{"steps":[]}`},
	} {
		f.Add(seed.path, []byte(seed.body))
	}
	clock := newTestClock()
	st := openSQLite(f, clock)
	kinds := errand.NewKinds()
	kinds.HandleRaw("task", nil, nil)
	c, err := errand.NewClient(st, &errand.Config{Kinds: kinds, AllowUnknownKinds: true, Clock: clock})
	if err != nil {
		f.Fatal(err)
	}
	h, err := errandhttp.New(c, &errandhttp.Options{Auth: &errandhttp.AuthOptions{Tokens: testTokens}})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, which uint8, body []byte) {
		if len(body) > 64<<10 {
			return // the size limit has tests of its own; keep runs quick
		}
		path := fuzzEnqueuePaths[int(which)%len(fuzzEnqueuePaths)]
		before := jobTotal(t, c)
		r := httptest.NewRequest(http.MethodPost, path, strings.NewReader(string(body)))
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("Authorization", "Bearer "+operatorSecret)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		after := jobTotal(t, c)
		switch {
		case w.Code >= 200 && w.Code < 300:
			checkEnqueued(t, c, path, body, w.Body.Bytes(), after-before)
		case w.Code >= 400 && w.Code < 500:
			var e struct {
				Error struct{ Code, Message string } `json:"error"`
			}
			if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil || e.Error.Code == "" || e.Error.Message == "" {
				t.Fatalf("POST %s %q: %d with body %q, want a JSON error with a code and a message", path, body, w.Code, w.Body)
			}
			if after != before {
				t.Fatalf("POST %s %q: %d %s, but the store went from %d to %d jobs", path, body, w.Code, w.Body, before, after)
			}
		default:
			t.Fatalf("POST %s %q: %d %s, want 2xx or 4xx", path, body, w.Code, w.Body)
		}
	})
}

// checkEnqueued checks a 2xx answer to body: every job it names exists with
// the kind the body gave, and the store grew by those jobs (by none for a
// duplicate).
func checkEnqueued(t *testing.T, c *errand.Client[*sql.Tx], path string, body, answer []byte, grew int) {
	t.Helper()
	var res struct {
		Job       *errandtype.Job   `json:"job"`
		Jobs      []*errandtype.Job `json:"jobs"`
		Duplicate bool              `json:"duplicate"`
	}
	if err := json.Unmarshal(answer, &res); err != nil {
		t.Fatalf("POST %s %q: answer %s: %v", path, body, answer, err)
	}
	// The handler decodes strictly; having accepted body, a plain decode
	// reads the same request.
	var kinds []string
	switch path {
	case "/api/v1/jobs":
		var req errandhttp.JobRequest
		mustUnmarshal(t, body, &req)
		if res.Job == nil {
			t.Fatalf("POST %s %q: answer %s names no job", path, body, answer)
		}
		if req.ID != "" && res.Job.ID != req.ID {
			t.Fatalf("POST %s %q: job %q, want id %q", path, body, res.Job.ID, req.ID)
		}
		res.Jobs, kinds = []*errandtype.Job{res.Job}, []string{req.Kind}
	case "/api/v1/batches":
		var req errandhttp.BatchRequest
		mustUnmarshal(t, body, &req)
		for _, j := range req.Jobs {
			kinds = append(kinds, j.Kind)
		}
	default:
		var req errandhttp.WorkflowRequest
		mustUnmarshal(t, body, &req)
		// The first steps are enqueued now, the others later.
		for _, j := range res.Jobs {
			kinds = append(kinds, j.Kind)
		}
		if !res.Duplicate && len(res.Jobs) == 0 {
			t.Fatalf("POST %s %q: answer %s enqueued no first step", path, body, answer)
		}
		steps := map[string]bool{}
		for _, s := range req.Steps {
			steps[s.Kind] = true
		}
		for _, k := range kinds {
			if !steps[k] {
				t.Fatalf("POST %s %q: enqueued kind %q, no step's", path, body, k)
			}
		}
	}
	want := len(res.Jobs)
	if res.Duplicate {
		want = 0
	} else if len(res.Jobs) != len(kinds) {
		t.Fatalf("POST %s %q: answer names %d jobs, the body %d", path, body, len(res.Jobs), len(kinds))
	}
	if grew != want {
		t.Fatalf("POST %s %q: answer %s, but the store grew by %d jobs, want %d", path, body, answer, grew, want)
	}
	for i, shown := range res.Jobs {
		j, err := c.Get(context.Background(), shown.ID)
		if err != nil {
			t.Fatalf("POST %s %q: job %q answered but not stored: %v", path, body, shown.ID, err)
		}
		if !res.Duplicate && j.Kind != kinds[i] {
			t.Fatalf("POST %s %q: job %q has kind %q, want %q", path, body, j.ID, j.Kind, kinds[i])
		}
	}
}

func mustUnmarshal(t *testing.T, b []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("accepted body %q does not decode: %v", b, err)
	}
}

// jobTotal counts the store's jobs in every queue and state.
func jobTotal(t *testing.T, c *errand.Client[*sql.Tx]) int {
	t.Helper()
	stats, err := c.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, q := range stats {
		for _, k := range q.Counts {
			n += k
		}
	}
	return n
}

// FuzzTimeJSON checks Time's JSON: RFC 3339 text it reads writes back as
// the same instant, null leaves the time as it was, and what it refuses is
// a *json.UnmarshalTypeError naming Time.
func FuzzTimeJSON(f *testing.F) {
	for _, s := range []string{`"2026-12-01T10:00:00Z"`, `"2026-12-01T10:00:00.123456789+05:30"`, `"2026-12-01T10:00:00-00:00"`,
		`"0001-01-01T00:00:00Z"`, `"9999-12-31T23:59:59Z"`, `null`, `"2026-12-01"`, `"2026-12-01 10:00:00Z"`, `""`, `1`, `{}`, `"2026-02-30T00:00:00Z"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var tm errandhttp.Time
		if err := json.Unmarshal(b, &tm); err != nil {
			var te *json.UnmarshalTypeError
			if json.Valid(b) && (!errors.As(err, &te) || te.Type != reflect.TypeFor[errandhttp.Time]()) {
				t.Fatalf("%q: refused with %T %v, want a *json.UnmarshalTypeError naming Time", b, err, err)
			}
			return
		}
		out, err := json.Marshal(tm)
		if err != nil {
			return // past RFC 3339's years: the time's own MarshalJSON refuses it
		}
		var back errandhttp.Time
		if err := json.Unmarshal(out, &back); err != nil || !back.Equal(tm.Time) {
			t.Fatalf("%q read as %v, marshalled as %s, read back as %v (%v)", b, tm.Time, out, back.Time, err)
		}
	})
}
