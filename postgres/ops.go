package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
	"github.com/errandhq/errand/internal/sqlbuild"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/jackc/pgx/v5"
)

// Operators' actions: replays, cancels, the audit that records them.

// auditEntry is one record to append to errand_audit, at the statement's
// {now}.
type auditEntry struct {
	action     errandtype.AuditAction
	jobID      string // "" for none
	operator   string
	reason     string
	priorState errandtype.JobState
	replay     int
	details    json.RawMessage
}

// insertAudit appends a record; now is the operation's $1.
func (s *Store) insertAudit(ctx context.Context, tx pgx.Tx, now any, a *auditEntry) error {
	var details *string
	if a.details != nil {
		d := string(a.details)
		details = &d
	}
	_, err := tx.Exec(ctx, s.sql(`INSERT INTO {audit}
			(action, job_id, operator, reason, at, prior_state, replay, details)
		VALUES ($2, $3, $4, $5, {now}, $6, $7, $8::jsonb)`), now,
		string(a.action), nullIfEmpty(a.jobID), a.operator, a.reason,
		nullIfEmpty(string(a.priorState)), a.replay, details)
	return err
}

// replaySQL starts a new delivery cycle for job $2 at {now}, replacing its
// args_version with $4 when that is positive and
// args with $3 when that is not NULL, and clearing its progress when $5.
const replaySQL = `UPDATE {jobs} SET
		state = 'queued', attempt = 0, available_at = {now}, replays = replays + 1,
		deadline = CASE WHEN max_age_us > 0 THEN {now} + max_age_us * interval '1 microsecond' END, start_by = NULL,
		priority = coalesce(base_priority, priority), base_priority = NULL,
		lease_token = NULL, lease_until = NULL, finished_at = NULL, cancel_requested_at = NULL,
		progress = CASE WHEN $5::boolean THEN NULL ELSE progress END,
		args = coalesce($3::jsonb, args),
		args_version = CASE WHEN $4::int > 0 THEN $4::int ELSE args_version END
	WHERE id = $2 RETURNING ` + jobColumns

// uniqueHolderSQL finds another job holding a unique key in a window.
var uniqueHolderSQL = errandstore.UniqueReplayHolderSQL("{jobs}", pgParam)

// isUniqueViolation reports whether err is a violation of the unique
// index named index.
func isUniqueViolation(err error, index string) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "23505" && pgErr.ConstraintName == index
}

// replay replays job id inside tx and audits it as action, with details
// (nil for none). newArgs, when not nil, replaces the job's args, and the
// details become the old and new args.
func (s *Store) replay(ctx context.Context, tx pgx.Tx, now any, id, operator, reason string,
	action errandtype.AuditAction, newArgs json.RawMessage, newVersion int, clearProgress bool, details json.RawMessage) (*errandtype.Job, error) {
	if !errandtype.StorableText(id) {
		return nil, errandtype.ErrNotFound
	}
	var state, oldArgs string
	var ukey, workflowID *string
	var ustates, uwindow int64
	err := tx.QueryRow(ctx, s.sql(`SELECT state, args::text, unique_key, unique_states, unique_window_us, workflow_id
		FROM {jobs} WHERE id = $1 FOR UPDATE`), id).Scan(&state, &oldArgs, &ukey, &ustates, &uwindow, &workflowID)
	if isNoRows(err) {
		return nil, errandtype.ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	if err := errandstore.CheckReplay(id, errandtype.JobState(state)); err != nil {
		return nil, err
	}
	if err := s.checkReplayWorkflow(ctx, tx, id, errandtype.JobState(state), workflowID); err != nil {
		return nil, err
	}
	takesKey := ukey != nil && errandstore.ReplayTakesKey(errandtype.UniqueScope(ustates), errandtype.JobState(state))
	if takesKey {
		if err := s.checkReplayKey(ctx, tx, id, *ukey, uwindow); err != nil {
			return nil, err
		}
	}
	var argsArg *string
	if newArgs != nil {
		a := string(newArgs)
		argsArg = &a
		details = errandstore.ReplayArgsDetails(json.RawMessage(oldArgs), newArgs)
	}
	// A job that enqueued the key since the check above, in a transaction
	// that committed meanwhile, makes the update violate the unique index:
	// the same refusal, its holder unnamed.
	j, err := scanJob(tx.QueryRow(ctx, s.sql(replaySQL), now, id, argsArg, newVersion, clearProgress))
	if takesKey && isUniqueViolation(err, "errand_jobs_unique") {
		return nil, &errandtype.UniqueConflictError{ID: id, Key: *ukey}
	}
	if err != nil {
		return nil, err
	}
	if clearProgress {
		if _, err := tx.Exec(ctx, s.sql(`WITH st AS (DELETE FROM {steps} WHERE job_seq = $1),
			ev AS (DELETE FROM {events} WHERE job_seq = $1),
			sm AS (DELETE FROM {streams} WHERE job_seq = $1)
			DELETE FROM {signals} WHERE job_seq = $1`), j.Seq); err != nil {
			return nil, err
		}
	}
	err = s.insertAudit(ctx, tx, now, &auditEntry{action: action, jobID: id, operator: operator, reason: reason,
		priorState: errandtype.JobState(state), replay: j.Replays, details: details})
	return j, err
}

// checkReplayWorkflow refuses the replay of job id, in state st, when its
// workflow holds it (see [errandstore.CheckReplayInWorkflow]).
func (s *Store) checkReplayWorkflow(ctx context.Context, tx pgx.Tx, id string, st errandtype.JobState, workflowID *string) error {
	if !errandstore.ReplayHeldByWorkflow(id, workflowID) {
		return nil
	}
	// FOR SHARE waits for an advance under way (it locks the row FOR
	// UPDATE) and holds off the next until the replay commits: an
	// advance never comes between this check and the replay.
	ws, err := queryWorkflows(ctx, pgxQuerier{tx}, s.workflowSQL(s.own, `SELECT `+workflowColumns+` FROM {workflows} WHERE id = $1 FOR SHARE`), *workflowID)
	if err != nil || len(ws) != 1 {
		return err // none: retention deleted the workflow, and nothing holds the step
	}
	return errandstore.CheckReplayInWorkflow(id, st, ws[0])
}

// checkReplayKey refuses the replay of job id when another job holds its
// unique key in window.
func (s *Store) checkReplayKey(ctx context.Context, tx pgx.Tx, id, key string, window int64) error {
	var holder string
	err := tx.QueryRow(ctx, s.sql(uniqueHolderSQL), key, window, id).Scan(&holder)
	switch {
	case err == nil:
		return &errandtype.UniqueConflictError{ID: id, Key: key, HeldBy: holder}
	case !isNoRows(err):
		return err
	}
	return nil
}

// JobReplay implements [errandstore.JobStore].
func (s *Store) JobReplay(ctx context.Context, p *errandstore.JobReplayParams) (*errandtype.Job, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	var j *errandtype.Job
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		j, err = s.replay(ctx, tx, s.nowArg(), p.ID, p.Operator, p.Reason, p.AuditAction(), p.Args, p.ArgsVersion, p.ClearProgress, p.ReplayDetails())
		if err != nil || p.FromStep == nil {
			return err
		}
		_, err = tx.Exec(ctx, s.sql(`DELETE FROM {steps} WHERE job_seq = $1 AND idx >= $2`), j.Seq, *p.FromStep)
		return err
	})
	if err != nil {
		return nil, badValue(err)
	}
	return j, nil
}

// JobReplayAudit implements [errandstore.JobStore].
func (s *Store) JobReplayAudit(ctx context.Context, p *errandstore.JobReplayAuditParams) ([]errandtype.ReplayRecord, error) {
	jobID := p.JobID
	if !errandtype.StorableText(jobID) {
		return []errandtype.ReplayRecord{}, nil
	}
	rows, err := s.pool.Query(ctx, s.sql(`SELECT id, job_id, replay, prior_state, operator, reason, at
		FROM {audit} WHERE job_id = $1 AND action IN ($2, $3, $4) ORDER BY id`), jobID,
		string(errandtype.AuditReplay), string(errandtype.AuditReplayArgs), string(errandtype.AuditBulkReplay))
	if err != nil {
		return nil, fmt.Errorf("replay audit of job %s: %w", jobID, err)
	}
	out := []errandtype.ReplayRecord{}
	var r errandtype.ReplayRecord
	var prior string
	_, err = pgx.ForEachRow(rows, []any{&r.ID, &r.JobID, &r.Replay, &prior, &r.Operator, &r.Reason, &r.At}, func() error {
		r.PriorState = errandtype.JobState(prior)
		r.At = r.At.UTC()
		out = append(out, r)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("replay audit of job %s: %w", jobID, err)
	}
	return out, nil
}

// JobCancel implements [errandstore.JobStore].
func (s *Store) JobCancel(ctx context.Context, p *errandstore.JobCancelParams) (*errandtype.Job, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	id := p.ID
	var j *errandtype.Job
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if !errandtype.StorableText(id) {
			return errandtype.ErrNotFound
		}
		now := s.nowArg()
		var state string
		var holds, pending bool
		err := tx.QueryRow(ctx, s.sql(`SELECT state, ordering_key IS NOT NULL AND ordering_hold = 1, cancel_requested_at IS NOT NULL
			FROM {jobs} WHERE id = $1 FOR UPDATE`), id).Scan(&state, &holds, &pending)
		if isNoRows(err) {
			return errandtype.ErrNotFound
		}
		if err != nil {
			return err
		}
		var wrote bool
		j, wrote, err = errandstore.CancelJob(id, errandtype.JobState(state), holds, pending,
			func() (*errandtype.Job, error) {
				return scanJob(tx.QueryRow(ctx, s.sql(`SELECT `+jobColumns+` FROM {jobs} WHERE id = $1`), id))
			},
			func() (*errandtype.Job, error) {
				// The notification goes inside the transaction, so it is
				// delivered exactly when the request commits; cancels are
				// rare, so the commit lock a NOTIFY takes costs nothing
				// that matters.
				j, err := scanJob(tx.QueryRow(ctx, s.sql(`UPDATE {jobs} SET cancel_requested_at = {now}
					WHERE id = $2 RETURNING `+jobColumns), now, id))
				if err != nil {
					return nil, err
				}
				_, err = tx.Exec(ctx, `SELECT pg_notify($1, $2)`, cancelChannel(s.name), id)
				return j, err
			},
			func() (*errandtype.Job, error) {
				return scanJob(tx.QueryRow(ctx, s.sql(`UPDATE {jobs} SET state = 'cancelled', finished_at = {now}
					WHERE id = $2 RETURNING `+jobColumns), now, id))
			})
		if err != nil || !wrote {
			return err
		}
		return s.insertAudit(ctx, tx, now, &auditEntry{action: errandtype.AuditCancel, jobID: id,
			operator: p.Operator, reason: p.Reason, priorState: errandtype.JobState(state)})
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
	out := []errandtype.AuditRecord{}
	if !errandtype.StorableText(p.JobID) || !errandtype.StorableText(string(p.Action)) {
		return out, nil // no record has such a job id or action
	}
	var where []string
	args := []any{}
	add := func(cond string, v any) {
		args = append(args, v)
		where = append(where, strings.ReplaceAll(cond, "?", "$"+strconv.Itoa(len(args))))
	}
	if p.JobID != "" {
		add("job_id = ?", p.JobID)
	}
	if p.Action != "" {
		add("action = ?", string(p.Action))
	}
	if !p.Since.IsZero() {
		add("at >= ?", micro(p.Since))
	}
	if !p.Until.IsZero() {
		add("at < ?", micro(p.Until))
	}
	if p.BeforeID > 0 {
		add("id < ?", p.BeforeID)
	}
	q := `SELECT id, action, job_id, operator, reason, at, coalesce(prior_state, ''), replay, details::text FROM {audit}`
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, " AND ")
	}
	args = append(args, errandstore.AuditLimit(p.Limit))
	q += ` ORDER BY id DESC LIMIT $` + strconv.Itoa(len(args))
	rows, err := s.pool.Query(ctx, s.sql(q), args...)
	if err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	var r errandtype.AuditRecord
	var action, prior string
	var details *string
	_, err = pgx.ForEachRow(rows, []any{&r.ID, &action, &r.JobID, &r.Operator, &r.Reason, &r.At, &prior, &r.Replay, &details}, func() error {
		rec := r
		rec.Action = errandtype.AuditAction(action)
		rec.PriorState = errandtype.JobState(prior)
		rec.At = r.At.UTC()
		if r.JobID != nil {
			id := *r.JobID
			rec.JobID = &id
		}
		if details != nil {
			rec.Details = json.RawMessage(*details)
		}
		out = append(out, rec)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	return out, nil
}

// replayManyHeldSQL selects the dead steps a bulk replay leaves out, as
// the store's replay refuses them: those of workflows that have enqueued a
// compensation or were rerun. Compensations are replayed.
var replayManyHeldSQL = `(workflow_id IS NOT NULL
		AND starts_with(id, workflow_id || '` + errandstore.WorkflowStepJobID("", "") + `')
		AND EXISTS (SELECT 1 FROM {workflows} w WHERE w.id = workflow_id AND ` + errandstore.WorkflowRefusesReplaySQL("w") + `))`

// JobReplayMany implements [errandstore.OperatorStore].
func (s *Store) JobReplayMany(ctx context.Context, p *errandstore.JobReplayManyParams) ([]*errandtype.Job, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	q, args := dialect.ReplayMany(p, replayManyHeldSQL, "last_error ->> 'class'")
	q = strings.ReplaceAll(q, "{workflows}", s.table("errand_workflows"))
	if p.DryRun {
		rows, err := s.pool.Query(ctx, s.sql(`SELECT `+jobColumns+q), args...)
		if err != nil {
			return nil, fmt.Errorf("replay dead jobs: %w", err)
		}
		js, err := scanJobs(rows, jobScanner())
		if err != nil {
			return nil, fmt.Errorf("replay dead jobs: %w", err)
		}
		return js, nil
	}
	out := []*errandtype.Job{}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		now := s.nowArg()
		details := errandstore.BulkReplayDetails(p.Bulk, p.Filter)
		// A step whose workflow began compensating after the select is
		// held, as the select would now find it, and skipped; the page is
		// filled from the rows after it, since a short page tells the
		// client there are no more.
		after := p.AfterSeq
		for {
			want := p.Limit - len(out)
			args[0], args[len(args)-1] = after, want
			rows, err := tx.Query(ctx, s.sql(`SELECT id, seq`+q+` FOR UPDATE SKIP LOCKED`), args...)
			if err != nil {
				return err
			}
			type picked struct {
				ID  string
				Seq int64
			}
			ps, err := pgx.CollectRows(rows, pgx.RowToStructByPos[picked])
			if err != nil {
				return err
			}
			ids := make([]string, len(ps))
			for i, pk := range ps {
				ids[i], after = pk.ID, pk.Seq
			}
			out, err = errandstore.ReplayPicked(out, ids, func(id string) (*errandtype.Job, error) {
				return s.replay(ctx, tx, now, id, p.Operator, p.Reason, errandtype.AuditBulkReplay, nil, 0, false, details)
			})
			if err != nil {
				return err
			}
			if len(ps) < want || len(out) == p.Limit {
				return nil
			}
		}
	})
	if err != nil {
		return nil, fmt.Errorf("replay dead jobs: %w", err)
	}
	return out, nil
}

// pruneSQL deletes up to $3 jobs in state $1 finished before $2 of which
// where (from dialect.PruneWhere, its parameters from $4 on) holds, oldest
// first: one state at a time, so that errand_jobs_finished yields them in
// order and a batch reads only the rows it deletes (and those of open
// workflows and batches it keeps). A row another transaction holds (a
// replay under way) is skipped, not waited for. The victims are chosen
// once, in a materialised CTE: as a subquery of "seq IN (...)" the planner
// may run the LIMIT more than once and delete more than the batch.
func (s *Store) pruneSQL(where string) string {
	return s.workflowSQL(s.own, s.batchSQL(s.own, `WITH victims AS MATERIALIZED (
		SELECT j.seq FROM {jobs} j
		WHERE j.state = $1 AND j.finished_at IS NOT NULL AND j.finished_at < $2 AND `+where+`
		ORDER BY j.finished_at LIMIT $3 FOR UPDATE OF j SKIP LOCKED)
	DELETE FROM {jobs} j USING victims v WHERE j.seq = v.seq AND j.state = $1
	RETURNING j.state`))
}

// finishedWorkflows is errand's finished workflow states as a SQL list, as
// errand_workflows_finished's predicate spells it.
var finishedWorkflows = errandstore.FinishedWorkflowsSQL

// pruneBatchesSQL deletes up to $2 completed batches that completed before
// $1 and have no job left: no member (errand_jobs_batch) and no callback job
// (its unique id; NULL, for a batch without one, matches none), oldest
// first, from errand_batches_completed.
// Each candidate costs index seeks only; the open batches are not read. A
// batch another transaction holds is skipped, not waited for.
const pruneBatchesSQL = `WITH victims AS MATERIALIZED (
		SELECT b.id FROM {batches} b
		WHERE b.completed_at IS NOT NULL AND b.completed_at < $1
			AND NOT EXISTS (SELECT 1 FROM {jobs} j WHERE j.batch_id = b.id)
			AND NOT EXISTS (SELECT 1 FROM {jobs} j WHERE j.id = b.callback_job_id)
		ORDER BY b.completed_at LIMIT $2 FOR UPDATE SKIP LOCKED)
	DELETE FROM {batches} b USING victims v WHERE b.id = v.id`

// pruneWorkflowsSQL deletes up to $2 finished workflows that finished
// before $1 and have no job left (errand_jobs_workflow), oldest first, from
// errand_workflows_finished. A workflow being advanced (its row locked) is
// skipped; the state is checked again on the locked row.
var pruneWorkflowsSQL = `WITH victims AS MATERIALIZED (
		SELECT w.id FROM {workflows} w
		WHERE w.state IN (` + finishedWorkflows + `) AND w.finished_at < $1
			AND NOT EXISTS (SELECT 1 FROM {jobs} j WHERE j.workflow_id = w.id)
		ORDER BY w.finished_at LIMIT $2 FOR UPDATE SKIP LOCKED)
	DELETE FROM {workflows} w USING victims v WHERE w.id = v.id AND w.state IN (` + finishedWorkflows + `)`

// pruneStepsSQL deletes the steps of up to $1 jobs that are gone: pruned,
// or deleted on success.
const pruneStepsSQL = `DELETE FROM {steps} WHERE job_seq IN (
	SELECT DISTINCT s.job_seq FROM {steps} s
	WHERE NOT EXISTS (SELECT 1 FROM {jobs} j WHERE j.seq = s.job_seq) LIMIT $1)`

// pruneSignalsSQL deletes up to $1 signals of jobs that are gone.
const pruneSignalsSQL = `DELETE FROM {signals} WHERE id IN (
	SELECT g.id FROM {signals} g
	WHERE NOT EXISTS (SELECT 1 FROM {jobs} j WHERE j.seq = g.job_seq) LIMIT $1)`

// pruneEventsSQL deletes the events of up to $1 jobs that are gone.
const pruneEventsSQL = `DELETE FROM {events} WHERE job_seq IN (
	SELECT DISTINCT e.job_seq FROM {events} e
	WHERE NOT EXISTS (SELECT 1 FROM {jobs} j WHERE j.seq = e.job_seq) LIMIT $1)`

// pruneStreamsSQL deletes the streams of up to $1 jobs that are gone.
const pruneStreamsSQL = `DELETE FROM {streams} WHERE job_seq IN (
	SELECT DISTINCT c.job_seq FROM {streams} c
	WHERE NOT EXISTS (SELECT 1 FROM {jobs} j WHERE j.seq = c.job_seq) LIMIT $1)`

// pruneTx runs fn, one batch of a prune, in a transaction that does not
// sort. Each statement of a batch takes the oldest rows of an index in its
// order up to the batch's size; on a table that autovacuum has not yet
// analyzed (after a bulk load) the planner took the 62,000 succeeded jobs
// of 100,000 for 56, and chose to read them all and sort them, for every
// batch. Without sorting, walking the index is the only plan.
func (s *Store) pruneTx(ctx context.Context, fn func(pgx.Tx) error) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SET LOCAL enable_sort = off"); err != nil {
			return err
		}
		return fn(tx)
	})
}

// JobPrune implements [errandstore.OperatorStore].
func (s *Store) JobPrune(ctx context.Context, p *errandstore.JobPruneParams) (errandstore.PruneResult, error) {
	r := errandstore.PruneResult{DryRun: p.DryRun}
	if err := p.Validate(); err != nil {
		return r, err
	}
	now, err := s.Now(ctx)
	if err != nil {
		return r, fmt.Errorf("prune: %w", err)
	}
	return errandstore.RunPrune(p,
		func(r *errandstore.PruneResult) error { return s.pruneDryRun(ctx, p, now, r) },
		func(r *errandstore.PruneResult) error {
			return s.pruneTx(ctx, func(tx pgx.Tx) error { return s.prune(ctx, tx, p, now, r) })
		})
}

// pruneDryRun counts into r what a prune of p at now would delete.
func (s *Store) pruneDryRun(ctx context.Context, p *errandstore.JobPruneParams, now time.Time, r *errandstore.PruneResult) error {
	count := func(q string, args []any) (n int, err error) {
		return n, s.pool.QueryRow(ctx, s.workflowSQL(s.own, s.batchSQL(s.own, q)), args...).Scan(&n)
	}
	return dialect.PruneDryRun(p, now, r, sqlbuild.PruneCounts{
		Jobs: func(prunable string, args []any) (int, error) {
			return count(`SELECT count(*) FROM {jobs} j
			WHERE j.state = $1 AND j.finished_at IS NOT NULL AND j.finished_at < $2 AND `+prunable, args)
		},
		Batches: func(kept string, args []any) (int, error) {
			return count(`SELECT count(*) FROM {batches} b
		WHERE b.completed_at IS NOT NULL AND b.completed_at < $1
			AND NOT EXISTS (SELECT 1 FROM {jobs} j WHERE j.batch_id = b.id AND `+kept+`)
			AND NOT EXISTS (SELECT 1 FROM {jobs} j WHERE j.id = b.callback_job_id AND `+kept+`)`, args)
		},
		Workflows: func(kept string, args []any) (int, error) {
			return count(`SELECT count(*) FROM {workflows} w
		WHERE w.state IN (`+finishedWorkflows+`) AND w.finished_at < $1
			AND NOT EXISTS (SELECT 1 FROM {jobs} j WHERE j.workflow_id = w.id AND `+kept+`)`, args)
		},
	})
}

// prune deletes in tx up to p.Limit jobs of p at now, then the batches and
// workflows left without jobs, and counts them into r.
func (s *Store) prune(ctx context.Context, tx pgx.Tx, p *errandstore.JobPruneParams, now time.Time, r *errandstore.PruneResult) error {
	groups := errandstore.PruneGroups(p)
	where, condArgs := dialect.PruneWhere(groups, 4)
	err := r.PruneJobs(groups, p.Limit, func(i int, left int) ([]string, error) {
		g := groups[i]
		rows, err := tx.Query(ctx, s.pruneSQL(where[i]), append([]any{string(g.State), micro(now.Add(-g.Age)), left}, condArgs[i]...)...)
		if err != nil {
			return nil, err
		}
		return pgx.CollectRows(rows, pgx.RowTo[string])
	})
	if err != nil {
		return err
	}
	cut := micro(errandstore.PruneBatchCutoff(p, now))
	tag, err := tx.Exec(ctx, s.batchSQL(s.own, pruneBatchesSQL), cut, p.Limit)
	if err != nil {
		return err
	}
	r.Batches = int(tag.RowsAffected())
	if tag, err = tx.Exec(ctx, s.workflowSQL(s.own, pruneWorkflowsSQL), cut, p.Limit); err != nil {
		return err
	}
	r.Workflows = int(tag.RowsAffected())
	for _, q := range []string{pruneStepsSQL, pruneSignalsSQL, pruneEventsSQL, pruneStreamsSQL} {
		if _, err = tx.Exec(ctx, s.sql(q), p.Limit); err != nil {
			return err
		}
	}
	if r.Total() == 0 && r.Batches == 0 && r.Workflows == 0 {
		return nil
	}
	return s.insertAudit(ctx, tx, s.nowArg(), &auditEntry{action: errandtype.AuditPrune, operator: p.Operator,
		reason: p.Reason, details: errandstore.PruneDetails(p, *r)})
}
