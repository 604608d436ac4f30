package errandhttp_test

import (
	"database/sql"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/errandhq/errand/errandhttp"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtest"
	"github.com/errandhq/errand/errandtype"
)

// TestAPIJobSteps: GET /api/v1/jobs/{id}/steps answers a job's recorded
// steps in order, none for a job without them, 404 for an unknown job, and
// hides their results with HideArgs.
func TestAPIJobSteps(t *testing.T) {
	eachStore(t, func(t *testing.T, st errandstore.TxStore[*sql.Tx], clock *errandtest.Clock) {
		for _, hide := range []bool{false, true} {
			s := newServer(t, st, clock, &errandhttp.Options{API: &errandhttp.APIOptions{HideArgs: hide}})
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
				if err := st.(errandstore.StepStore).JobStepRecord(t.Context(), &errandstore.JobStepRecordParams{JobLease: lease, Step: step}); err != nil {
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
			if shown := strings.Contains(string(r.body), "4111"); shown == hide {
				t.Errorf("HideArgs %t: the step's result shown %t: %s", hide, shown, r.body)
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
