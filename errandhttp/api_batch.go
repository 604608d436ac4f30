package errandhttp

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/errandhq/errand"
)

// batch serves GET /api/v1/batches/{id}: the batch record of errand batch
// --json, with its members' current counts.
func (a *api[TTx]) batch(w http.ResponseWriter, r *http.Request) error {
	if err := checkQuery(r.URL.Query()); err != nil {
		return err
	}
	id := r.PathValue("id")
	b, err := a.c.Batch(r.Context(), id)
	if errors.Is(err, errand.ErrNotFound) {
		return &httpError{http.StatusNotFound, "not_found", "no batch with id " + strconv.Quote(id)}
	}
	if err != nil {
		return err
	}
	if a.hideArgs && b.Callback != nil {
		cb := *b.Callback
		cb.Args = nil
		b.Callback = &cb
	}
	writeJSON(w, http.StatusOK, b)
	return nil
}

// deleteSchedule serves DELETE /api/v1/schedules/{name} with a body
// {"reason"}: an operator action, audited. It answers the deleted schedule.
// A worker still declaring the schedule registers it again.
func (a *api[TTx]) deleteSchedule(w http.ResponseWriter, r *http.Request) error {
	operator, reason, err := operatorReason(r)
	if err != nil {
		return err
	}
	name := r.PathValue("name")
	rec, err := a.c.DeleteSchedule(r.Context(), name, &errand.DeleteScheduleOpts{Operator: operator, Reason: reason})
	if errors.Is(err, errand.ErrNotFound) {
		return &httpError{http.StatusNotFound, "not_found", "no schedule named " + strconv.Quote(name)}
	}
	if err != nil {
		return err
	}
	a.log.Info("schedule deleted", "schedule", rec.Name, "spec", rec.Spec, "operator", operator, "reason", reason)
	writeJSON(w, http.StatusOK, rec)
	return nil
}
