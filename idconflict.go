package errand

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
)

// A caller-given id makes a retried enqueue return the job (batch,
// workflow) the first one made. A duplicate id whose existing job is not
// what the enqueue would have made is another request reusing the id, and
// is refused with an *IDConflictError naming what differs, unless the
// enqueue says FirstWins. A duplicate found by a unique key is never a
// conflict: unique keys exist to dedupe jobs whose args differ.
//
// Times relative to a request (Delay, RunAt, MaxAge, which a job keeps as
// its deadline) cannot be compared and are not; neither is a max attempts
// or an ordering-on-dead choice the enqueue left to the defaults, which
// another client may resolve otherwise.

// IDConflictError reports an enqueue refused because its id names an
// existing job, batch or workflow that differs from the one it would have
// made. Nothing was written. errors.Is(err, ErrIDConflict) is true.
type IDConflictError struct {
	// What is "job", "batch" or "workflow".
	What string
	// ID is the id the existing one has.
	ID string
	// Fields names what differs, as the JSON API names it: "args",
	// "queue", "jobs[2].args", "steps[0].compensate.kind".
	Fields []string
}

func (e *IDConflictError) Error() string {
	return fmt.Sprintf("%s id %q is taken by a different %s (%s differ); give a new id for a new %s, or set FirstWins to get the existing one",
		e.What, e.ID, e.What, strings.Join(e.Fields, ", "), e.What)
}

// Is makes errors.Is(err, ErrIDConflict) true.
func (e *IDConflictError) Is(target error) bool { return target == ErrIDConflict }

// checkFirstWins refuses FirstWins without the id it is about.
func checkFirstWins(firstWins bool, id, what string) error {
	if firstWins && id == "" {
		return &errandtype.InputError{Field: "first_wins", Message: fmt.Sprintf("is set without a %s id; it only decides what a duplicate id returns, so give the id or drop it", what)}
	}
	return nil
}

func shapeOfTemplate(t *errandstore.JobTemplate) errandstore.JobShape {
	return errandstore.JobShape{Kind: t.Kind, Queue: t.Queue, Args: t.Args, ArgsVersion: t.ArgsVersion, Priority: t.Priority,
		MaxAttempts: t.MaxAttempts, BackoffBase: time.Duration(t.BackoffBaseUS) * time.Microsecond,
		BackoffMax: time.Duration(t.BackoffMaxUS) * time.Microsecond, Delay: time.Duration(t.DelayUS) * time.Microsecond,
		MaxAge: time.Duration(t.MaxAgeUS) * time.Microsecond, Timed: true,
		OrderingKey: t.OrderingKey, FairnessKey: t.FairnessKey, OrderingHold: t.OrderingHold, Tags: t.Tags}
}

// checkJobConflicts returns the *IDConflictError of the first job of ps
// whose caller-given id found an existing job that differs, in rs.
func checkJobConflicts(ps []*errandstore.JobInsertParams, rs []errandstore.JobInsertResult) error {
	for i, p := range ps {
		r := rs[i]
		if !r.Duplicate || !p.CallerID || p.FirstWins || r.Job.ID != p.ID {
			continue // new, errand's id, first wins, or found by its unique key
		}
		if fields := p.JobDifferences(r.Job); len(fields) > 0 {
			err := &IDConflictError{What: "job", ID: p.ID, Fields: fields}
			if len(ps) > 1 {
				return fmt.Errorf("job %d: %w", i, err)
			}
			return err
		}
	}
	return nil
}

// mayConflict reports whether an insert of ps may end in an
// *IDConflictError.
func mayConflict(ps []*errandstore.JobInsertParams) bool {
	return slices.ContainsFunc(ps, func(p *errandstore.JobInsertParams) bool { return p.CallerID && !p.FirstWins })
}

// batchConflict returns the *IDConflictError of b, the batch found under
// p's id, when it is not what p would have made, as far as the store
// tells: its number of jobs, its callback, and each member given an id
// that still exists. An id no job has is a member deleted since, unless
// every member is there. Members without an id cannot be told apart.
func (c *engine) batchConflict(ctx context.Context, b *errandstore.Batch, p *errandstore.BatchInsertParams) error {
	var fields []string
	if b.Total != len(p.Jobs) {
		fields = append(fields, "jobs")
	}
	switch {
	case (b.Callback == nil) != (p.ClientCallback == nil):
		fields = append(fields, "callback")
	case b.Callback != nil:
		for _, f := range p.ClientCallback.Differences(shapeOfTemplate(b.Callback), "batch") {
			fields = append(fields, "callback."+f)
		}
	}
	for i, jp := range p.Jobs {
		if !jp.CallerID {
			continue
		}
		j, err := c.store.JobGet(ctx, &errandstore.JobGetParams{ID: jp.ID})
		if errors.Is(err, errandtype.ErrNotFound) {
			if present(b) == b.Total {
				fields = append(fields, fmt.Sprintf("jobs[%d].id", i)) // never a member
			}
			continue
		}
		if err != nil {
			return fmt.Errorf("enqueue batch %s: compare with the existing one: %w", b.ID, err)
		}
		if j.BatchID == nil || *j.BatchID != b.ID {
			fields = append(fields, fmt.Sprintf("jobs[%d].id", i))
			continue
		}
		for _, f := range jp.JobDifferences(j) {
			fields = append(fields, fmt.Sprintf("jobs[%d].%s", i, f))
		}
	}
	if len(fields) > 0 {
		return &IDConflictError{What: "batch", ID: b.ID, Fields: fields}
	}
	return nil
}

// present is how many of b's members exist still.
func present(b *errandstore.Batch) int {
	n := 0
	for _, c := range b.Counts {
		n += c
	}
	return n
}

// workflowConflict returns the *IDConflictError of w, the workflow found
// under p's id, when it is not what p would have made, as far as the store
// tells: its name and graph, and the job of every step and compensation
// enqueued and not deleted since.
func (c *engine) workflowConflict(ctx context.Context, w *errandtype.Workflow, p *errandstore.WorkflowInsertParams) error {
	var fields []string
	if w.Name != p.Name {
		fields = append(fields, "name")
	}
	if len(w.Steps) != len(p.Steps) {
		fields = append(fields, "steps")
	}
	for i := range min(len(w.Steps), len(p.Steps)) {
		ws, ps, at := &w.Steps[i], &p.Steps[i], fmt.Sprintf("steps[%d].", i)
		if ws.Name != ps.Name {
			fields = append(fields, at+"name")
		}
		if !slices.Equal(ws.DependsOn, ps.DependsOn) {
			fields = append(fields, at+"depends_on")
		}
		fs, err := c.workflowJobConflict(ctx, ws.JobID, ws.State, ws.Kind, p.Jobs[i][0])
		if err != nil {
			return err
		}
		fields = appendPrefixed(fields, at, fs)
		switch wc := ws.Compensation; {
		case (wc == nil) != (ps.Compensation == nil):
			fields = append(fields, at+"compensate")
		case wc != nil:
			fs, err := c.workflowJobConflict(ctx, wc.JobID, wc.State, wc.Kind, p.Jobs[i][1])
			if err != nil {
				return err
			}
			fields = appendPrefixed(fields, at+"compensate.", fs)
		}
	}
	if len(fields) > 0 {
		return &IDConflictError{What: "workflow", ID: w.ID, Fields: fields}
	}
	return nil
}

// workflowJobConflict names the fields in which a workflow's job id, of
// kind and in state (nil when it is not enqueued or was deleted), differs
// from the one want would make: only the kind, when there is no job.
func (c *engine) workflowJobConflict(ctx context.Context, id string, state *errandtype.JobState, kind string, want *errandstore.JobInsertParams) ([]string, error) {
	if state == nil {
		if kind != want.Kind {
			return []string{"kind"}, nil
		}
		return nil, nil
	}
	j, err := c.store.JobGet(ctx, &errandstore.JobGetParams{ID: id})
	if errors.Is(err, errandtype.ErrNotFound) {
		return c.workflowJobConflict(ctx, id, nil, kind, want) // deleted since
	}
	if err != nil {
		return nil, fmt.Errorf("enqueue workflow: compare with the existing one: %w", err)
	}
	return want.Differences(errandstore.ShapeOfJob(j), "workflow"), nil
}

func appendPrefixed(out []string, prefix string, fields []string) []string {
	for _, f := range fields {
		out = append(out, prefix+f)
	}
	return out
}
