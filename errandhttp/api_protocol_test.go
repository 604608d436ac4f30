package errandhttp_test

import (
	"database/sql"
	"encoding/json"
	"net/http"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/errandhq/errand/errandhttp"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtest"
	"github.com/errandhq/errand/errandtype"
)

// claimOne enqueues a task with max_attempts 5 and claims it over the API.
func claimOne(t *testing.T, s *server) errandtype.Envelope {
	t.Helper()
	want(t, "enqueue", s.op(t, "POST", "/api/v1/jobs", map[string]any{"kind": "task", "max_attempts": 5}), http.StatusCreated, "")
	return claimEnvelopes(t, s, 1)[0]
}

// claimEnvelopes claims n tasks over the API and fails unless it gets n.
func claimEnvelopes(t *testing.T, s *server, n int) []errandtype.Envelope {
	t.Helper()
	r := s.op(t, "POST", "/api/v1/queues/default/claim", map[string]any{"kinds": []string{"task"}, "max_jobs": n})
	var claimed struct {
		Jobs []errandtype.Envelope `json:"jobs"`
	}
	if err := json.Unmarshal(r.body, &claimed); err != nil || len(claimed.Jobs) != n {
		t.Fatalf("claim %d: %d %s", n, r.status, r.body)
	}
	return claimed.Jobs
}

// claimTasks enqueues n tasks and claims them over the API.
func claimTasks(t *testing.T, s *server, n int) []errandtype.Envelope {
	t.Helper()
	for range n {
		want(t, "enqueue", s.op(t, "POST", "/api/v1/jobs", map[string]any{"kind": "task"}), http.StatusCreated, "")
	}
	return claimEnvelopes(t, s, n)
}

// outcomeOf decodes the answer to an ack or a fail.
func outcomeOf(t *testing.T, r response) (errandtype.JobState, *time.Time) {
	t.Helper()
	var out struct {
		State       errandtype.JobState `json:"state"`
		AvailableAt *time.Time          `json:"available_at"`
	}
	if err := json.Unmarshal(r.body, &out); err != nil {
		t.Fatalf("%d %s: %v", r.status, r.body, err)
	}
	return out.State, out.AvailableAt
}

// TestAPIFailPermanent: a fail with "permanent": true ends the job dead on
// its first of five attempts, with the class the worker named, on both
// stores.
func TestAPIFailPermanent(t *testing.T) {
	eachStore(t, func(t *testing.T, st errandstore.TxStore[*sql.Tx], clock *errandtest.Clock) {
		s := newServer(t, st, clock, nil)
		env := claimOne(t, s)
		f := s.op(t, "POST", "/api/v1/jobs/"+env.ID+"/fail", map[string]any{"lease_token": env.LeaseToken,
			"class": "bad_image", "message": "not a PNG", "permanent": true})
		want(t, "fail", f, http.StatusOK, "")
		if state, at := outcomeOf(t, f); state != errandtype.StateDead || at != nil {
			t.Fatalf("fail answered %s", f.body)
		}
		j := s.job(t, env.ID)
		if j.State != errandtype.StateDead || j.Attempt != 1 || len(j.Errors) != 1 || j.Errors[0].Class != "bad_image" {
			t.Fatalf("job %s on attempt %d of %d with errors %+v; want dead on the first", j.State, j.Attempt, j.MaxAttempts, j.Errors)
		}
	})
}

// TestAPIFailRetryAfter: a fail with "retry_after" schedules the retry
// exactly that long from now, in place of the kind's backoff (5s to 10s),
// on both stores.
func TestAPIFailRetryAfter(t *testing.T) {
	eachStore(t, func(t *testing.T, st errandstore.TxStore[*sql.Tx], clock *errandtest.Clock) {
		s := newServer(t, st, clock, nil)
		env := claimOne(t, s)
		f := s.op(t, "POST", "/api/v1/jobs/"+env.ID+"/fail", map[string]any{"lease_token": env.LeaseToken,
			"class": "rate_limited", "message": "429", "retry_after": "90s"})
		want(t, "fail", f, http.StatusOK, "")
		due := clock.Now().Add(90 * time.Second)
		if state, at := outcomeOf(t, f); state != errandtype.StateRetrying || at == nil || !at.Equal(due) {
			t.Fatalf("fail answered %s; want retrying, available at %s", f.body, due.Format(time.RFC3339))
		}
		if j := s.job(t, env.ID); j.State != errandtype.StateRetrying || !j.AvailableAt.Equal(due) {
			t.Fatalf("job %s available at %s; want retrying at %s", j.State, j.AvailableAt, due)
		}
	})
}

// TestAPIAckManyStaleAtEitherEnd: a batch ack whose first and last leases
// are stale reports those two lease_lost and leaves their jobs as they
// were, and acknowledges the one between, on both stores.
func TestAPIAckManyStaleAtEitherEnd(t *testing.T) {
	eachStore(t, func(t *testing.T, st errandstore.TxStore[*sql.Tx], clock *errandtest.Clock) {
		s := newServer(t, st, clock, nil)
		js := claimTasks(t, s, 3)
		first, last := s.job(t, js[0].ID), s.job(t, js[2].ID)
		ack := s.op(t, "POST", "/api/v1/ack", map[string]any{"jobs": []map[string]string{
			{"id": js[0].ID, "lease_token": "stale-first"},
			{"id": js[1].ID, "lease_token": js[1].LeaseToken},
			{"id": js[2].ID, "lease_token": "stale-last"},
		}})
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
		lost := func(i int) bool {
			r := res.Results[i]
			return r.ID == js[i].ID && r.State == "" && r.Error != nil && r.Error.Code == "lease_lost"
		}
		if len(res.Results) != 3 || !lost(0) || !lost(2) || res.Results[1].ID != js[1].ID || res.Results[1].State != "succeeded" || res.Results[1].Error != nil {
			t.Fatalf("ack many answered %s; want lease_lost, succeeded, lease_lost", ack.body)
		}
		if a, b := s.job(t, js[0].ID), s.job(t, js[2].ID); !reflect.DeepEqual(a, first) || !reflect.DeepEqual(b, last) {
			t.Fatalf("stale acks changed their jobs:\n%+v\n%+v", a, b)
		}
		if j := s.job(t, js[1].ID); j.State != errandtype.StateSucceeded {
			t.Fatalf("acknowledged job is %s", j.State)
		}
	})
}

// TestAPIClaimCannotTakeOverWorkers: a claim that names a worker names it
// under the caller's token, so it neither takes over the registry row of
// a Go worker with that id nor another token's worker of that name, on
// both stores.
func TestAPIClaimCannotTakeOverWorkers(t *testing.T) {
	eachStore(t, func(t *testing.T, st errandstore.TxStore[*sql.Tx], clock *errandtest.Clock) {
		const bobSecret = "bob-secret-0123456789abcdef"
		tokens := append(slices.Clone(testTokens), errandhttp.Token{Name: "bob", Secret: bobSecret, Role: errandhttp.RoleOperator})
		s := newServer(t, st, clock, &errandhttp.Options{Auth: &errandhttp.AuthOptions{Tokens: tokens}})
		ctx := t.Context()
		if _, err := st.WorkerRegister(ctx, &errandstore.WorkerRegisterParams{ID: "node-7", Host: "web-1", PID: 42,
			Queues: []errandtype.WorkerQueue{{Name: "default", Concurrency: 2}}, Kinds: []string{"task"}, HeartbeatInterval: 5 * time.Second}); err != nil {
			t.Fatal(err)
		}
		rows := func() map[string]*errandtype.WorkerRecord {
			ws, err := s.c.Workers(ctx)
			if err != nil {
				t.Fatal(err)
			}
			m := map[string]*errandtype.WorkerRecord{}
			for _, w := range ws {
				m[w.ID] = w
			}
			return m
		}
		local := rows()["node-7"]
		for _, c := range []struct{ token, owner string }{{operatorSecret, "http:alice/node-7"}, {bobSecret, "http:bob/node-7"}} {
			want(t, "enqueue", s.op(t, "POST", "/api/v1/jobs", map[string]any{"kind": "task"}), http.StatusCreated, "")
			r := s.do(t, req{method: "POST", path: "/api/v1/queues/default/claim", token: c.token,
				body: map[string]any{"kinds": []string{"task"}, "worker": "node-7"}})
			want(t, "claim as "+c.owner, r, http.StatusOK, "")
			var claimed struct {
				Jobs []errandtype.Envelope `json:"jobs"`
			}
			if err := json.Unmarshal(r.body, &claimed); err != nil || len(claimed.Jobs) != 1 {
				t.Fatalf("claim: %s", r.body)
			}
			if j := s.job(t, claimed.Jobs[0].ID); j.LeaseOwner == nil || *j.LeaseOwner != c.owner {
				t.Fatalf("lease owner %q, want %s", deref(j.LeaseOwner), c.owner)
			}
		}
		after := rows()
		if !reflect.DeepEqual(after["node-7"], local) {
			t.Fatalf("the Go worker's row changed:\n%+v\nwant\n%+v", after["node-7"], local)
		}
		for _, id := range []string{"http:alice/node-7", "http:bob/node-7"} {
			if w := after[id]; w == nil || w.Host != "remote" {
				t.Fatalf("remote worker %s: %+v", id, w)
			}
		}
		if len(after) != 3 {
			t.Fatalf("%d workers registered, want 3", len(after))
		}
	})
}

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}
