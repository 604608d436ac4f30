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
	"github.com/errandhq/errand/internal/sqlbuild"
)

// Operators' actions: replays, cancels, the audit that records them.

var errNoSuchJob = errandtype.ErrNotFound

// auditEntry is one record to append to errand_audit.
type auditEntry struct {
	action     errandtype.AuditAction
	jobID      string // "" for none
	operator   string
	reason     string
	at         time.Time
	priorState errandtype.JobState
	replay     int
	details    json.RawMessage
}

func insertAudit(ctx context.Context, tx *sql.Tx, a *auditEntry) error {
	var details any
	if a.details != nil {
		details = string(a.details)
	}
	_, err := tx.ExecContext(ctx, `INSERT INTO errand_audit
			(action, job_id, operator, reason, at, prior_state, replay, details)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
		string(a.action), nullIfEmpty(a.jobID), a.operator, a.reason, micros(a.at),
		nullIfEmpty(string(a.priorState)), a.replay, details)
	return err
}

// replaySQL starts a new delivery cycle for job ?2 at ?1, replacing its
// args_version with ?4 when that is positive and
// args with ?3 when that is not NULL, and clearing its progress when ?5.
const replaySQL = `UPDATE errand_jobs SET
		state = 'queued', attempt = 0, available_at = ?1, replays = replays + 1,
		deadline = CASE WHEN max_age_us > 0 THEN ?1 + max_age_us END, start_by = NULL,
		priority = coalesce(base_priority, priority), base_priority = NULL,
		lease_token = NULL, lease_until = NULL, finished_at = NULL, cancel_requested_at = NULL,
		progress = iif(?5, NULL, progress),
		args = coalesce(?3, args),
		args_version = CASE WHEN ?4 > 0 THEN ?4 ELSE args_version END
	WHERE id = ?2 RETURNING ` + jobColumns

// uniqueHolderSQL finds another job holding a unique key in a window.
var uniqueHolderSQL = errandstore.UniqueReplayHolderSQL("errand_jobs", sqliteParam)

// replay replays job id inside tx and audits it as action, with details
// (nil for none). newArgs, when not nil, replaces the job's args, and the
// details become the old and new args.
func (s *Store) replay(ctx context.Context, tx *sql.Tx, now time.Time, id, operator, reason string,
	action errandtype.AuditAction, newArgs json.RawMessage, newVersion int, clearProgress bool, details json.RawMessage) (*errandtype.Job, error) {
	var state, oldArgs string
	var ukey sql.NullString
	var workflowID *string
	var ustates, uwindow int64
	err := tx.QueryRowContext(ctx, `SELECT state, args, unique_key, unique_states, unique_window_us, workflow_id
		FROM errand_jobs WHERE id = ?`, id).Scan(&state, &oldArgs, &ukey, &ustates, &uwindow, &workflowID)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, errNoSuchJob
	}
	if err != nil {
		return nil, err
	}
	if err := errandstore.CheckReplay(id, errandtype.JobState(state)); err != nil {
		return nil, err
	}
	if errandstore.ReplayHeldByWorkflow(id, workflowID) {
		// The one writer connection serializes this check, the replay
		// and any advance of the workflow.
		w, err := scanWorkflow(tx.QueryRowContext(ctx, `SELECT `+workflowColumns+` FROM errand_workflows WHERE id = ?`, *workflowID))
		switch {
		case errors.Is(err, sql.ErrNoRows): // retention deleted the workflow: nothing holds the step
		case err != nil:
			return nil, err
		default:
			if err := errandstore.CheckReplayInWorkflow(id, errandtype.JobState(state), w); err != nil {
				return nil, err
			}
		}
	}
	if ukey.Valid && errandstore.ReplayTakesKey(errandtype.UniqueScope(ustates), errandtype.JobState(state)) {
		// The one writer connection serializes this check and the update.
		var holder string
		err := tx.QueryRowContext(ctx, uniqueHolderSQL, ukey.String, uwindow, id).Scan(&holder)
		switch {
		case err == nil:
			return nil, &errandtype.UniqueConflictError{ID: id, Key: ukey.String, HeldBy: holder}
		case !errors.Is(err, sql.ErrNoRows):
			return nil, err
		}
	}
	var argsArg any
	if newArgs != nil {
		argsArg = string(newArgs)
		details = errandstore.ReplayArgsDetails(json.RawMessage(oldArgs), newArgs)
	}
	j, err := scanJob(tx.QueryRowContext(ctx, replaySQL, micros(now), id, argsArg, newVersion, clearProgress))
	if err != nil {
		return nil, err
	}
	if clearProgress {
		for _, table := range []string{"errand_steps", "errand_signals", "errand_events", "errand_streams"} {
			if _, err := tx.ExecContext(ctx, `DELETE FROM `+table+` WHERE job_seq = ?`, j.Seq); err != nil {
				return nil, err
			}
		}
	}
	err = insertAudit(ctx, tx, &auditEntry{action: action, jobID: id, operator: operator, reason: reason,
		at: now, priorState: errandtype.JobState(state), replay: j.Replays, details: details})
	return j, err
}

// JobReplay implements [errandstore.JobStore].
func (s *Store) JobReplay(ctx context.Context, p *errandstore.JobReplayParams) (*errandtype.Job, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	var j *errandtype.Job
	err := s.tx(ctx, func(tx *sql.Tx) error {
		var err error
		j, err = s.replay(ctx, tx, s.clock.Now(), p.ID, p.Operator, p.Reason, p.AuditAction(), p.Args, p.ArgsVersion, p.ClearProgress, p.ReplayDetails())
		if err != nil || p.FromStep == nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `DELETE FROM errand_steps WHERE job_seq = ? AND idx >= ?`, j.Seq, *p.FromStep)
		return err
	})
	if err != nil {
		return nil, err
	}
	return j, nil
}

// JobReplayAudit implements [errandstore.JobStore].
func (s *Store) JobReplayAudit(ctx context.Context, p *errandstore.JobReplayAuditParams) ([]errandtype.ReplayRecord, error) {
	rows, err := s.read.QueryContext(ctx, `SELECT id, job_id, replay, prior_state, operator, reason, at
		FROM errand_audit WHERE job_id = ? AND action IN (?, ?, ?) ORDER BY id`,
		p.JobID, errandtype.AuditReplay, errandtype.AuditReplayArgs, errandtype.AuditBulkReplay)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	rs := []errandtype.ReplayRecord{}
	for rows.Next() {
		var r errandtype.ReplayRecord
		var prior string
		var at int64
		if err := rows.Scan(&r.ID, &r.JobID, &r.Replay, &prior, &r.Operator, &r.Reason, &at); err != nil {
			return nil, err
		}
		r.PriorState = errandtype.JobState(prior)
		r.At = fromMicros(at)
		rs = append(rs, r)
	}
	return rs, rows.Err()
}

// JobCancel implements [errandstore.JobStore].
func (s *Store) JobCancel(ctx context.Context, p *errandstore.JobCancelParams) (*errandtype.Job, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	id := p.ID
	var j *errandtype.Job
	err := s.tx(ctx, func(tx *sql.Tx) error {
		now := s.clock.Now()
		var state string
		var holds, pending bool
		err := tx.QueryRowContext(ctx, `SELECT state, ordering_key IS NOT NULL AND ordering_hold = 1, cancel_requested_at IS NOT NULL
			FROM errand_jobs WHERE id = ?`, id).Scan(&state, &holds, &pending)
		if errors.Is(err, sql.ErrNoRows) {
			return errNoSuchJob
		}
		if err != nil {
			return err
		}
		var wrote bool
		j, wrote, err = errandstore.CancelJob(id, errandtype.JobState(state), holds, pending,
			func() (*errandtype.Job, error) {
				return scanJob(tx.QueryRowContext(ctx, `SELECT `+jobColumns+` FROM errand_jobs WHERE id = ?`, id))
			},
			func() (*errandtype.Job, error) {
				// The commit is the notification (see ListenCancels).
				return scanJob(tx.QueryRowContext(ctx, `UPDATE errand_jobs SET cancel_requested_at = ?
					WHERE id = ? RETURNING `+jobColumns, micros(now), id))
			},
			func() (*errandtype.Job, error) {
				return scanJob(tx.QueryRowContext(ctx, `UPDATE errand_jobs SET state = 'cancelled', finished_at = ?
					WHERE id = ? RETURNING `+jobColumns, micros(now), id))
			})
		if err != nil || !wrote {
			return err
		}
		return insertAudit(ctx, tx, &auditEntry{action: errandtype.AuditCancel, jobID: id, operator: p.Operator,
			reason: p.Reason, at: now, priorState: errandtype.JobState(state)})
	})
	if err != nil {
		return nil, err
	}
	return j, nil
}

// AuditList implements [errandstore.OperatorStore].
func (s *Store) AuditList(ctx context.Context, p *errandstore.AuditListParams) ([]errandtype.AuditRecord, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	var where []string
	var args []any
	if p.JobID != "" {
		where, args = append(where, "job_id = ?"), append(args, p.JobID)
	}
	if p.Action != "" {
		where, args = append(where, "action = ?"), append(args, string(p.Action))
	}
	if !p.Since.IsZero() {
		where, args = append(where, "at >= ?"), append(args, micros(p.Since))
	}
	if !p.Until.IsZero() {
		where, args = append(where, "at < ?"), append(args, micros(p.Until))
	}
	if p.BeforeID > 0 {
		where, args = append(where, "id < ?"), append(args, p.BeforeID)
	}
	q := `SELECT id, action, job_id, operator, reason, at, prior_state, replay, details FROM errand_audit`
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, " AND ")
	}
	q += ` ORDER BY id DESC LIMIT ?`
	args = append(args, errandstore.AuditLimit(p.Limit))
	rows, err := s.read.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	defer rows.Close()
	out := []errandtype.AuditRecord{}
	for rows.Next() {
		var r errandtype.AuditRecord
		var action string
		var jobID, prior, details sql.NullString
		var at int64
		if err := rows.Scan(&r.ID, &action, &jobID, &r.Operator, &r.Reason, &at, &prior, &r.Replay, &details); err != nil {
			return nil, fmt.Errorf("audit: %w", err)
		}
		r.Action = errandtype.AuditAction(action)
		r.JobID = nullString(jobID)
		r.PriorState = errandtype.JobState(prior.String)
		r.At = fromMicros(at)
		if details.Valid {
			r.Details = json.RawMessage(details.String)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	return out, nil
}

// replayManyHeldSQL selects the dead steps a bulk replay leaves out, as
// the store's replay refuses them: those of workflows that have enqueued a
// compensation or were rerun. Compensations are replayed.
var replayManyHeldSQL = `(workflow_id IS NOT NULL
		AND substr(id, 1, length(workflow_id) + length('` + errandstore.WorkflowStepJobID("", "") + `')) = workflow_id || '` + errandstore.WorkflowStepJobID("", "") + `'
		AND EXISTS (SELECT 1 FROM errand_workflows w WHERE w.id = workflow_id AND ` + errandstore.WorkflowRefusesReplaySQL("w") + `))`

// JobReplayMany implements [errandstore.OperatorStore].
func (s *Store) JobReplayMany(ctx context.Context, p *errandstore.JobReplayManyParams) ([]*errandtype.Job, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	q, args := dialect.ReplayMany(p, replayManyHeldSQL, "last_error ->> '$.class'")
	if p.DryRun {
		rows, err := s.read.QueryContext(ctx, `SELECT `+jobColumns+q, args...)
		if err != nil {
			return nil, fmt.Errorf("replay dead jobs: %w", err)
		}
		return scanJobs(rows, scanJob)
	}
	out := []*errandtype.Job{}
	err := s.tx(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, `SELECT id`+q, args...)
		if err != nil {
			return err
		}
		jobIDs, err := scanRows(rows, func(row scanner) (id string, err error) { return id, row.Scan(&id) })
		if err != nil {
			return err
		}
		now := s.clock.Now()
		details := errandstore.BulkReplayDetails(p.Bulk, p.Filter)
		out, err = errandstore.ReplayPicked(out, jobIDs, func(id string) (*errandtype.Job, error) {
			return s.replay(ctx, tx, now, id, p.Operator, p.Reason, errandtype.AuditBulkReplay, nil, 0, false, details)
		})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("replay dead jobs: %w", err)
	}
	return out, nil
}

// pruneSQL deletes up to ?3 jobs in state ?1 finished before ?2 of which
// where (from dialect.PruneWhere, its parameters from ?4 on) holds, oldest
// first: one state at a time, so that errand_jobs_finished yields them in
// order and a batch reads only the rows it deletes (and those of open
// workflows and batches it keeps).
func pruneSQL(where string) string {
	return `DELETE FROM errand_jobs WHERE seq IN (
		SELECT j.seq FROM errand_jobs j INDEXED BY errand_jobs_finished
		WHERE j.state = ?1 AND j.finished_at IS NOT NULL AND j.finished_at < ?2 AND ` + where + `
		ORDER BY j.finished_at LIMIT ?3)
	RETURNING state`
}

// finishedWorkflows is errand's finished workflow states as a SQL list, as
// errand_workflows_finished's predicate spells it.
var finishedWorkflows = errandstore.FinishedWorkflowsSQL

// pruneBatchesSQL deletes up to ?2 completed batches that completed before
// ?1 and have no job left: no member (errand_jobs_batch) and no callback job
// (its unique id; NULL, for a batch without one, matches none), oldest first. Each candidate costs index
// seeks only; the open batches are not read.
const pruneBatchesSQL = `DELETE FROM errand_batches WHERE id IN (
		SELECT b.id FROM errand_batches b INDEXED BY errand_batches_completed
		WHERE b.completed_at IS NOT NULL AND b.completed_at < ?1
			AND NOT EXISTS (SELECT 1 FROM errand_jobs j WHERE j.batch_id = b.id)
			AND NOT EXISTS (SELECT 1 FROM errand_jobs j WHERE j.id = b.callback_job_id)
		ORDER BY b.completed_at LIMIT ?2)`

// pruneWorkflowsSQL deletes up to ?2 finished workflows that finished before
// ?1 and have no job left (errand_jobs_workflow), oldest first.
var pruneWorkflowsSQL = `DELETE FROM errand_workflows WHERE id IN (
		SELECT w.id FROM errand_workflows w INDEXED BY errand_workflows_finished
		WHERE w.state IN (` + finishedWorkflows + `) AND w.finished_at < ?1
			AND NOT EXISTS (SELECT 1 FROM errand_jobs j WHERE j.workflow_id = w.id)
		ORDER BY w.finished_at LIMIT ?2)`

// JobPrune implements [errandstore.OperatorStore].
func (s *Store) JobPrune(ctx context.Context, p *errandstore.JobPruneParams) (errandstore.PruneResult, error) {
	if err := p.Validate(); err != nil {
		return errandstore.PruneResult{DryRun: p.DryRun}, err
	}
	now := s.clock.Now()
	return errandstore.RunPrune(p,
		func(r *errandstore.PruneResult) error { return s.pruneDryRun(ctx, p, now, r) },
		func(r *errandstore.PruneResult) error {
			return s.tx(ctx, func(tx *sql.Tx) error { return s.prune(ctx, tx, p, now, r) })
		})
}

// pruneDryRun counts into r what a prune of p at now would delete.
func (s *Store) pruneDryRun(ctx context.Context, p *errandstore.JobPruneParams, now time.Time, r *errandstore.PruneResult) error {
	count := func(q string, args []any) (n int, err error) {
		return n, s.read.QueryRowContext(ctx, q, args...).Scan(&n)
	}
	return dialect.PruneDryRun(p, now, r, sqlbuild.PruneCounts{
		Jobs: func(prunable string, args []any) (int, error) {
			return count(`SELECT count(*) FROM errand_jobs j INDEXED BY errand_jobs_finished
			WHERE j.state = ?1 AND j.finished_at IS NOT NULL AND j.finished_at < ?2 AND `+prunable, args)
		},
		Batches: func(kept string, args []any) (int, error) {
			return count(`SELECT count(*) FROM errand_batches b INDEXED BY errand_batches_completed
		WHERE b.completed_at IS NOT NULL AND b.completed_at < ?1
			AND NOT EXISTS (SELECT 1 FROM errand_jobs j WHERE j.batch_id = b.id AND `+kept+`)
			AND NOT EXISTS (SELECT 1 FROM errand_jobs j WHERE j.id = b.callback_job_id AND `+kept+`)`, args)
		},
		Workflows: func(kept string, args []any) (int, error) {
			return count(`SELECT count(*) FROM errand_workflows w INDEXED BY errand_workflows_finished
		WHERE w.state IN (`+finishedWorkflows+`) AND w.finished_at < ?1
			AND NOT EXISTS (SELECT 1 FROM errand_jobs j WHERE j.workflow_id = w.id AND `+kept+`)`, args)
		},
	})
}

// prune deletes in tx up to p.Limit jobs of p at now, then the batches and
// workflows left without jobs, and counts them into r.
func (s *Store) prune(ctx context.Context, tx *sql.Tx, p *errandstore.JobPruneParams, now time.Time, r *errandstore.PruneResult) error {
	groups := errandstore.PruneGroups(p)
	where, condArgs := dialect.PruneWhere(groups, 4)
	err := r.PruneJobs(groups, p.Limit, func(i int, left int) ([]string, error) {
		g := groups[i]
		rows, err := tx.QueryContext(ctx, pruneSQL(where[i]), append([]any{string(g.State), micros(now.Add(-g.Age)), left}, condArgs[i]...)...)
		if err != nil {
			return nil, err
		}
		return scanRows(rows, func(row scanner) (st string, err error) { return st, row.Scan(&st) })
	})
	if err != nil {
		return err
	}
	cut := micros(errandstore.PruneBatchCutoff(p, now))
	if r.Batches, err = execCount(ctx, tx, pruneBatchesSQL, cut, p.Limit); err != nil {
		return err
	}
	if r.Workflows, err = execCount(ctx, tx, pruneWorkflowsSQL, cut, p.Limit); err != nil {
		return err
	}
	for _, q := range []string{pruneStepsSQL, pruneSignalsSQL, pruneEventsSQL, pruneStreamsSQL} {
		if _, err := tx.ExecContext(ctx, q, p.Limit); err != nil {
			return err
		}
	}
	if r.Total() == 0 && r.Batches == 0 && r.Workflows == 0 {
		return nil
	}
	return insertAudit(ctx, tx, &auditEntry{action: errandtype.AuditPrune, operator: p.Operator, reason: p.Reason,
		at: now, details: errandstore.PruneDetails(p, *r)})
}

// pruneStepsSQL deletes the steps of up to $1 jobs that are gone: pruned,
// or deleted on success.
const pruneStepsSQL = `DELETE FROM errand_steps WHERE job_seq IN (
	SELECT DISTINCT s.job_seq FROM errand_steps s
	WHERE NOT EXISTS (SELECT 1 FROM errand_jobs j WHERE j.seq = s.job_seq) LIMIT ?)`

// pruneSignalsSQL deletes up to $1 signals of jobs that are gone.
const pruneSignalsSQL = `DELETE FROM errand_signals WHERE id IN (
	SELECT g.id FROM errand_signals g
	WHERE NOT EXISTS (SELECT 1 FROM errand_jobs j WHERE j.seq = g.job_seq) LIMIT ?)`

// pruneEventsSQL deletes the events of up to $1 jobs that are gone.
const pruneEventsSQL = `DELETE FROM errand_events WHERE job_seq IN (
	SELECT DISTINCT e.job_seq FROM errand_events e
	WHERE NOT EXISTS (SELECT 1 FROM errand_jobs j WHERE j.seq = e.job_seq) LIMIT ?)`

// pruneStreamsSQL deletes the streams of up to $1 jobs that are gone.
const pruneStreamsSQL = `DELETE FROM errand_streams WHERE job_seq IN (
	SELECT DISTINCT c.job_seq FROM errand_streams c
	WHERE NOT EXISTS (SELECT 1 FROM errand_jobs j WHERE j.seq = c.job_seq) LIMIT ?)`

// execCount runs q in tx and returns how many rows it changed.
func execCount(ctx context.Context, tx *sql.Tx, q string, args ...any) (int, error) {
	res, err := tx.ExecContext(ctx, q, args...)
	if err != nil {
		return 0, err
	}
	n, err := res.RowsAffected()
	return int(n), err
}
