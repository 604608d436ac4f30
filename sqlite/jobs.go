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

const jobColumns = `seq, id, queue, kind, args, args_version, priority, state, attempt, max_attempts,
	backoff_base_us, backoff_max_us, available_at, deadline, lease_token, lease_until, lease_owner,
	unique_key, ordering_key, progress, created_at, attempted_at, finished_at, last_error, errors,
	replays, tags, unique_states, unique_window_us, ordering_hold, cancel_requested_at, fairness_key, batch_id,
	workflow_id, output, metadata, start_by, base_priority`

// keyedColumns are jobColumns and the debounce columns, which only
// operators' reads and debounced enqueues read. scanKeyedJob reads them.
const keyedColumns = jobColumns + `, debounce_key, absorbed`

// readColumns are what operators' reads (JobGet, JobList) select from the
// jobs table aliased j: keyedColumns and HeldBy. scanReadJob reads them.
var readColumns = keyedColumns + `, ` + errandstore.HeldBySQL("errand_jobs")

// waiting is errandstore.WaitingStates as a SQL list, for IN (...).
var waiting = errandstore.SQLStates(errandstore.WaitingStates)

type scanner = rowscan.Row

// scanJobs reads every row of rows with scan (scanJob or scanReadJob) and
// closes rows.
func scanJobs(rows *sql.Rows, scan func(scanner) (*errandtype.Job, error)) ([]*errandtype.Job, error) {
	defer rows.Close()
	return rowscan.All(rows, scan)
}

// scanReadJob reads a row of readColumns.
func scanReadJob(row scanner) (*errandtype.Job, error) {
	var held, dkey sql.NullString
	var absorbed int
	j, err := scanJobAnd(row, &dkey, &absorbed, &held)
	if err != nil {
		return nil, err
	}
	j.DebounceKey, j.Absorbed, j.HeldBy = nullString(dkey), absorbed, nullString(held)
	return j, nil
}

// scanKeyedJob reads a row of keyedColumns.
func scanKeyedJob(row scanner) (*errandtype.Job, error) {
	var dkey sql.NullString
	var absorbed int
	j, err := scanJobAnd(row, &dkey, &absorbed)
	if err != nil {
		return nil, err
	}
	j.DebounceKey, j.Absorbed = nullString(dkey), absorbed
	return j, nil
}

// scanJob reads a row of jobColumns.
func scanJob(row scanner) (*errandtype.Job, error) { return scanJobAnd(row) }

// scanJobAnd reads a row of jobColumns and the extra columns after them.
// Times are microseconds since the epoch.
func scanJobAnd(row scanner, extra ...any) (*errandtype.Job, error) {
	var (
		j                                     errandtype.Job
		c                                     errandtype.JobColumns
		avail, crt                            int64
		deadline, leaseUntil, attempted       sql.NullInt64
		finished, cancelReq, startBy          sql.NullInt64
		token, owner, ukey, okey, fkey, batch sql.NullString
		workflow, output                      sql.NullString
		ustates, uwindow, ohold               int64
		basePrio                              sql.NullInt32
	)
	err := row.Scan(append([]any{&j.Seq, &j.ID, &j.Queue, &j.Kind, &c.Args, &j.ArgsVersion, &j.Priority, &c.State,
		&j.Attempt, &j.MaxAttempts, &c.BackoffBaseUS, &c.BackoffMaxUS, &avail, &deadline, &token, &leaseUntil,
		&owner, &ukey, &okey, &c.Progress, &crt, &attempted, &finished, &c.LastError, &c.Errors, &j.Replays, &c.Tags,
		&ustates, &uwindow, &ohold, &cancelReq, &fkey, &batch, &workflow, &output, &c.Metadata, &startBy, &basePrio},
		extra...)...)
	if err != nil {
		return nil, err
	}
	j.AvailableAt, j.CreatedAt = fromMicros(avail), fromMicros(crt)
	j.Deadline, j.LeaseUntil = nullMicros(deadline), nullMicros(leaseUntil)
	j.AttemptedAt, j.FinishedAt = nullMicros(attempted), nullMicros(finished)
	j.CancelRequestedAt, j.StartBy = nullMicros(cancelReq), nullMicros(startBy)
	if basePrio.Valid {
		p := int(basePrio.Int32)
		j.BasePriority = &p
	}
	j.LeaseToken, j.LeaseOwner = nullString(token), nullString(owner)
	j.UniqueKey, j.OrderingKey, j.FairnessKey = nullString(ukey), nullString(okey), nullString(fkey)
	j.SetUniqueColumns(ustates, uwindow)
	j.OrderingHold = ohold == 1
	j.BatchID, j.WorkflowID = nullString(batch), nullString(workflow)
	if output.Valid {
		j.Output = json.RawMessage(output.String)
	}
	if err := j.DecodeColumns(&c); err != nil {
		return nil, err
	}
	return &j, nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func nullIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// JobInsertMany implements [errandstore.JobStore].
func (s *Store) JobInsertMany(ctx context.Context, p *errandstore.JobInsertManyParams) ([]errandstore.JobInsertResult, error) {
	var rs []errandstore.JobInsertResult
	err := s.tx(ctx, func(tx *sql.Tx) error {
		var err error
		if errandstore.HasDebounce(p.Jobs) {
			rs, err = errandstore.InsertKeyed(ctx, keyedTx{s, tx}, p.Jobs)
			return err
		}
		rs, err = s.insertWith(ctx, s.ownStmts(tx), p.Jobs)
		return err
	})
	return rs, err
}

// JobInsertManyTx implements [errandstore.TxStore]. tx is a transaction on
// [Store.DB].
func (s *Store) JobInsertManyTx(ctx context.Context, tx *sql.Tx, p *errandstore.JobInsertManyParams) ([]errandstore.JobInsertResult, error) {
	if errandstore.HasDebounce(p.Jobs) {
		return errandstore.InsertKeyed(ctx, keyedTx{s, tx}, p.Jobs)
	}
	return s.insert(ctx, tx, p.Jobs)
}

// insertRowsSQL inserts rows jobs in one statement, skipping a job whose
// id or unique key is taken (by an earlier job of the same statement too):
// the unique index errand_jobs_unique holds only the rows that hold their
// key, so a conflict there is a held key.
// Each row's parameters are the columns it names but state. Rows are
// inserted in the order given, so seq follows the batch.
func insertRowsSQL(rows int) string {
	const row = `(?, ?, ?, ?, ?, ?, 'queued', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	return `INSERT INTO errand_jobs (id, queue, kind, args, args_version, priority,
	state, max_attempts, backoff_base_us, backoff_max_us, max_age_us, available_at, deadline,
	unique_key, ordering_key, created_at, tags, unique_states, unique_window_us, ordering_hold, fairness_key, metadata,
	debounce_key, start_by)
	VALUES ` + strings.Repeat(row+", ", rows-1) + row + `
	ON CONFLICT DO NOTHING
	RETURNING ` + jobColumns
}

// insertParamsPerRow is the number of parameters of one row of
// insertRowsSQL.
const insertParamsPerRow = 23

// insertChunkRows is how many jobs one statement of a batch inserts: a
// statement per job cost a VM start, a statement journal and a round
// through database/sql for each. 100 rows (2,300 parameters, far below
// SQLite's limit of 32,766) is one statement for a small batch and ten for
// a batch of 1,000.
const insertChunkRows = 100

// duplicateSQL finds the job that holds an insert's id or unique key,
// preferring the id match. Its parameters are the id, the unique key and
// the unique window. Each arm reads one index: the id's, or
// errand_jobs_unique, whose predicate the second arm repeats.
var duplicateSQL = `SELECT ` + jobColumns + ` FROM (
	SELECT 0 AS pref, * FROM errand_jobs WHERE id = ?1
	UNION ALL
	SELECT 1 AS pref, * FROM errand_jobs WHERE unique_key = ?2 AND unique_window_us = ?3 AND ` + errandstore.UniqueHeldSQL() + `
	) ORDER BY pref LIMIT 1`

// insert inserts params insertChunkRows jobs per statement, each distinct
// statement prepared once per batch, then finds the job that holds the id
// or unique key of each job that was not inserted.
func (s *Store) insert(ctx context.Context, tx *sql.Tx, params []*errandstore.JobInsertParams) ([]errandstore.JobInsertResult, error) {
	return s.insertWith(ctx, newStmts(tx), params)
}

// insertWith is insert with the statements of st, which it closes.
func (s *Store) insertWith(ctx context.Context, st *stmts, params []*errandstore.JobInsertParams) ([]errandstore.JobInsertResult, error) {
	defer st.Close()
	now := s.clock.Now()
	args, err := insertArgs(params, now)
	if err != nil {
		return nil, err
	}
	// Made here, where it does not escape: a batch of one job allocates
	// no map.
	inserted := make(map[string]*errandtype.Job, len(params))
	if err := insertChunks(ctx, st, args, len(params), inserted); err != nil {
		return nil, fmt.Errorf("insert jobs: %w", err)
	}
	rs := make([]errandstore.JobInsertResult, len(params))
	for i, p := range params {
		if j, ok := inserted[p.ID]; ok && errandstore.InsertedFor(j, p) {
			rs[i] = errandstore.JobInsertResult{Job: j}
			delete(inserted, p.ID) // a later job with this id is its duplicate
			continue
		}
		j, err := findDuplicate(ctx, st, p, now)
		if err != nil {
			return nil, fmt.Errorf("insert job %s: find duplicate: %w", p.ID, err)
		}
		rs[i] = errandstore.JobInsertResult{Job: j, Duplicate: true}
	}
	return rs, nil
}

// insertArgs are the parameters of insertRowsSQL for params inserted at
// now, insertParamsPerRow per job. Every job is checked before any is
// written, so that a bad job in a caller's transaction leaves nothing of
// its batch behind.
func insertArgs(params []*errandstore.JobInsertParams, now time.Time) ([]any, error) {
	args := make([]any, 0, len(params)*insertParamsPerRow)
	for _, p := range params {
		if err := p.Validate(); err != nil {
			return nil, err
		}
		avail := now.Add(p.Delay)
		if !p.RunAt.IsZero() {
			avail = p.RunAt
		}
		var deadline, startBy any
		if d := errandstore.FirstDeadline(now, p.MaxAge, p.StartBy); d != nil {
			deadline = micros(*d)
		}
		if !p.StartBy.IsZero() {
			startBy = micros(p.StartBy)
		}
		tagsJSON, err := p.TagsJSON()
		if err != nil {
			return nil, err
		}
		args = append(args, p.ID, p.Queue, p.Kind, string(p.Args), p.ArgsVersion, p.Priority, p.MaxAttempts,
			p.BackoffBase.Microseconds(), p.BackoffMax.Microseconds(), p.MaxAge.Microseconds(),
			micros(avail), deadline, nullIfEmpty(p.UniqueKey), nullIfEmpty(p.OrderingKey),
			micros(now), tagsJSON, p.UniqueScopeColumn(), p.UniqueWindowColumn(now), boolInt(p.OrderingHold), nullIfEmpty(p.FairnessKey),
			nullIfEmpty(string(p.Metadata)), debounceKey(p), startBy)
	}
	return args, nil
}

// debounceKey is the debounce_key column of p.
func debounceKey(p *errandstore.JobInsertParams) any {
	if p.Debounce == nil {
		return nil
	}
	return p.Debounce.Key
}

// insertChunks inserts the n jobs of args insertChunkRows per statement
// and puts those it wrote in inserted, by id.
func insertChunks(ctx context.Context, st *stmts, args []any, n int, inserted map[string]*errandtype.Job) error {
	for start := 0; start < n; start += insertChunkRows {
		rowsN := min(insertChunkRows, n-start)
		ins, err := st.get(ctx, insertRowsSQL(rowsN))
		if err != nil {
			return err
		}
		rows, err := ins.QueryContext(ctx, args[start*insertParamsPerRow:(start+rowsN)*insertParamsPerRow]...)
		if err != nil {
			return err
		}
		jobs, err := scanJobs(rows, scanJob)
		if err != nil {
			return err
		}
		for _, j := range jobs {
			inserted[j.ID] = j
		}
	}
	return nil
}

// findDuplicate is the job that holds the id or unique key p conflicted
// on, inserted at now.
func findDuplicate(ctx context.Context, st *stmts, p *errandstore.JobInsertParams, now time.Time) (*errandtype.Job, error) {
	dup, err := st.get(ctx, duplicateSQL)
	if err != nil {
		return nil, err
	}
	return scanJob(dup.QueryRowContext(ctx, p.ID, nullIfEmpty(p.UniqueKey), p.UniqueWindowColumn(now)))
}

// JobGet implements [errandstore.JobStore].
func (s *Store) JobGet(ctx context.Context, p *errandstore.JobGetParams) (*errandtype.Job, error) {
	j, err := scanReadJob(s.read.QueryRowContext(ctx, `SELECT `+readColumns+` FROM errand_jobs j WHERE id = ?`, p.ID))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, errandtype.ErrNotFound
	}
	return j, err
}

// JobList implements [errandstore.JobStore].
func (s *Store) JobList(ctx context.Context, p *errandstore.JobListParams) ([]*errandtype.Job, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	where := []string{"seq > ?"}
	args := []any{p.AfterSeq}
	if len(p.States) > 0 {
		where = append(where, "state IN ("+placeholders(len(p.States))+")")
		for _, st := range p.States {
			args = append(args, string(st))
		}
	}
	if p.Queue != "" {
		where = append(where, "queue = ?")
		args = append(args, p.Queue)
	}
	if p.Kind != "" {
		where = append(where, "kind = ?")
		args = append(args, p.Kind)
	}
	where, args, err := searchWhere(p, where, args)
	if err != nil {
		return nil, err
	}
	where = p.FlowWhere(where, "j.last_error ->> '$.class'", func(v any) string {
		args = append(args, v)
		return "?"
	})
	limit := p.Limit
	if limit <= 0 {
		limit = 100
	}
	args = append(args, limit)
	rows, err := s.read.QueryContext(ctx, `SELECT `+readColumns+` FROM errand_jobs j WHERE `+
		strings.Join(where, " AND ")+` ORDER BY seq LIMIT ?`, args...)
	if err != nil {
		return nil, err
	}
	return scanJobs(rows, scanReadJob)
}

// JobClaimMany implements [errandstore.JobStore].
func (s *Store) JobClaimMany(ctx context.Context, p *errandstore.JobClaimParams) ([]*errandtype.Job, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	var (
		jobs   []*errandtype.Job
		unread []errandstore.UnreadJob
	)
	swept := false // this claim sweeps (see errandstore.ClaimSweeps)
	err := s.tx(ctx, func(tx *sql.Tx) error {
		now := s.clock.Now()
		if s.sweeps.Due(now) {
			swept = true
			if _, err := s.sweep(ctx, tx, now); err != nil {
				return err
			}
		}
		var err error
		jobs, unread, err = s.claimIn(ctx, tx, p, now)
		return err
	})
	if err != nil {
		if swept {
			s.sweeps.Failed()
		}
		return nil, fmt.Errorf("claim: %w", err)
	}
	errandstore.GiveBackUnread(ctx, s, s.logger, unread)
	errandstore.SortClaimOrder(jobs)
	return jobs, nil
}

// claimIn claims p's jobs at now in tx, without a sweep: the jobs, and
// those claimed whose rows did not decode (see claimedRows).
func (s *Store) claimIn(ctx context.Context, tx *sql.Tx, p *errandstore.JobClaimParams, now time.Time) ([]*errandtype.Job, []errandstore.UnreadJob, error) {
	args := []any{micros(now), micros(now.Add(p.Lease)), p.Owner, micros(now)}
	for _, q := range p.Queues {
		args = append(args, q)
	}
	for _, k := range p.Kinds {
		args = append(args, k)
	}
	for _, k := range p.SkipRetryKinds {
		args = append(args, k)
	}
	args = append(args, p.Limit)
	st := s.ownStmts(tx)
	defer st.Close()
	claim, err := st.get(ctx, claimSQL(len(p.Queues), len(p.Kinds), len(p.SkipRetryKinds)))
	if err != nil {
		return nil, nil, err
	}
	rows, err := claim.QueryContext(ctx, args...)
	if err != nil {
		return nil, nil, err
	}
	return claimedRows(rows)
}

// claimedRows reads the rows of a claim, of jobColumns, and closes rows.
// A row that does not decode (a value written by a newer errand, or changed
// by hand) fails only itself, as on PostgreSQL, where the claim has
// committed before its rows are read: it is claimed with the others, and
// comes back in unread, to be given back once the claim commits (see
// errandstore.GiveBackUnread), rather than fail every claim of its queue.
func claimedRows(rows *sql.Rows) ([]*errandtype.Job, []errandstore.UnreadJob, error) {
	defer rows.Close()
	var c errandstore.ClaimedRows
	for rows.Next() {
		j, err := scanJob(rows)
		if err := c.Add(j, err, func() (errandstore.UnreadJob, bool) { return unreadLease(rows) }); err != nil {
			return nil, nil, err
		}
	}
	if err := rows.Err(); err != nil {
		return nil, nil, err
	}
	return c.Jobs, c.Unread, nil
}

// unreadLease reads again the lease and attempt of a row of jobColumns
// that did not decode as a whole.
func unreadLease(rows *sql.Rows) (errandstore.UnreadJob, bool) {
	const colID, colAttempt, colLeaseToken = 1, 8, 14
	cols, err := rows.Columns()
	if err != nil || len(cols) <= colLeaseToken {
		return errandstore.UnreadJob{}, false
	}
	var u errandstore.UnreadJob
	dest := make([]any, len(cols))
	for i := range dest {
		dest[i] = new(any)
	}
	dest[colID], dest[colAttempt], dest[colLeaseToken] = &u.Lease.ID, &u.Attempt, &u.Lease.LeaseToken
	return u, rows.Scan(dest...) == nil
}

// claimSQL is the claim of JobClaimMany for that many queues and kinds (no
// kinds: every kind), leaving out the retries of skipRetry kinds. Its
// parameters are claimUpdate's, then claimable's, then the limit. The pick
// walks the claim index, which holds waiting rows in claim order: named,
// because the errand_jobs_due index also matches queue and available_at,
// and a pick through it would read and sort every ready job of the queue
// to take a few.
func claimSQL(queues, kinds, skipRetry int) string {
	return claimUpdate(`SELECT j.seq FROM errand_jobs j INDEXED BY errand_jobs_claim
			WHERE ` + claimable(queues, kinds, skipRetry) + `
			ORDER BY j.priority, j.available_at, j.seq LIMIT ?`)
}

// claimUpdate claims the jobs whose seqs pick selects. Its parameters are
// attempted_at, lease_until and lease_owner, then pick's. Each row gets its
// own token: randomblob is evaluated per row.
func claimUpdate(pick string) string {
	return `UPDATE errand_jobs SET
			state = 'running', attempt = attempt + 1, ` + firstStartDeadline + `, attempted_at = ?,
			lease_token = lower(hex(randomblob(16))), lease_until = ?, lease_owner = ?
		WHERE seq IN (` + pick + `)
		RETURNING ` + jobColumns
}

// firstStartDeadline puts back, on a job's first start, the maximum age's
// deadline that its start-by replaced (see errandstore.FirstDeadline).
const firstStartDeadline = `deadline = CASE WHEN start_by IS NULL OR attempted_at IS NOT NULL THEN deadline
			WHEN max_age_us > 0 THEN created_at + max_age_us END`

// claimable is the claim's rule for a job j: waiting, available, within its
// deadline, in one of that many queues, of one of that many kinds (none:
// every kind), not a retry of skipRetry kinds, its ordering key free. Its
// parameters, numbered after claimUpdate's three, are now, the queues, the
// kinds and the kinds whose retries to skip.
func claimable(queues, kinds, skipRetry int) string {
	filter := "queue IN (" + placeholders(queues) + ")"
	if kinds > 0 {
		filter += " AND kind IN (" + placeholders(kinds) + ")"
	}
	if skipRetry > 0 {
		filter += " AND NOT (j.attempt > 0 AND j.kind IN (" + placeholders(skipRetry) + "))"
	}
	return `j.state IN (` + waiting + `) AND j.available_at <= ?
				AND (j.deadline IS NULL OR j.deadline > ?4) AND ` + filter + `
				AND ` + errandstore.OrderingFreeSQL("errand_jobs")
}

// nextDueSQL finds the earliest job of one queue that comes due after now,
// walking the errand_jobs_due index from now: one seek, then rows of other
// kinds, when Kinds excludes them, until one matches.
var nextDueSQL = `SELECT available_at FROM errand_jobs INDEXED BY errand_jobs_due
	WHERE queue = ? AND state IN (` + waiting + `) AND available_at > ?`

// JobNextDue implements [errandstore.JobStore]. It asks once per queue: each
// question is one seek of the errand_jobs_due index.
func (s *Store) JobNextDue(ctx context.Context, p *errandstore.JobNextDueParams) (errandstore.JobNextDueResult, error) {
	if err := p.Validate(); err != nil {
		return errandstore.JobNextDueResult{}, err
	}
	now := micros(s.clock.Now())
	q := nextDueSQL
	var kinds []any
	if len(p.Kinds) > 0 {
		q += " AND kind IN (" + placeholders(len(p.Kinds)) + ")"
		for _, k := range p.Kinds {
			kinds = append(kinds, k)
		}
	}
	q += " ORDER BY available_at LIMIT 1"
	var next int64
	found := false
	for _, queue := range p.Queues {
		var at int64
		err := s.read.QueryRowContext(ctx, q, append([]any{queue, now}, kinds...)...).Scan(&at)
		if errors.Is(err, sql.ErrNoRows) {
			continue
		}
		if err != nil {
			return errandstore.JobNextDueResult{}, fmt.Errorf("next due: %w", err)
		}
		if !found || at < next {
			next, found = at, true
		}
	}
	if !found {
		return errandstore.JobNextDueResult{}, nil
	}
	return errandstore.JobNextDueResult{Wait: time.Duration(next-now) * time.Microsecond, Found: true}, nil
}

// JobHeartbeatMany implements [errandstore.JobStore].
func (s *Store) JobHeartbeatMany(ctx context.Context, p *errandstore.JobHeartbeatParams) ([]errandstore.HeartbeatResult, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	rs := make([]errandstore.HeartbeatResult, len(p.Leases))
	err := s.tx(ctx, func(tx *sql.Tx) error {
		now := s.clock.Now()
		until := micros(now.Add(p.Lease))
		// The renewal reads the cancel request of its own row: no
		// statement more for it.
		renew, err := tx.PrepareContext(ctx, `UPDATE errand_jobs SET lease_until = ?
			WHERE id = ? AND state = 'running' AND lease_token = ? AND lease_until > ?
			RETURNING cancel_requested_at IS NOT NULL`)
		if err != nil {
			return err
		}
		defer renew.Close()
		for i, l := range p.Leases {
			var cancel bool
			err := renew.QueryRowContext(ctx, until, l.ID, l.LeaseToken, micros(now)).Scan(&cancel)
			if errors.Is(err, sql.ErrNoRows) {
				rs[i] = errandstore.HeartbeatResult{Err: errandtype.ErrLeaseLost}
				continue
			}
			if err != nil {
				return err
			}
			rs[i] = errandstore.HeartbeatResult{LeaseUntil: fromMicros(until), CancelRequested: cancel}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("heartbeat: %w", err)
	}
	return rs, nil
}

// JobSetProgress implements [errandstore.JobStore].
func (s *Store) JobSetProgress(ctx context.Context, p *errandstore.JobSetProgressParams) error {
	if err := p.Validate(); err != nil {
		return err
	}
	return s.fencedWrite(ctx, func(now int64) (string, []any) {
		return `UPDATE errand_jobs SET progress = ?
			WHERE id = ? AND state = 'running' AND lease_token = ? AND lease_until > ?`,
			[]any{string(p.Progress), p.ID, p.LeaseToken, now}
	})
}

// fencedWrite runs, in a transaction, the write q makes from the store's
// time, which changes a row only while the lease it names is live:
// ErrLeaseLost when it changes none.
func (s *Store) fencedWrite(ctx context.Context, q func(now int64) (string, []any)) error {
	return s.tx(ctx, func(tx *sql.Tx) error {
		query, args := q(micros(s.clock.Now()))
		res, err := tx.ExecContext(ctx, query, args...)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return errandtype.ErrLeaseLost
		}
		return nil
	})
}

// appendError is the SQL that appends one history entry and sets
// last_error. Its parameters are: attempt, at, class, message, stack, then
// class, message, at for last_error.
const appendError = `errors = json_insert(errors, '$[#]', json_object(
		'attempt', ?, 'replay', replays, 'at', ?, 'class', ?, 'message', ?, 'stack', ?)),
	last_error = json_object('class', ?, 'message', ?, 'at', ?)`

func errorArgs(e *errandtype.AttemptError, now time.Time) []any {
	at := historyTime(now)
	return []any{e.Attempt, at, e.Class, e.Message, e.Stack, e.Class, e.Message, at}
}

// historyTime formats t for the JSON history at the microsecond precision
// of every other time column, so an entry's time equals finished_at.
func historyTime(t time.Time) string {
	return fromMicros(micros(t)).Format(time.RFC3339Nano)
}

// JobRecordOutcomes implements [errandstore.JobStore].
func (s *Store) JobRecordOutcomes(ctx context.Context, p *errandstore.JobRecordOutcomesParams) ([]errandstore.OutcomeResult, error) {
	rs := make([]errandstore.OutcomeResult, len(p.Outcomes))
	err := s.tx(ctx, func(tx *sql.Tx) error {
		now := s.clock.Now()
		// Outcomes of one kind share their statement: prepared once each,
		// and kept for later batches.
		followed := ""
		if p.Follow {
			followed = ", kind, batch_id, workflow_id, attempted_at, output, last_error"
		}
		st := s.ownStmts(tx)
		defer st.Close()
		grouped, err := s.recordGroups(ctx, st, p.Outcomes, now, rs, followed)
		if err != nil {
			return err
		}
		for i, o := range p.Outcomes {
			if grouped != nil && grouped[i] {
				continue
			}
			set, args, err := outcomeSet(o, now)
			if err != nil {
				return err
			}
			fence := []any{o.ID, o.LeaseToken, micros(now)} // outcomeFence's
			write := `UPDATE errand_jobs SET ` + set + `,
					lease_token = NULL, lease_until = NULL
				WHERE ` + outcomeFence + `
				RETURNING state, available_at` + followed
			args = append(args, fence...)
			if o.Delete {
				write = `DELETE FROM errand_jobs WHERE ` + outcomeFence + `
				RETURNING '` + string(errandtype.StateSucceeded) + `', available_at` + followed
				args = fence
			}
			update, err := st.get(ctx, write)
			if err != nil {
				return fmt.Errorf("job %s: %w", o.ID, err)
			}
			var (
				r     errandstore.OutcomeResult
				state string
				avail int64
			)
			row := update.QueryRowContext(ctx, args...)
			if p.Follow {
				err = scanFollowed(row.Scan, &r, &state, &avail)
			} else {
				err = row.Scan(&state, &avail)
			}
			if errors.Is(err, sql.ErrNoRows) {
				rs[i] = errandstore.OutcomeResult{Err: errandtype.ErrLeaseLost}
				continue
			}
			if err != nil {
				return fmt.Errorf("job %s: %w", o.ID, err)
			}
			r.State, r.AvailableAt = errandtype.JobState(state), fromMicros(avail)
			rs[i] = r
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("record outcomes: %w", err)
	}
	return rs, nil
}

// outcomeGroupMin is the fewest outcomes of one kind written by one
// statement (recordGroups); fewer are written one by one.
const outcomeGroupMin = 4

// outcomeGroupSQL writes a group of outcomes whose SET clause and arguments
// are the same (the first placeholders), each fenced by its own token: the
// group is a JSON array of [id, token] pairs, then now. The unary plus keeps
// the planner from walking every running job through errand_jobs_state or
// errand_jobs_lease: each job of the group is sought by its id.
func outcomeGroupSQL(set, followed string) string {
	return `UPDATE errand_jobs SET ` + set + `,
			lease_token = NULL, lease_until = NULL
		FROM (SELECT json_extract(value, '$[0]') AS oid, json_extract(value, '$[1]') AS otoken FROM json_each(?)) AS o
		WHERE errand_jobs.id = o.oid AND +errand_jobs.state = 'running' AND errand_jobs.lease_token = o.otoken
			AND +errand_jobs.lease_until > ?
		RETURNING errand_jobs.id, errand_jobs.state, errand_jobs.available_at` + followed
}

// outcomeFence is the condition under which one outcome applies to its
// job: its id, its lease token and now.
const outcomeFence = `id = ? AND state = 'running' AND lease_token = ? AND lease_until > ?`

// outcomeGroupDeleteSQL is outcomeGroupSQL for a group of successes that
// delete their jobs (JobOutcome.Delete), reported as succeeded.
func outcomeGroupDeleteSQL(followed string) string {
	return `DELETE FROM errand_jobs
		WHERE (id, lease_token) IN (SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]') FROM json_each(?))
			AND +state = 'running' AND +lease_until > ?
		RETURNING id, '` + string(errandtype.StateSucceeded) + `', available_at` + followed
}

// recordGroups writes, one statement per kind and delete, the outcomes whose SET
// arguments do not depend on the outcome (no error to append, no delay:
// succeeded, above all), and reports which it wrote, their results in rs.
// followed is JobRecordOutcomes' extra RETURNING columns: "" or kind,
// batch_id, workflow_id, output and last_error.
// A job named by more than one outcome of the batch is left out of the
// groups, so that its outcomes apply one by one in batch order. Executing
// one statement per outcome cost more than the rows it changed.
func (s *Store) recordGroups(ctx context.Context, st *stmts, outcomes []*errandstore.JobOutcome, now time.Time, rs []errandstore.OutcomeResult, followed string) ([]bool, error) {
	if len(outcomes) < outcomeGroupMin {
		return nil, nil
	}
	groups := map[outcomeGroup][]int{} // made here, where it does not escape
	groupOutcomes(outcomes, groups)
	var grouped []bool
	for _, idx := range groups {
		if len(idx) < outcomeGroupMin {
			continue
		}
		if grouped == nil {
			grouped = make([]bool, len(outcomes))
		}
		if err := recordGroup(ctx, st, outcomes, idx, now, rs, grouped, followed); err != nil {
			return nil, err
		}
	}
	return grouped, nil
}

// outcomeGroup is what the outcomes of one group share: their kind, and
// whether they delete their jobs.
type outcomeGroup struct {
	kind   errandstore.OutcomeKind
	delete bool
}

// groupOutcomes puts in groups, by kind and delete, the indexes of the
// outcomes that may be written in a group: valid, of a job no other outcome
// of the batch names, appending no error and waiting no delay.
func groupOutcomes(outcomes []*errandstore.JobOutcome, groups map[outcomeGroup][]int) {
	seen := make(map[string]int, len(outcomes))
	for _, o := range outcomes {
		seen[o.ID]++
	}
	for i, o := range outcomes {
		if seen[o.ID] == 1 && !o.Kind.AppendsError() && !o.Kind.Delayed() && o.Validate() == nil {
			g := outcomeGroup{o.Kind, o.Delete}
			groups[g] = append(groups[g], i)
		}
	}
}

// recordGroup writes the outcomes at idx, of one kind, with one
// statement, marks them in grouped and puts their results in rs.
func recordGroup(ctx context.Context, st *stmts, outcomes []*errandstore.JobOutcome, idx []int, now time.Time, rs []errandstore.OutcomeResult, grouped []bool, followed string) error {
	set, args, err := outcomeSet(outcomes[idx[0]], now)
	if err != nil {
		return err
	}
	pairs := make([][2]string, len(idx))
	byID := make(map[string]int, len(idx))
	for k, i := range idx {
		pairs[k] = [2]string{outcomes[i].ID, outcomes[i].LeaseToken}
		byID[outcomes[i].ID] = i
	}
	group, err := json.Marshal(pairs)
	if err != nil {
		return err
	}
	write := outcomeGroupSQL(set, followed)
	if outcomes[idx[0]].Delete {
		write, args = outcomeGroupDeleteSQL(followed), nil
	}
	update, err := st.get(ctx, write)
	if err != nil {
		return err
	}
	rows, err := update.QueryContext(ctx, append(args, string(group), micros(now))...)
	if err != nil {
		return err
	}
	for _, i := range idx {
		grouped[i] = true
		rs[i] = errandstore.OutcomeResult{Err: errandtype.ErrLeaseLost}
	}
	return scanGroupRows(rows, rs, byID, followed != "")
}

// scanGroupRows reads the rows of outcomeGroupSQL into rs, at the index
// byID gives each row's job, and closes rows. follow: the rows carry
// the follow-up columns too.
func scanGroupRows(rows *sql.Rows, rs []errandstore.OutcomeResult, byID map[string]int, follow bool) error {
	defer rows.Close()
	for rows.Next() {
		var id, state string
		var avail int64
		var r errandstore.OutcomeResult
		var err error
		if follow {
			err = scanFollowed(rows.Scan, &r, &id, &state, &avail)
		} else {
			err = rows.Scan(&id, &state, &avail)
		}
		if err != nil {
			return err
		}
		r.State, r.AvailableAt = errandtype.JobState(state), fromMicros(avail)
		rs[byID[id]] = r
	}
	if err := rows.Err(); err != nil {
		return err
	}
	return rows.Close()
}

// scanFollowed scans, with scan, a row of head's columns and then the
// followed ones (see JobRecordOutcomes) into r. Its variables are declared
// here: the worker's outcomes, without Follow, allocate none of them.
func scanFollowed(scan func(dest ...any) error, r *errandstore.OutcomeResult, head ...any) error {
	var c errandstore.FollowColumns
	var attempted sql.NullInt64
	if err := scan(append(head, &c.Kind, &c.BatchID, &c.WorkflowID, &attempted, &c.Output, &c.LastError)...); err != nil {
		return err
	}
	c.AttemptedAt = zeroTime(attempted)
	return r.Followed(&c)
}

// outcomeSet returns the SET clause and its arguments for one outcome,
// from what errand says each outcome kind does.
func outcomeSet(o *errandstore.JobOutcome, now time.Time) (string, []any, error) {
	if err := o.Validate(); err != nil {
		return "", nil, err
	}
	k, state := o.Kind, o.Kind.State()
	set, args := `state = ?`, []any{string(state)}
	if k.YieldsToCancel() {
		// A cancel request that the attempt did not hear of in time
		// still wins: the job does not wait to run again.
		set = `state = CASE WHEN cancel_requested_at IS NULL THEN ? ELSE '` + string(errandtype.StateCancelled) + `' END,
			finished_at = CASE WHEN cancel_requested_at IS NULL THEN finished_at ELSE ? END`
		args = append(args, micros(now))
	}
	if !k.CountsAttempt() {
		set += `, attempt = attempt - 1`
	}
	switch {
	case k.Delayed():
		set, args = set+`, available_at = ?`, append(args, micros(now.Add(o.Delay)))
	case state.Waiting():
		set, args = set+`, available_at = ?`, append(args, micros(now))
	}
	if state.Terminal() {
		set, args = set+`, finished_at = ?`, append(args, micros(now))
	}
	if k.AppendsError() {
		set, args = set+`, `+appendError, append(args, errorArgs(o.Error, now)...)
	}
	return set, args, nil
}

// JobSweep implements [errandstore.JobStore].
func (s *Store) JobSweep(ctx context.Context, _ *errandstore.JobSweepParams) (errandstore.SweepResult, error) {
	var r errandstore.SweepResult
	now := s.clock.Now()
	err := s.tx(ctx, func(tx *sql.Tx) error {
		var err error
		r, err = s.sweep(ctx, tx, now)
		return err
	})
	if err != nil {
		return r, fmt.Errorf("sweep: %w", err)
	}
	s.sweeps.Swept(now)
	return r, nil
}

// sweepError is appendError with the attempt taken from the row.
const sweepError = `errors = json_insert(errors, '$[#]', json_object(
		'attempt', attempt, 'replay', replays, 'at', ?1, 'class', ?2, 'message', ?3, 'stack', '')),
	last_error = json_object('class', ?2, 'message', ?3, 'at', ?1)`

// The sweep's statements. Their parameters are ?1 the history time, ?2
// the class, ?3 the message and ?4 now. Each names the partial index that
// holds exactly the rows it may change, so that a sweep reads only the
// expired rows. Without INDEXED BY the planner, lacking statistics, chose
// errand_jobs_state for all three: the deadline sweep read every waiting
// row of the table, in every claim, and the lease sweeps every running
// row.
var (
	// sweepLeaseDeadSQL ends expired final attempts: dead, so a job that
	// kills its worker cannot crash-loop. A job with a cancel request is
	// left to the next statement.
	sweepLeaseDeadSQL = `UPDATE errand_jobs INDEXED BY errand_jobs_lease SET ` + sweepError + `,
			state = 'dead', finished_at = ?4, lease_token = NULL, lease_until = NULL
		WHERE state = 'running' AND lease_until <= ?4 AND attempt >= max_attempts
			AND cancel_requested_at IS NULL`
	// sweepLeaseRetrySQL makes the other expired attempts retrying, available
	// now, or cancelled when a cancel was requested: a cancel request wins
	// over a retry. ?5 and ?6 are the cancelled entry's class and message.
	sweepLeaseRetrySQL = `UPDATE errand_jobs INDEXED BY errand_jobs_lease SET
			errors = json_insert(errors, '$[#]', json_object('attempt', attempt, 'replay', replays, 'at', ?1,
				'class', iif(cancel_requested_at IS NULL, ?2, ?5),
				'message', iif(cancel_requested_at IS NULL, ?3, ?6), 'stack', '')),
			last_error = json_object('class', iif(cancel_requested_at IS NULL, ?2, ?5),
				'message', iif(cancel_requested_at IS NULL, ?3, ?6), 'at', ?1),
			state = iif(cancel_requested_at IS NULL, 'retrying', 'cancelled'),
			available_at = iif(cancel_requested_at IS NULL, ?4, available_at),
			finished_at = iif(cancel_requested_at IS NULL, finished_at, ?4),
			lease_token = NULL, lease_until = NULL
		WHERE state = 'running' AND lease_until <= ?4
		RETURNING state`
	// sweepDeadlineSQL ends waiting jobs past their deadline: with class ?5
	// and message ?6 a job never started whose deadline is its start-by.
	sweepDeadlineSQL = `UPDATE errand_jobs INDEXED BY errand_jobs_deadline SET
			errors = json_insert(errors, '$[#]', json_object('attempt', attempt, 'replay', replays, 'at', ?1,
				'class', iif(` + startByEnds + `, ?5, ?2), 'message', iif(` + startByEnds + `, ?6, ?3), 'stack', '')),
			last_error = json_object('class', iif(` + startByEnds + `, ?5, ?2),
				'message', iif(` + startByEnds + `, ?6, ?3), 'at', ?1),
			state = 'dead', finished_at = ?4
		WHERE state IN (` + waiting + `) AND deadline IS NOT NULL AND deadline <= ?4`
)

// startByEnds is true of a waiting job never started whose deadline is its
// start-by.
const startByEnds = `start_by = deadline AND attempted_at IS NULL`

func (s *Store) sweep(ctx context.Context, tx *sql.Tx, now time.Time) (errandstore.SweepResult, error) {
	var r errandstore.SweepResult
	at := historyTime(now)
	us := micros(now)
	leaseMsg := "lease expired: the worker stopped renewing its lease (crashed, stopped or cut off)"
	res, err := tx.ExecContext(ctx, sweepLeaseDeadSQL,
		at, errandstore.ClassLeaseExpired, leaseMsg+" on the final attempt", us)
	if err != nil {
		return r, err
	}
	n, _ := res.RowsAffected()
	r.Dead += int(n)
	rows, err := tx.QueryContext(ctx, sweepLeaseRetrySQL, at, errandstore.ClassLeaseExpired, leaseMsg, us,
		errandstore.ClassCancelled, errandstore.CancelledBySweepMessage)
	if err != nil {
		return r, err
	}
	for rows.Next() {
		var st string
		if err := rows.Scan(&st); err != nil {
			rows.Close()
			return r, err
		}
		if st == string(errandtype.StateCancelled) {
			r.Cancelled++
		} else {
			r.Retried++
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return r, err
	}
	res, err = tx.ExecContext(ctx, sweepDeadlineSQL,
		at, errandstore.ClassExpired, errandstore.ExpiredMessage, us, errandstore.ClassStartBy, errandstore.StartByMessage)
	if err != nil {
		return r, err
	}
	n, _ = res.RowsAffected()
	r.Dead += int(n)
	return r, nil
}

// QueueStats implements [errandstore.JobStore].
func (s *Store) QueueStats(ctx context.Context, _ *errandstore.QueueStatsParams) ([]errandtype.QueueStats, error) {
	now := micros(s.clock.Now())
	rows, err := s.read.QueryContext(ctx, `SELECT queue, state, kind, count(*),
			min(CASE WHEN state IN (`+waiting+`) AND available_at <= ?
				AND `+errandstore.OrderingFreeSQL("errand_jobs")+` THEN available_at END)
		FROM errand_jobs j GROUP BY queue, state, kind`, now)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var counts []errandstore.QueueCount
	for rows.Next() {
		var c errandstore.QueueCount
		var oldest sql.NullInt64
		if err := rows.Scan(&c.Queue, &c.State, &c.Kind, &c.Jobs, &oldest); err != nil {
			return nil, err
		}
		if oldest.Valid {
			c.OldestReadyAgeSeconds = (time.Duration(now-oldest.Int64) * time.Microsecond).Seconds()
		}
		counts = append(counts, c)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return errandstore.AssembleQueueStats(counts), nil
}
