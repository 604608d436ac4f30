package errandhttp

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
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
	return reply(w, a.showBatch(b))
}

// showBatch prepares a batch for a reader: its callback's args hidden when
// args are.
func (a *api[TTx]) showBatch(b *errandstore.Batch) *errandstore.Batch {
	if !a.hideArgs || b == nil || b.Callback == nil {
		return b
	}
	c := *b
	cb := *b.Callback
	cb.Args = nil
	c.Callback = &cb
	return &c
}

// batches serves GET /api/v1/batches?state=open|completed&limit=: batches,
// newest first, each as GET /api/v1/batches/{id} answers it, as
// {"batches": [...]}.
func (a *api[TTx]) batches(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	if err := checkQuery(q, "state", "limit", "cursor"); err != nil {
		return err
	}
	p := &errandstore.BatchListParams{}
	if v := q.Get("state"); v != "" {
		st, err := errand.ParseBatchState(v)
		if err != nil {
			return badRequest("state %q is not a batch state; use open or completed", v)
		}
		p.State = st
	}
	var err error
	if p.Limit, err = queryLimit(q, DefaultListLimit, MaxListLimit); err != nil {
		return err
	}
	if p.Before, err = queryListCursor(q); err != nil {
		return err
	}
	bs, err := a.c.Batches(r.Context(), p)
	if err != nil {
		return err
	}
	out := make([]*errandstore.Batch, len(bs))
	for i, b := range bs {
		out[i] = a.showBatch(b)
	}
	var next *string
	if len(bs) == p.Limit {
		last := bs[len(bs)-1]
		next = nextCursor(last.CreatedAt, last.ID)
	}
	return reply(w, map[string]any{"batches": out, "next_cursor": next})
}

// batchResponse is the answer to POST /api/v1/batches.
type batchResponse struct {
	Batch *errandstore.Batch `json:"batch"`
	// Jobs are the batch's members as enqueued, in the order given; []
	// when Duplicate.
	Jobs []*errandtype.Job `json:"jobs"`
	// Duplicate: a batch with this id (or Idempotency-Key) existed; Batch
	// is that batch and nothing was enqueued.
	Duplicate bool `json:"duplicate"`
}

// enqueueBatch serves POST /api/v1/batches: a batch from any language, in
// the JSON form of [BatchRequest]. Kinds need no Go handler on the
// server, as for POST /api/v1/jobs. An Idempotency-Key header becomes the
// batch's id; reused for a different batch it is answered 409
// idempotency_conflict (an id in the body, 409 id_conflict), as on
// POST /api/v1/jobs and /api/v1/workflows.
func (a *api[TTx]) enqueueBatch(w http.ResponseWriter, r *http.Request, req *BatchRequest) error {
	key, err := idempotencyKey(r, &req.ID, "batch")
	if err != nil {
		return err
	}
	params, opts, err := req.Batch()
	if err != nil {
		return err
	}
	res, err := a.c.EnqueueBatch(enqueueContext(r), params, opts)
	err = keyConflict(keyError(err, key), key)
	if ie := (*errandtype.InputError)(nil); errors.As(err, &ie) {
		// The whole message: it names the job (or the callback) whose
		// field is wrong.
		return badRequest("%s", err)
	}
	if err != nil {
		return err
	}
	writeJSON(w, enqueueStatus(w, res.Duplicate, key), batchResponse{Batch: a.showBatch(res.Batch), Jobs: a.showJobs(res.Jobs), Duplicate: res.Duplicate})
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
	if err != nil {
		return notFound(err, "no schedule named "+strconv.Quote(name))
	}
	a.log.Info("schedule deleted", "schedule", rec.Name, "spec", rec.Spec, "operator", operator, "reason", reason)
	return reply(w, rec)
}
