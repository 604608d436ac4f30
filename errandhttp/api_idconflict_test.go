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

// TestAPIIDConflict: an id in the body that names a different job is 409
// id_conflict naming the fields and first_wins, with nothing written;
// first_wins answers the existing job; under an Idempotency-Key it is 409
// idempotency_conflict naming the fields, for jobs, batches and workflows.
func TestAPIIDConflict(t *testing.T) {
	eachStore(t, func(t *testing.T, st errandstore.TxStore[*sql.Tx], clock *errandtest.Clock) {
		s := newServer(t, st, clock, nil)
		body := map[string]any{"id": "pay-1", "kind": "charge", "args": map[string]int{"amount": 1}, "backoff_base": "2s", "backoff_max": "1m"}
		want(t, "first", s.op(t, "POST", "/api/v1/jobs", body), http.StatusCreated, "")
		if j := s.job(t, "pay-1"); j.BackoffBase != errandtype.Duration(2e9) || j.BackoffMax != errandtype.Duration(6e10) {
			t.Fatalf("backoff_base and backoff_max: %+v", j)
		}
		want(t, "the same job", s.op(t, "POST", "/api/v1/jobs", body), http.StatusOK, "")

		other := map[string]any{"id": "pay-1", "kind": "charge", "args": map[string]int{"amount": 2}, "priority": 4}
		r := s.op(t, "POST", "/api/v1/jobs", other)
		want(t, "a different job", r, http.StatusConflict, "id_conflict")
		if msg := r.errorMessage(); !strings.Contains(msg, "(args, priority, backoff_base, backoff_max differ)") || !strings.Contains(msg, `"first_wins": true`) {
			t.Fatalf("a different job: %s", msg)
		}
		other["first_wins"] = true
		r = s.op(t, "POST", "/api/v1/jobs", other)
		if want(t, "first_wins", r, http.StatusOK, ""); r.json(t)["duplicate"] != true {
			t.Fatalf("first_wins: %s", r.body)
		}
		delete(other, "first_wins")
		delete(other, "id")
		r = s.do(t, req{method: "POST", path: "/api/v1/jobs", token: operatorSecret, body: other, header: map[string]string{errandhttp.IdempotencyHeader: "pay-1"}})
		want(t, "a reused Idempotency-Key", r, http.StatusConflict, "idempotency_conflict")
		if msg := r.errorMessage(); !strings.Contains(msg, `Idempotency-Key "pay-1" was used for a different job (args, priority, backoff_base, backoff_max differ)`) {
			t.Fatalf("a reused Idempotency-Key: %s", msg)
		}

		want(t, "batch", s.op(t, "POST", "/api/v1/batches", importBody("imp-1")), http.StatusCreated, "")
		b := importBody("imp-1")
		b["callback"].(map[string]any)["queue"] = "elsewhere"
		r = s.op(t, "POST", "/api/v1/batches", b)
		if want(t, "a different batch", r, http.StatusConflict, "id_conflict"); !strings.Contains(r.errorMessage(), "(callback.queue differ)") {
			t.Fatalf("a different batch: %s", r.errorMessage())
		}
		b["first_wins"] = true
		want(t, "a different batch, first_wins", s.op(t, "POST", "/api/v1/batches", b), http.StatusOK, "")

		want(t, "workflow", s.op(t, "POST", "/api/v1/workflows", checkoutBody("order-1")), http.StatusCreated, "")
		w := checkoutBody("order-1")
		w["name"] = "refund"
		r = s.op(t, "POST", "/api/v1/workflows", w)
		if want(t, "a different workflow", r, http.StatusConflict, "id_conflict"); !strings.Contains(r.errorMessage(), "(name differ)") {
			t.Fatalf("a different workflow: %s", r.errorMessage())
		}
		w["first_wins"] = true
		want(t, "a different workflow, first_wins", s.op(t, "POST", "/api/v1/workflows", w), http.StatusOK, "")

		want(t, "first_wins without an id", s.op(t, "POST", "/api/v1/jobs", map[string]any{"kind": "charge", "first_wins": true}), http.StatusBadRequest, "invalid_input")
		if n := s.jobCount(t); n != 5 {
			t.Fatalf("%d jobs, want 5: pay-1, the batch's three and the workflow's first", n)
		}
	})
}

// errorMessage returns the error's message, or "".
func (r response) errorMessage() string {
	var e struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	_ = json.Unmarshal(r.body, &e)
	return e.Error.Message
}
