package errandhttp_test

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
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

func TestAPIEnqueueGetList(t *testing.T) {
	clock := newTestClock()
	s := newServer(t, openSQLite(t, clock), clock, nil)

	r := s.op(t, "POST", "/api/v1/jobs", map[string]any{
		"kind": "send_receipt", "args": map[string]any{"payment_id": "p1"}, "queue": "billing",
		"priority": 3, "delay": "1m", "max_attempts": 4, "unique_key": "receipt:p1", "tags": []string{"a"},
		"metadata": map[string]any{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"},
	})
	want(t, "enqueue", r, http.StatusCreated, "")
	var created struct {
		Job       errandtype.Job `json:"job"`
		Duplicate bool           `json:"duplicate"`
	}
	if err := json.Unmarshal(r.body, &created); err != nil {
		t.Fatal(err)
	}
	j := created.Job
	if j.Kind != "send_receipt" || j.Queue != "billing" || j.Priority != 3 || j.MaxAttempts != 4 || created.Duplicate ||
		!j.AvailableAt.Equal(clock.Now().Add(time.Minute)) || string(j.Args) != `{"payment_id":"p1"}` ||
		string(j.Metadata) != `{"traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}` {
		t.Fatalf("created %s", r.body)
	}
	if !strings.Contains(string(r.body), `"available_at":"2026-11-29T12:01:00Z"`) {
		t.Fatalf("times must be RFC 3339 in UTC: %s", r.body)
	}

	got := s.do(t, req{method: "GET", path: "/api/v1/jobs/" + j.ID, token: readerSecret})
	want(t, "get", got, http.StatusOK, "")
	if m := got.json(t); m["id"] != j.ID || m["state"] != "queued" || m["lease_token"] != nil {
		t.Fatalf("get: %s", got.body)
	}
	want(t, "get unknown", s.op(t, "GET", "/api/v1/jobs/nope", nil), http.StatusNotFound, "not_found")
	badMeta := s.op(t, "POST", "/api/v1/jobs", map[string]any{"kind": "send_receipt", "id": "bad-meta", "metadata": []int{1}})
	want(t, "metadata not an object", badMeta, http.StatusBadRequest, "invalid_input")
	if !strings.Contains(string(badMeta.body), `metadata: is not a JSON object`) {
		t.Fatalf("metadata not an object: %s", badMeta.body)
	}
	want(t, "no job for bad metadata", s.op(t, "GET", "/api/v1/jobs/bad-meta", nil), http.StatusNotFound, "not_found")

	// A unique key already taken returns the first job.
	dup := s.op(t, "POST", "/api/v1/jobs", map[string]any{"kind": "send_receipt", "unique_key": "receipt:p1"})
	want(t, "duplicate", dup, http.StatusOK, "")
	if m := dup.json(t); m["duplicate"] != true || m["job"].(map[string]any)["id"] != j.ID {
		t.Fatalf("duplicate: %s", dup.body)
	}

	for i := 0; i < 4; i++ {
		want(t, "enqueue", s.op(t, "POST", "/api/v1/jobs", map[string]any{"kind": "task"}), http.StatusCreated, "")
	}
	// Pages of two, following next_cursor, see every task once.
	var seen []string
	cursor := ""
	for pages := 0; ; pages++ {
		if pages > 5 {
			t.Fatal("paging does not end")
		}
		path := "/api/v1/jobs?kind=task&state=queued,retrying&queue=&limit=2"
		if cursor != "" {
			path += "&cursor=" + cursor
		}
		page := s.do(t, req{method: "GET", path: path, token: readerSecret})
		want(t, "list", page, http.StatusOK, "")
		var lr struct {
			Jobs       []errandtype.Job `json:"jobs"`
			NextCursor *string          `json:"next_cursor"`
		}
		if err := json.Unmarshal(page.body, &lr); err != nil {
			t.Fatal(err)
		}
		for _, j := range lr.Jobs {
			seen = append(seen, j.ID)
		}
		if lr.NextCursor == nil {
			break
		}
		cursor = *lr.NextCursor
	}
	if len(seen) != 4 {
		t.Fatalf("paged through %d tasks, want 4", len(seen))
	}
	empty := s.op(t, "GET", "/api/v1/jobs?state=dead", nil)
	if want(t, "empty list", empty, http.StatusOK, ""); !strings.Contains(string(empty.body), `"jobs":[]`) {
		t.Fatalf("an empty listing must be []: %s", empty.body)
	}
	for _, path := range []string{
		"/api/v1/jobs?limit=1001", "/api/v1/jobs?limit=0", "/api/v1/jobs?state=zombie",
		"/api/v1/jobs?sate=dead", "/api/v1/jobs?cursor=x",
	} {
		want(t, path, s.op(t, "GET", path, nil), http.StatusBadRequest, "invalid_input")
	}
}

func TestAPIIdempotencyKey(t *testing.T) {
	clock := newTestClock()
	s := newServer(t, openSQLite(t, clock), clock, nil)
	body := map[string]any{"kind": "task", "args": map[string]any{"n": 1, "s": "x"}}
	key := map[string]string{"Idempotency-Key": "order-77"}

	first := s.do(t, req{method: "POST", path: "/api/v1/jobs", token: operatorSecret, body: body, header: key})
	want(t, "first", first, http.StatusCreated, "")
	// The same request again, its args spelled differently.
	again := s.do(t, req{method: "POST", path: "/api/v1/jobs", token: operatorSecret, body: `{"args": {"s": "x", "n": 1}, "kind": "task"}`, header: key})
	want(t, "retried", again, http.StatusOK, "")
	if again.header.Get("Idempotent-Replayed") != "true" || again.json(t)["job"].(map[string]any)["id"] != "order-77" {
		t.Fatalf("retried: %s %v", again.body, again.header)
	}
	conflict := s.do(t, req{method: "POST", path: "/api/v1/jobs", token: operatorSecret,
		body: map[string]any{"kind": "task", "args": map[string]any{"n": 2}}, header: key})
	want(t, "reused key", conflict, http.StatusConflict, "idempotency_conflict")
	mismatch := s.do(t, req{method: "POST", path: "/api/v1/jobs", token: operatorSecret,
		body: map[string]any{"kind": "task", "id": "other"}, header: key})
	want(t, "id and key differ", mismatch, http.StatusBadRequest, "invalid_input")
	if n := s.jobCount(t); n != 1 {
		t.Fatalf("%d jobs, want 1", n)
	}
	// A unique job retried with its key, then with another scope or
	// window under the same Idempotency-Key.
	ukey := map[string]string{"Idempotency-Key": "sync-7"}
	ubody := map[string]any{"kind": "task", "unique_key": "sync:7", "unique_scope": "until_finished", "unique_window": "1h"}
	want(t, "unique first", s.do(t, req{method: "POST", path: "/api/v1/jobs", token: operatorSecret, body: ubody, header: ukey}), http.StatusCreated, "")
	want(t, "unique retried", s.do(t, req{method: "POST", path: "/api/v1/jobs", token: operatorSecret, body: ubody, header: ukey}), http.StatusOK, "")
	for name, change := range map[string]map[string]any{
		"another scope":   {"unique_scope": "always"},
		"another window":  {"unique_window": "59m"},
		"no window":       {"unique_window": nil},
		"the default one": {"unique_scope": nil},
	} {
		b := map[string]any{}
		for k, v := range ubody {
			b[k] = v
		}
		for k, v := range change {
			if v == nil {
				delete(b, k)
			} else {
				b[k] = v
			}
		}
		want(t, "unique key reused with "+name, s.do(t, req{method: "POST", path: "/api/v1/jobs", token: operatorSecret, body: b, header: ukey}), http.StatusConflict, "idempotency_conflict")
	}
	if n := s.jobCount(t); n != 2 {
		t.Fatalf("%d jobs, want 2", n)
	}

	// A unique key that another job holds answers with that job, key or
	// no key: it is not a reused key.
	want(t, "unique", s.op(t, "POST", "/api/v1/jobs", map[string]any{"kind": "task", "unique_key": "u1"}), http.StatusCreated, "")
	held := s.do(t, req{method: "POST", path: "/api/v1/jobs", token: operatorSecret,
		body: map[string]any{"kind": "task", "unique_key": "u1", "args": map[string]any{"other": true}}, header: map[string]string{"Idempotency-Key": "order-78"}})
	want(t, "unique key held", held, http.StatusOK, "")
	if j := held.json(t)["job"].(map[string]any); j["unique_key"] != "u1" || j["id"] == "order-78" {
		t.Fatalf("unique key held: %s", held.body)
	}
	if n := s.jobCount(t); n != 3 {
		t.Fatalf("%d jobs, want 3", n)
	}
}

func TestAPIBadInputWritesNothing(t *testing.T) {
	clock := newTestClock()
	s := newServer(t, openSQLite(t, clock), clock, &errandhttp.Options{Auth: &errandhttp.AuthOptions{Tokens: testTokens, MaxBodyBytes: 4096}})
	for _, tc := range []struct {
		name   string
		body   string
		ctype  string
		status int
		code   string
	}{
		{"malformed", `{"kind": "task",`, "", 400, "invalid_input"},
		{"unknown field", `{"kind": "task", "prio": 1}`, "", 400, "invalid_input"},
		{"two values", `{"kind": "task"} {"kind": "task"}`, "", 400, "invalid_input"},
		{"wrong type", `{"kind": "task", "priority": "high"}`, "", 400, "invalid_input"},
		{"not an object", `["task"]`, "", 400, "invalid_input"},
		{"no kind", `{"args": {}}`, "", 400, "invalid_input"},
		{"bad kind", `{"kind": "a b"}`, "", 400, "invalid_input"},
		{"run_at and delay", `{"kind": "task", "run_at": "2026-12-01T00:00:00Z", "delay": "1m"}`, "", 400, "invalid_input"},
		{"bad delay", `{"kind": "task", "delay": "soon"}`, "", 400, "invalid_input"},
		{"args not JSON object", `{"kind": "task", "args": nul}`, "", 400, "invalid_input"},
		{"priority past 32 bits", `{"kind": "task", "priority": 4294967296}`, "", 400, "invalid_input"},
		{"form post", `kind=task`, "application/x-www-form-urlencoded", 415, "unsupported_media_type"},
		{"too large", `{"kind": "task", "args": {"x": "` + strings.Repeat("a", 5000) + `"}}`, "", 413, "too_large"},
	} {
		h := map[string]string{}
		if tc.ctype != "" {
			h["Content-Type"] = tc.ctype
		}
		r := s.do(t, req{method: "POST", path: "/api/v1/jobs", token: operatorSecret, body: tc.body, header: h})
		want(t, tc.name, r, tc.status, tc.code)
		if msg := r.json(t)["error"].(map[string]any)["message"]; msg == "" {
			t.Errorf("%s: no message", tc.name)
		}
	}
	if n := s.jobCount(t); n != 0 {
		t.Fatalf("bad requests wrote %d jobs", n)
	}
}

// TestAPIWorkerSession is a worker in another language: claim, heartbeat,
// ack and fail by lease token, on both stores.
func TestAPIWorkerSession(t *testing.T) {
	eachStore(t, func(t *testing.T, st errandstore.TxStore[*sql.Tx], clock *errandtest.Clock) {
		s := newServer(t, st, clock, nil)
		claimBody := map[string]any{"kinds": []string{"task"}, "lease": "30s", "max_jobs": 10, "worker": "node-7"}

		want(t, "claim nothing", s.op(t, "POST", "/api/v1/queues/default/claim", claimBody), http.StatusNoContent, "")
		want(t, "enqueue", s.op(t, "POST", "/api/v1/jobs", map[string]any{"kind": "task", "args": map[string]int{"n": 1}, "max_attempts": 2}), http.StatusCreated, "")
		want(t, "enqueue other", s.op(t, "POST", "/api/v1/jobs", map[string]any{"kind": "other"}), http.StatusCreated, "")

		r := s.op(t, "POST", "/api/v1/queues/default/claim", claimBody)
		want(t, "claim", r, http.StatusOK, "")
		var claimed struct {
			Jobs []errandtype.Envelope `json:"jobs"`
		}
		if err := json.Unmarshal(r.body, &claimed); err != nil {
			t.Fatal(err)
		}
		if len(claimed.Jobs) != 1 || claimed.Jobs[0].Kind != "task" || claimed.Jobs[0].LeaseToken == "" ||
			claimed.Jobs[0].Attempt != 1 || string(claimed.Jobs[0].Args) != `{"n":1}` {
			t.Fatalf("claimed %s", r.body)
		}
		env := claimed.Jobs[0]
		if j := s.job(t, env.ID); j.LeaseOwner == nil || *j.LeaseOwner != "http:alice/node-7" {
			t.Fatalf("lease owner %v, want http:alice/node-7", j.LeaseOwner)
		}

		clock.Advance(20 * time.Second)
		hb := s.op(t, "POST", "/api/v1/jobs/"+env.ID+"/heartbeat", map[string]any{"lease_token": env.LeaseToken, "lease": "1m"})
		want(t, "heartbeat", hb, http.StatusOK, "")
		if hb.json(t)["lease_until"] != clock.Now().Add(time.Minute).Format(time.RFC3339) {
			t.Fatalf("heartbeat: %s", hb.body)
		}

		before := s.job(t, env.ID)
		for _, action := range []string{"heartbeat", "ack", "fail"} {
			stale := s.op(t, "POST", "/api/v1/jobs/"+env.ID+"/"+action, map[string]any{"lease_token": "stale-token"})
			want(t, action+" with a stale token", stale, http.StatusConflict, "lease_lost")
		}
		want(t, "ack without a token", s.op(t, "POST", "/api/v1/jobs/"+env.ID+"/ack", map[string]any{}), http.StatusBadRequest, "invalid_input")
		if after := s.job(t, env.ID); !reflect.DeepEqual(before, after) {
			t.Fatalf("refused calls changed the job:\n%+v\n%+v", before, after)
		}

		// A failure retries on the kind's policy (10s cap: 5s to 10s).
		f := s.op(t, "POST", "/api/v1/jobs/"+env.ID+"/fail", map[string]any{"lease_token": env.LeaseToken, "class": "upstream_down", "message": "503 from upstream"})
		want(t, "fail", f, http.StatusOK, "")
		var out struct {
			State       errandtype.JobState `json:"state"`
			AvailableAt *time.Time          `json:"available_at"`
		}
		if err := json.Unmarshal(f.body, &out); err != nil {
			t.Fatal(err)
		}
		if d := out.AvailableAt.Sub(clock.Now()); out.State != errandtype.StateRetrying || d < 5*time.Second || d >= 10*time.Second {
			t.Fatalf("fail: %s", f.body)
		}
		want(t, "ack after fail", s.op(t, "POST", "/api/v1/jobs/"+env.ID+"/ack", map[string]any{"lease_token": env.LeaseToken}), http.StatusConflict, "lease_lost")

		clock.Advance(10 * time.Second)
		r = s.op(t, "POST", "/api/v1/queues/default/claim", claimBody)
		want(t, "claim again", r, http.StatusOK, "")
		if err := json.Unmarshal(r.body, &claimed); err != nil {
			t.Fatal(err)
		}
		env = claimed.Jobs[0]
		ack := s.op(t, "POST", "/api/v1/jobs/"+env.ID+"/ack", map[string]any{"lease_token": env.LeaseToken})
		want(t, "ack", ack, http.StatusOK, "")
		if m := ack.json(t); m["state"] != "succeeded" || m["available_at"] != nil {
			t.Fatalf("ack: %s", ack.body)
		}
		j := s.job(t, env.ID)
		if j.State != errandtype.StateSucceeded || j.Attempt != 2 || j.Errors[0].Class != "upstream_down" {
			t.Fatalf("job %s attempt %d errors %+v", j.State, j.Attempt, j.Errors)
		}
		want(t, "claim past the maximum", s.op(t, "POST", "/api/v1/queues/default/claim",
			map[string]any{"kinds": []string{"task"}, "max_jobs": errand.MaxClaimJobs + 1}), http.StatusBadRequest, "invalid_input")
	})
}

func TestAPIOperatorActions(t *testing.T) {
	clock := newTestClock()
	s := newServer(t, openSQLite(t, clock), clock, nil)
	r := s.op(t, "POST", "/api/v1/jobs", map[string]any{"kind": "task", "max_attempts": 1})
	id := r.json(t)["job"].(map[string]any)["id"].(string)
	js, err := s.c.Claim(t.Context(), &errand.ClaimOpts{Kinds: []string{"task"}, Owner: "w"})
	if err != nil || len(js) != 1 {
		t.Fatalf("claim: %v", err)
	}
	want(t, "fail", s.op(t, "POST", "/api/v1/jobs/"+id+"/fail", map[string]any{"lease_token": *js[0].LeaseToken, "message": "boom"}), http.StatusOK, "")

	want(t, "replay without a reason", s.op(t, "POST", "/api/v1/jobs/"+id+"/replay", map[string]any{}), http.StatusBadRequest, "invalid_input")
	want(t, "replay by a reader", s.do(t, req{method: "POST", path: "/api/v1/jobs/" + id + "/replay", token: readerSecret, body: map[string]any{"reason": "x"}}), http.StatusForbidden, "forbidden")
	if j := s.job(t, id); j.State != errandtype.StateDead || j.Replays != 0 {
		t.Fatalf("refused replays changed the job: %s, %d replays", j.State, j.Replays)
	}
	rep := s.op(t, "POST", "/api/v1/jobs/"+id+"/replay", map[string]any{"reason": "upstream fixed"})
	want(t, "replay", rep, http.StatusOK, "")
	if m := rep.json(t); m["state"] != "queued" || m["replays"] != 1.0 {
		t.Fatalf("replay: %s", rep.body)
	}
	want(t, "replay a queued job", s.op(t, "POST", "/api/v1/jobs/"+id+"/replay", map[string]any{"reason": "again"}), http.StatusConflict, "wrong_state")

	audit := s.do(t, req{method: "GET", path: "/api/v1/jobs/" + id + "/audit", token: readerSecret})
	want(t, "audit", audit, http.StatusOK, "")
	var ar struct {
		Audit []errandtype.ReplayRecord `json:"audit"`
	}
	if err := json.Unmarshal(audit.body, &ar); err != nil {
		t.Fatal(err)
	}
	if len(ar.Audit) != 1 || ar.Audit[0].Operator != "alice" || ar.Audit[0].Reason != "upstream fixed" || ar.Audit[0].PriorState != errandtype.StateDead {
		t.Fatalf("audit: %s", audit.body)
	}
	want(t, "audit of an unknown job", s.op(t, "GET", "/api/v1/jobs/nope/audit", nil), http.StatusNotFound, "not_found")

	want(t, "cancel without a reason", s.op(t, "POST", "/api/v1/jobs/"+id+"/cancel", nil), http.StatusBadRequest, "invalid_input")
	c := s.op(t, "POST", "/api/v1/jobs/"+id+"/cancel", map[string]any{"reason": "customer left"})
	if want(t, "cancel", c, http.StatusOK, ""); c.json(t)["state"] != "cancelled" {
		t.Fatalf("cancel: %s", c.body)
	}
	want(t, "cancel again", s.op(t, "POST", "/api/v1/jobs/"+id+"/cancel", map[string]any{"reason": "x"}), http.StatusConflict, "wrong_state")
	want(t, "cancel unknown", s.op(t, "POST", "/api/v1/jobs/nope/cancel", map[string]any{"reason": "x"}), http.StatusNotFound, "not_found")
}

func TestAPIStatsAndWorkers(t *testing.T) {
	clock := newTestClock()
	s := newServer(t, openSQLite(t, clock), clock, nil)
	for i := 0; i < 3; i++ {
		s.op(t, "POST", "/api/v1/jobs", map[string]any{"kind": "task", "queue": fmt.Sprintf("q%d", i%2)})
	}
	r := s.do(t, req{method: "GET", path: "/api/v1/stats", token: readerSecret})
	want(t, "stats", r, http.StatusOK, "")
	var sr struct {
		Queues []errandtype.QueueStats `json:"queues"`
	}
	if err := json.Unmarshal(r.body, &sr); err != nil {
		t.Fatal(err)
	}
	if len(sr.Queues) != 2 || sr.Queues[0].Queue != "q0" || sr.Queues[0].Counts[errandtype.StateQueued] != 2 {
		t.Fatalf("stats: %s", r.body)
	}
	w := s.do(t, req{method: "GET", path: "/api/v1/workers", token: readerSecret})
	want(t, "workers", w, http.StatusOK, "")
	if m := w.json(t); !reflect.DeepEqual(m["workers"], []any{}) || m["leader"] != nil {
		t.Fatalf("workers: %s", w.body)
	}
	want(t, "unknown endpoint", s.op(t, "GET", "/api/v1/nothing", nil), http.StatusNotFound, "not_found")
	want(t, "wrong method", s.op(t, "DELETE", "/api/v1/jobs/x", nil), http.StatusMethodNotAllowed, "method_not_allowed")
}

func TestAPIHideArgs(t *testing.T) {
	clock := newTestClock()
	st := openSQLite(t, clock)
	s := newServer(t, st, clock, &errandhttp.Options{API: &errandhttp.APIOptions{HideArgs: true}})
	r := s.op(t, "POST", "/api/v1/jobs", map[string]any{"kind": "task", "unique_key": "u1", "args": map[string]string{"card": "4111"}})
	id := r.json(t)["job"].(map[string]any)["id"].(string)
	// A duplicate enqueue answers with the existing job: args hidden too.
	if d := s.op(t, "POST", "/api/v1/jobs", map[string]any{"kind": "task", "unique_key": "u1", "args": map[string]string{}}); strings.Contains(string(d.body), "4111") {
		t.Fatalf("a duplicate enqueue shows hidden args: %s", d.body)
	}
	c := s.op(t, "POST", "/api/v1/queues/default/claim", map[string]any{"kinds": []string{"task"}})
	if !strings.Contains(string(c.body), "4111") {
		t.Fatalf("a claim must carry the args: %s", c.body)
	}
	var claimed struct {
		Jobs []errandtype.Envelope `json:"jobs"`
	}
	if err := json.Unmarshal(c.body, &claimed); err != nil || len(claimed.Jobs) != 1 {
		t.Fatalf("claim: %s", c.body)
	}
	// Progress a handler saved is often drawn from the args: hidden too.
	if err := st.JobSetProgress(t.Context(), &errandstore.JobSetProgressParams{ID: id, LeaseToken: claimed.Jobs[0].LeaseToken, Progress: json.RawMessage(`{"card":"4111"}`)}); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/api/v1/jobs/" + id, "/api/v1/jobs"} {
		if g := s.op(t, "GET", path, nil); strings.Contains(string(g.body), "4111") {
			t.Fatalf("%s shows hidden args or progress: %s", path, g.body)
		}
	}
}

func TestAPIAckMany(t *testing.T) {
	eachStore(t, func(t *testing.T, st errandstore.TxStore[*sql.Tx], clock *errandtest.Clock) {
		s := newServer(t, st, clock, nil)
		for range 3 {
			s.op(t, "POST", "/api/v1/jobs", map[string]any{"kind": "task"})
		}
		r := s.op(t, "POST", "/api/v1/queues/default/claim", map[string]any{"kinds": []string{"task"}, "max_jobs": 3})
		var claimed struct {
			Jobs []errandtype.Envelope `json:"jobs"`
		}
		if err := json.Unmarshal(r.body, &claimed); err != nil || len(claimed.Jobs) != 3 {
			t.Fatalf("claim: %s", r.body)
		}
		js := claimed.Jobs
		body := map[string]any{"jobs": []map[string]string{
			{"id": js[0].ID, "lease_token": js[0].LeaseToken},
			{"id": js[1].ID, "lease_token": "stale"},
			{"id": js[2].ID, "lease_token": js[2].LeaseToken},
		}}
		ack := s.op(t, "POST", "/api/v1/ack", body)
		want(t, "ack many", ack, http.StatusOK, "")
		var res struct {
			Results []struct {
				ID    string `json:"id"`
				State string `json:"state"`
				Error *struct {
					Code string `json:"code"`
				} `json:"error"`
			} `json:"results"`
		}
		if err := json.Unmarshal(ack.body, &res); err != nil {
			t.Fatal(err)
		}
		if len(res.Results) != 3 || res.Results[0].State != "succeeded" || res.Results[1].Error == nil ||
			res.Results[1].Error.Code != "lease_lost" || res.Results[1].State != "" || res.Results[2].State != "succeeded" {
			t.Fatalf("ack many: %s", ack.body)
		}
		if j := s.job(t, js[1].ID); j.State != errandtype.StateRunning {
			t.Fatalf("the stale ack changed the job: %s", j.State)
		}
		many := make([]map[string]string, errand.MaxClaimJobs+1)
		for i := range many {
			many[i] = map[string]string{"id": js[1].ID, "lease_token": js[1].LeaseToken}
		}
		want(t, "too many", s.op(t, "POST", "/api/v1/ack", map[string]any{"jobs": many}), http.StatusBadRequest, "invalid_input")
		want(t, "none", s.op(t, "POST", "/api/v1/ack", map[string]any{"jobs": []any{}}), http.StatusBadRequest, "invalid_input")
		if j := s.job(t, js[1].ID); j.State != errandtype.StateRunning {
			t.Fatalf("refused batches changed the job: %s", j.State)
		}
	})
}

// TestAPICancelRunning is an operator cancelling a job a remote worker
// runs: the cancel is a request, the worker's next heartbeat says
// cancel_requested, and its fail ends the job cancelled, on both stores.
func TestAPICancelRunning(t *testing.T) {
	eachStore(t, func(t *testing.T, st errandstore.TxStore[*sql.Tx], clock *errandtest.Clock) {
		s := newServer(t, st, clock, nil)
		want(t, "enqueue", s.op(t, "POST", "/api/v1/jobs", map[string]any{"kind": "task", "max_attempts": 5}), http.StatusCreated, "")
		r := s.op(t, "POST", "/api/v1/queues/default/claim", map[string]any{"kinds": []string{"task"}, "lease": "30s", "worker": "node-7"})
		want(t, "claim", r, http.StatusOK, "")
		var claimed struct {
			Jobs []errandtype.Envelope `json:"jobs"`
		}
		if err := json.Unmarshal(r.body, &claimed); err != nil {
			t.Fatal(err)
		}
		env := claimed.Jobs[0]
		hb := s.op(t, "POST", "/api/v1/jobs/"+env.ID+"/heartbeat", map[string]any{"lease_token": env.LeaseToken})
		if m := hb.json(t); m["cancel_requested"] != false {
			t.Fatalf("heartbeat before a cancel: %s", hb.body)
		}
		c := s.op(t, "POST", "/api/v1/jobs/"+env.ID+"/cancel", map[string]any{"reason": "runaway import"})
		want(t, "cancel a running job", c, http.StatusOK, "")
		if m := c.json(t); m["state"] != "running" || m["cancel_requested_at"] == nil {
			t.Fatalf("cancel of a running job: %s", c.body)
		}
		hb = s.op(t, "POST", "/api/v1/jobs/"+env.ID+"/heartbeat", map[string]any{"lease_token": env.LeaseToken})
		if m := hb.json(t); m["cancel_requested"] != true {
			t.Fatalf("heartbeat after a cancel: %s", hb.body)
		}
		f := s.op(t, "POST", "/api/v1/jobs/"+env.ID+"/fail", map[string]any{"lease_token": env.LeaseToken, "message": "stopped"})
		want(t, "fail after a cancel", f, http.StatusOK, "")
		if m := f.json(t); m["state"] != "cancelled" {
			t.Fatalf("fail after a cancel: %s", f.body)
		}
		if j := s.job(t, env.ID); j.State != errandtype.StateCancelled || j.Errors[0].Class != errandstore.ClassCancelled {
			t.Fatalf("job %s, history %+v", j.State, j.Errors)
		}
	})
}

// GET /api/v1/stats says null, as errand stats --json does, for the oldest
// ready age of a queue and a kind with no job ready, and the age otherwise.
func TestAPIStatsOldestReadyAgeNullWhenNoneReady(t *testing.T) {
	clock := newTestClock()
	s := newServer(t, openSQLite(t, clock), clock, nil)
	s.op(t, "POST", "/api/v1/jobs", map[string]any{"kind": "later", "queue": "q0", "delay": "1h"})
	s.op(t, "POST", "/api/v1/jobs", map[string]any{"kind": "now", "queue": "q1"})
	clock.Advance(5 * time.Second)
	r := s.do(t, req{method: "GET", path: "/api/v1/stats", token: readerSecret})
	want(t, "stats", r, http.StatusOK, "")
	var sr struct {
		Queues []struct {
			Queue string   `json:"queue"`
			Age   *float64 `json:"oldest_ready_age_seconds"`
		} `json:"queues"`
		Insights struct {
			Kinds []struct {
				Kind string   `json:"kind"`
				Age  *float64 `json:"oldest_ready_age_seconds"`
			} `json:"kinds"`
		} `json:"insights"`
	}
	if err := json.Unmarshal(r.body, &sr); err != nil {
		t.Fatal(err)
	}
	if len(sr.Queues) != 2 || sr.Queues[0].Age != nil || sr.Queues[1].Age == nil || *sr.Queues[1].Age != 5 {
		t.Fatalf("queues' oldest ready ages: %s\nwant q0 null and q1 5", r.body)
	}
	ages := map[string]*float64{}
	for _, k := range sr.Insights.Kinds {
		ages[k.Kind] = k.Age
	}
	if len(ages) != 2 || ages["later"] != nil || ages["now"] == nil || *ages["now"] != 5 {
		t.Fatalf("kinds' oldest ready ages: %s\nwant later null and now 5", r.body)
	}
	if strings.Contains(string(r.body), `"oldest_ready_age_seconds":0`) {
		t.Fatalf("an age of 0 where none is ready: %s", r.body)
	}
}

// TestAPIAckManyRefusesBadEntries: a batch ack with a bad entry is 400,
// naming the entry, and acknowledges nothing; a job listed twice is such an
// entry (acknowledged by one and reported lease_lost by the other, the
// answer would contradict itself), on both stores.
func TestAPIAckManyRefusesBadEntries(t *testing.T) {
	eachStore(t, func(t *testing.T, st errandstore.TxStore[*sql.Tx], clock *errandtest.Clock) {
		s := newServer(t, st, clock, nil)
		for range 2 {
			want(t, "enqueue", s.op(t, "POST", "/api/v1/jobs", map[string]any{"kind": "task"}), http.StatusCreated, "")
		}
		r := s.op(t, "POST", "/api/v1/queues/default/claim", map[string]any{"kinds": []string{"task"}, "max_jobs": 2})
		var claimed struct {
			Jobs []errandtype.Envelope `json:"jobs"`
		}
		if err := json.Unmarshal(r.body, &claimed); err != nil || len(claimed.Jobs) != 2 {
			t.Fatalf("claim: %s", r.body)
		}
		a, b := claimed.Jobs[0], claimed.Jobs[1]
		for _, tc := range []struct {
			name  string
			jobs  []map[string]string
			names string
		}{
			{"a job twice", []map[string]string{{"id": a.ID, "lease_token": a.LeaseToken}, {"id": b.ID, "lease_token": b.LeaseToken},
				{"id": a.ID, "lease_token": a.LeaseToken}}, "jobs[2].id"},
			{"an empty token", []map[string]string{{"id": a.ID, "lease_token": a.LeaseToken}, {"id": b.ID, "lease_token": ""}}, "jobs[1].lease_token"},
			{"an empty id", []map[string]string{{"id": a.ID, "lease_token": a.LeaseToken}, {"id": "", "lease_token": b.LeaseToken}}, "jobs[1].id"},
		} {
			r := s.op(t, "POST", "/api/v1/ack", map[string]any{"jobs": tc.jobs})
			want(t, tc.name, r, http.StatusBadRequest, "invalid_input")
			if msg := r.json(t)["error"].(map[string]any)["message"].(string); !strings.HasPrefix(msg, tc.names+": ") {
				t.Errorf("%s: message %q does not name %s", tc.name, msg, tc.names)
			}
		}
		for _, env := range claimed.Jobs {
			if j := s.job(t, env.ID); j.State != errandtype.StateRunning {
				t.Fatalf("a refused batch acknowledged job %s: %s", j.ID, j.State)
			}
		}
	})
}

// TestAPILeaseOfZeroIsRefused: a lease of "0s", in a claim or a heartbeat,
// is under the 1s minimum and refused with nothing written, not taken for
// the default 30s; left out or null, the lease is the default.
func TestAPILeaseOfZeroIsRefused(t *testing.T) {
	clock := newTestClock()
	s := newServer(t, openSQLite(t, clock), clock, nil)
	want(t, "enqueue", s.op(t, "POST", "/api/v1/jobs", map[string]any{"kind": "task", "id": "j1"}), http.StatusCreated, "")
	r := s.op(t, "POST", "/api/v1/queues/default/claim", map[string]any{"kinds": []string{"task"}, "lease": "0s"})
	want(t, "claim with lease 0s", r, http.StatusBadRequest, "invalid_input")
	if msg := r.json(t)["error"].(map[string]any)["message"].(string); !strings.HasPrefix(msg, "lease: ") {
		t.Errorf("message %q does not name the lease", msg)
	}
	if j := s.job(t, "j1"); j.State != errandtype.StateQueued {
		t.Fatalf("a refused claim took the job: %s", j.State)
	}
	r = s.op(t, "POST", "/api/v1/queues/default/claim", `{"kinds": ["task"], "lease": null}`)
	want(t, "claim with lease null", r, http.StatusOK, "")
	var claimed struct {
		Jobs []errandtype.Envelope `json:"jobs"`
	}
	if err := json.Unmarshal(r.body, &claimed); err != nil || len(claimed.Jobs) != 1 {
		t.Fatalf("claim: %s", r.body)
	}
	env := claimed.Jobs[0]
	if !env.LeaseUntil.Equal(clock.Now().Add(errand.DefaultLease)) {
		t.Fatalf("lease null: lease until %s, want the default", env.LeaseUntil)
	}
	clock.Advance(10 * time.Second)
	r = s.op(t, "POST", "/api/v1/jobs/j1/heartbeat", map[string]any{"lease_token": env.LeaseToken, "lease": "0s"})
	want(t, "heartbeat with lease 0s", r, http.StatusBadRequest, "invalid_input")
	if j := s.job(t, "j1"); !j.LeaseUntil.Equal(env.LeaseUntil) {
		t.Fatalf("a refused heartbeat moved the lease to %s", j.LeaseUntil)
	}
	r = s.op(t, "POST", "/api/v1/jobs/j1/heartbeat", map[string]any{"lease_token": env.LeaseToken})
	want(t, "heartbeat without a lease", r, http.StatusOK, "")
	if r.json(t)["lease_until"] != clock.Now().Add(errand.DefaultLease).Format(time.RFC3339) {
		t.Fatalf("heartbeat without a lease: %s", r.body)
	}
}

// TestAPIHeartbeatAnswersAsDocumented: a heartbeat's answer is
// {"id", "lease_until", "cancel_requested"}, in the order the session in
// docs/http-api.md shows it.
func TestAPIHeartbeatAnswersAsDocumented(t *testing.T) {
	clock := newTestClock()
	s := newServer(t, openSQLite(t, clock), clock, nil)
	want(t, "enqueue", s.op(t, "POST", "/api/v1/jobs", map[string]any{"kind": "task", "id": "j1"}), http.StatusCreated, "")
	r := s.op(t, "POST", "/api/v1/queues/default/claim", map[string]any{"kinds": []string{"task"}})
	var claimed struct {
		Jobs []errandtype.Envelope `json:"jobs"`
	}
	if err := json.Unmarshal(r.body, &claimed); err != nil || len(claimed.Jobs) != 1 {
		t.Fatalf("claim: %s", r.body)
	}
	hb := s.op(t, "POST", "/api/v1/jobs/j1/heartbeat", map[string]any{"lease_token": claimed.Jobs[0].LeaseToken, "lease": "1m"})
	want(t, "heartbeat", hb, http.StatusOK, "")
	if got, want := string(hb.body), `{"id":"j1","lease_until":"2026-11-29T12:01:00Z","cancel_requested":false}`+"\n"; got != want {
		t.Fatalf("heartbeat answered %q, want %q", got, want)
	}
}
