package errandstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/errandhq/errand/errandtype"
)

// EachID runs step on each of ids in order (a store runs each in its own
// transaction) and returns the results that are not nil. A step's error
// is reported, as what and the id, and passed over: one that fails on
// every pass (a callback or planned job the store refuses) must not keep
// the leader from the ids after it. A cancelled ctx ends the pass.
func EachID[T any](ctx context.Context, ids []string, what string, step func(id string) (*T, error)) ([]*T, error) {
	var (
		out  []*T
		errs []error
	)
	for _, id := range ids {
		if ctx.Err() != nil {
			errs = append(errs, ctx.Err())
			break
		}
		r, err := step(id)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s %s: %w", what, id, err))
			continue
		}
		if r != nil {
			out = append(out, r)
		}
	}
	return out, errors.Join(errs...)
}

// BatchFinishSteps are the reads and writes that finish a batch, made by
// the store in the transaction that marked it completed.
type BatchFinishSteps struct {
	// Count fills b.Counts from its members' states.
	Count func(b *Batch) error
	// Insert enqueues the callback job p and returns its job.
	Insert func(p *JobInsertParams) (*errandtype.Job, error)
	// Record writes b.Final and b.CallbackJobID (nil without a callback).
	Record func(b *Batch) error
}

// FinishBatch finishes b, just marked completed at at: it counts the
// members, enqueues the callback job with the final counts, and records
// both. It returns b, or nil with the error that stopped it.
func FinishBatch(b *Batch, at time.Time, s BatchFinishSteps) (*Batch, error) {
	if err := s.Count(b); err != nil {
		return nil, err
	}
	b.Finish(at)
	cj, err := b.CallbackJob()
	if err != nil {
		return nil, err
	}
	if cj != nil {
		j, err := s.Insert(cj)
		if err != nil {
			return nil, err
		}
		b.CallbackJobID = &j.ID
	}
	if err := s.Record(b); err != nil {
		return nil, err
	}
	return b, nil
}

// WorkflowEnqueueSteps are the writes that enqueue a workflow plan's jobs,
// made by the store in the transaction that advances the workflow.
type WorkflowEnqueueSteps struct {
	// Insert inserts the jobs under the duplicate-id rule.
	Insert func(ps []*JobInsertParams) ([]JobInsertResult, error)
	// Kill makes the job d.ID, just inserted, dead with d's error, unrun,
	// and returns its row.
	Kill func(d *WorkflowDeadJob) (*errandtype.Job, error)
	// Mark sets the workflow id of the jobs ids.
	Mark func(ids []string) error
}

// EnqueuePlanned inserts plan.Insert with s, and returns the jobs it
// created, added to byID. A job whose id is taken counts as enqueued:
// plan.Enqueued records it, and the workflow waits on whatever has it.
func EnqueuePlanned(id string, plan *WorkflowPlan, byID map[string]*WorkflowJob, s WorkflowEnqueueSteps) ([]*errandtype.Job, error) {
	if len(plan.Insert) == 0 {
		return nil, nil
	}
	rs, err := s.Insert(plan.Insert)
	if err != nil {
		return nil, err
	}
	var jobs []*errandtype.Job
	for _, r := range rs {
		if !r.Duplicate {
			jobs = append(jobs, r.Job)
		}
	}
	if err := KillPlanned(plan.Dead, jobs, s.Kill); err != nil {
		return nil, err
	}
	if err := MarkWorkflowJobs(id, jobs, s.Mark); err != nil {
		return nil, err
	}
	for _, j := range jobs {
		byID[j.ID] = WorkflowJobOf(j)
	}
	return jobs, nil
}

// KillPlanned makes dead with kill the jobs of dead among jobs, just
// inserted (see [WorkflowPlan].Dead), and replaces them in jobs with their
// rows as they are now.
func KillPlanned(dead []*WorkflowDeadJob, jobs []*errandtype.Job, kill func(d *WorkflowDeadJob) (*errandtype.Job, error)) error {
	if len(dead) == 0 {
		return nil
	}
	byID := make(map[string]*WorkflowDeadJob, len(dead))
	for _, d := range dead {
		byID[d.ID] = d
	}
	for i, j := range jobs {
		d := byID[j.ID]
		if d == nil {
			continue
		}
		k, err := kill(d)
		if err != nil {
			return fmt.Errorf("enqueue job %s dead: %w", j.ID, err)
		}
		jobs[i] = k
	}
	return nil
}

// MarkWorkflowJobs sets the workflow id of jobs to id, in the store with
// mark and in jobs.
func MarkWorkflowJobs(id string, jobs []*errandtype.Job, mark func(ids []string) error) error {
	if len(jobs) == 0 {
		return nil
	}
	ids := make([]string, len(jobs))
	for i, j := range jobs {
		ids[i] = j.ID
	}
	if err := mark(ids); err != nil {
		return fmt.Errorf("mark jobs: %w", err)
	}
	for _, j := range jobs {
		j.WorkflowID = &id
	}
	return nil
}

// WorkflowJobOf is what a workflow reads of its job j.
func WorkflowJobOf(j *errandtype.Job) *WorkflowJob {
	return &WorkflowJob{ID: j.ID, State: j.State, Attempts: j.Attempt, MaxAttempts: j.MaxAttempts, Output: j.Output, LastError: j.LastError}
}

// Rows are the rows of a query, as *sql.Rows and pgx.Rows read them.
type Rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
}

// ResetBatchCounts sets the Counts of bs to zero and returns their ids,
// for a store to count their members.
func ResetBatchCounts(bs []*Batch) []string {
	ids := make([]string, len(bs))
	for i, b := range bs {
		b.Counts = NewBatchCounts()
		ids[i] = b.ID
	}
	return ids
}

// AddBatchCounts adds rows of (batch id, state, count) to the Counts of bs.
func AddBatchCounts(bs []*Batch, rows Rows) error {
	byID := make(map[string]*Batch, len(bs))
	for _, b := range bs {
		byID[b.ID] = b
	}
	for rows.Next() {
		var id, st string
		var n int
		if err := rows.Scan(&id, &st, &n); err != nil {
			return err
		}
		if b := byID[id]; b != nil {
			b.Counts[errandtype.JobState(st)] = n
		}
	}
	return rows.Err()
}

// ReadCounts sets b.Counts from rows of (state, count) of its members.
func (b *Batch) ReadCounts(rows Rows) error {
	b.Counts = NewBatchCounts()
	for rows.Next() {
		var st string
		var n int
		if err := rows.Scan(&st, &n); err != nil {
			return err
		}
		b.Counts[errandtype.JobState(st)] = n
	}
	return rows.Err()
}

// ReadFinal sets b.Final from a batch row's final counts, for a completed
// batch (CompletedAt set); the counts of an open batch mean nothing.
func (b *Batch) ReadFinal(succeeded, dead, cancelled int) {
	if b.CompletedAt != nil {
		b.Final = &BatchResult{ID: b.ID, Total: b.Total, Succeeded: succeeded, Dead: dead, Cancelled: cancelled, CompletedAt: *b.CompletedAt}
	}
}

// NewWorkflowJobs checks that the first jobs of a new workflow, rs as
// inserted for ps, are all new, and returns them and what the workflow
// reads of them. A job whose id or unique key is taken by a job that
// exists already is an *InputError: a workflow's jobs must be its own.
func NewWorkflowJobs(ps []*JobInsertParams, rs []JobInsertResult) ([]*errandtype.Job, map[string]*WorkflowJob, error) {
	jobs := make([]*errandtype.Job, len(rs))
	byID := make(map[string]*WorkflowJob, len(rs))
	for i, r := range rs {
		if r.Duplicate {
			return nil, nil, &errandtype.InputError{Field: "workflow steps", Message: fmt.Sprintf("job %s: its id is taken by an existing job; a workflow's jobs must be new, so give the workflow another id", ps[i].ID)}
		}
		jobs[i] = r.Job
		byID[r.Job.ID] = WorkflowJobOf(r.Job)
	}
	return jobs, byID, nil
}

// PlanWorkflowJobs plans the advance of w from jobs, the jobs of
// workflows by workflow id as a store reads them, and returns w's own
// (an empty map when it has none, for the plan's jobs to be added to).
func PlanWorkflowJobs(w *WorkflowRecord, jobs map[string]map[string]*WorkflowJob) (map[string]*WorkflowJob, *WorkflowPlan, error) {
	byID := jobs[w.ID]
	if byID == nil {
		byID = make(map[string]*WorkflowJob)
	}
	plan, err := PlanWorkflow(w, byID)
	if err != nil {
		return nil, nil, err
	}
	return byID, plan, nil
}

// DecodeColumns sets the fields of w that a row holds encoded: the
// state, the steps (see [EncodeWorkflowSteps]) and the enqueued ids (see
// [EncodeWorkflowEnqueued]).
func (w *WorkflowRecord) DecodeColumns(state, steps, enqueued string) error {
	var err error
	if w.Steps, err = DecodeWorkflowSteps(steps); err != nil {
		return err
	}
	if w.Enqueued, err = DecodeWorkflowEnqueued(enqueued); err != nil {
		return err
	}
	w.State = errandtype.WorkflowState(state)
	return nil
}

// ViewWorkflows is the view of each of ws, with their jobs, which jobs
// reads by workflow id in one go.
func ViewWorkflows(ws []*WorkflowRecord, jobs func(ids []string) (map[string]map[string]*WorkflowJob, error)) ([]*errandtype.Workflow, error) {
	ids := make([]string, len(ws))
	for i, w := range ws {
		ids[i] = w.ID
	}
	byWorkflow, err := jobs(ids)
	if err != nil {
		return nil, err
	}
	out := make([]*errandtype.Workflow, len(ws))
	for i, w := range ws {
		out[i] = ViewWorkflow(w, byWorkflow[w.ID])
	}
	return out, nil
}

// AddBatchMembers makes rs, the jobs just inserted for batch b's p.Jobs,
// its members: each must be new, and mark sets their batch id in the
// store. It returns what inserting the batch did.
func AddBatchMembers(b *Batch, p *BatchInsertParams, rs []JobInsertResult, mark func(ids []string) error) (*BatchInsertResult, error) {
	jobs := make([]*errandtype.Job, len(rs))
	ids := make([]string, len(rs))
	for i, r := range rs {
		if r.Duplicate {
			return nil, BatchMemberTakenError(i, p.Jobs[i].ID)
		}
		jobs[i], ids[i] = r.Job, r.Job.ID
	}
	if err := mark(ids); err != nil {
		return nil, fmt.Errorf("insert batch %s: mark members: %w", p.ID, err)
	}
	for _, j := range jobs {
		j.BatchID = &p.ID
	}
	b.Counts = NewBatchCounts()
	b.Counts[errandtype.StateQueued] = len(jobs)
	return &BatchInsertResult{Batch: b, Jobs: jobs}, nil
}
