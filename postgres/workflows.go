package postgres

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
	"github.com/jackc/pgx/v5"
)

var (
	_ errandstore.WorkflowTxStore[pgx.Tx]  = (*Store)(nil)
	_ errandstore.WorkflowTxStore[*sql.Tx] = (*SQLStore)(nil)
)

const workflowColumns = `id, name, state, failed_step, steps, enqueued, created_at, updated_at, checked_at, finished_at,
	compensation_started_at, rerun_of, rerun_as`

// openWorkflows is errand's open workflow states as a SQL list.
var openWorkflows = errandstore.OpenWorkflowsSQL

// workflowSQL expands a workflow statement: {workflows} and what r expands.
func (s *Store) workflowSQL(r *strings.Replacer, q string) string {
	return r.Replace(strings.ReplaceAll(q, "{workflows}", s.table("errand_workflows")))
}

func scanWorkflow(row scanner) (*errandstore.WorkflowRecord, error) {
	var (
		w                      errandstore.WorkflowRecord
		state, steps, enqueued string
	)
	if err := row.Scan(&w.ID, &w.Name, &state, &w.FailedStep, &steps, &enqueued, &w.CreatedAt, &w.UpdatedAt,
		&w.CheckedAt, &w.FinishedAt, &w.CompensationStartedAt, &w.RerunOf, &w.RerunAs); err != nil {
		return nil, err
	}
	if err := w.DecodeColumns(state, steps, enqueued); err != nil {
		return nil, err
	}
	w.CreatedAt, w.UpdatedAt, w.CheckedAt, w.FinishedAt = w.CreatedAt.UTC(), w.UpdatedAt.UTC(), w.CheckedAt.UTC(), utc(w.FinishedAt)
	w.CompensationStartedAt = utc(w.CompensationStartedAt)
	return &w, nil
}

// queryWorkflows reads the workflow rows a query returns.
func queryWorkflows(ctx context.Context, q querier, sql string, args ...any) ([]*errandstore.WorkflowRecord, error) {
	rs, err := q.query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	defer rs.Close()
	var out []*errandstore.WorkflowRecord
	for rs.Next() {
		w, err := scanWorkflow(rs)
		if err != nil {
			return nil, err
		}
		out = append(out, w)
	}
	return out, rs.Err()
}

// workflowJobs reads the jobs of the workflows ids, by workflow id and job
// id.
func (s *Store) workflowJobs(ctx context.Context, q querier, ids ...string) (map[string]map[string]*errandstore.WorkflowJob, error) {
	out := make(map[string]map[string]*errandstore.WorkflowJob, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	rs, err := q.query(ctx, s.sql(`SELECT workflow_id, id, state, attempt, max_attempts, output, last_error FROM {jobs}
		WHERE workflow_id = ANY($1)`), ids)
	if err != nil {
		return nil, err
	}
	defer rs.Close()
	for rs.Next() {
		var (
			wf, state         string
			output, lastError *string
			j                 errandstore.WorkflowJob
		)
		if err := rs.Scan(&wf, &j.ID, &state, &j.Attempts, &j.MaxAttempts, &output, &lastError); err != nil {
			return nil, err
		}
		if lastError != nil {
			j.LastError = new(errandtype.LastError)
			if err := json.Unmarshal([]byte(*lastError), j.LastError); err != nil {
				return nil, fmt.Errorf("job %s: last_error: %w", j.ID, err)
			}
		}
		j.State = errandtype.JobState(state)
		if output != nil {
			j.Output = []byte(*output)
		}
		if out[wf] == nil {
			out[wf] = make(map[string]*errandstore.WorkflowJob)
		}
		out[wf][j.ID] = &j
	}
	return out, rs.Err()
}

// markWorkflowJobs sets the workflow_id of the jobs ids to id.
func markWorkflowJobs(ctx context.Context, q querier, r *strings.Replacer, id string, ids []string) error {
	_, err := q.exec(ctx, r.Replace(`UPDATE {jobs} SET workflow_id = $1 WHERE id = ANY($2)`), id, ids)
	return err
}

// killWorkflowSQL makes a job just inserted dead at once, unrun: $2 its
// id, $3 the class and $4 the message of its error.
var killWorkflowSQL = func() string {
	entry, last := historyEntry("attempt", "$3::text", "$4::text", "''")
	return `UPDATE {jobs} SET errors = errors || ` + entry + `, last_error = ` + last + `,
		state = 'dead', finished_at = {now}
	WHERE id = $2 AND state = 'queued' AND attempt = 0
	RETURNING ` + jobColumns
}()

// killWorkflowJob makes dead at once the job d.ID, just inserted with q,
// with d's error (see [errandstore.WorkflowPlan].Dead).
func killWorkflowJob(ctx context.Context, q querier, r *strings.Replacer, now any, d *errandstore.WorkflowDeadJob) (*errandtype.Job, error) {
	rs, err := q.query(ctx, r.Replace(killWorkflowSQL), now, d.ID, d.Class, d.Message)
	if err != nil {
		return nil, err
	}
	ks, err := scanJobs(rs, jobScanner())
	if err == nil && len(ks) != 1 {
		err = fmt.Errorf("%d rows", len(ks))
	}
	if err != nil {
		return nil, err
	}
	return ks[0], nil
}

// WorkflowInsert implements [errandstore.WorkflowStore].
func (s *Store) WorkflowInsert(ctx context.Context, p *errandstore.WorkflowInsertParams) (*errandstore.WorkflowInsertResult, error) {
	var res *errandstore.WorkflowInsertResult
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		res, err = s.insertWorkflow(ctx, pgxQuerier{tx}, s.own, p, func(jobs []*errandstore.JobInsertParams) ([]errandstore.JobInsertResult, error) {
			return s.insert(ctx, pgxQuerier{tx}, s.own, jobs)
		})
		return err
	})
	return res, err
}

// WorkflowInsertTx implements [errandstore.WorkflowTxStore]: tx is a pgx.Tx on
// the store's database.
func (s *Store) WorkflowInsertTx(ctx context.Context, tx pgx.Tx, p *errandstore.WorkflowInsertParams) (*errandstore.WorkflowInsertResult, error) {
	return s.insertWorkflow(ctx, pgxQuerier{tx}, s.inTx, p, func(jobs []*errandstore.JobInsertParams) ([]errandstore.JobInsertResult, error) {
		return s.insertCallerTx(ctx, tx, jobs)
	})
}

// WorkflowInsertTx implements [errandstore.WorkflowTxStore]: tx is a *sql.Tx of
// the pgx driver on the store's database.
func (s *SQLStore) WorkflowInsertTx(ctx context.Context, tx *sql.Tx, p *errandstore.WorkflowInsertParams) (*errandstore.WorkflowInsertResult, error) {
	return s.insertWorkflow(ctx, sqlQuerier{tx}, s.inTx, p, func(jobs []*errandstore.JobInsertParams) ([]errandstore.JobInsertResult, error) {
		return s.insert(ctx, sqlQuerier{tx}, s.inTx, jobs)
	})
}

func (s *Store) insertWorkflow(ctx context.Context, q querier, r *strings.Replacer, p *errandstore.WorkflowInsertParams,
	insert func([]*errandstore.JobInsertParams) ([]errandstore.JobInsertResult, error)) (*errandstore.WorkflowInsertResult, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	steps, err := errandstore.EncodeWorkflowSteps(p.Steps)
	if err != nil {
		return nil, err
	}
	plan, err := errandstore.PlanWorkflow(&errandstore.WorkflowRecord{ID: p.ID, Name: p.Name, State: errandtype.WorkflowRunning, Steps: p.Steps}, nil)
	if err != nil {
		return nil, err
	}
	ws, err := queryWorkflows(ctx, q, s.workflowSQL(r, `INSERT INTO {workflows} (id, name, state, steps, enqueued, created_at, updated_at, checked_at, rerun_of)
		VALUES ($2, $3, $4, $5, $6, {now}, {now}, {now}, NULLIF($7, '')) ON CONFLICT (id) DO NOTHING RETURNING `+workflowColumns),
		s.nowArg(), p.ID, p.Name, string(plan.State), steps, errandstore.EncodeWorkflowEnqueued(plan.Enqueued), p.RerunOf)
	if err != nil {
		return nil, fmt.Errorf("insert workflow %s: %w", p.ID, badValue(err))
	}
	if len(ws) == 0 {
		v, err := s.getWorkflow(ctx, q, r, p.ID)
		if err != nil {
			return nil, fmt.Errorf("insert workflow %s: %w", p.ID, err)
		}
		return &errandstore.WorkflowInsertResult{Workflow: v, Duplicate: true}, nil
	}
	rs, err := insert(plan.Insert)
	if err != nil {
		return nil, err
	}
	jobs, byID, err := errandstore.NewWorkflowJobs(plan.Insert, rs)
	if err != nil {
		return nil, err
	}
	if err := errandstore.MarkWorkflowJobs(p.ID, jobs, func(ids []string) error { return markWorkflowJobs(ctx, q, r, p.ID, ids) }); err != nil {
		return nil, fmt.Errorf("insert workflow %s: %w", p.ID, err)
	}
	return &errandstore.WorkflowInsertResult{Workflow: errandstore.ViewWorkflow(ws[0], byID), Jobs: jobs}, nil
}

// getWorkflow reads workflow id and its jobs with q, or ErrNotFound.
func (s *Store) getWorkflow(ctx context.Context, q querier, r *strings.Replacer, id string) (*errandtype.Workflow, error) {
	ws, err := queryWorkflows(ctx, q, s.workflowSQL(r, `SELECT `+workflowColumns+` FROM {workflows} WHERE id = $1`), id)
	if err != nil {
		return nil, err
	}
	if len(ws) == 0 {
		return nil, errandtype.ErrNotFound
	}
	jobs, err := s.workflowJobs(ctx, q, id)
	if err != nil {
		return nil, err
	}
	return errandstore.ViewWorkflow(ws[0], jobs[id]), nil
}

// WorkflowGet implements [errandstore.WorkflowStore].
func (s *Store) WorkflowGet(ctx context.Context, p *errandstore.WorkflowGetParams) (*errandtype.Workflow, error) {
	if !errandtype.StorableText(p.ID) {
		return nil, errandtype.ErrNotFound
	}
	v, err := s.getWorkflow(ctx, pgxQuerier{s.pool}, s.own, p.ID)
	if err != nil && !errors.Is(err, errandtype.ErrNotFound) {
		return nil, fmt.Errorf("get workflow %s: %w", p.ID, err)
	}
	return v, err
}

// WorkflowCounts implements [errandstore.WorkflowStore].
func (s *Store) WorkflowCounts(ctx context.Context) (map[errandtype.WorkflowState]int, error) {
	rows, err := s.pool.Query(ctx, s.workflowSQL(s.own, `SELECT state, count(*) FROM {workflows} GROUP BY state`))
	if err != nil {
		return nil, fmt.Errorf("count workflows: %w", err)
	}
	m := errandstore.NewWorkflowCounts()
	var st string
	var n int
	_, err = pgx.ForEachRow(rows, []any{&st, &n}, func() error {
		m[errandtype.WorkflowState(st)] = n
		return nil
	})
	if err != nil {
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
	var states []string
	for _, st := range p.States {
		states = append(states, string(st))
	}
	limit := p.Limit
	if limit <= 0 {
		limit = 100
	}
	q := pgxQuerier{s.pool}
	var at *time.Time
	var after *string
	if c := p.Before; c != nil {
		at, after = &c.CreatedAt, &c.ID
	}
	ws, err := queryWorkflows(ctx, q, s.workflowSQL(s.own, `SELECT `+workflowColumns+` FROM {workflows}
		WHERE ($1::text[] IS NULL OR state = ANY($1))
			AND ($3::timestamptz IS NULL OR (created_at, id) < ($3, $4::text))
		ORDER BY created_at DESC, id DESC LIMIT $2`), states, limit, at, after)
	if err != nil {
		return nil, fmt.Errorf("list workflows: %w", err)
	}
	out, err := errandstore.ViewWorkflows(ws, func(ids []string) (map[string]map[string]*errandstore.WorkflowJob, error) {
		return s.workflowJobs(ctx, q, ids...)
	})
	if err != nil {
		return nil, fmt.Errorf("list workflows: %w", err)
	}
	return out, nil
}

// WorkflowAdvance implements [errandstore.WorkflowStore]. Each workflow is
// advanced in a transaction that locks its row (SELECT ... FOR UPDATE)
// before it reads the jobs: a second advance of the workflow waits for the
// first to commit, then reads the row it wrote and the jobs it inserted
// (READ COMMITTED takes a new snapshot per statement), so it plans none of
// them again.
func (s *Store) WorkflowAdvance(ctx context.Context, p *errandstore.WorkflowAdvanceParams) ([]*errandstore.WorkflowAdvanceResult, error) {
	var ids []string
	for _, id := range p.IDs {
		if errandtype.StorableText(id) {
			ids = append(ids, id)
		}
	}
	if len(p.IDs) == 0 {
		// The leader's pass reads first: an idle pass costs one round
		// trip and no transaction. A finish after checked_at is news; so
		// is, once every job has finished, one a margin before it: {now}
		// is an outcome's transaction start, and it may commit after an
		// advance that read the jobs.
		limit := p.Limit
		if limit <= 0 {
			limit = 100
		}
		rs, err := s.pool.Query(ctx, s.workflowSQL(s.own, `SELECT w.id FROM {workflows} w
			WHERE w.state IN (`+openWorkflows+`)
				AND (EXISTS (SELECT 1 FROM {jobs} j WHERE j.workflow_id = w.id AND j.finished_at > w.checked_at)
					OR (NOT EXISTS (SELECT 1 FROM {jobs} j WHERE j.workflow_id = w.id AND j.state IN (`+unfinished+`))
						AND EXISTS (SELECT 1 FROM {jobs} j WHERE j.workflow_id = w.id AND j.finished_at > w.checked_at - $2 * interval '1 microsecond')))
			ORDER BY w.created_at, w.id LIMIT $1`), limit, errandstore.WorkflowRecheckOverlap.Microseconds())
		if err != nil {
			return nil, fmt.Errorf("advance workflows: %w", err)
		}
		if ids, err = pgx.CollectRows(rs, pgx.RowTo[string]); err != nil {
			return nil, fmt.Errorf("advance workflows: %w", err)
		}
	}
	return errandstore.EachID(ctx, ids, "advance workflow", func(id string) (res *errandstore.WorkflowAdvanceResult, err error) {
		err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			res, err = s.advanceWorkflow(ctx, tx, id)
			return err
		})
		return res, err
	})
}

// advanceWorkflow advances workflow id in tx; nil for an unknown id.
func (s *Store) advanceWorkflow(ctx context.Context, tx pgx.Tx, id string) (*errandstore.WorkflowAdvanceResult, error) {
	q := pgxQuerier{tx}
	ws, err := queryWorkflows(ctx, q, s.workflowSQL(s.own, `SELECT `+workflowColumns+` FROM {workflows} WHERE id = $1 FOR UPDATE`), id)
	if err != nil || len(ws) == 0 {
		return nil, err
	}
	w := ws[0]
	all, err := s.workflowJobs(ctx, q, id)
	if err != nil {
		return nil, err
	}
	byID, plan, err := errandstore.PlanWorkflowJobs(w, all)
	if err != nil {
		return nil, err
	}
	jobs, err := errandstore.EnqueuePlanned(id, plan, byID, errandstore.WorkflowEnqueueSteps{
		Insert: func(ps []*errandstore.JobInsertParams) ([]errandstore.JobInsertResult, error) {
			return s.insert(ctx, q, s.own, ps)
		},
		Kill: func(d *errandstore.WorkflowDeadJob) (*errandtype.Job, error) {
			return killWorkflowJob(ctx, q, s.own, s.nowArg(), d)
		},
		Mark: func(ids []string) error { return markWorkflowJobs(ctx, q, s.own, id, ids) },
	})
	if err != nil {
		return nil, err
	}
	// The row's times come back from the statement: {now} is the
	// database's clock unless the store has one of its own.
	var (
		rs  pgx.Rows
		now = s.nowArg()
	)
	if plan.Changed {
		rs, err = tx.Query(ctx, s.workflowSQL(s.own, `UPDATE {workflows} SET state = $3, failed_step = $4, enqueued = $5,
				updated_at = {now}, checked_at = {now}, finished_at = CASE WHEN $6 THEN {now} END,
				compensation_started_at = CASE WHEN $7 THEN coalesce(compensation_started_at, {now}) END
			WHERE id = $2 RETURNING checked_at, updated_at, finished_at, compensation_started_at`),
			now, id, string(plan.State), plan.FailedStep, errandstore.EncodeWorkflowEnqueued(plan.Enqueued), !plan.State.Open(), plan.CompensationStarted)
	} else {
		rs, err = tx.Query(ctx, s.workflowSQL(s.own, `UPDATE {workflows} SET checked_at = {now}
			WHERE id = $2 RETURNING checked_at, updated_at, finished_at, compensation_started_at`), now, id)
	}
	if err != nil {
		return nil, err
	}
	var (
		checked, updated  time.Time
		fin, compensating *time.Time
	)
	if rs.Next() {
		err = rs.Scan(&checked, &updated, &fin, &compensating)
	}
	rs.Close()
	if err == nil {
		err = rs.Err()
	}
	if err != nil {
		return nil, err
	}
	w.CheckedAt, w.UpdatedAt, w.FinishedAt, w.CompensationStartedAt = checked.UTC(), updated.UTC(), utc(fin), utc(compensating)
	if plan.Changed {
		w.State, w.FailedStep, w.Enqueued = plan.State, plan.FailedStep, plan.Enqueued
	}
	return &errandstore.WorkflowAdvanceResult{Workflow: errandstore.ViewWorkflow(w, byID), Jobs: jobs, Changed: plan.Changed}, nil
}

// JobSetOutput implements [errandstore.WorkflowStore].
func (s *Store) JobSetOutput(ctx context.Context, p *errandstore.JobSetOutputParams) error {
	if err := p.Validate(); err != nil {
		return err
	}
	id := p.ID
	tag, err := s.pool.Exec(ctx, s.sql(`UPDATE {jobs} j SET output = $2
		FROM `+leaseRows("$3::text AS id, $4::text AS token", "", "l")+` WHERE `+leaseFence("j", "l")),
		s.nowArg(), string(p.Output), id, p.LeaseToken)
	if err != nil {
		return fmt.Errorf("set output of job %s: %w", id, badValue(err))
	}
	if tag.RowsAffected() == 0 {
		return errandtype.ErrLeaseLost
	}
	return nil
}

// WorkflowRerun implements [errandstore.WorkflowStore]. It locks the old
// workflow's row FOR UPDATE: a concurrent rerun waits and then finds it
// rerun, and a replay of its steps (FOR SHARE) waits and then finds
// rerun_as set.
func (s *Store) WorkflowRerun(ctx context.Context, p *errandstore.WorkflowRerunParams) (*errandstore.WorkflowInsertResult, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if !errandtype.StorableText(p.ID) {
		return nil, errandtype.ErrNotFound
	}
	var res *errandstore.WorkflowInsertResult
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		q := pgxQuerier{tx}
		ws, err := queryWorkflows(ctx, q, s.workflowSQL(s.own, `SELECT `+workflowColumns+` FROM {workflows} WHERE id = $1 FOR UPDATE`), p.ID)
		if err != nil {
			return err
		}
		if len(ws) == 0 {
			return errandtype.ErrNotFound
		}
		ip, again, err := errandstore.PlanWorkflowRerun(ws[0], p.NewID)
		switch {
		case err != nil:
			return err
		case again:
			v, err := s.getWorkflow(ctx, q, s.own, p.NewID)
			res = &errandstore.WorkflowInsertResult{Workflow: v, Duplicate: true}
			return err
		}
		res, err = s.insertWorkflow(ctx, q, s.own, ip, func(jobs []*errandstore.JobInsertParams) ([]errandstore.JobInsertResult, error) {
			return s.insert(ctx, q, s.own, jobs)
		})
		if err != nil {
			return err
		}
		if res.Duplicate {
			return errandstore.RerunIDTakenError(p.NewID)
		}
		_, err = tx.Exec(ctx, s.workflowSQL(s.own, `UPDATE {workflows} SET rerun_as = $1 WHERE id = $2`), p.NewID, p.ID)
		return err
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}
