package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
	"github.com/errandhq/errand/internal/rowscan"
)

var _ errandstore.WorkflowTxStore[*sql.Tx] = (*Store)(nil)

const workflowColumns = `id, name, state, failed_step, steps, enqueued, created_at, updated_at, checked_at, finished_at,
	compensation_started_at, rerun_of, rerun_as`

// openWorkflows is errand's open workflow states as a SQL list.
var openWorkflows = errandstore.OpenWorkflowsSQL

func scanWorkflow(row scanner) (*errandstore.WorkflowRecord, error) {
	var (
		w                         errandstore.WorkflowRecord
		state, steps, enqueued    string
		failed, rerunOf, rerunAs  sql.NullString
		created, updated, checked int64
		finished, compensated     sql.NullInt64
	)
	if err := row.Scan(&w.ID, &w.Name, &state, &failed, &steps, &enqueued, &created, &updated, &checked, &finished,
		&compensated, &rerunOf, &rerunAs); err != nil {
		return nil, err
	}
	if err := w.DecodeColumns(state, steps, enqueued); err != nil {
		return nil, err
	}
	w.FailedStep = nullString(failed)
	w.CreatedAt, w.UpdatedAt, w.CheckedAt = fromMicros(created), fromMicros(updated), fromMicros(checked)
	w.FinishedAt, w.CompensationStartedAt = nullMicros(finished), nullMicros(compensated)
	w.RerunOf, w.RerunAs = nullString(rerunOf), nullString(rerunAs)
	return &w, nil
}

type queryer interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// workflowJobs reads the jobs of the workflows ids, by workflow id and job
// id, in chunks far below SQLite's parameter limit.
func workflowJobs(ctx context.Context, q queryer, ids ...string) (map[string]map[string]*errandstore.WorkflowJob, error) {
	out := make(map[string]map[string]*errandstore.WorkflowJob, len(ids))
	const chunk = 500
	for start := 0; start < len(ids); start += chunk {
		end := min(start+chunk, len(ids))
		args := make([]any, 0, end-start)
		for _, id := range ids[start:end] {
			args = append(args, id)
		}
		rows, err := q.QueryContext(ctx, `SELECT workflow_id, id, state, attempt, max_attempts, output, last_error FROM errand_jobs
			WHERE workflow_id IN (`+strings.TrimSuffix(strings.Repeat("?, ", end-start), ", ")+`)`, args...)
		if err != nil {
			return nil, err
		}
		for rows.Next() {
			var (
				wf, state         string
				output, lastError sql.NullString
				j                 errandstore.WorkflowJob
			)
			if err := rows.Scan(&wf, &j.ID, &state, &j.Attempts, &j.MaxAttempts, &output, &lastError); err != nil {
				rows.Close()
				return nil, err
			}
			j.State = errandtype.JobState(state)
			if output.Valid {
				j.Output = []byte(output.String)
			}
			if lastError.Valid {
				j.LastError = new(errandtype.LastError)
				if err := json.Unmarshal([]byte(lastError.String), j.LastError); err != nil {
					rows.Close()
					return nil, fmt.Errorf("job %s: last_error: %w", j.ID, err)
				}
			}
			if out[wf] == nil {
				out[wf] = make(map[string]*errandstore.WorkflowJob)
			}
			out[wf][j.ID] = &j
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// markWorkflowJobs sets the workflow_id of the jobs ids to id.
func markWorkflowJobs(ctx context.Context, tx *sql.Tx, id string, ids []string) error {
	args := make([]any, 0, len(ids)+1)
	args = append(args, id)
	for _, j := range ids {
		args = append(args, j)
	}
	// A workflow has at most MaxWorkflowSteps steps and as many
	// compensations: far below SQLite's parameter limit.
	_, err := tx.ExecContext(ctx, `UPDATE errand_jobs SET workflow_id = ? WHERE id IN (`+
		strings.TrimSuffix(strings.Repeat("?, ", len(ids)), ", ")+`)`, args...)
	return err
}

// killWorkflowJob makes dead at once the job d.ID, just inserted in tx,
// with d's error (see [errandstore.WorkflowPlan].Dead).
func killWorkflowJob(ctx context.Context, tx *sql.Tx, now time.Time, d *errandstore.WorkflowDeadJob) (*errandtype.Job, error) {
	return scanJob(tx.QueryRowContext(ctx, `UPDATE errand_jobs SET `+sweepError+`,
			state = 'dead', finished_at = ?4
		WHERE id = ?5 AND state = 'queued' AND attempt = 0
		RETURNING `+jobColumns, historyTime(now), d.Class, d.Message, micros(now), d.ID))
}

// WorkflowInsert implements [errandstore.WorkflowStore].
func (s *Store) WorkflowInsert(ctx context.Context, p *errandstore.WorkflowInsertParams) (*errandstore.WorkflowInsertResult, error) {
	var res *errandstore.WorkflowInsertResult
	err := s.tx(ctx, func(tx *sql.Tx) error {
		var err error
		res, err = s.insertWorkflow(ctx, tx, p)
		return err
	})
	return res, err
}

// WorkflowInsertTx implements [errandstore.WorkflowTxStore]. tx is a transaction
// on [Store.DB].
func (s *Store) WorkflowInsertTx(ctx context.Context, tx *sql.Tx, p *errandstore.WorkflowInsertParams) (*errandstore.WorkflowInsertResult, error) {
	return s.insertWorkflow(ctx, tx, p)
}

func (s *Store) insertWorkflow(ctx context.Context, tx *sql.Tx, p *errandstore.WorkflowInsertParams) (*errandstore.WorkflowInsertResult, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	steps, err := errandstore.EncodeWorkflowSteps(p.Steps)
	if err != nil {
		return nil, err
	}
	now := fromMicros(micros(s.clock.Now()))
	w := &errandstore.WorkflowRecord{ID: p.ID, Name: p.Name, State: errandtype.WorkflowRunning, Steps: p.Steps,
		CreatedAt: now, UpdatedAt: now, CheckedAt: now}
	if p.RerunOf != "" {
		w.RerunOf = &p.RerunOf
	}
	plan, err := errandstore.PlanWorkflow(w, nil)
	if err != nil {
		return nil, err
	}
	w.State, w.Enqueued = plan.State, plan.Enqueued
	res, err := tx.ExecContext(ctx, `INSERT INTO errand_workflows (id, name, state, steps, enqueued, created_at, updated_at, checked_at, rerun_of)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING`,
		p.ID, p.Name, string(w.State), steps, errandstore.EncodeWorkflowEnqueued(w.Enqueued), micros(now), micros(now), micros(now), w.RerunOf)
	if err != nil {
		return nil, fmt.Errorf("insert workflow %s: %w", p.ID, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return nil, fmt.Errorf("insert workflow %s: %w", p.ID, err)
	} else if n == 0 {
		v, err := getWorkflow(ctx, tx, p.ID)
		if err != nil {
			return nil, fmt.Errorf("insert workflow %s: %w", p.ID, err)
		}
		return &errandstore.WorkflowInsertResult{Workflow: v, Duplicate: true}, nil
	}
	rs, err := s.insert(ctx, tx, plan.Insert)
	if err != nil {
		return nil, err
	}
	jobs, byID, err := errandstore.NewWorkflowJobs(plan.Insert, rs)
	if err != nil {
		return nil, err
	}
	if err := errandstore.MarkWorkflowJobs(p.ID, jobs, func(ids []string) error { return markWorkflowJobs(ctx, tx, p.ID, ids) }); err != nil {
		return nil, fmt.Errorf("insert workflow %s: %w", p.ID, err)
	}
	return &errandstore.WorkflowInsertResult{Workflow: errandstore.ViewWorkflow(w, byID), Jobs: jobs}, nil
}

// getWorkflow reads workflow id and its jobs with q, or ErrNotFound.
func getWorkflow(ctx context.Context, q interface {
	queryer
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}, id string) (*errandtype.Workflow, error) {
	w, err := scanWorkflow(q.QueryRowContext(ctx, `SELECT `+workflowColumns+` FROM errand_workflows WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, errandtype.ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	jobs, err := workflowJobs(ctx, q, id)
	if err != nil {
		return nil, err
	}
	return errandstore.ViewWorkflow(w, jobs[id]), nil
}

// WorkflowGet implements [errandstore.WorkflowStore].
func (s *Store) WorkflowGet(ctx context.Context, p *errandstore.WorkflowGetParams) (*errandtype.Workflow, error) {
	v, err := getWorkflow(ctx, s.read, p.ID)
	if err != nil && !errors.Is(err, errandtype.ErrNotFound) {
		return nil, fmt.Errorf("get workflow %s: %w", p.ID, err)
	}
	return v, err
}

// WorkflowCounts implements [errandstore.WorkflowStore].
func (s *Store) WorkflowCounts(ctx context.Context) (map[errandtype.WorkflowState]int, error) {
	rows, err := s.read.QueryContext(ctx, `SELECT state, count(*) FROM errand_workflows GROUP BY state`)
	if err != nil {
		return nil, fmt.Errorf("count workflows: %w", err)
	}
	defer rows.Close()
	m := errandstore.NewWorkflowCounts()
	for rows.Next() {
		var st string
		var n int
		if err := rows.Scan(&st, &n); err != nil {
			return nil, fmt.Errorf("count workflows: %w", err)
		}
		m[errandtype.WorkflowState(st)] = n
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("count workflows: %w", err)
	}
	return m, nil
}

// WorkflowList implements [errandstore.WorkflowStore]: the rows in one query,
// the jobs of all of them in another.
func (s *Store) WorkflowList(ctx context.Context, p *errandstore.WorkflowListParams) ([]*errandtype.Workflow, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	limit := p.Limit
	if limit <= 0 {
		limit = 100
	}
	var where []string
	var args []any
	if len(p.States) > 0 {
		where = append(where, `state IN (`+placeholders(len(p.States))+`)`)
		for _, st := range p.States {
			args = append(args, string(st))
		}
	}
	if c := p.Before; c != nil {
		where = append(where, `(created_at, id) < (?, ?)`)
		args = append(args, micros(c.CreatedAt), c.ID)
	}
	q := `SELECT ` + workflowColumns + ` FROM errand_workflows`
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, ` AND `)
	}
	q += ` ORDER BY created_at DESC, id DESC LIMIT ?`
	args = append(args, limit)
	rows, err := s.read.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list workflows: %w", err)
	}
	ws, err := scanRows(rows, scanWorkflow)
	if err != nil {
		return nil, fmt.Errorf("list workflows: %w", err)
	}
	out, err := errandstore.ViewWorkflows(ws, func(ids []string) (map[string]map[string]*errandstore.WorkflowJob, error) {
		return workflowJobs(ctx, s.read, ids...)
	})
	if err != nil {
		return nil, fmt.Errorf("list workflows: %w", err)
	}
	return out, nil
}

// scanRows reads every row of rows with scan and closes rows.
func scanRows[T any](rows *sql.Rows, scan func(scanner) (T, error)) ([]T, error) {
	defer rows.Close()
	return rowscan.All(rows, scan)
}

// readList reads with db every row of query q with scan, as a list: empty,
// not nil, when there are none.
func readList[T any](ctx context.Context, db *sql.DB, scan func(scanner) (T, error), q string, args ...any) ([]T, error) {
	rows, err := db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	return rowscan.List(rows, scan)
}

// readyWorkflowsSQL finds the open workflows with a job finished since
// they were last advanced, or, when none of their jobs is unfinished, since
// then less [errandstore.WorkflowRecheckOverlap] (the first parameter, in
// microseconds), oldest first.
var readyWorkflowsSQL = `SELECT w.id FROM errand_workflows w
	WHERE w.state IN (` + openWorkflows + `)
		AND (EXISTS (SELECT 1 FROM errand_jobs j WHERE j.workflow_id = w.id AND j.finished_at > w.checked_at)
			OR (NOT EXISTS (SELECT 1 FROM errand_jobs j WHERE j.workflow_id = w.id AND j.state IN (` + unfinished + `))
				AND EXISTS (SELECT 1 FROM errand_jobs j WHERE j.workflow_id = w.id AND j.finished_at > w.checked_at - ?)))
	ORDER BY w.created_at, w.id LIMIT ?`

// WorkflowAdvance implements [errandstore.WorkflowStore]. The single writer
// serialises advances: each reads the row and the jobs and writes them in
// one write transaction.
func (s *Store) WorkflowAdvance(ctx context.Context, p *errandstore.WorkflowAdvanceParams) ([]*errandstore.WorkflowAdvanceResult, error) {
	ids := p.IDs
	named := len(ids) > 0
	if !named {
		// The leader's pass reads from the reader first: an idle pass
		// costs no write transaction.
		limit := p.Limit
		if limit <= 0 {
			limit = 100
		}
		rows, err := s.read.QueryContext(ctx, readyWorkflowsSQL, errandstore.WorkflowRecheckOverlap.Microseconds(), limit)
		if err != nil {
			return nil, fmt.Errorf("advance workflows: %w", err)
		}
		if ids, err = scanRows(rows, func(row scanner) (id string, err error) { return id, row.Scan(&id) }); err != nil {
			return nil, fmt.Errorf("advance workflows: %w", err)
		}
	}
	return errandstore.EachID(ctx, ids, "advance workflow", func(id string) (*errandstore.WorkflowAdvanceResult, error) {
		if named {
			// A worker's advance after an outcome that changes nothing
			// (a step succeeded while its siblings run) costs one read
			// and no write transaction. A read begun after the caller's
			// outcome committed sees every outcome committed before it;
			// a later outcome's process advances the workflow itself.
			r, err := s.planWorkflow(ctx, s.read, id)
			if err != nil || r == nil {
				return nil, err // nil: unknown id
			}
			if !r.plan.Changed {
				return &errandstore.WorkflowAdvanceResult{Workflow: errandstore.ViewWorkflow(r.w, r.jobs)}, nil
			}
		}
		var res *errandstore.WorkflowAdvanceResult
		err := s.tx(ctx, func(tx *sql.Tx) error {
			var err error
			res, err = s.advanceWorkflow(ctx, tx, id)
			return err
		})
		return res, err
	})
}

// plannedWorkflow is a workflow's row, its jobs and their plan.
type plannedWorkflow struct {
	w    *errandstore.WorkflowRecord
	jobs map[string]*errandstore.WorkflowJob
	plan *errandstore.WorkflowPlan
}

// planWorkflow reads workflow id and its jobs with q and plans its advance;
// nil for an unknown id.
func (s *Store) planWorkflow(ctx context.Context, q interface {
	queryer
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}, id string) (*plannedWorkflow, error) {
	w, err := scanWorkflow(q.QueryRowContext(ctx, `SELECT `+workflowColumns+` FROM errand_workflows WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	jobs, err := workflowJobs(ctx, q, id)
	if err != nil {
		return nil, err
	}
	byID, plan, err := errandstore.PlanWorkflowJobs(w, jobs)
	if err != nil {
		return nil, err
	}
	return &plannedWorkflow{w: w, jobs: byID, plan: plan}, nil
}

// advanceWorkflow advances workflow id in tx; nil for an unknown id.
func (s *Store) advanceWorkflow(ctx context.Context, tx *sql.Tx, id string) (*errandstore.WorkflowAdvanceResult, error) {
	r, err := s.planWorkflow(ctx, tx, id)
	if err != nil || r == nil {
		return nil, err
	}
	w, plan := r.w, r.plan
	jobs, err := errandstore.EnqueuePlanned(id, plan, r.jobs, errandstore.WorkflowEnqueueSteps{
		Insert: func(ps []*errandstore.JobInsertParams) ([]errandstore.JobInsertResult, error) {
			return s.insert(ctx, tx, ps)
		},
		Kill: func(d *errandstore.WorkflowDeadJob) (*errandtype.Job, error) {
			return killWorkflowJob(ctx, tx, s.clock.Now(), d)
		},
		Mark: func(ids []string) error { return markWorkflowJobs(ctx, tx, id, ids) },
	})
	if err != nil {
		return nil, err
	}
	now := fromMicros(micros(s.clock.Now()))
	w.CheckedAt = now
	if plan.Changed {
		w.State, w.FailedStep, w.Enqueued, w.UpdatedAt, w.FinishedAt = plan.State, plan.FailedStep, plan.Enqueued, now, nil
		if !plan.State.Open() {
			w.FinishedAt = &now
		}
		if plan.CompensationStarted && w.CompensationStartedAt == nil {
			w.CompensationStartedAt = &now
		}
		_, err = tx.ExecContext(ctx, `UPDATE errand_workflows SET state = ?, failed_step = ?, enqueued = ?,
			updated_at = ?, checked_at = ?, finished_at = ?, compensation_started_at = ? WHERE id = ?`,
			string(w.State), w.FailedStep, errandstore.EncodeWorkflowEnqueued(w.Enqueued), micros(now), micros(now),
			optMicros(w.FinishedAt), optMicros(w.CompensationStartedAt), id)
	} else {
		_, err = tx.ExecContext(ctx, `UPDATE errand_workflows SET checked_at = ? WHERE id = ?`, micros(now), id)
	}
	if err != nil {
		return nil, err
	}
	return &errandstore.WorkflowAdvanceResult{Workflow: errandstore.ViewWorkflow(w, r.jobs), Jobs: jobs, Changed: plan.Changed}, nil
}

// JobSetOutput implements [errandstore.WorkflowStore].
func (s *Store) JobSetOutput(ctx context.Context, p *errandstore.JobSetOutputParams) error {
	if err := p.Validate(); err != nil {
		return err
	}
	return s.fencedWrite(ctx, func(now int64) (string, []any) {
		return `UPDATE errand_jobs SET output = ?
			WHERE id = ? AND state = 'running' AND lease_token = ? AND lease_until > ?`,
			[]any{string(p.Output), p.ID, p.LeaseToken, now}
	})
}

// WorkflowRerun implements [errandstore.WorkflowStore]. The one writer
// connection serialises it with the advances and replays of the workflow.
func (s *Store) WorkflowRerun(ctx context.Context, p *errandstore.WorkflowRerunParams) (*errandstore.WorkflowInsertResult, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	var res *errandstore.WorkflowInsertResult
	err := s.tx(ctx, func(tx *sql.Tx) error {
		old, err := scanWorkflow(tx.QueryRowContext(ctx, `SELECT `+workflowColumns+` FROM errand_workflows WHERE id = ?`, p.ID))
		if errors.Is(err, sql.ErrNoRows) {
			return errandtype.ErrNotFound
		}
		if err != nil {
			return err
		}
		ip, again, err := errandstore.PlanWorkflowRerun(old, p.NewID)
		switch {
		case err != nil:
			return err
		case again:
			v, err := getWorkflow(ctx, tx, p.NewID)
			res = &errandstore.WorkflowInsertResult{Workflow: v, Duplicate: true}
			return err
		}
		if res, err = s.insertWorkflow(ctx, tx, ip); err != nil {
			return err
		}
		if res.Duplicate {
			return errandstore.RerunIDTakenError(p.NewID)
		}
		_, err = tx.ExecContext(ctx, `UPDATE errand_workflows SET rerun_as = ? WHERE id = ?`, p.NewID, p.ID)
		return err
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}
