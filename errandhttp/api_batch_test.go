package errandhttp_test

import (
	"database/sql"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtest"
	"github.com/errandhq/errand/errandtype"
)

func TestAPIBatchAndScheduleDelete(t *testing.T) {
	eachStore(t, func(t *testing.T, st errandstore.TxStore[*sql.Tx], clock *errandtest.Clock) {
		s := newServer(t, st, clock, nil)
		want(t, "unknown batch", s.do(t, req{method: "GET", path: "/api/v1/batches/nope", token: readerSecret}), http.StatusNotFound, "not_found")
		_, err := s.c.EnqueueBatch(t.Context(), []errand.EnqueueParams{{Args: errand.RawArgs{KindName: "task"}}},
			&errand.BatchOpts{ID: "b1", Callback: errand.RawArgs{KindName: "task", JSON: json.RawMessage(`{"done":true}`)}})
		if err != nil {
			t.Fatal(err)
		}
		r := s.do(t, req{method: "GET", path: "/api/v1/batches/b1", token: readerSecret})
		want(t, "batch", r, http.StatusOK, "")
		var b errandstore.Batch
		if err := json.Unmarshal(r.body, &b); err != nil {
			t.Fatal(err)
		}
		if b.ID != "b1" || b.Total != 1 || b.Counts[errandtype.StateQueued] != 1 || b.Final != nil || b.Callback == nil || b.Callback.Kind != "task" {
			t.Fatalf("batch: %s", r.body)
		}
		want(t, "batch with a query", s.do(t, req{method: "GET", path: "/api/v1/batches/b1?x=1", token: readerSecret}), http.StatusBadRequest, "invalid_input")

		ss := st.(errandstore.ScheduleStore)
		if _, err := ss.ScheduleUpsert(t.Context(), &errandstore.ScheduleUpsertParams{Name: "nightly", Spec: "0 3 * * *", Kind: "task", Queue: "default",
			Missed: errandtype.MissedSkip, NextFireAt: clock.Now().Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
		del := func(token string, body any) response {
			return s.do(t, req{method: "DELETE", path: "/api/v1/schedules/nightly", token: token, body: body})
		}
		if r := del(readerSecret, map[string]string{"reason": "x"}); r.status != http.StatusForbidden {
			t.Fatalf("a reader deleted a schedule: %d %s", r.status, r.body)
		}
		want(t, "delete without a reason", del(operatorSecret, map[string]string{}), http.StatusBadRequest, "")
		r = del(operatorSecret, map[string]string{"reason": "retired"})
		want(t, "delete", r, http.StatusOK, "")
		var rec errandtype.ScheduleRecord
		if err := json.Unmarshal(r.body, &rec); err != nil || rec.Name != "nightly" {
			t.Fatalf("deleted: %s (%v)", r.body, err)
		}
		want(t, "delete again", del(operatorSecret, map[string]string{"reason": "retired"}), http.StatusNotFound, "not_found")
		recs, err := s.c.Audit(t.Context(), &errand.AuditOpts{Action: errandtype.AuditScheduleDelete})
		if err != nil || len(recs) != 1 || recs[0].Operator != "alice" || recs[0].Reason != "retired" {
			t.Fatalf("audit = %+v (%v)", recs, err)
		}
	})
}
