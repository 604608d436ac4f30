package errandhttp_test

import (
	"database/sql"
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/errandhq/errand/errandhttp"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtest"
	"github.com/errandhq/errand/errandtype"
)

// TestAPIRefusesWhatAStoreCouldNotKeep: JSON that SQLite would keep as
// text and PostgreSQL's jsonb refuses (an escaped half of a surrogate pair,
// a number past PostgreSQL's numeric, \u0000), and ids or lease tokens that
// are not text every store keeps, get the same 400 on both stores, with
// nothing written: never a 5xx, never accepted by one store and refused by
// the other, and never accepted now only to be refused when a worker's
// outcome enqueues the batch callback or workflow step that holds it.
func TestAPIRefusesWhatAStoreCouldNotKeep(t *testing.T) {
	eachStore(t, func(t *testing.T, st errandstore.TxStore[*sql.Tx], clock *errandtest.Clock) {
		s := newServer(t, st, clock, nil)
		for _, args := range []string{`{"a": "\ud800"}`, `{"a": "x\udc00"}`, `{"a": 1e200000}`, `{"a": [1e-20000]}`, `{"a": "\u0000"}`} {
			for _, c := range []struct{ path, body string }{
				{"/api/v1/jobs", `{"kind": "task", "args": ` + args + `}`},
				{"/api/v1/batches", `{"id": "b1", "jobs": [{"kind": "task", "args": ` + args + `}]}`},
				{"/api/v1/batches", `{"id": "b2", "jobs": [{"kind": "task"}], "callback": {"kind": "task", "args": ` + args + `}}`},
				{"/api/v1/workflows", `{"id": "w1", "steps": [{"name": "a", "kind": "task"}, {"name": "b", "kind": "task", "depends_on": ["a"], "args": ` + args + `}]}`},
			} {
				r := s.op(t, "POST", c.path, c.body)
				want(t, c.path+" with args "+args, r, http.StatusBadRequest, "invalid_input")
				if !strings.Contains(r.String(), "args") {
					t.Errorf("%s with args %s: the error names no field: %s", c.path, args, r)
				}
			}
		}
		if n := s.jobCount(t); n != 0 {
			t.Fatalf("refused requests wrote %d jobs", n)
		}

		// A worker's calls with an id or token that is no text.
		want(t, "enqueue", s.op(t, "POST", "/api/v1/jobs", map[string]any{"kind": "task", "id": "j1"}), http.StatusCreated, "")
		want(t, "enqueue", s.op(t, "POST", "/api/v1/jobs", map[string]any{"kind": "task", "id": "j2"}), http.StatusCreated, "")
		r := s.op(t, "POST", "/api/v1/queues/default/claim", map[string]any{"kinds": []string{"task"}, "lease": "1m", "max_jobs": 2})
		want(t, "claim", r, http.StatusOK, "")
		var claimed struct {
			Jobs []errandtype.Envelope `json:"jobs"`
		}
		if err := json.Unmarshal(r.body, &claimed); err != nil || len(claimed.Jobs) != 2 {
			t.Fatalf("claimed %s (%v)", r.body, err)
		}
		tok := claimed.Jobs[0].LeaseToken
		j1, j2 := s.job(t, "j1"), s.job(t, "j2")
		for _, action := range []string{"heartbeat", "ack", "fail", "output"} {
			for _, c := range []struct{ id, body string }{
				{"j1%00", `{"lease_token": "` + tok + `", "output": 1}`},
				{"j1%FF", `{"lease_token": "` + tok + `", "output": 1}`},
				{"j1", `{"lease_token": "` + tok + `\u0000", "output": 1}`},
			} {
				want(t, action+" of "+c.id+" "+c.body, s.op(t, "POST", "/api/v1/jobs/"+c.id+"/"+action, c.body), http.StatusBadRequest, "invalid_input")
			}
		}
		bulk := `{"jobs": [{"id": "j1", "lease_token": "` + tok + `"}, {"id": "j2\u0000", "lease_token": "x"}]}`
		want(t, "bulk ack with one id that is no text", s.op(t, "POST", "/api/v1/ack", bulk), http.StatusBadRequest, "invalid_input")
		want(t, "bulk fail with one id that is no text", s.op(t, "POST", "/api/v1/fail", bulk), http.StatusBadRequest, "invalid_input")
		for _, out := range []string{`{"a": "x\u0000y"}`, `"\ud800"`, `[1e200000]`} {
			want(t, "output "+out, s.op(t, "POST", "/api/v1/jobs/j1/output", `{"lease_token": "`+tok+`", "output": `+out+`}`), http.StatusBadRequest, "invalid_input")
		}
		if a, b := s.job(t, "j1"), s.job(t, "j2"); !reflect.DeepEqual(a, j1) || !reflect.DeepEqual(b, j2) {
			t.Fatalf("refused calls changed the jobs:\n%+v\n%+v", a, b)
		}

		// Corrected args for a replay are held to the same rule.
		f := s.op(t, "POST", "/api/v1/jobs/j1/fail", map[string]any{"lease_token": tok, "permanent": true, "message": "bad"})
		want(t, "fail", f, http.StatusOK, "")
		dead := s.job(t, "j1")
		for _, args := range []string{`{"a": "\ud800"}`, `{"a": 1e200000}`} {
			want(t, "replay with args "+args, s.op(t, "POST", "/api/v1/jobs/j1/replay", `{"reason": "fix", "args": `+args+`}`), http.StatusBadRequest, "invalid_input")
		}
		if after := s.job(t, "j1"); !reflect.DeepEqual(after, dead) {
			t.Fatalf("refused replays changed the job:\n%+v\n%+v", dead, after)
		}

		// Reads: a queue that is no text has no fairness keys; a cursor,
		// or a queue or kind to list jobs of, that is no text is refused.
		keys := s.op(t, "GET", "/api/v1/fairness-keys?queue=a%00", nil)
		want(t, "fairness keys of a queue that is no text", keys, http.StatusOK, "")
		if !strings.Contains(keys.String(), `"fairness_keys":[]`) {
			t.Errorf("fairness keys of a queue that is no text: %s", keys)
		}
		// A cursor's time past the years every store keeps: PostgreSQL
		// refused it (a 500), SQLite compared it as a number.
		for _, path := range []string{"/api/v1/batches?cursor=1.a%00", "/api/v1/workflows?cursor=1.a%FF", "/api/v1/jobs?queue=a%00", "/api/v1/jobs?kind=a%FF",
			"/api/v1/batches?cursor=-210866803200000001.x", "/api/v1/workflows?cursor=-9223372036854775808.x", "/api/v1/batches?cursor=253402300800000000.x"} {
			want(t, path, s.op(t, "GET", path, nil), http.StatusBadRequest, "invalid_input")
		}
	})
}

// TestAPIDurationErrorsNameTheField: a duration sent as a number, or one
// that does not parse, is refused with the field's name.
func TestAPIDurationErrorsNameTheField(t *testing.T) {
	clock := newTestClock()
	s := newServer(t, openSQLite(t, clock), clock, nil)
	for _, body := range []string{`{"kind": "task", "delay": 30}`, `{"kind": "task", "delay": "9999999999h"}`, `{"kind": "task", "delay": true}`} {
		r := s.op(t, "POST", "/api/v1/jobs", body)
		want(t, body, r, http.StatusBadRequest, "invalid_input")
		if !strings.Contains(r.String(), `field \"delay\" must be a duration`) {
			t.Errorf("%s: %s; want the field named", body, r)
		}
	}
	r := s.op(t, "POST", "/api/v1/queues/default/claim", `{"kinds": ["task"], "lease": 60}`)
	if want(t, "claim", r, http.StatusBadRequest, "invalid_input"); !strings.Contains(r.String(), `field \"lease\"`) {
		t.Errorf("claim with a numeric lease: %s; want the field named", r)
	}
}

// TestAPIIdempotencyKeyComparesNumbersByValue: a retried request is the
// same request whatever the store did to the spelling of its numbers
// (PostgreSQL's jsonb keeps 1e3 as 1000), and numbers past float64's
// precision or range are not taken for others.
func TestAPIIdempotencyKeyComparesNumbersByValue(t *testing.T) {
	eachStore(t, func(t *testing.T, st errandstore.TxStore[*sql.Tx], clock *errandtest.Clock) {
		s := newServer(t, st, clock, nil)
		key := map[string]string{"Idempotency-Key": "order-9"}
		send := func(body string) response {
			return s.do(t, req{method: "POST", path: "/api/v1/jobs", token: operatorSecret, body: body, header: key})
		}
		want(t, "first", send(`{"kind": "task", "args": {"a": 1e3, "big": 9007199254740993, "huge": 1e400, "f": 1.50}}`), http.StatusCreated, "")
		for _, body := range []string{
			`{"kind": "task", "args": {"a": 1e3, "big": 9007199254740993, "huge": 1e400, "f": 1.50}}`,
			`{"kind": "task", "args": {"huge": 10e399, "f": 0.15e1, "big": 9007199254740993, "a": 1000.0}}`,
		} {
			r := send(body)
			if want(t, "retried "+body, r, http.StatusOK, ""); r.header.Get("Idempotent-Replayed") != "true" {
				t.Fatalf("retried %s: %s %v", body, r, r.header)
			}
		}
		for _, body := range []string{
			`{"kind": "task", "args": {"a": 1e3, "big": 9007199254740992, "huge": 1e400, "f": 1.50}}`,
			`{"kind": "task", "args": {"a": 1e3, "big": 9007199254740993, "huge": 1e401, "f": 1.50}}`,
			`{"kind": "task", "args": {"a": -1e3, "big": 9007199254740993, "huge": 1e400, "f": 1.50}}`,
		} {
			want(t, "different "+body, send(body), http.StatusConflict, "idempotency_conflict")
		}
		if n := s.jobCount(t); n != 1 {
			t.Fatalf("%d jobs, want 1", n)
		}
	})
}

// TestAPIRefusesTextItWouldChange: invalid UTF-8 and escaped halves of
// surrogate pairs anywhere in a body are refused, naming the field, with
// nothing written. The decoder would have turned each into U+FFFD unseen,
// stored an id, kind or queue other than sent, and taken "a\ud800" and
// "a\udc00" for the same id.
func TestAPIRefusesTextItWouldChange(t *testing.T) {
	eachStore(t, func(t *testing.T, st errandstore.TxStore[*sql.Tx], clock *errandtest.Clock) {
		s := newServer(t, st, clock, nil)
		for _, c := range []struct{ path, body, field string }{
			{"/api/v1/jobs", `{"kind": "task", "id": "a\ud800"}`, "id: contains \\\\ud800"},
			{"/api/v1/jobs", `{"kind": "task", "id": "a\udc00"}`, "id: contains \\\\udc00"},
			{"/api/v1/jobs", `{"kind": "task\udfff"}`, "kind: contains"},
			{"/api/v1/jobs", `{"kind": "task", "queue": "q\ud800x"}`, "queue: contains"},
			{"/api/v1/jobs", `{"kind": "task", "tags": ["a", "b\ud800"]}`, "tags[1]: contains"},
			{"/api/v1/jobs", `{"kind": "task", "args": {"x": ["\ud800"]}}`, "args.x[0]: contains"},
			{"/api/v1/batches", `{"jobs": [{"kind": "task"}, {"kind": "task", "queue": "\ud800"}]}`, "jobs[1].queue: contains"},
			{"/api/v1/workflows", `{"name": "w\ud800", "steps": [{"name": "a", "kind": "task"}]}`, "name: contains"},
			{"/api/v1/workflows", `{"steps": [{"name": "a", "kind": "task"}, {"name": "b\udc00", "kind": "task"}]}`, "steps[1].name: contains"},
			{"/api/v1/jobs", "{\"kind\": \"task\", \"id\": \"a\xff\"}", "not valid UTF-8"},
			{"/api/v1/jobs", "{\"kind\": \"task\xc3\"}", "not valid UTF-8"},
		} {
			r := s.op(t, "POST", c.path, c.body)
			want(t, c.path+" "+c.body, r, http.StatusBadRequest, "invalid_input")
			if !strings.Contains(r.String(), c.field) {
				t.Errorf("%s %s: %s; want %q", c.path, c.body, r, c.field)
			}
		}
		if n := s.jobCount(t); n != 0 {
			t.Fatalf("refused requests wrote %d jobs", n)
		}
		// A whole pair, escaped, is a character like any other.
		r := s.op(t, "POST", "/api/v1/jobs", `{"kind": "task", "id": "a\ud83d\ude00", "args": {"s": "\\ud800"}}`)
		want(t, "an escaped whole pair", r, http.StatusCreated, "")
		if j := s.job(t, "a\U0001F600"); j == nil || string(j.Args) != `{"s": "\\ud800"}` && string(j.Args) != `{"s":"\\ud800"}` {
			t.Errorf("job with an escaped pair in its id: %+v", j)
		}
	})
}

// TestAPIRefusesQueryParametersItWouldIgnore: an endpoint with a body takes
// its options in the body, and one without takes only the parameters it
// lists; any other query parameter is refused, not ignored, so
// POST /api/v1/replay?dry_run=true cannot replay for real.
func TestAPIRefusesQueryParametersItWouldIgnore(t *testing.T) {
	clock := newTestClock()
	s := newServer(t, openSQLite(t, clock), clock, nil)
	want(t, "enqueue", s.op(t, "POST", "/api/v1/jobs", map[string]any{"kind": "task", "id": "j1"}), http.StatusCreated, "")
	before := s.job(t, "j1")
	for _, c := range []struct{ method, path string }{
		{"POST", "/api/v1/replay?dry_run=true"},
		{"POST", "/api/v1/prune?dry_run=true"},
		{"POST", "/api/v1/jobs?queue=other"},
		{"POST", "/api/v1/jobs/j1/cancel?force=1"},
		{"GET", "/api/v1/jobs/j1?bogus=1"},
		{"GET", "/api/v1/jobs/j1/audit?bogus=1"},
	} {
		body := any(nil)
		if c.method == "POST" {
			body = map[string]any{"reason": "preview", "kind": "task", "succeeded_age": "1h"}
			if strings.HasPrefix(c.path, "/api/v1/jobs?") {
				body = map[string]any{"kind": "task", "id": "j2"}
			}
		}
		r := s.op(t, c.method, c.path, body)
		want(t, c.method+" "+c.path, r, http.StatusBadRequest, "invalid_input")
		if !strings.Contains(r.String(), "unknown query parameter") {
			t.Errorf("%s %s: %s", c.method, c.path, r)
		}
	}
	if n := s.jobCount(t); n != 1 {
		t.Errorf("%d jobs after refused requests, want 1", n)
	}
	if after := s.job(t, "j1"); !reflect.DeepEqual(after, before) {
		t.Errorf("refused requests changed the job:\n%+v\n%+v", before, after)
	}
}

// TestAPIDryRunRefusesWhatTheRunRefuses: a preview of a bulk replay or a
// prune given a reason the run would refuse is refused too, rather than
// answered as if the run would go ahead.
func TestAPIDryRunRefusesWhatTheRunRefuses(t *testing.T) {
	clock := newTestClock()
	s := newServer(t, openSQLite(t, clock), clock, nil)
	long := strings.Repeat("r", errandstore.MaxReasonBytes+1)
	for _, c := range []struct{ path, body string }{
		{"/api/v1/replay", `{"reason": "a\u0001b", "dry_run": true}`},
		{"/api/v1/replay", `{"reason": "` + long + `", "dry_run": true}`},
		{"/api/v1/prune", `{"reason": "a\u0001b", "dead_age": "720h", "dry_run": true}`},
		{"/api/v1/prune", `{"reason": "` + long + `", "dead_age": "720h", "dry_run": true}`},
	} {
		r := s.op(t, "POST", c.path, c.body)
		want(t, c.path+" dry run", r, http.StatusBadRequest, "invalid_input")
		if !strings.Contains(r.String(), "reason") {
			t.Errorf("%s dry run: %s; want the reason named", c.path, r)
		}
		// Without the dry run, the same request is refused the same way.
		real := strings.Replace(c.body, `"dry_run": true`, `"dry_run": false`, 1)
		if rr := s.op(t, "POST", c.path, real); rr.status != r.status || rr.String() != r.String() {
			t.Errorf("%s: the run answered %d %s, the dry run %d %s", c.path, rr.status, rr, r.status, r)
		}
	}
}

// TestAPIErrorsNameTheFieldInJSONTerms: a body field of the wrong type or
// form is refused with the field's name and what it must be in JSON's
// terms, never Go's type names, and nothing is written.
func TestAPIErrorsNameTheFieldInJSONTerms(t *testing.T) {
	clock := newTestClock()
	s := newServer(t, openSQLite(t, clock), clock, nil)
	for _, c := range []struct{ path, body, want string }{
		{"/api/v1/jobs", `{"kind":"task","run_at":"tomorrow"}`, `"run_at" must be a time in RFC 3339`},
		{"/api/v1/jobs", `{"kind":"task","run_at":5}`, `"run_at" must be a time in RFC 3339`},
		{"/api/v1/jobs", `{"kind":"task","unique_key":"u","unique_scope":5}`, `"unique_scope" must be a scope`},
		{"/api/v1/jobs", `{"kind":"task","unique_window":"1h"}`, `unique_key: is empty, but unique_scope or unique_window is set`},
		{"/api/v1/jobs", `{"kind":"task","tags":"a"}`, `"tags" must be an array of strings`},
		{"/api/v1/jobs", `{"kind":"task","priority":"high"}`, `"priority" must be an integer`},
		{"/api/v1/jobs", `{"kind":"task","ordering_on_dead":1}`, `"ordering_on_dead" must be "hold" or "release"`},
		{"/api/v1/jobs", `{"kind":"task","delay":"1s","run_at":"2030-01-01T00:00:00Z"}`, `run_at: is set, and so is delay`},
		{"/api/v1/jobs", `{"kind":"task","run_at":"9999-12-31T23:59:59.999999999Z"}`, `9999-12-31T23:59:59.999999999Z is out of range; give a time from 0001-01-01T00:00:00Z to 9999-12-31T23:59:59Z`},
		{"/api/v1/jobs", `{"kind":"task","id":"b.callback"}`, `id: "b.callback" ends in ".callback"`},
		{"/api/v1/jobs", `[]`, `the body must be an object, not array`},
		{"/api/v1/batches", `{"jobs":[1]}`, `"jobs[0]" must be an object`},
		{"/api/v1/batches", `{"jobs":{}}`, `"jobs" must be an array of objects`},
		{"/api/v1/batches", `{"jobs":[{"kind":"task","run_at":"2030-01-01T00:00:00Z"}, {"kind":"task","run_at":"x"}]}`, `"jobs[1].run_at" must be a time in RFC 3339`},
		{"/api/v1/batches", `{"jobs":[{"kind":"task"},{"kind":"task","priority":"high"}]}`, `"jobs[1].priority" must be an integer`},
		{"/api/v1/batches", `{"jobs":[{"kind":"task"}],"callback":{"kind":"done","delay":5}}`, `"callback.delay" must be a duration`},
		{"/api/v1/workflows", `{"steps":[{"name":"a","kind":"task"},{"name":"b","kind":"task","priority":"x"}]}`, `"steps[1].priority" must be an integer`},
		{"/api/v1/workflows", `{"steps":[{"name":"a","kind":"task","delay":"1s"},{"name":"b","kind":"task","delay":5}]}`, `"steps[1].delay" must be a duration`},
		{"/api/v1/batches", `{"jobs":[{"kind":"task","unique_scope":"always"}]}`, `jobs[0].unique_key: is empty`},
		{"/api/v1/batches", `{"jobs":[{"kind":"task","id":"d"},{"kind":"task","id":"d"}]}`, `job 1: has the id "d" of job 0`},
		{"/api/v1/replay", `{"reason":"r","since":"yesterday"}`, `"since" must be a time in RFC 3339`},
		{"/api/v1/replay", `{"reason":"r","until":5}`, `"until" must be a time in RFC 3339`},
		// An explicit 0 is out of the documented range, not the default.
		{"/api/v1/replay", `{"reason":"r","limit":0}`, `limit 0 is out of range; give 1 to 1000`},
		{"/api/v1/prune", `{"reason":"r","succeeded_age":"1h","batch":0}`, `batch 0 is out of range; give 1 to 1000`},
		{"/api/v1/queues/default/claim", `{"kinds":["task"],"max_jobs":0}`, `max_jobs 0 is out of range; give 1 to 100`},
	} {
		r := s.op(t, "POST", c.path, json.RawMessage(c.body))
		want(t, c.body, r, http.StatusBadRequest, "invalid_input")
		var body struct{ Error struct{ Message string } }
		if err := json.Unmarshal([]byte(r.String()), &body); err != nil {
			t.Fatalf("%s %s: %s: %v", c.path, c.body, r, err)
		}
		msg := body.Error.Message
		if !strings.Contains(msg, c.want) {
			t.Errorf("%s %s: %s, want %q", c.path, c.body, msg, c.want)
		}
		for _, goism := range []string{"errand.", "errandhttp", "JobRequest", "LaterJob", "[]", "time.Time", "2006-01-02", "UnmarshalJSON", "Unique is set", " int,", "enqueue batch"} {
			if strings.Contains(msg, goism) {
				t.Errorf("%s %s: %s speaks Go (%q)", c.path, c.body, msg, goism)
			}
		}
	}
	// An Idempotency-Key becomes the id: its refusal names the header.
	for _, c := range []struct{ path, body, key, want string }{
		{"/api/v1/jobs", `{"kind":"task"}`, "order.callback", `Idempotency-Key "order.callback" becomes the job's id, and is refused: "order.callback" ends in ".callback"`},
		{"/api/v1/batches", `{"jobs":[{"kind":"task"}]}`, "w.step", `Idempotency-Key "w.step" becomes the batch id, and is refused`},
	} {
		r := s.do(t, req{method: "POST", path: c.path, token: operatorSecret, body: json.RawMessage(c.body),
			header: map[string]string{errandhttp.IdempotencyHeader: c.key}})
		want(t, c.key, r, http.StatusBadRequest, "invalid_input")
		var body struct{ Error struct{ Message string } }
		if err := json.Unmarshal([]byte(r.String()), &body); err != nil || !strings.Contains(body.Error.Message, c.want) {
			t.Errorf("%s with key %s: %s (%v), want %q", c.path, c.key, r, err, c.want)
		}
	}
	if n := s.jobCount(t); n != 0 {
		t.Errorf("%d jobs after refused requests, want 0", n)
	}
}
