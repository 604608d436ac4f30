package errandhttp

import (
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
	if err != nil {
		return notFound(err, "no batch with id "+strconv.Quote(id))
	}
	if a.hideArgs && b.Callback != nil {
		cb := *b.Callback
		cb.Args = nil
		b.Callback = &cb
	}
	return reply(w, b)
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
	if err != nil {
		return notFound(err, "no schedule named "+strconv.Quote(name))
	}
	a.log.Info("schedule deleted", "schedule", rec.Name, "spec", rec.Spec, "operator", operator, "reason", reason)
	return reply(w, rec)
}
