package errandhttp_test

import (
	"bufio"
	"database/sql"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/errandhq/errand/errandhttp"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtest"
	"github.com/errandhq/errand/errandtype"
)

// TestAPIJobSteps: GET /api/v1/jobs/{id}/steps answers a job's recorded
// steps in order, none for a job without them, 404 for an unknown job, and
// hides their results from readers with HideArgs.
func TestAPIJobSteps(t *testing.T) {
	eachStore(t, func(t *testing.T, st errandstore.TxStore[*sql.Tx], clock *errandtest.Clock) {
		for _, hide := range []bool{false, true} {
			s := newServer(t, st, clock, &errandhttp.Options{API: &errandhttp.APIOptions{HideArgs: hide}, Auth: &errandhttp.AuthOptions{Tokens: testTokens}})
			id := s.op(t, "POST", "/api/v1/jobs", map[string]any{"kind": "task"}).json(t)["job"].(map[string]any)["id"].(string)
			if r := s.op(t, "GET", "/api/v1/jobs/"+id+"/steps", nil); r.status != http.StatusOK || strings.TrimSpace(string(r.body)) != `{"steps":[]}` {
				t.Fatalf("steps of a job without any: %d %s", r.status, r.body)
			}
			c := s.op(t, "POST", "/api/v1/queues/default/claim", map[string]any{"kinds": []string{"task"}})
			var claimed struct {
				Jobs []errandtype.Envelope `json:"jobs"`
			}
			if err := json.Unmarshal(c.body, &claimed); err != nil || len(claimed.Jobs) != 1 {
				t.Fatalf("claim: %s", c.body)
			}
			lease := errandstore.JobLease{ID: id, LeaseToken: claimed.Jobs[0].LeaseToken}
			for _, step := range []errandtype.Step{
				{Index: 0, Name: "charge", Result: json.RawMessage(`{"card":"4111"}`)},
				{Index: 1, Name: "mail", Error: "bounced"},
			} {
				if err := errandstore.RecordStep(t.Context(), st.(errandstore.StepStore), &errandstore.JobStepRecordParams{JobLease: lease, Step: step}); err != nil {
					t.Fatal(err)
				}
			}
			r := s.op(t, "GET", "/api/v1/jobs/"+id+"/steps", nil)
			var got struct {
				Steps []errandtype.Step `json:"steps"`
			}
			if err := json.Unmarshal(r.body, &got); r.status != http.StatusOK || err != nil || len(got.Steps) != 2 ||
				got.Steps[0].Name != "charge" || got.Steps[1].Error != "bounced" || got.Steps[1].Attempt != 1 {
				t.Fatalf("steps: %d %s", r.status, r.body)
			}
			// A worker (who may write) needs the results; a reader sees them
			// unless HideArgs.
			if !strings.Contains(string(r.body), "4111") {
				t.Errorf("HideArgs %t: a writer does not see the step's result: %s", hide, r.body)
			}
			rr := s.do(t, req{method: "GET", path: "/api/v1/jobs/" + id + "/steps", token: readerSecret})
			if shown := strings.Contains(string(rr.body), "4111"); rr.status != http.StatusOK || shown == hide {
				t.Errorf("HideArgs %t: a reader sees the step's result %t: %d %s", hide, shown, rr.status, rr.body)
			}
			if r := s.op(t, "GET", "/api/v1/jobs/nope/steps", nil); r.status != http.StatusNotFound {
				t.Errorf("steps of an unknown job: %d %s", r.status, r.body)
			}
			if r := s.op(t, "GET", "/api/v1/jobs/"+id+"/steps?x=1", nil); r.status != http.StatusBadRequest {
				t.Errorf("steps with an unknown parameter: %d %s", r.status, r.body)
			}
		}
	})
}

// TestAPISignal: POST /api/v1/jobs/{id}/signal keeps the signal for the
// job (true when no value is given), and answers 400 without a name, 404
// for an unknown job and 409 for a finished one, writing nothing.
func TestAPISignal(t *testing.T) {
	eachStore(t, func(t *testing.T, st errandstore.TxStore[*sql.Tx], clock *errandtest.Clock) {
		s := newServer(t, st, clock, nil)
		id := s.op(t, "POST", "/api/v1/jobs", map[string]any{"kind": "task"}).json(t)["job"].(map[string]any)["id"].(string)
		for _, body := range []map[string]any{{"name": "approval", "value": map[string]any{"by": "ana"}}, {"name": "approval"}} {
			if r := s.op(t, "POST", "/api/v1/jobs/"+id+"/signal", body); r.status != http.StatusOK ||
				strings.TrimSpace(string(r.body)) != `{"job_id":"`+id+`","signal":"approval"}` {
				t.Fatalf("signal %v: %d %s", body, r.status, r.body)
			}
		}
		for _, c := range []struct {
			id     string
			body   map[string]any
			status int
		}{
			{id, map[string]any{"value": 1}, http.StatusBadRequest},
			{id, map[string]any{"name": strings.Repeat("n", errandstore.MaxJobStepNameBytes+1)}, http.StatusBadRequest},
			{"nope", map[string]any{"name": "approval"}, http.StatusNotFound},
		} {
			if r := s.op(t, "POST", "/api/v1/jobs/"+c.id+"/signal", c.body); r.status != c.status {
				t.Errorf("signal %s %v: %d %s, want %d", c.id, c.body, r.status, r.body, c.status)
			}
		}
		sigs, err := st.(errandstore.StepStore).JobSignals(t.Context(), &errandstore.JobSignalsParams{ID: id, Name: "approval"})
		if err != nil || len(sigs) != 2 || string(sigs[1].Value) != "true" || !strings.Contains(string(sigs[0].Value), "ana") {
			t.Fatalf("signals kept: %+v, %v", sigs, err)
		}
		s.op(t, "POST", "/api/v1/jobs/"+id+"/cancel", map[string]any{"reason": "done with it"})
		if r := s.op(t, "POST", "/api/v1/jobs/"+id+"/signal", map[string]any{"name": "approval"}); r.status != http.StatusConflict {
			t.Errorf("signal to a cancelled job: %d %s, want 409", r.status, r.body)
		}
		if sigs, _ := st.(errandstore.StepStore).JobSignals(t.Context(), &errandstore.JobSignalsParams{ID: id, Name: "approval"}); len(sigs) != 2 {
			t.Errorf("a refused signal was kept: %d signals", len(sigs))
		}
	})
}

// TestAPIJobResult: GET /api/v1/jobs/{id}/result answers a finished job's
// state and output, 409 not_finished for one still waiting after ?wait=,
// 404 for an unknown job and 400 for a bad wait.
func TestAPIJobResult(t *testing.T) {
	eachStore(t, func(t *testing.T, st errandstore.TxStore[*sql.Tx], clock *errandtest.Clock) {
		s := newServer(t, st, clock, nil)
		id := s.op(t, "POST", "/api/v1/jobs", map[string]any{"kind": "task"}).json(t)["job"].(map[string]any)["id"].(string)
		if r := s.op(t, "GET", "/api/v1/jobs/"+id+"/result", nil); r.status != http.StatusConflict || !strings.Contains(string(r.body), `"not_finished"`) {
			t.Errorf("result of a queued job: %d %s", r.status, r.body)
		}
		for _, q := range []string{"?wait=x", "?wait=2m", "?wait=-1s", "?other=1"} {
			if r := s.op(t, "GET", "/api/v1/jobs/"+id+"/result"+q, nil); r.status != http.StatusBadRequest {
				t.Errorf("result%s: %d %s, want 400", q, r.status, r.body)
			}
		}
		if r := s.op(t, "GET", "/api/v1/jobs/nope/result", nil); r.status != http.StatusNotFound {
			t.Errorf("result of an unknown job: %d %s", r.status, r.body)
		}
		s.op(t, "POST", "/api/v1/jobs/"+id+"/cancel", map[string]any{"reason": "not needed"})
		r := s.op(t, "GET", "/api/v1/jobs/"+id+"/result?wait=0s", nil)
		if m := r.json(t); r.status != http.StatusOK || m["state"] != "cancelled" || m["id"] != id {
			t.Errorf("result of a cancelled job: %d %s", r.status, r.body)
		}
	})
}

// TestAPIRemoteDurableFlow: a remote worker keeps a durable handler's
// protocol through the API: it records a step under its lease (a second at
// the same index is 409 step_recorded, a stale token 409 lease_lost),
// records a wait and snoozes; the signal wakes the job; the next attempt
// reads the steps and the signal and finishes. A signal that comes while
// the attempt runs wakes the job as soon as it snoozes.
func TestAPIRemoteDurableFlow(t *testing.T) {
	eachStore(t, func(t *testing.T, st errandstore.TxStore[*sql.Tx], clock *errandtest.Clock) {
		s := newServer(t, st, clock, nil)
		claim := func() string {
			t.Helper()
			var claimed struct {
				Jobs []errandtype.Envelope `json:"jobs"`
			}
			c := s.op(t, "POST", "/api/v1/queues/default/claim", map[string]any{"kinds": []string{"task"}})
			if err := json.Unmarshal(c.body, &claimed); err != nil || len(claimed.Jobs) != 1 {
				t.Fatalf("claim: %s", c.body)
			}
			return claimed.Jobs[0].LeaseToken
		}
		want := func(what string, r response, status int, code string) {
			t.Helper()
			if r.status != status || (code != "" && !strings.Contains(string(r.body), `"`+code+`"`)) {
				t.Fatalf("%s: %d %s, want %d %s", what, r.status, r.body, status, code)
			}
		}
		for _, race := range []bool{false, true} {
			id := s.op(t, "POST", "/api/v1/jobs", map[string]any{"kind": "task"}).json(t)["job"].(map[string]any)["id"].(string)
			base := "/api/v1/jobs/" + id
			tok := claim()
			want("step 0", s.op(t, "POST", base+"/steps", map[string]any{"lease_token": tok, "index": 0, "name": "charge", "result": map[string]string{"id": "ch_1"}}), http.StatusOK, "")
			want("step 0 again", s.op(t, "POST", base+"/steps", map[string]any{"lease_token": tok, "index": 0, "name": "charge", "result": 1}), http.StatusConflict, "step_recorded")
			want("a stale token", s.op(t, "POST", base+"/steps", map[string]any{"lease_token": "stale", "index": 1, "name": "x", "result": 1}), http.StatusConflict, "lease_lost")
			want("no index", s.op(t, "POST", base+"/steps", map[string]any{"lease_token": tok, "name": "x", "result": 1}), http.StatusBadRequest, "invalid_input")
			want("the wait", s.op(t, "POST", base+"/steps", map[string]any{"lease_token": tok, "index": 1, "name": "errand.wait", "result": map[string]string{"signal": "approval"}}), http.StatusOK, "")
			if r := s.op(t, "GET", base+"/signals?name=approval", nil); strings.TrimSpace(string(r.body)) != `{"signals":[]}` {
				t.Fatalf("signals before any: %d %s", r.status, r.body)
			}
			if race {
				want("a signal while it runs", s.op(t, "POST", base+"/signal", map[string]any{"name": "approval", "value": "ok"}), http.StatusOK, "")
			}
			want("a bad snooze", s.op(t, "POST", base+"/snooze", map[string]any{"lease_token": tok, "delay": "-1h"}), http.StatusBadRequest, "invalid_input")
			r := s.op(t, "POST", base+"/snooze", map[string]any{"lease_token": tok, "delay": "1h"})
			want("the snooze", r, http.StatusOK, "")
			if r.json(t)["state"] != "queued" {
				t.Fatalf("snooze: %s", r.body)
			}
			if !race {
				if j := s.job(t, id); j.AvailableAt.Sub(clock.Now()) != time.Hour || j.Attempt != 0 {
					t.Fatalf("waiting: available at %s, attempt %d; want in an hour, attempt 0", j.AvailableAt, j.Attempt)
				}
				want("the signal", s.op(t, "POST", base+"/signal", map[string]any{"name": "approval", "value": "ok"}), http.StatusOK, "")
			}
			if j := s.job(t, id); j.AvailableAt.After(clock.Now()) {
				t.Fatalf("race %t: the job waits until %s after its signal; want available now", race, j.AvailableAt)
			}
			tok = claim()
			var got struct {
				Steps []errandtype.Step `json:"steps"`
			}
			if err := json.Unmarshal(s.op(t, "GET", base+"/steps", nil).body, &got); err != nil || len(got.Steps) != 2 {
				t.Fatalf("steps on the next attempt: %+v, %v", got, err)
			}
			if r := s.op(t, "GET", base+"/signals?name=approval", nil); !strings.Contains(string(r.body), `"value":"ok"`) {
				t.Fatalf("signals: %s", r.body)
			}
			want("the wait's outcome", s.op(t, "POST", base+"/steps", map[string]any{"lease_token": tok, "index": 2, "name": "errand.signal", "result": map[string]any{"signal": "approval", "value": "ok"}}), http.StatusOK, "")
			want("the ack", s.op(t, "POST", base+"/ack", map[string]any{"lease_token": tok}), http.StatusOK, "")
		}
	})
}

// TestAPIReplayFromStep: POST /api/v1/jobs/{id}/replay with from_step
// forks a durable job there; with args too, it is 400 and nothing is
// written.
func TestAPIReplayFromStep(t *testing.T) {
	eachStore(t, func(t *testing.T, st errandstore.TxStore[*sql.Tx], clock *errandtest.Clock) {
		s := newServer(t, st, clock, nil)
		id := s.op(t, "POST", "/api/v1/jobs", map[string]any{"kind": "task"}).json(t)["job"].(map[string]any)["id"].(string)
		base := "/api/v1/jobs/" + id
		var claimed struct {
			Jobs []errandtype.Envelope `json:"jobs"`
		}
		if err := json.Unmarshal(s.op(t, "POST", "/api/v1/queues/default/claim", map[string]any{"kinds": []string{"task"}}).body, &claimed); err != nil || len(claimed.Jobs) != 1 {
			t.Fatal("claim", err)
		}
		tok := claimed.Jobs[0].LeaseToken
		for i := range 3 {
			s.op(t, "POST", base+"/steps", map[string]any{"lease_token": tok, "index": i, "name": "s", "result": i})
		}
		s.op(t, "POST", base+"/fail", map[string]any{"lease_token": tok, "permanent": true, "message": "stop"})
		if r := s.op(t, "POST", base+"/replay", map[string]any{"reason": "r", "from_step": 1, "args": map[string]any{}}); r.status != http.StatusBadRequest {
			t.Errorf("from_step with args: %d %s", r.status, r.body)
		}
		if r := s.op(t, "POST", base+"/replay", map[string]any{"reason": "redo from 1", "from_step": 1}); r.status != http.StatusOK {
			t.Fatalf("replay from step 1: %d %s", r.status, r.body)
		}
		var got struct {
			Steps []errandtype.Step `json:"steps"`
		}
		if err := json.Unmarshal(s.op(t, "GET", base+"/steps", nil).body, &got); err != nil || len(got.Steps) != 1 {
			t.Errorf("steps after the fork: %+v, %v; want step 0 kept", got, err)
		}
	})
}

// TestAPIJobEvent: GET /api/v1/jobs/{id}/events/{key} answers the event a
// job published, and 404 no_event for one it has not.
func TestAPIJobEvent(t *testing.T) {
	eachStore(t, func(t *testing.T, st errandstore.TxStore[*sql.Tx], clock *errandtest.Clock) {
		s := newServer(t, st, clock, nil)
		id := s.op(t, "POST", "/api/v1/jobs", map[string]any{"kind": "task"}).json(t)["job"].(map[string]any)["id"].(string)
		if r := s.op(t, "GET", "/api/v1/jobs/"+id+"/events/link", nil); r.status != http.StatusNotFound || r.errorCode() != "no_event" {
			t.Fatalf("an event not published: %d %s", r.status, r.body)
		}
		var claimed struct {
			Jobs []errandtype.Envelope `json:"jobs"`
		}
		if err := json.Unmarshal(s.op(t, "POST", "/api/v1/queues/default/claim", map[string]any{"kinds": []string{"task"}}).body, &claimed); err != nil || len(claimed.Jobs) != 1 {
			t.Fatal("claim", err)
		}
		if err := st.(errandstore.StepStore).JobSetEvent(t.Context(), &errandstore.JobSetEventParams{
			JobLease: errandstore.JobLease{ID: id, LeaseToken: claimed.Jobs[0].LeaseToken}, Key: "link", Value: json.RawMessage(`"https://x"`)}); err != nil {
			t.Fatal(err)
		}
		r := s.op(t, "GET", "/api/v1/jobs/"+id+"/events/link?wait=1s", nil)
		if m := r.json(t); r.status != http.StatusOK || m["value"] != "https://x" || m["key"] != "link" {
			t.Errorf("the event: %d %s", r.status, r.body)
		}
		if r := s.op(t, "GET", "/api/v1/jobs/"+id+"/events/link?wait=1h", nil); r.status != http.StatusBadRequest {
			t.Errorf("a wait over a minute: %d %s", r.status, r.body)
		}
	})
}

// TestAPIJobStream: GET /api/v1/jobs/{id}/stream answers the chunks after
// ?after= as JSON, and as server-sent events while the job writes them,
// ending with an "end" event once the job has finished; 404 for an
// unknown job.
func TestAPIJobStream(t *testing.T) {
	eachStore(t, func(t *testing.T, st errandstore.TxStore[*sql.Tx], clock *errandtest.Clock) {
		s := newServer(t, st, clock, nil)
		id := s.op(t, "POST", "/api/v1/jobs", map[string]any{"kind": "task"}).json(t)["job"].(map[string]any)["id"].(string)
		base := "/api/v1/jobs/" + id + "/stream"
		if r := s.op(t, "GET", "/api/v1/jobs/nope/stream", nil); r.status != http.StatusNotFound {
			t.Errorf("an unknown job's stream: %d %s", r.status, r.body)
		}
		var claimed struct {
			Jobs []errandtype.Envelope `json:"jobs"`
		}
		if err := json.Unmarshal(s.op(t, "POST", "/api/v1/queues/default/claim", map[string]any{"kinds": []string{"task"}}).body, &claimed); err != nil || len(claimed.Jobs) != 1 {
			t.Fatal("claim", err)
		}
		tok := claimed.Jobs[0].LeaseToken
		write := func(data string) {
			t.Helper()
			if _, err := st.(errandstore.StepStore).JobStreamAppend(t.Context(), &errandstore.JobStreamAppendParams{
				JobLease: errandstore.JobLease{ID: id, LeaseToken: tok}, Data: data}); err != nil {
				t.Fatal(err)
			}
		}
		write("one\n")
		write("two")
		r := s.op(t, "GET", base+"?after=0", nil)
		if m := r.json(t); r.status != http.StatusOK || m["state"] != "running" || m["finished"] != false || len(m["chunks"].([]any)) != 1 {
			t.Fatalf("JSON page after chunk 0: %d %s", r.status, r.body)
		}
		if r := s.op(t, "GET", base+"?wait=2h", nil); r.status != http.StatusBadRequest || !strings.Contains(string(r.body), "wait") {
			t.Errorf("a wait of two hours: %d %s", r.status, r.body)
		}
		// ?wait= answers the chunk written while it waits.
		waited := make(chan response, 1)
		go func() { waited <- s.op(t, "GET", base+"?after=1&wait=1m", nil) }()
		write("wait")
		if r := <-waited; r.status != http.StatusOK || !strings.Contains(string(r.body), `"data":"wait"`) {
			t.Fatalf("JSON page waited for: %d %s", r.status, r.body)
		}
		// Server-sent events: the chunks so far, one more as it is written,
		// then the end.
		req, _ := http.NewRequest("GET", s.URL+base, nil)
		req.Header.Set("Accept", "text/event-stream")
		req.Header.Set("Authorization", "Bearer "+operatorSecret)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
			t.Fatalf("events: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		lines := bufio.NewScanner(resp.Body)
		read := func(n int) []string {
			t.Helper()
			var got []string
			for len(got) < n && lines.Scan() {
				got = append(got, lines.Text())
			}
			return got
		}
		want := []string{"id: 0", "data: one", "data: ", "", "id: 1", "data: two", "", "id: 2", "data: wait", ""}
		if got := read(len(want)); strings.Join(got, "|") != strings.Join(want, "|") {
			t.Fatalf("events so far:\n%q\nwant\n%q", got, want)
		}
		write("three")
		if got := read(3); strings.Join(got, "|") != "id: 3|data: three|" {
			t.Fatalf("the event of a chunk written since: %q", got)
		}
		s.op(t, "POST", "/api/v1/jobs/"+id+"/ack", map[string]any{"lease_token": tok})
		if got := read(3); strings.Join(got, "|") != "event: end|data: succeeded|" {
			t.Fatalf("the end: %q", got)
		}
	})
}
