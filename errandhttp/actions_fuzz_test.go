package errandhttp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/errandhq/errand/sqlite"
)

// The API's other bodies, by the first byte of a fuzz input: a remote
// worker's claim and outcomes, and the operators' actions. {id} is one of
// fuzzActionIDs, by the second byte.
var fuzzActionPaths = []string{
	"/api/v1/queues/q/claim",
	"/api/v1/jobs/{id}/heartbeat",
	"/api/v1/jobs/{id}/ack",
	"/api/v1/jobs/{id}/fail",
	"/api/v1/ack",
	"/api/v1/jobs/{id}/output",
	"/api/v1/jobs/{id}/replay",
	"/api/v1/jobs/{id}/cancel",
	"/api/v1/replay",
	"/api/v1/prune",
	"/api/v1/workflows/{id}/rerun",
	"/api/v1/fail",
}

// The jobs of fuzzState, and a finished workflow ("wf-1"). TOKEN in a body
// is run-1's lease token, so that inputs can hold a live lease.
var fuzzActionIDs = []string{"queued-1", "run-1", "dead-1", "wf-1", "missing"}

// FuzzActionBody posts arbitrary bodies to every body-taking endpoint but
// the enqueues (FuzzEnqueueBody has those), each on a fresh store holding a
// queued, a running and a dead job and a finished workflow. Every answer
// is 2xx or a 4xx JSON error with a code and a message; a 4xx changes no
// job, audit record or workflow; after a 2xx every job is still whole
// (attempts within bounds, a lease exactly when running).
func FuzzActionBody(f *testing.F) {
	for _, seed := range []struct {
		path, id uint8
		body     string
	}{
		{0, 0, `{"kinds":["task"],"lease":"30s","max_jobs":5,"worker":"w1"}`},
		{0, 0, `{"kinds":[]}`},
		{0, 0, `{"kinds":["task"],"lease":"0s"}`},
		{0, 0, `{"kinds":["task"],"max_jobs":1000}`},
		{1, 1, `{"lease_token":"TOKEN","lease":"1m"}`},
		{1, 1, `{"lease_token":"stale"}`},
		{1, 0, `{"lease_token":"TOKEN"}`},
		{2, 1, `{"lease_token":"TOKEN"}`},
		{2, 1, `{"lease_token":""}`},
		{2, 4, `{"lease_token":"TOKEN"}`},
		{3, 1, `{"lease_token":"TOKEN","class":"timeout","message":"upstream","retry_after":"5s"}`},
		{3, 1, `{"lease_token":"TOKEN","permanent":true,"message":"bad input"}`},
		{3, 1, `{"lease_token":"TOKEN","retry_after":"-1s"}`},
		{4, 0, `{"jobs":[{"id":"run-1","lease_token":"TOKEN"},{"id":"queued-1","lease_token":"x"}]}`},
		{4, 0, `{"jobs":[]}`},
		{5, 1, `{"lease_token":"TOKEN","output":{"total":3}}`},
		{5, 1, `{"lease_token":"TOKEN","output":` + strings.Repeat("[", 200) + strings.Repeat("]", 200) + `}`},
		{6, 2, `{"reason":"fixed the mail server"}`},
		{6, 2, `{"reason":"fix the args","args":{"to":"b@example.com"}}`},
		{6, 2, `{"reason":"","args":null}`},
		{6, 0, `{"reason":"not dead"}`},
		{7, 0, `{"reason":"customer asked"}`},
		{7, 1, `{"reason":"stuck"}`},
		{7, 2, `{}`},
		{8, 0, `{"kind":"task","queue":"q","reason":"outage over","limit":10,"rate":5}`},
		{8, 0, `{"since":"2026-12-01T00:00:00Z","until":"2026-11-01T00:00:00Z","reason":"x"}`},
		{8, 0, `{"limit":0,"reason":"x"}`},
		{9, 0, `{"succeeded_age":"1h","dead_age":"1h","reason":"tidy","dry_run":true}`},
		{9, 0, `{"succeeded_age":"0s","reason":"tidy"}`},
		{9, 0, `{"dead_age":"1ns","batch":1,"reason":"tidy"}`},
		{10, 3, `{"id":"wf-2"}`},
		{10, 3, `{}`},
		{11, 0, `{"jobs":[{"id":"run-1","lease_token":"TOKEN","class":"http_429","retry_after":"5s"},{"id":"queued-1","lease_token":"x"}]}`},
		{11, 0, `{"jobs":[{"id":"run-1","lease_token":"TOKEN","permanent":true,"retry_after":"5s"}]}`},
		{10, 4, `{}`},
		{2, 1, `{"lease_token":"TOKEN"} trailing`},
		{3, 1, `{"lease_token":"TOKEN","nope":1}`},
		{1, 1, `[]`},
		{4, 0, `null`},
		{6, 2, ``},
	} {
		f.Add(seed.path, seed.id, []byte(seed.body))
	}
	db, token := fuzzTemplate(f)
	f.Fuzz(func(t *testing.T, which, job uint8, body []byte) {
		if len(body) > 64<<10 {
			return // the size limit has tests of its own
		}
		file := filepath.Join(t.TempDir(), "errand.db")
		if err := os.WriteFile(file, db, 0o600); err != nil {
			t.Fatal(err)
		}
		clock := newTestClock()
		st, err := sqlite.Open(t.Context(), file, &sqlite.Options{Clock: clock})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		s := newServer(t, st, clock, nil)
		path := strings.Replace(fuzzActionPaths[int(which)%len(fuzzActionPaths)], "{id}", fuzzActionIDs[int(job)%len(fuzzActionIDs)], 1)
		sent := strings.ReplaceAll(string(body), "TOKEN", token)
		before := snapshot(t, s)
		r := s.do(t, req{method: "POST", path: path, token: operatorSecret, body: sent})
		after := snapshot(t, s)
		switch {
		case r.status >= 200 && r.status < 300:
			checkWhole(t, s, path, sent)
		case r.status >= 400 && r.status < 500:
			var e struct {
				Error struct{ Code, Message string } `json:"error"`
			}
			if err := json.Unmarshal(r.body, &e); err != nil || e.Error.Code == "" || e.Error.Message == "" {
				t.Fatalf("POST %s %q: %d with body %q, want a JSON error with a code and a message", path, sent, r.status, r.body)
			}
			if !maps.Equal(before, after) {
				t.Fatalf("POST %s %q: %d %s, but the store changed:\nbefore %v\nafter  %v", path, sent, r.status, r.body, before, after)
			}
		default:
			t.Fatalf("POST %s %q: %d %s, want 2xx or 4xx", path, sent, r.status, r.body)
		}
	})
}

// fuzzTemplate makes, through the API, a SQLite database holding queued-1,
// run-1 (claimed: its lease token is returned), dead-1 and the finished
// one-step workflow wf-1, and returns its file: each input starts from a
// copy, at the same clock reading.
func fuzzTemplate(t *testing.F) (db []byte, token string) {
	clock := newTestClock()
	path := filepath.Join(t.TempDir(), "template.db")
	st, err := sqlite.Open(context.Background(), path, &sqlite.Options{Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	s := newServer(t, st, clock, nil)
	must := func(path string, body string, want int) response {
		r := s.do(t, req{method: "POST", path: path, token: operatorSecret, body: body})
		if r.status != want {
			t.Fatalf("setup: POST %s %s: %d %s, want %d", path, body, r.status, r.body, want)
		}
		return r
	}
	claim := func() (id, token string) {
		r := must("/api/v1/queues/q/claim", `{"kinds":["task"],"worker":"setup"}`, 200)
		var res struct {
			Jobs []struct {
				ID         string `json:"id"`
				LeaseToken string `json:"lease_token"`
			} `json:"jobs"`
		}
		if err := json.Unmarshal(r.body, &res); err != nil || len(res.Jobs) != 1 {
			t.Fatalf("setup: claim answered %s (%v), want one job", r.body, err)
		}
		return res.Jobs[0].ID, res.Jobs[0].LeaseToken
	}
	must("/api/v1/workflows", `{"id":"wf-1","name":"order","steps":[{"name":"a","kind":"task","queue":"q"}]}`, 201)
	id, tok := claim()
	must("/api/v1/jobs/"+id+"/ack", fmt.Sprintf(`{"lease_token":%q}`, tok), 200)
	must("/api/v1/jobs", `{"id":"dead-1","kind":"task","queue":"q","max_attempts":1,"args":{"to":"a@example.com"}}`, 201)
	id, tok = claim()
	must("/api/v1/jobs/"+id+"/fail", fmt.Sprintf(`{"lease_token":%q,"message":"smtp down"}`, tok), 200)
	must("/api/v1/jobs", `{"id":"run-1","kind":"task","queue":"q","max_attempts":3}`, 201)
	if id, tok = claim(); id != "run-1" {
		t.Fatalf("setup: claimed %s, want run-1", id)
	}
	must("/api/v1/jobs", `{"id":"queued-1","kind":"task","queue":"q"}`, 201)
	s.Close()
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if db, err = os.ReadFile(path); err != nil {
		t.Fatal(err)
	}
	return db, tok
}

// snapshot is every job, audit record and workflow of s, as text.
func snapshot(t *testing.T, s *server) map[string]string {
	t.Helper()
	ctx := t.Context()
	m := map[string]string{}
	jobs, err := s.c.List(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs {
		b, _ := json.Marshal(j)
		m["job "+j.ID] = string(b)
	}
	audit, err := s.c.Audit(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	m["audit"] = fmt.Sprint(len(audit))
	wfs, err := s.c.Workflows(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	ids := []string{}
	for _, w := range wfs {
		ids = append(ids, w.ID+":"+string(w.State))
	}
	slices.Sort(ids)
	m["workflows"] = strings.Join(ids, ",")
	return m
}

// checkWhole checks every job after an accepted request: attempts within
// their bound, and a lease token exactly on running jobs.
func checkWhole(t *testing.T, s *server, path, body string) {
	t.Helper()
	jobs, err := s.c.List(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs {
		if j.Attempt > j.MaxAttempts {
			t.Fatalf("POST %s %q: job %s at attempt %d of %d", path, body, j.ID, j.Attempt, j.MaxAttempts)
		}
		if running, leased := j.State == "running", j.LeaseToken != nil && *j.LeaseToken != ""; running != leased {
			t.Fatalf("POST %s %q: job %s %s, holding a lease token: %v", path, body, j.ID, j.State, leased)
		}
	}
}
