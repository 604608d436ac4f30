package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
	"github.com/errandhq/errand/internal/rowscan"
	"github.com/jackc/pgx/v5"
)

// jobColumns are read as text where they are jsonb, so that one scan works
// for pgx and for database/sql.
const jobColumns = `seq, id, queue, kind, args::text, args_version, priority, state, attempt, max_attempts,
	backoff_base_us, backoff_max_us, available_at, deadline, lease_token, lease_until, lease_owner,
	unique_key, ordering_key, progress::text, created_at, attempted_at, finished_at, last_error::text,
	errors::text, replays, tags::text, unique_states, unique_window_us, ordering_hold, cancel_requested_at, fairness_key, batch_id,
	workflow_id, output, metadata::text, start_by, base_priority`

// keyedColumns are jobColumns and the debounce columns, which only
// operators' reads and debounced enqueues read: a claim's RETURNING
// leaves them out. keyedJobScanner reads them.
const keyedColumns = jobColumns + `, debounce_key, absorbed`

// readColumns are what operators' reads (JobGet, JobList) select from the
// jobs table aliased j: keyedColumns and HeldBy. scanReadJob reads them.
var readColumns = keyedColumns + `, ` + errandstore.HeldBySQL("{jobs}")

// waiting is errandstore.WaitingStates as a SQL list, for IN (...).
var waiting = errandstore.SQLStates(errandstore.WaitingStates)

// statesWhere is the condition that a job is in one of states, spelled so
// that the planner can read each state's jobs from the partial index that
// holds them, as no index of all states exists (migration 024): the claim
// index the waiting jobs, the lease index the running ones, the finished
// index (finished_at IS NOT NULL, which every finished job has) the
// finished ones. Unknown states match nothing.
func statesWhere(states []errandtype.JobState) string {
	var wait, done []errandtype.JobState
	running := false
	for _, st := range states {
		switch {
		case st.Waiting():
			wait = append(wait, st)
		case st == errandtype.StateRunning:
			running = true
		case st.Terminal():
			done = append(done, st)
		}
	}
	var or []string
	if len(wait) > 0 {
		or = append(or, "state IN ("+errandstore.SQLStates(wait)+")")
	}
	if running {
		or = append(or, "state = '"+string(errandtype.StateRunning)+"'")
	}
	if len(done) > 0 {
		or = append(or, "(state IN ("+errandstore.SQLStates(done)+") AND finished_at IS NOT NULL)")
	}
	if len(or) == 0 {
		return "false"
	}
	return "(" + strings.Join(or, " OR ") + ")"
}

type scanner = rowscan.Row

// scanJob reads a row of jobColumns.
func scanJob(row scanner) (*errandtype.Job, error) { return newJobRow().scan(row) }

// scanReadJob reads a row of readColumns.
func scanReadJob(row scanner) (*errandtype.Job, error) { return newReadJobRow().scan(row) }

// jobScanner and readJobScanner return scans for scanJobs of jobColumns and
// of readColumns, which reuse their destinations from row to row.
func jobScanner() func(scanner) (*errandtype.Job, error)     { return newJobRow().scan }
func readJobScanner() func(scanner) (*errandtype.Job, error) { return newReadJobRow().scan }

// jobRow holds the destinations of a row of jobColumns. One jobRow reads
// every row of a result, so that a claim of a thousand jobs does not make
// a thousand lists of 38 destinations and the columns they point to: each
// row costs the Job it becomes.
type jobRow struct {
	j                errandtype.Job
	c                errandtype.JobColumns
	ustates, uwindow int64
	ohold            int16
	output           *string
	dkey             *string // keyedColumns' debounce_key
	absorbed         int32   // keyedColumns' absorbed
	held             *string // readColumns' HeldBy
	dest             []any
}

func newJobRow() *jobRow {
	r := &jobRow{}
	j, c := &r.j, &r.c
	r.dest = []any{&j.Seq, &j.ID, &j.Queue, &j.Kind, &c.Args, &j.ArgsVersion, &j.Priority, &c.State,
		&j.Attempt, &j.MaxAttempts, &c.BackoffBaseUS, &c.BackoffMaxUS, &j.AvailableAt, &j.Deadline, &j.LeaseToken,
		&j.LeaseUntil, &j.LeaseOwner, &j.UniqueKey, &j.OrderingKey, &c.Progress, &j.CreatedAt, &j.AttemptedAt,
		&j.FinishedAt, &c.LastError, &c.Errors, &j.Replays, &c.Tags, &r.ustates, &r.uwindow, &r.ohold, &j.CancelRequestedAt, &j.FairnessKey, &j.BatchID,
		&j.WorkflowID, &r.output, &c.Metadata, &j.StartBy, &j.BasePriority}
	return r
}

func newKeyedJobRow() *jobRow {
	r := newJobRow()
	r.dest = append(r.dest, &r.dkey, &r.absorbed)
	return r
}

func newReadJobRow() *jobRow {
	r := newKeyedJobRow()
	r.dest = append(r.dest, &r.held)
	return r
}

// scan reads one row into a new Job.
func (r *jobRow) scan(row scanner) (*errandtype.Job, error) {
	// Every pointer is nil before the scan, so that the drivers set each
	// to a value of its own (or leave it nil for NULL), never one an
	// earlier row's Job still points to.
	r.j, r.c, r.output, r.dkey, r.absorbed, r.held = errandtype.Job{}, errandtype.JobColumns{}, nil, nil, 0, nil
	if err := row.Scan(r.dest...); err != nil {
		return nil, err
	}
	j := new(errandtype.Job)
	*j = r.j
	// pgx returns times in the local zone; the contract's are UTC. The
	// pointed-to times are this row's own, so they change in place.
	j.AvailableAt, j.CreatedAt = j.AvailableAt.UTC(), j.CreatedAt.UTC()
	for _, t := range [...]*time.Time{j.Deadline, j.LeaseUntil, j.AttemptedAt, j.FinishedAt, j.CancelRequestedAt} {
		if t != nil {
			*t = t.UTC()
		}
	}
	j.SetUniqueColumns(r.ustates, r.uwindow)
	j.OrderingHold = r.ohold == 1
	if r.output != nil {
		j.Output = json.RawMessage(*r.output)
	}
	j.DebounceKey, j.Absorbed, j.HeldBy = r.dkey, int(r.absorbed), r.held
	if err := j.DecodeColumns(&r.c); err != nil {
		return nil, err
	}
	return j, nil
}

// scanJobs reads every row of rs with scan (jobScanner or readJobScanner) and
// closes rs.
func scanJobs(rs rows, scan func(scanner) (*errandtype.Job, error)) ([]*errandtype.Job, error) {
	defer rs.Close()
	return rowscan.All(rs, scan)
}

func utc(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

func nullIfEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// JobInsertMany implements [errandstore.JobStore].
func (s *Store) JobInsertMany(ctx context.Context, p *errandstore.JobInsertManyParams) ([]errandstore.JobInsertResult, error) {
	if p.Announce && len(p.Jobs) == 1 && !errandstore.HasDebounce(p.Jobs) {
		return s.insertTry(ctx, pgxQuerier{s.pool}, s.own, p.Jobs, 1, notifyChannel(s.name))
	}
	return s.insertOwnTx(ctx, p.Jobs)
}

// JobInsertManyTx implements [errandstore.TxStore]: tx is a pgx.Tx on the
// store's database, from any pgx connection or pool. Times come from
// statement_timestamp(), not the start of the caller's transaction.
func (s *Store) JobInsertManyTx(ctx context.Context, tx pgx.Tx, p *errandstore.JobInsertManyParams) ([]errandstore.JobInsertResult, error) {
	return s.insertCallerTx(ctx, tx, p.Jobs)
}

// insertSQL inserts the whole batch in one statement, in the batch's order
// so that seq follows it. ON CONFLICT DO NOTHING covers both unique indexes
// (id, and errand_jobs_unique, which holds only the rows that hold their
// key), within the batch too; a conflicting insert of another transaction
// that is still open makes this one wait for its outcome.
//
// A batch of one, what Enqueue and EnqueueTx send, reads its values from
// one row of scalar parameters (insertOneSQL) instead of unnesting twenty
// arrays of one element: the server's function scan over the arrays took
// 0.26–0.31 ms of the statement's 0.48–0.54 ms, and the statement on one
// connection went from 1.28–1.34 to 0.90–0.97 ms (bench/HISTORY.md). Both
// forms share everything else, so they write the same row.
var (
	insertSQL = insertHead + `FROM unnest($2::text[], $3::text[], $4::text[], $5::text[], $6::integer[], $7::integer[],
			$8::integer[], $9::bigint[], $10::bigint[], $11::bigint[], $12::timestamptz[],
			$13::bigint[], $14::text[], $15::text[], $16::text[], $17::integer[], $18::bigint[],
			$19::smallint[], $20::text[], $21::text[], $22::text[], $23::timestamptz[]) WITH ORDINALITY
		AS p(` + insertNames + `, ord)
	ORDER BY p.ord` + insertTail
	insertOneSQL = insertHead + `FROM ` + insertOneRow + insertTail

	// insertOneAnnouncedSQL is insertOneSQL that also announces the job's
	// queue on the channel $24, in the statement's own commit, if it
	// inserts the job: the NOTIFY is evaluated once per inserted row.
	insertOneAnnouncedSQL = `WITH ins AS (` + insertOneSQL + `)
	SELECT ins.* FROM ins, pg_notify($24, ins.queue)`
)

// insertValues are the columns an insert writes, each with its value from
// the row p of the insert's parameters.
var insertValues = [][2]string{
	{"id", "p.id"}, {"queue", "p.queue"}, {"kind", "p.kind"}, {"args", "p.args::jsonb"},
	{"args_version", "p.args_version"}, {"priority", "p.priority"}, {"state", "'queued'"},
	{"max_attempts", "p.max_attempts"}, {"backoff_base_us", "p.backoff_base_us"},
	{"backoff_max_us", "p.backoff_max_us"}, {"max_age_us", "p.max_age_us"},
	{"available_at", "coalesce(p.run_at, {now} + p.delay_us * interval '1 microsecond')"},
	{"deadline", "least(p.start_by, CASE WHEN p.max_age_us > 0 THEN {now} + p.max_age_us * interval '1 microsecond' END)"},
	{"unique_key", "p.unique_key"}, {"ordering_key", "p.ordering_key"}, {"created_at", "{now}"},
	{"tags", "p.tags::jsonb"}, {"unique_states", "p.unique_states"}, {"unique_window_us", "p.unique_window_us"},
	{"ordering_hold", "p.ordering_hold"}, {"fairness_key", "p.fairness_key"}, {"metadata", "p.metadata::jsonb"},
	{"debounce_key", "p.debounce_key"}, {"start_by", "p.start_by"},
}

var insertHead = `INSERT INTO {jobs} (` + joinColumns(insertValues, "%[1]s") + `)
	SELECT ` + joinColumns(insertValues, "%[2]s") + `
	`

const (
	// insertOneRow is the parameters of one job as a row p.
	insertOneRow = `(VALUES ($2::text, $3::text, $4::text, $5::text, $6::integer, $7::integer,
			$8::integer, $9::bigint, $10::bigint, $11::bigint, $12::timestamptz,
			$13::bigint, $14::text, $15::text, $16::text, $17::integer, $18::bigint,
			$19::smallint, $20::text, $21::text, $22::text, $23::timestamptz))
		AS p(` + insertNames + `)`
	insertNames = `id, queue, kind, args, args_version, priority, max_attempts, backoff_base_us,
			backoff_max_us, max_age_us, run_at, delay_us, unique_key, ordering_key, tags,
			unique_states, unique_window_us, ordering_hold, fairness_key, metadata, debounce_key, start_by`
	insertTail = `
	ON CONFLICT DO NOTHING
	RETURNING ` + jobColumns
)

// joinColumns formats each pair of cols, column and value, as format
// does (%[1]s the column, %[2]s the value), joined by commas.
func joinColumns(cols [][2]string, format string) string {
	parts := make([]string, len(cols))
	for i, c := range cols {
		parts[i] = fmt.Sprintf(format, c[0], c[1])
	}
	return strings.Join(parts, ", ")
}

// insert writes params with insertSQL, then reads the jobs holding the ids
// and keys that conflicted. Its one write is that single statement:
// insertOwnTx runs it on the pool, outside any transaction, relying on
// the statement's own atomicity. Only jobs whose key's holder left it
// between the two statements are written by a second (see insertTry).
func (s *Store) insert(ctx context.Context, q querier, r *strings.Replacer, params []*errandstore.JobInsertParams) ([]errandstore.JobInsertResult, error) {
	return s.insertTry(ctx, q, r, params, 1, "")
}

// insertTry is insert's tries-th try. When channel is set, a lone job's
// first try announces its queue on it in the insert's commit
// (JobInsertManyParams.Announce), and its result says so.
func (s *Store) insertTry(ctx context.Context, q querier, r *strings.Replacer, params []*errandstore.JobInsertParams, tries int, channel string) ([]errandstore.JobInsertResult, error) {
	cols, err := newInsertColumns(params)
	if err != nil {
		return nil, err
	}
	if cols.n == 0 {
		return []errandstore.JobInsertResult{}, nil
	}
	now, err := s.insertNow(ctx, q, r, &cols, params)
	if err != nil {
		return nil, err
	}
	rs, err := cols.query(ctx, q, r, now, channel)
	if err != nil {
		return nil, fmt.Errorf("insert jobs: %w", badValue(err))
	}
	inserted, err := scanJobs(rs, jobScanner())
	if err != nil {
		return nil, fmt.Errorf("insert jobs: %w", badValue(err))
	}
	out, dups := matchInserted(params, inserted)
	if cols.announces(channel) && len(dups) == 0 {
		out[0].Announced = true
	}
	if len(dups) == 0 {
		return out, nil
	}
	again, err := findDuplicates(ctx, q, r, params, cols.uwindows, dups, out)
	if err != nil || len(again) == 0 {
		return out, err
	}
	return s.insertAgain(ctx, q, r, params, again, out, tries)
}

// insertNow is the {now} argument of an insert of cols: nil (the
// server's time) unless the store's clock is injected, or a job has a
// unique window. A window is computed from the time the jobs are inserted
// at, in Go as every store does: then the time is read first and the jobs
// inserted at it.
func (s *Store) insertNow(ctx context.Context, q querier, r *strings.Replacer, cols *insertColumns, params []*errandstore.JobInsertParams) (any, error) {
	now := s.nowArg()
	if !cols.windowed {
		return now, nil
	}
	if now == nil {
		t, err := s.readNow(ctx, q, r)
		if err != nil {
			return nil, fmt.Errorf("insert jobs: read the clock: %w", err)
		}
		now = t
	}
	cols.setWindows(params, now.(time.Time))
	return now, nil
}

// insertColumns are the columns of the jobs to insert, one array each, as
// insertSQL takes them.
type insertColumns struct {
	n                              int
	ids, queues, kinds, args, tags []string
	versions, prios, maxAttempts   []int32
	bases, maxes, ages, delays     []int64
	runAt, startBy                 []*time.Time
	ukeys, okeys, fkeys, metas     []*string
	dkeys                          []*string // nil unless a job has a debounce key: unnest pads it with NULLs
	ustates                        []int32
	holds                          []int16
	uwindows                       []int64 // zero until setWindows
	windowed                       bool    // a job has a unique window: setWindows must run
}

// newInsertColumns validates params and lays them out in columns.
// It returns them by value: one allocation less per insert.
func newInsertColumns(params []*errandstore.JobInsertParams) (insertColumns, error) {
	n := len(params)
	c := insertColumns{
		n:   n,
		ids: make([]string, n), queues: make([]string, n), kinds: make([]string, n), args: make([]string, n), tags: make([]string, n),
		versions: make([]int32, n), prios: make([]int32, n), maxAttempts: make([]int32, n),
		bases: make([]int64, n), maxes: make([]int64, n), ages: make([]int64, n), delays: make([]int64, n),
		runAt: make([]*time.Time, n), startBy: make([]*time.Time, n),
		ukeys: make([]*string, n), okeys: make([]*string, n), fkeys: make([]*string, n), metas: make([]*string, n),
		ustates: make([]int32, n), holds: make([]int16, n),
		uwindows: make([]int64, n),
	}
	for i, p := range params {
		if err := p.Validate(); err != nil {
			return insertColumns{}, err
		}
		tagsJSON, err := p.TagsJSON()
		if err != nil {
			return insertColumns{}, err
		}
		c.ids[i], c.queues[i], c.kinds[i], c.args[i], c.tags[i] = p.ID, p.Queue, p.Kind, string(p.Args), tagsJSON
		c.versions[i], c.prios[i], c.maxAttempts[i] = int32(p.ArgsVersion), int32(p.Priority), int32(p.MaxAttempts)
		c.bases[i], c.maxes[i], c.ages[i], c.delays[i] = us(p.BackoffBase), us(p.BackoffMax), us(p.MaxAge), us(p.Delay)
		if !p.RunAt.IsZero() {
			t := micro(p.RunAt)
			c.runAt[i] = &t
		}
		if !p.StartBy.IsZero() {
			t := micro(p.StartBy)
			c.startBy[i] = &t
		}
		c.ukeys[i], c.okeys[i], c.fkeys[i] = nullIfEmpty(p.UniqueKey), nullIfEmpty(p.OrderingKey), nullIfEmpty(p.FairnessKey)
		if p.Metadata != nil {
			m := string(p.Metadata)
			c.metas[i] = &m
		}
		if p.Debounce != nil {
			if c.dkeys == nil {
				c.dkeys = make([]*string, n)
			}
			c.dkeys[i] = &p.Debounce.Key
		}
		c.ustates[i] = int32(p.UniqueScopeColumn())
		if p.OrderingHold {
			c.holds[i] = 1
		}
		c.windowed = c.windowed || (p.UniqueKey != "" && p.UniqueWindow > 0)
	}
	return c, nil
}

// setWindows computes the unique windows of params for jobs inserted at now.
func (c *insertColumns) setWindows(params []*errandstore.JobInsertParams, now time.Time) {
	for i, p := range params {
		c.uwindows[i] = p.UniqueWindowColumn(now)
	}
}

// debounceKey0 is the first job's debounce key, or nil.
func (c *insertColumns) debounceKey0() *string {
	if c.dkeys == nil {
		return nil
	}
	return c.dkeys[0]
}

// announces reports whether the insert of c announces its job on channel:
// a lone job's, when channel is set.
func (c *insertColumns) announces(channel string) bool { return channel != "" && c.n == 1 }

// query runs the insert, announcing a lone job on channel if it is set.
func (c *insertColumns) query(ctx context.Context, q querier, r *strings.Replacer, now any, channel string) (rows, error) {
	if c.announces(channel) {
		sql, args := c.statementOne(r, insertOneAnnouncedSQL, now)
		return q.query(ctx, sql, append(args, channel)...)
	}
	sql, args := c.statement(r, now)
	return q.query(ctx, sql, args...)
}

// statement is the insert: insertOneSQL, with scalars, for one job,
// insertSQL, with arrays, for more.
func (c *insertColumns) statement(r *strings.Replacer, now any) (string, []any) {
	if c.n == 1 {
		return c.statementOne(r, insertOneSQL, now)
	}
	return r.Replace(insertSQL), []any{now, c.ids, c.queues, c.kinds, c.args, c.versions, c.prios,
		c.maxAttempts, c.bases, c.maxes, c.ages, c.runAt, c.delays, c.ukeys, c.okeys, c.tags, c.ustates, c.uwindows, c.holds, c.fkeys, c.metas, c.dkeys, c.startBy}
}

// statementOne is sql, insertOneSQL or a statement around it, with the
// one job's scalars.
func (c *insertColumns) statementOne(r *strings.Replacer, sql string, now any) (string, []any) {
	return r.Replace(sql), []any{now, c.ids[0], c.queues[0], c.kinds[0], c.args[0], c.versions[0], c.prios[0],
		c.maxAttempts[0], c.bases[0], c.maxes[0], c.ages[0], c.runAt[0], c.delays[0], c.ukeys[0], c.okeys[0], c.tags[0],
		c.ustates[0], c.uwindows[0], c.holds[0], c.fkeys[0], c.metas[0], c.debounceKey0(), c.startBy[0]}
}

// matchInserted pairs params with the jobs the insert wrote: out holds
// those, dups the indexes of params that wrote none.
func matchInserted(params []*errandstore.JobInsertParams, inserted []*errandtype.Job) (out []errandstore.JobInsertResult, dups []int) {
	byID := make(map[string]*errandtype.Job, len(inserted))
	for _, j := range inserted {
		byID[j.ID] = j
	}
	out = make([]errandstore.JobInsertResult, len(params))
	for i, p := range params {
		if j, ok := byID[p.ID]; ok && errandstore.InsertedFor(j, p) {
			out[i] = errandstore.JobInsertResult{Job: j}
			delete(byID, p.ID) // a second job with this id is its duplicate
			continue
		}
		dups = append(dups, i)
	}
	return out, dups
}

// duplicatesSQL reads the jobs holding the ids $1 and the unique keys $2.
var duplicatesSQL = `SELECT ` + jobColumns + ` FROM {jobs} WHERE id = ANY($1)
		UNION SELECT ` + jobColumns + ` FROM {jobs} WHERE unique_key = ANY($2) AND ` + errandstore.UniqueHeldSQL()

// findDuplicates reads the jobs holding the ids and keys that the params
// at dups conflicted with and sets each one's result in out. again are
// the indexes of params whose holder is gone.
func findDuplicates(ctx context.Context, q querier, r *strings.Replacer, params []*errandstore.JobInsertParams, uwindows []int64, dups []int, out []errandstore.JobInsertResult) (again []int, err error) {
	// A conflict with a transaction that committed meanwhile is visible
	// here: each statement of a READ COMMITTED transaction takes a new
	// snapshot.
	var dupIDs, dupKeys []string
	for _, i := range dups {
		dupIDs = append(dupIDs, params[i].ID)
		if params[i].UniqueKey != "" {
			dupKeys = append(dupKeys, params[i].UniqueKey)
		}
	}
	rs, err := q.query(ctx, r.Replace(duplicatesSQL), dupIDs, dupKeys)
	if err != nil {
		return nil, fmt.Errorf("insert jobs: find duplicates: %w", err)
	}
	existing, err := scanJobs(rs, jobScanner())
	if err != nil {
		return nil, fmt.Errorf("insert jobs: find duplicates: %w", err)
	}
	held := holders{ofID: map[string]*errandtype.Job{}, ofKey: map[keyWindow]*errandtype.Job{}} // made here, where they do not escape
	held.add(existing)
	for _, i := range dups {
		p := params[i]
		j := held.ofID[p.ID] // the id match first, as SQLite does
		if j == nil && p.UniqueKey != "" {
			j = held.ofKey[keyWindow{p.UniqueKey, uwindows[i]}]
		}
		if j == nil {
			again = append(again, i) // conflicted with a job gone since
			continue
		}
		out[i] = errandstore.JobInsertResult{Job: j, Duplicate: true}
	}
	return again, nil
}

// keyWindow is a unique key in one of its windows (0: no window).
type keyWindow struct {
	key    string
	window int64
}

// holders are jobs that hold ids and unique keys, by what they hold.
type holders struct {
	ofID  map[string]*errandtype.Job
	ofKey map[keyWindow]*errandtype.Job
}

// add puts jobs in h by the id and the key in its window each holds.
func (h holders) add(jobs []*errandtype.Job) {
	for _, j := range jobs {
		h.ofID[j.ID] = j
		if j.UniqueKey != nil && j.UniqueScope != nil && j.UniqueScope.Holds(j.State) {
			var w int64
			if j.UniqueWindowStart != nil {
				w = j.UniqueWindowStart.UnixMicro()
			}
			h.ofKey[keyWindow{*j.UniqueKey, w}] = j
		}
	}
}

// insertAgain inserts the params at again, whose conflicting job left its
// key (or id) between the INSERT and the look-up: a job of a unique key
// that finished, say. Under READ COMMITTED the next statement sees the
// key free or held. Under a REPEATABLE READ or SERIALIZABLE snapshot it
// sees the same as before, and tries end. On the pool, outside a
// transaction, the jobs inserted by the first statement stay if the
// second fails: their ids are in the error, for a caller that retries to
// give them.
func (s *Store) insertAgain(ctx context.Context, q querier, r *strings.Replacer, params []*errandstore.JobInsertParams, again []int, out []errandstore.JobInsertResult, tries int) ([]errandstore.JobInsertResult, error) {
	if tries >= maxInsertTries {
		return nil, fmt.Errorf("insert job %s: it conflicts with a job this transaction cannot see (a REPEATABLE READ or SERIALIZABLE snapshot); retry the transaction", params[again[0]].ID)
	}
	sub := make([]*errandstore.JobInsertParams, len(again))
	for k, i := range again {
		sub[k] = params[i]
	}
	rs2, err := s.insertTry(ctx, q, r, sub, tries+1, "")
	if err != nil {
		var done []string
		for i := range out {
			if out[i].Job != nil && !out[i].Duplicate {
				done = append(done, out[i].Job.ID)
			}
		}
		if len(done) > 0 {
			return nil, fmt.Errorf("insert jobs (%d of them inserted, %s first): %w", len(done), done[0], err)
		}
		return nil, err
	}
	for k, i := range again {
		out[i] = rs2[k]
	}
	return out, nil
}

// maxInsertTries bounds how often insert writes jobs whose key's holder
// keeps leaving it between the INSERT and the look-up.
const maxInsertTries = 3

// readNow reads the time {now} stands for in statements of q.
func (s *Store) readNow(ctx context.Context, q querier, r *strings.Replacer) (time.Time, error) {
	rs, err := q.query(ctx, r.Replace(`SELECT {now}`), nil)
	if err != nil {
		return time.Time{}, err
	}
	defer rs.Close()
	var t time.Time
	if !rs.Next() {
		if err := rs.Err(); err != nil {
			return time.Time{}, err
		}
		return time.Time{}, errors.New("no row")
	}
	if err := rs.Scan(&t); err != nil {
		return time.Time{}, err
	}
	return micro(t), rs.Err()
}

// JobGet implements [errandstore.JobStore].
func (s *Store) JobGet(ctx context.Context, p *errandstore.JobGetParams) (*errandtype.Job, error) {
	id := p.ID
	if !errandtype.StorableText(id) {
		return nil, errandtype.ErrNotFound // no job can have it; PostgreSQL would refuse the query
	}
	j, err := scanReadJob(s.pool.QueryRow(ctx, s.sql(`SELECT `+readColumns+` FROM {jobs} j WHERE id = $1`), id))
	if isNoRows(err) {
		return nil, errandtype.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("get job %s: %w", id, err)
	}
	return j, nil
}

var _ errandstore.ManyJobGetter = (*Store)(nil)

// JobGetMany implements [errandstore.ManyJobGetter]: one statement for every id.
func (s *Store) JobGetMany(ctx context.Context, ids []string) ([]*errandtype.Job, error) {
	ids = slices.DeleteFunc(slices.Clone(ids), func(id string) bool {
		return !errandtype.StorableText(id) // no job can have it; PostgreSQL would refuse the query
	})
	if len(ids) == 0 {
		return nil, nil
	}
	rows, err := s.pool.Query(ctx, s.sql(`SELECT `+readColumns+` FROM {jobs} j WHERE id = ANY($1)`), ids)
	if err != nil {
		return nil, fmt.Errorf("get %d jobs: %w", len(ids), err)
	}
	jobs, err := scanJobs(rows, readJobScanner())
	if err != nil {
		return nil, fmt.Errorf("get %d jobs: %w", len(ids), err)
	}
	return jobs, nil
}

// JobList implements [errandstore.JobStore]. A list of states other than
// succeeded (the waiting, the running, the dead) may be a few jobs beside a
// long history of succeeded ones, the waiting and running ones at its end,
// or a backlog of a million. Walking the primary key in seq order until the
// page fills, the planner's choice, read the whole history first in the
// first case (185 ms for a page of queued jobs beside a million succeeded
// ones); fetching the listed states' jobs through their own indexes and
// sorting them read the whole backlog in the second (650 to 730 ms a page
// of a million queued). So the list walks the next listWalk jobs in seq
// order first, and only when they hold less than a page does it fetch and
// sort (TestOperatorReadsBesideHistory, TestListBesideBacklog).
func (s *Store) JobList(ctx context.Context, p *errandstore.JobListParams) ([]*errandtype.Job, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if !errandtype.StorableText(p.Queue) || !errandtype.StorableText(p.Kind) {
		return []*errandtype.Job{}, nil // no job is in such a queue or of such a kind
	}
	apart := len(p.States) > 0 && !slices.Contains(p.States, errandtype.StateSucceeded)
	var js []*errandtype.Job
	for _, walk := range []bool{apart, false} {
		q, args, limit := jobListSQL(p, walk)
		rs, err := s.pool.Query(ctx, s.sql(q), args...)
		if err != nil {
			return nil, fmt.Errorf("list jobs: %w", err)
		}
		if js, err = scanJobs(rs, readJobScanner()); err != nil {
			return nil, fmt.Errorf("list jobs: %w", err)
		}
		if !walk || len(js) == limit {
			break
		}
	}
	return js, nil
}

// orderBySeqApart orders by seq without letting the planner walk the
// primary key to fill a page: no index holds seq + 0, so the planner reads
// the jobs through the index of their conditions and sorts them.
const orderBySeqApart = "seq + 0"

// listWalk is how many jobs after its cursor a list of states other than
// succeeded reads in seq order before it fetches its states' jobs apart
// (see JobList).
const listWalk = 5000

// jobListSQL is JobList's query, its arguments and its page size: with
// walk, over the next listWalk jobs in seq order alone; without, over every
// job, in seq order too but, for states other than succeeded, fetched
// through their own indexes and sorted (orderBySeqApart).
func jobListSQL(p *errandstore.JobListParams, walk bool) (string, []any, int) {
	var where []string
	args := []any{p.AfterSeq}
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	if len(p.States) > 0 {
		where = append(where, statesWhere(p.States))
	}
	if p.Queue != "" {
		where = append(where, "queue = "+arg(p.Queue))
	}
	if p.Kind != "" {
		where = append(where, "kind = "+arg(p.Kind))
	}
	// Containment with @>, which the stores' shared check (ContainmentLeaves)
	// limits to what SQLite's json functions match alike. No index serves it
	// unless the operator made one (docs/search.md): the list walks seqs.
	if p.ArgsHas != nil {
		where = append(where, "args @> "+arg(string(p.ArgsHas))+"::jsonb")
	}
	if p.OutputHas != nil {
		where = append(where, "output::jsonb @> "+arg(string(p.OutputHas))+"::jsonb")
	}
	if len(p.Tags) > 0 {
		where = append(where, "tags @> "+arg(p.TagsFilterJSON())+"::jsonb")
	}
	where = p.FlowWhere(where, "j.last_error ->> 'class'", arg)
	limit := p.Limit
	if limit <= 0 {
		limit = 100
	}
	from, order := `{jobs} j`, "seq"
	switch {
	case walk:
		from = `(SELECT * FROM {jobs} WHERE seq > $1 ORDER BY seq LIMIT ` + strconv.Itoa(listWalk) + `) j`
	case len(p.States) > 0 && !slices.Contains(p.States, errandtype.StateSucceeded):
		order = orderBySeqApart
	}
	where = append([]string{"seq > $1"}, where...)
	q := `SELECT ` + readColumns + ` FROM ` + from + ` WHERE ` + strings.Join(where, " AND ") + ` ORDER BY ` + order + ` LIMIT ` + arg(limit)
	return q, args, limit
}

// genericPlans makes the statements after it in a transaction run on their
// generic plans; defaultPlans gives the choice back to the server's
// setting. They bracket the next-due query. PostgreSQL plans a prepared
// statement afresh for its parameters at each of its first five runs, then
// keeps doing so for good whenever the generic plan's estimated cost is
// higher than the average of those: for the next-due query it always is,
// and planning it took 0.5 to 1.5 ms, ten times its run, in every idle
// claim, on the path from an enqueue to the start of its job. Its generic
// plan is pinned by TestClaimPlanWithoutStatistics. The claim itself is
// left to the server: its generic plan, although it walks the same index,
// made BenchmarkClaimOnly/jobs=100 three times slower (18 ms against 6),
// and the server settles on a generic plan for a one-job claim by itself.
// SET LOCAL ends with the transaction, so a caller's pool keeps its own
// setting.
const (
	genericPlans = "SET LOCAL plan_cache_mode = force_generic_plan"
	defaultPlans = "SET LOCAL plan_cache_mode TO DEFAULT"
)

// claimSQL claims in one statement. The subselect walks the partial claim
// index of one queue in claim order and locks the first claimable rows,
// skipping rows another claimer holds, so concurrent claimers never wait
// for each other and never share a job; the cost is the batch's, however
// many jobs wait. Each row gets its own token. The picked seqs are
// collected into an array first, so that the update reads them by primary
// key whatever the planner guesses. With "seq IN (...)" it joined the pick
// to a scan of the whole table in a generic plan (which assumes the limit
// is a tenth of the rows) after stale statistics, and sorted a whole
// never-analyzed table when claiming from several queues (see
// TestClaimPlanWithoutStatistics).
var claimSQL = `UPDATE {jobs} SET ` + joinColumns(claimSets("$2", "$3"), "%[1]s = %[2]s") + `
	WHERE seq = ANY(ARRAY({pick}))
	RETURNING ` + jobColumns

// claimSets are what a claim writes into a job it takes, column and value,
// of a lease of lease microseconds held by owner (two parameters).
// Unqualified columns are the job's before the claim. A first start puts
// back the maximum age's deadline that its start-by replaced (see
// errandstore.FirstDeadline).
func claimSets(lease, owner string) [][2]string {
	return [][2]string{
		{"state", "'running'"},
		{"attempt", "attempt + 1"},
		{"attempted_at", "{now}"},
		{"deadline", `CASE WHEN start_by IS NULL OR attempted_at IS NOT NULL THEN deadline
			WHEN max_age_us > 0 THEN created_at + max_age_us * interval '1 microsecond' END`},
		{"lease_token", "replace(gen_random_uuid()::text, '-', '')"},
		{"lease_until", "{now} + " + lease + " * interval '1 microsecond'"},
		{"lease_owner", owner},
	}
}

// orderingFree is errand's ordering-key rule on a candidate aliased j. A
// concurrent claimer sees a job another has just locked as still queued, so
// it never takes the next job of that key early. It does not see a later
// job of the key another claim is starting: the unique index
// errand_jobs_ordering_running fails the second of two such claims, which
// is tried again (see orderingRace).
var orderingFree = errandstore.OrderingFreeSQL("{jobs}")

// The claim index (queue, fairness_key IS NULL, priority, available_at,
// seq) holds a queue's waiting jobs in two ranges: those without a
// fairness key, then those with one, each in claim order. A plain claim
// walks both, through keyRanges (a set-returning function, so that the
// planner cannot fold a range's constant into "fairness_key IS NOT NULL",
// which the index does not match), and merges what they return.
const (
	keyRanges = `unnest('{true,false}'::boolean[]) AS k(unkeyed)`
	inRange   = `(fairness_key IS NULL) = k.unkeyed`
)

// wantedKind is a claim's filter of the kinds it wants ($5, NULL: every
// kind). It compares kind joined to an empty string, an expression no
// index holds, and not the column: a custom plan for named kinds then
// matched errand_jobs_state (state, queue, kind; dropped since) on three
// of the claim's conditions, and on a bulk-loaded table no ANALYZE had
// seen yet the planner preferred that index to the claim index. Such a
// claim read and sorted every waiting job of its queue: 687 ms for 100
// jobs with a million waiting, against 3 ms through the claim index (see
// TestClaimPlanWithoutStatistics).
var wantedKind = wantedKinds("$5")

// wantedKinds is wantedKind with the kinds in parameter kinds.
func wantedKinds(kinds string) string {
	return `AND (` + kinds + `::text[] IS NULL OR kind || '' = ANY(` + kinds + `))`
}

// claimable is the claim's rule for a job j: waiting, available, within
// its deadline, of a kind the claim wants ($5), its ordering key free.
var claimable = claimableKeyless("$5") + ` AND ` + orderingFree

// claimableKeyless is claimable, with the kinds wanted in parameter kinds,
// for a job without an ordering key, for which orderingFree holds.
func claimableKeyless(kinds string) string {
	return `state IN (` + waiting + `) AND available_at <= {now}
				AND (deadline IS NULL OR deadline > {now})
				` + wantedKinds(kinds)
}

// claimPick picks from the queues of from, a FROM item q(name): the first
// Limit claimable jobs of each range of each queue, and the best Limit of
// those. The other rows it locked stay locked (and skipped by other
// claimers) only until this short transaction ends; a queue whose jobs
// carry no key has nothing in the second range.
func claimPick(from string) string {
	return `SELECT c.seq FROM ` + from + ` CROSS JOIN ` + keyRanges + ` CROSS JOIN LATERAL (
			SELECT seq, priority, available_at FROM {jobs} j
			WHERE queue = q.name AND ` + inRange + ` AND ` + claimable + `
			ORDER BY priority, available_at, seq
			LIMIT $6
			FOR UPDATE SKIP LOCKED) c
		ORDER BY c.priority, c.available_at, c.seq
		LIMIT $6`
}

var (
	// claimOneQueue picks from one queue ($4, the worker's claims).
	claimOneQueue = claimPick(`(SELECT $4::text AS name) q`)
	// claimManyQueues picks from several ($4). queue = ANY(...) would read
	// and sort every ready job of those queues before the limit; instead
	// each range of each queue's index is walked for its first Limit jobs.
	claimManyQueues = claimPick(`unnest($4::text[]) AS q(name)`)
)

var (
	claimOneSQL  = replacePick(claimSQL, claimOneQueue)
	claimManySQL = replacePick(claimSQL, claimManyQueues)
	// The claims that leave out the retries of some kinds ($7), for a
	// worker with a spent retry budget: the others are unchanged.
	claimOneSkipSQL  = skipRetries(claimOneSQL)
	claimManySkipSQL = skipRetries(claimManySQL)
)

// replacePick puts a pick, a query of the seqs to claim, into claimSQL.
func replacePick(claim, pick string) string { return strings.Replace(claim, "{pick}", pick, 1) }

func skipRetries(q string) string {
	if !strings.Contains(q, wantedKind) {
		panic("postgres: the claim has no kind filter to extend")
	}
	return strings.Replace(q, wantedKind, wantedKind+skipRetryKinds, 1)
}

// skipRetryKinds leaves out the retries of the kinds $7.
const skipRetryKinds = " AND NOT (attempt > 0 AND kind = ANY($7::text[]))"

// JobClaimMany implements [errandstore.JobStore].
func (s *Store) JobClaimMany(ctx context.Context, p *errandstore.JobClaimParams) ([]*errandtype.Job, error) {
	jobs, _, err := s.claim(ctx, p, nil)
	return jobs, err
}

var _ errandstore.NextDueClaimer = (*Store)(nil)

// JobClaimManyNextDue implements [errandstore.NextDueClaimer]: the next-due
// query goes in the claim's pipelined batch, after its sweeps and before
// the claim, in its transaction, so that both statements compare
// available_at with the same now.
func (s *Store) JobClaimManyNextDue(ctx context.Context, p *errandstore.JobClaimParams, next *errandstore.JobNextDueParams) ([]*errandtype.Job, errandstore.JobNextDueResult, error) {
	return s.claim(ctx, p, next)
}

// claimTries bounds how often a claim is tried again after its update met a
// job of an ordering key that a concurrent claim had just started (see
// orderingRace).
const claimTries = 3

// orderingRace reports a claim that failed on errand_jobs_ordering_running:
// a concurrent claim committed a job of the same ordering key after this
// claim's snapshot was taken. Tried again, the claim sees the key held.
func orderingRace(err error) bool { return isUniqueViolation(err, "errand_jobs_ordering_running") }

// claim is JobClaimMany, answering JobNextDue for next too unless it is
// nil.
func (s *Store) claim(ctx context.Context, p *errandstore.JobClaimParams, next *errandstore.JobNextDueParams) ([]*errandtype.Job, errandstore.JobNextDueResult, error) {
	for try := 1; ; try++ {
		jobs, due, err := s.claimOnce(ctx, p, next)
		if try < claimTries && orderingRace(err) {
			continue
		}
		return jobs, due, err
	}
}

// claimOnce is one try of claim.
//
// The sweeps (when due, see errandstore.ClaimSweeps), the claim and its
// COMMIT go in one pipelined batch behind an explicit BEGIN, so they take
// one round trip and the claim sees what the sweeps freed. A statement
// that fails rolls the whole back. The rows are read after the server
// has committed them, so a row that does not decode is given back with
// its attempt uncounted (see errandstore.GiveBackUnread), and the rest
// run. Waiting for the rows before sending COMMIT cost a round trip per
// claim: about a third of a millisecond from an enqueue to its start in
// an idle worker (bench/HISTORY.md). A connection lost while the rows
// are on their way leaves its jobs to the lease sweep, as a worker that
// dies does.
func (s *Store) claimOnce(ctx context.Context, p *errandstore.JobClaimParams, next *errandstore.JobNextDueParams) ([]*errandtype.Job, errandstore.JobNextDueResult, error) {
	askDue, err := validateClaim(p, next)
	if err != nil {
		return nil, errandstore.JobNextDueResult{}, err
	}
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, errandstore.JobNextDueResult{}, fmt.Errorf("claim: %w", err)
	}
	defer conn.Release()
	sweep := s.sweeps.Due(s.paceNow())
	br := conn.SendBatch(ctx, s.claimBatch(p, next, sweep, askDue))
	jobs, unread, due, err := readClaimBatch(br, sweep, askDue)
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		s.abortClaim(ctx, conn, sweep)
		return nil, errandstore.JobNextDueResult{}, fmt.Errorf("claim: %w", err)
	}
	conn.Release() // the give-back takes a connection of its own
	errandstore.GiveBackUnread(ctx, s, s.logger, unread)
	errandstore.SortClaimOrder(jobs)
	return jobs, due, nil
}

// claimBatch is the batch claimOnce sends: BEGIN and the JIT setting, the
// sweeps if sweep, the next-due query if askDue, the claim and COMMIT.
func (s *Store) claimBatch(p *errandstore.JobClaimParams, next *errandstore.JobNextDueParams, sweep, askDue bool) *pgx.Batch {
	now := s.nowArg()
	b := &pgx.Batch{}
	b.Queue(beginSQL)
	b.Queue(claimNoJIT)
	if sweep {
		s.queueSweep(b, now)
	}
	if askDue {
		b.Queue(genericPlans)
		b.Queue(s.sql(nextDueSQL), now, next.Queues, kindFilter(next.Kinds))
		b.Queue(defaultPlans)
	}
	s.queueClaim(b, p, now)
	b.Queue("COMMIT")
	return b
}

// validateClaim validates p, and next unless it asks nothing; askDue
// reports whether it asks.
func validateClaim(p *errandstore.JobClaimParams, next *errandstore.JobNextDueParams) (askDue bool, err error) {
	if err := p.Validate(); err != nil {
		return false, err
	}
	askDue = next != nil && len(next.Queues) > 0
	if askDue {
		if err := next.Validate(); err != nil {
			return false, err
		}
	}
	return askDue, nil
}

// kindFilter is kinds as a claim filters on them: NULL, every kind, when
// there are none.
func kindFilter(kinds []string) []string {
	if len(kinds) == 0 {
		return nil
	}
	return kinds
}

// queueClaim queues the claim of p in b: the statement for one queue or
// many, leaving out the retries of p.SkipRetryKinds if any.
func (s *Store) queueClaim(b *pgx.Batch, p *errandstore.JobClaimParams, now any) {
	queues := slices.Compact(slices.Sorted(slices.Values(p.Queues)))
	kinds := kindFilter(p.Kinds)
	switch {
	case len(p.SkipRetryKinds) > 0 && len(queues) == 1:
		b.Queue(s.sql(claimOneSkipSQL), now, us(p.Lease), p.Owner, queues[0], kinds, p.Limit, p.SkipRetryKinds)
	case len(p.SkipRetryKinds) > 0:
		b.Queue(s.sql(claimManySkipSQL), now, us(p.Lease), p.Owner, queues, kinds, p.Limit, p.SkipRetryKinds)
	case len(queues) == 1:
		b.Queue(s.sql(claimOneSQL), now, us(p.Lease), p.Owner, queues[0], kinds, p.Limit)
	default:
		b.Queue(s.sql(claimManySQL), now, us(p.Lease), p.Owner, queues, kinds, p.Limit)
	}
}

// A claim runs without JIT compilation. Its estimated cost grows with the
// rows the planner expects to walk past before the limit fills, and on an
// analyzed table of 20,000 waiting jobs it passed jit_above_cost (100,000 by
// default): each claim then compiled its plan anew, 10 to 15 ms of a 20 ms
// claim of 500 jobs, and a drain ran at 0.6 times its speed
// (TestClaimWithoutJIT). A claim reads a few rows per job; compiling never
// pays.
const claimNoJIT = noJIT

// readClaimBatch reads the results of a claimBatch: the jobs claimed, and
// those whose rows did not decode.
func readClaimBatch(br pgx.BatchResults, sweep, askDue bool) ([]*errandtype.Job, []errandstore.UnreadJob, errandstore.JobNextDueResult, error) {
	var due errandstore.JobNextDueResult
	for range 2 {
		if _, err := br.Exec(); err != nil {
			return nil, nil, due, err
		}
	}
	if sweep {
		if _, err := readSweep(br); err != nil {
			return nil, nil, due, err
		}
	}
	if askDue {
		var err error
		if due, err = readNextDue(br); err != nil {
			return nil, nil, due, err
		}
	}
	jobs, unread, err := readClaimed(br)
	return jobs, unread, due, err
}

// readClaimed reads a claim's rows from br, and then the COMMIT sent
// behind the claim (see claimOnce): the jobs claimed, and those whose
// rows did not decode.
func readClaimed(br pgx.BatchResults) ([]*errandtype.Job, []errandstore.UnreadJob, error) {
	rs, err := br.Query()
	if err != nil {
		return nil, nil, err
	}
	jobs, unread, err := scanCommittedClaim(rs)
	if err != nil {
		return nil, nil, err
	}
	if _, err := br.Exec(); err != nil { // COMMIT
		return nil, nil, err
	}
	return jobs, unread, nil
}

// readNextDue reads the results of the next-due query and the plan
// settings around it.
func readNextDue(br pgx.BatchResults) (errandstore.JobNextDueResult, error) {
	var at *time.Time
	var dueNow time.Time
	if _, err := br.Exec(); err != nil {
		return errandstore.JobNextDueResult{}, err
	}
	if err := br.QueryRow().Scan(&at, &dueNow); err != nil {
		return errandstore.JobNextDueResult{}, fmt.Errorf("next due: %w", err)
	}
	if _, err := br.Exec(); err != nil {
		return errandstore.JobNextDueResult{}, err
	}
	if at == nil {
		return errandstore.JobNextDueResult{}, nil
	}
	return errandstore.JobNextDueResult{Wait: at.Sub(dueNow), Found: true}, nil
}

// abortClaim rolls back a claim that failed. It rolls back on a context
// of its own: the caller's may be what ended the claim. A connection that
// cannot roll back is closed, which ends its transaction too.
func (s *Store) abortClaim(ctx context.Context, c conn, sweep bool) {
	if sweep {
		s.sweeps.Failed()
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if _, rerr := c.Exec(rctx, "ROLLBACK"); rerr != nil {
		c.Conn().Close(rctx)
	}
}

// nextDueSQL finds the earliest job that comes due after now. For each
// queue and each range of the claim index (jobs without a fairness key,
// jobs with one) it walks the index from priority to priority, one seek
// each (a loose index scan, which PostgreSQL does not do by itself), and in
// each priority from now to the first row of a wanted kind; then it takes
// the earliest of those. Its cost grows with the number of distinct
// priorities waiting in a queue, not with the number of jobs. It returns
// NULL when none waits, and the statement's now, so that the wait is
// measured on one clock.
var nextDueSQL = `SELECT min(n.at), {now} FROM unnest($2::text[]) AS q(name) CROSS JOIN ` + keyRanges + ` CROSS JOIN LATERAL (
		WITH RECURSIVE prio(p) AS (
			(SELECT priority FROM {jobs}
				WHERE queue = q.name AND ` + inRange + ` AND state IN (` + waiting + `)
				ORDER BY priority LIMIT 1)
			UNION ALL
			SELECT (SELECT priority FROM {jobs}
				WHERE queue = q.name AND ` + inRange + ` AND state IN (` + waiting + `) AND priority > prio.p
				ORDER BY priority LIMIT 1)
			FROM prio WHERE prio.p IS NOT NULL)
		SELECT (SELECT available_at FROM {jobs}
				WHERE queue = q.name AND ` + inRange + ` AND priority = prio.p AND state IN (` + waiting + `)
					AND available_at > {now} AND ($3::text[] IS NULL OR kind = ANY($3))
				ORDER BY available_at
				LIMIT 1) AS at
		FROM prio WHERE prio.p IS NOT NULL) n`

// JobNextDue implements [errandstore.JobStore].
func (s *Store) JobNextDue(ctx context.Context, p *errandstore.JobNextDueParams) (errandstore.JobNextDueResult, error) {
	if err := p.Validate(); err != nil {
		return errandstore.JobNextDueResult{}, err
	}
	if len(p.Queues) == 0 {
		return errandstore.JobNextDueResult{}, nil
	}
	var kinds []string // NULL: every kind
	if len(p.Kinds) > 0 {
		kinds = p.Kinds
	}
	var next *time.Time
	var now time.Time
	// In a transaction of its own, for genericPlans; the four statements
	// go in one pipelined batch, one round trip.
	b := &pgx.Batch{}
	b.Queue(beginSQL)
	b.Queue(genericPlans)
	b.Queue(s.sql(nextDueSQL), s.nowArg(), p.Queues, kinds).QueryRow(func(row pgx.Row) error {
		return row.Scan(&next, &now)
	})
	b.Queue("COMMIT")
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return errandstore.JobNextDueResult{}, fmt.Errorf("next due: %w", err)
	}
	if next == nil {
		return errandstore.JobNextDueResult{}, nil
	}
	return errandstore.JobNextDueResult{Wait: next.Sub(now), Found: true}, nil
}

// JobHeartbeatMany implements [errandstore.JobStore]: one statement for the batch,
// each lease fenced by its own token.
func (s *Store) JobHeartbeatMany(ctx context.Context, p *errandstore.JobHeartbeatParams) ([]errandstore.HeartbeatResult, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	rs := make([]errandstore.HeartbeatResult, len(p.Leases))
	if len(p.Leases) == 0 {
		return rs, nil
	}
	ids, tokens := make([]string, len(p.Leases)), make([]string, len(p.Leases))
	for k, i := range byID(len(p.Leases), func(i int) string { return p.Leases[i].ID }) {
		ids[k], tokens[k] = p.Leases[i].ID, p.Leases[i].LeaseToken
	}
	rows, err := s.pool.Query(ctx, s.sql(heartbeatSQL), s.nowArg(), us(p.Lease), ids, tokens)
	if err != nil {
		return nil, fmt.Errorf("heartbeat: %w", badValue(err))
	}
	renewed := map[[2]string]errandstore.HeartbeatResult{}
	var id, tok string
	var until time.Time
	var cancel bool
	_, err = pgx.ForEachRow(rows, []any{&id, &tok, &until, &cancel}, func() error {
		renewed[[2]string{id, tok}] = errandstore.HeartbeatResult{LeaseUntil: until.UTC(), CancelRequested: cancel}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("heartbeat: %w", badValue(err))
	}
	for i, l := range p.Leases {
		if r, ok := renewed[[2]string{l.ID, l.LeaseToken}]; ok {
			rs[i] = r
		} else {
			rs[i] = errandstore.HeartbeatResult{Err: errandtype.ErrLeaseLost}
		}
	}
	return rs, nil
}

// heartbeatSQL extends the leases of jobs $3 held under tokens $4 by $2
// microseconds.
var heartbeatSQL = `UPDATE {jobs} j SET lease_until = {now} + $2 * interval '1 microsecond'
	FROM ` + leaseRows("u.id, u.token", "unnest($3::text[], $4::text[]) AS u(id, token)", "l") + `
	WHERE ` + leaseFence("j", "l") + `
	RETURNING j.id, j.lease_token, j.lease_until, j.cancel_requested_at IS NOT NULL`

// JobSetProgress implements [errandstore.JobStore].
func (s *Store) JobSetProgress(ctx context.Context, p *errandstore.JobSetProgressParams) error {
	if err := p.Validate(); err != nil {
		return err
	}
	id := p.ID
	tag, err := s.pool.Exec(ctx, s.sql(`UPDATE {jobs} j SET progress = $2::jsonb
		FROM `+leaseRows("$3::text AS id, $4::text AS token", "", "l")+` WHERE `+leaseFence("j", "l")),
		s.nowArg(), string(p.Progress), id, p.LeaseToken)
	if err != nil {
		return fmt.Errorf("set progress of job %s: %w", id, badValue(err))
	}
	if tag.RowsAffected() == 0 {
		return errandtype.ErrLeaseLost
	}
	return nil
}

// historyAt formats a timestamptz as the JSON history writes times:
// RFC 3339 in UTC with the fraction's trailing zeros trimmed, exactly as Go's
// time.RFC3339Nano (and so the SQLite store) writes them.
func historyAt(t string) string {
	return `(rtrim(rtrim(to_char(` + t + ` AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US'), '0'), '.') || 'Z')`
}

// historyEntry is the SQL of one history entry (as a one-element array) and
// of last_error, from expressions for the attempt, class, message and stack.
func historyEntry(attempt, class, message, stack string) (entry, last string) {
	at := historyAt("{now}")
	entry = `jsonb_build_array(jsonb_build_object('attempt', ` + attempt + `, 'replay', replays, 'at', ` + at +
		`, 'class', ` + class + `, 'message', ` + message + `, 'stack', ` + stack + `))`
	last = `jsonb_build_object('class', ` + class + `, 'message', ` + message + `, 'at', ` + at + `)`
	return entry, last
}

// The outcome writes apply a batch of outcomes in one statement. Each
// outcome is a row of unnested arrays, o, joined to its job only while the
// job runs under the outcome's token with a live lease; an outcome that
// matches no row lost its lease. At most one outcome per job can match (its
// current token); JobRecordOutcomes sends a lease's first outcome only.
//
// A batch comes in one of two forms. The full form sends every column of
// the outcomes ($2 to $10). The plain form is for a batch whose outcomes
// append no error and wait no delay (successes, above all): the columns
// that would be the same for every row are constants, the values the full
// form would be sent for them, so only the ids, tokens and kinds travel
// ($2 to $4), as array literals (see textArray); each row's ord is its
// place in them, from 1. A batch that deletes some of its jobs and keeps
// the others (outcomesSome) also sends which ($11 or $5).
//
// A lone plain outcome, what a worker that is not busy writes, sends its
// id, token and kind as scalars, one row of VALUES: the server then plans
// the statement once and keeps the plan, where the arrays' estimate kept
// it planning each write anew (bench/HISTORY.md, "Durable flows beside
// DBOS Transact, with Eager").
func outcomesFrom(form outcomeForm, some bool) string {
	switch form {
	case formOne:
		return leaseRows(`u.id, u.token, u.kind, 0::bigint AS delay_us, 0::integer AS attempt,
			NULL::text AS class, ''::text AS message, ''::text AS stack, u.ord`,
			`(VALUES ($2::text, $3::text, $4::text, 1::bigint)) AS u(id, token, kind, ord)`, "o")
	case formPlain:
		sel, arg, name := "", "", ""
		if some {
			sel, arg, name = ", u.gone", ", $5::boolean[]", " gone,"
		}
		return leaseRows(`u.id, u.token, u.kind, 0::bigint AS delay_us, 0::integer AS attempt,
			NULL::text AS class, ''::text AS message, ''::text AS stack, u.ord`+sel,
			`unnest($2::text[], $3::text[], $4::text[]`+arg+`) WITH ORDINALITY AS u(id, token, kind,`+name+` ord)`, "o")
	}
	arg, name := "", ""
	if some {
		arg, name = ", $11::boolean[]", ", gone"
	}
	return leaseRows("u.*", `unnest($2::text[], $3::text[], $4::text[], $5::bigint[], $6::integer[], $7::text[],
			$8::text[], $9::text[], $10::integer[]`+arg+`)
		AS u(id, token, kind, delay_us, attempt, class, message, stack, ord`+name+`)`, "o")
}

// outcomeForm is how a batch's outcomes travel (see outcomesFrom).
type outcomeForm int

const (
	formFull  outcomeForm = iota // every column, as arrays
	formPlain                    // ids, tokens and kinds, as arrays
	formOne                      // one plain outcome's id, token and kind
	outcomeForms
)

// outcomeDeletes says which jobs of a batch its write deletes (the
// successes of JobOutcome.Delete): none, all, or some.
type outcomeDeletes int

const (
	deleteNone outcomeDeletes = iota
	deleteAll
	deleteSome
)

// outcomeFence is the condition under which an outcome o (see leaseRows)
// applies to its job j.
var outcomeFence = leaseFence("j", "o")

// leaseRows makes a FROM item, named alias, of the leases a write is fenced
// by: the columns cols (an id and a token among them) of the rows of from
// (none: one row), with the state a held job is in and the time the leases
// must outlive, for leaseFence. Taking these from the rows, behind OFFSET 0,
// which keeps the planner from folding them back into constants, makes every
// condition of the fence a join condition: the planner then finds each job
// by its id, whatever its statistics say of the running jobs. With them as
// constants, after an ANALYZE that saw no job running, it estimated one
// running job, read the running jobs first and checked each against every
// outcome of the batch: 70 to 190 ms a write of 500 outcomes instead of 2
// to 5 (TestFencedWritesAfterAnalyze).
func leaseRows(cols, from, alias string) string {
	if from != "" {
		from = ` FROM ` + from
	}
	return `(SELECT ` + cols + `, '` + string(errandtype.StateRunning) + `'::text AS lease_state, {now} AS now` + from + `
		OFFSET 0) AS ` + alias
}

// leaseFence is the fence of a write by a lease's holder: job j is running
// under the token of lease l (see leaseRows), and the lease is live. No
// condition is an equality the planner can hash or merge on (the id is
// matched as id = ANY(ARRAY[l.id]), the rest with IS NOT DISTINCT FROM,
// the same for values never NULL), so the only plan left is the one
// wanted: each lease's job looked up in the id index. With equalities, on
// a table of 20,000 jobs, the planner read and sorted or hashed the whole
// table to join it to 500 outcomes, 2 to 14 ms of a write that takes 5.
func leaseFence(j, l string) string {
	return j + `.id = ANY(ARRAY[` + l + `.id]) AND ` + j + `.lease_token IS NOT DISTINCT FROM ` + l + `.token AND ` +
		j + `.state IS NOT DISTINCT FROM ` + l + `.lease_state AND ` + j + `.lease_until > ` + l + `.now`
}

// followColumns are what the follow-ups of an outcome need too
// (JobRecordOutcomesParams.Follow), after ord, state and available_at.
const followColumns = `, j.kind, j.batch_id, j.workflow_id, j.attempted_at, j.output, j.last_error::text`

// outcomesWrite is the statement that writes a batch of the form plain
// (see outcomesFrom) deleting the jobs dels says, returning each written
// row's ord, state and available_at, and followColumns when follow. A
// deleted job is reported succeeded: a delete writes no new version of the
// row and no index entry, where an update writes three.
func outcomesWrite(form outcomeForm, dels outcomeDeletes, follow bool) string {
	from := outcomesFrom(form, dels == deleteSome)
	returning := ""
	if follow {
		returning = followColumns
	}
	del := func(only string) string {
		return `DELETE FROM {jobs} j USING ` + from + `
	WHERE ` + only + outcomeFence + `
	RETURNING o.ord, '` + string(errandtype.StateSucceeded) + `'::text AS state, j.available_at` + returning
	}
	switch dels {
	case deleteAll:
		return del("")
	case deleteSome:
		return `WITH gone AS (` + del("o.gone AND ") + `),
	kept AS (` + outcomesUpdate(from, "NOT o.gone AND ") + returning + `)
	SELECT * FROM gone UNION ALL SELECT * FROM kept`
	}
	return outcomesUpdate(from, "") + returning
}

// outcomeWrites are outcomesWrite's statements, by form, deletes and
// follow.
var outcomeWrites = func() (w [outcomeForms][3][2]string) {
	for form := range outcomeForms {
		for dels := range 3 {
			for follow := range 2 {
				w[form][dels][follow] = outcomesWrite(form, outcomeDeletes(dels), follow == 1)
			}
		}
	}
	return w
}()

// textArray spells vals as the literal of a PostgreSQL text array, every
// element quoted. pgx sends a string argument in the text format whatever
// the parameter's type, so the server parses the literal into the text[]
// the statement declares. The plain outcome write sends its ids, tokens
// and kinds so: encoding a []string in the binary format boxes each
// element and grows the message's buffer by doubling, and those
// allocations were a third of the bytes a busy worker allocated per job.
// The values hold no NUL (Validate refuses one), the one byte a literal
// cannot carry.
func textArray(vals []string) string {
	n := 2
	for _, v := range vals {
		n += len(v) + 3
	}
	var b strings.Builder
	b.Grow(n)
	b.WriteByte('{')
	for i, v := range vals {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteByte('"')
		for {
			k := strings.IndexAny(v, `"\`)
			if k < 0 {
				break
			}
			b.WriteString(v[:k])
			b.WriteByte('\\')
			b.WriteByte(v[k])
			v = v[k+1:]
		}
		b.WriteString(v)
		b.WriteByte('"')
	}
	b.WriteByte('}')
	return b.String()
}

// outcomesUpdate is the update of outcomesWrite reading its outcomes, o,
// from from, those of which only holds.
func outcomesUpdate(from, only string) string {
	entry, last := historyEntry("o.attempt", "o.class", "o.message", "o.stack")
	yields := errandstore.SQLOutcomeKinds(errandstore.OutcomeKind.YieldsToCancel)
	// A cancel request that the attempt did not hear of in time still wins
	// over an outcome that would leave the job waiting.
	return `UPDATE {jobs} j SET
		state = CASE WHEN j.cancel_requested_at IS NOT NULL AND o.kind IN (` + yields + `)
			THEN '` + string(errandtype.StateCancelled) + `' ELSE ` + errandstore.OutcomeStateSQL("o.kind") + ` END,
		attempt = CASE WHEN o.kind IN (` + errandstore.SQLOutcomeKinds(func(k errandstore.OutcomeKind) bool { return !k.CountsAttempt() }) + `)
			THEN j.attempt - 1 ELSE j.attempt END,
		available_at = CASE
			WHEN o.kind IN (` + errandstore.SQLOutcomeKinds(errandstore.OutcomeKind.Delayed) + `)
				THEN {now} + o.delay_us * interval '1 microsecond'
			WHEN o.kind IN (` + errandstore.SQLOutcomeKinds(func(k errandstore.OutcomeKind) bool { return k.State().Waiting() }) + `) THEN {now}
			ELSE j.available_at END,
		finished_at = CASE WHEN o.kind IN (` + errandstore.SQLOutcomeKinds(func(k errandstore.OutcomeKind) bool { return k.State().Terminal() }) + `)
				OR (j.cancel_requested_at IS NOT NULL AND o.kind IN (` + yields + `))
			THEN {now} ELSE j.finished_at END,
		errors = CASE WHEN o.class IS NULL THEN j.errors ELSE j.errors || ` + entry + ` END,
		last_error = CASE WHEN o.class IS NULL THEN j.last_error ELSE ` + last + ` END,
		lease_token = NULL, lease_until = NULL
	FROM ` + from + `
	WHERE ` + only + outcomeFence + `
	RETURNING o.ord, j.state, j.available_at`
}

// JobRecordOutcomes implements [errandstore.JobStore]: one statement for the
// batch, each outcome fenced by its own token.
func (s *Store) JobRecordOutcomes(ctx context.Context, p *errandstore.JobRecordOutcomesParams) ([]errandstore.OutcomeResult, error) {
	c, err := newOutcomeColumns(p)
	if err != nil {
		return nil, err
	}
	rs := make([]errandstore.OutcomeResult, len(p.Outcomes))
	for i := range rs {
		rs[i].Err = errandtype.ErrLeaseLost
	}
	if len(c.ids) == 0 {
		return rs, nil
	}
	write, args := s.outcomesStatement(&c, p.Follow)
	if p.Follow {
		return s.recordOutcomesFollowed(ctx, &c, rs, write, args)
	}
	rows, err := s.pool.Query(ctx, write, args...)
	if err != nil {
		return nil, fmt.Errorf("record outcomes: %w", badValue(err))
	}
	if err := scanOutcomeRows(rows, rs, c.rowIndex); err != nil {
		return nil, fmt.Errorf("record outcomes: %w", badValue(err))
	}
	return rs, nil
}

// outcomesStatement is the statement that writes c, and its arguments.
func (s *Store) outcomesStatement(c *outcomeColumns, follow bool) (string, []any) {
	var args []any
	form := formFull
	switch {
	case c.plain && len(c.ids) == 1:
		form, args = formOne, []any{s.nowArg(), c.ids[0], c.tokens[0], c.kinds[0]}
	case c.plain:
		form, args = formPlain, []any{s.nowArg(), textArray(c.ids), textArray(c.tokens), textArray(c.kinds)}
	default:
		args = []any{s.nowArg(), c.ids, c.tokens, c.kinds, c.delays, c.attempts, c.classes, c.messages, c.stacks, c.ords}
	}
	dels := c.deletes()
	if dels == deleteSome {
		args = append(args, c.gone)
	}
	return s.sql(outcomeWrites[form][dels][b2i(follow)]), args
}

// outcomeColumns are the outcomes of a batch to write, one array each, in
// id order, as outcomesWrite takes them.
type outcomeColumns struct {
	// plain: no outcome appends an error or waits a delay (successes,
	// above all). Such a batch goes as
	// the plain form, which needs only the ids, tokens and kinds, and
	// the arrays after kinds stay nil.
	plain              bool
	n                  int     // outcomes in the batch
	ords               []int32 // each row's index in the batch
	ids, tokens, kinds []string
	delays             []int64
	attempts           []int32
	classes            []*string // NULL: no history entry
	messages, stacks   []string
	gone               []bool // the outcomes that delete their job
	deleted            int    // how many do
}

// deletes says which of c's jobs its write deletes.
func (c *outcomeColumns) deletes() outcomeDeletes {
	switch c.deleted {
	case 0:
		return deleteNone
	case len(c.ids):
		return deleteAll
	}
	return deleteSome
}

// b2i is 1 for true and 0 for false.
func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// newOutcomeColumns validates the outcomes of p and lays them out in
// columns, leaving out each outcome that repeats an earlier one's lease.
func newOutcomeColumns(p *errandstore.JobRecordOutcomesParams) (outcomeColumns, error) {
	outcomes := p.Outcomes
	n := len(outcomes)
	plain := true
	for _, o := range outcomes {
		if err := o.Validate(); err != nil {
			return outcomeColumns{}, err
		}
		plain = plain && !o.Kind.AppendsError() && o.Delay == 0
	}
	c := outcomeColumns{
		plain: plain, n: n,
		ords: make([]int32, 0, n),
		ids:  make([]string, 0, n), tokens: make([]string, 0, n), kinds: make([]string, 0, n),
		gone: make([]bool, 0, n),
	}
	if !plain {
		c.delays, c.attempts, c.classes = make([]int64, 0, n), make([]int32, 0, n), make([]*string, 0, n)
		c.messages, c.stacks = make([]string, 0, n), make([]string, 0, n)
	}
	order := byID(n, func(i int) string { return outcomes[i].ID })
	sameID := 0 // where in order the run of outcomes of this id began
	for k, i := range order {
		o := outcomes[i]
		// A later outcome under the same lease finds it ended by the
		// first (or as dead as the first found it): lease lost. byID
		// keeps equal ids together, in batch order.
		if outcomes[order[sameID]].ID != o.ID {
			sameID = k
		}
		if slices.ContainsFunc(order[sameID:k], func(j int) bool { return outcomes[j].JobLease == o.JobLease }) {
			continue
		}
		c.add(i, o)
	}
	return c, nil
}

// add appends o, the batch's i-th outcome.
func (c *outcomeColumns) add(i int, o *errandstore.JobOutcome) {
	c.ords = append(c.ords, int32(i))
	c.ids, c.tokens, c.kinds = append(c.ids, o.ID), append(c.tokens, o.LeaseToken), append(c.kinds, string(o.Kind))
	c.gone = append(c.gone, o.Delete)
	if o.Delete {
		c.deleted++
	}
	if c.plain {
		return
	}
	var class *string
	var e errandtype.AttemptError
	if o.Kind.AppendsError() {
		e = *o.Error
		class = &e.Class
	}
	c.delays, c.attempts, c.classes = append(c.delays, us(o.Delay)), append(c.attempts, int32(e.Attempt)), append(c.classes, class)
	c.messages, c.stacks = append(c.messages, e.Message), append(c.stacks, e.Stack)
}

// rowIndex is the index in the batch of the outcome a written row names
// by ord: a plain batch's rows name their place in the arrays, from 1;
// the others, their outcome's index.
func (c *outcomeColumns) rowIndex(ord int64) (int, error) {
	if c.plain {
		if ord < 1 || ord > int64(len(c.ords)) {
			return 0, fmt.Errorf("outcome row %d of %d", ord, len(c.ords))
		}
		return int(c.ords[ord-1]), nil
	}
	if ord < 0 || ord >= int64(c.n) {
		return 0, fmt.Errorf("outcome row for outcome %d of %d", ord, c.n)
	}
	return int(ord), nil
}

// recordOutcomesFollowed is JobRecordOutcomes with Follow: each result
// names its job's kind, batch and workflow, output and last error too.
func (s *Store) recordOutcomesFollowed(ctx context.Context, oc *outcomeColumns, rs []errandstore.OutcomeResult, write string, args []any) ([]errandstore.OutcomeResult, error) {
	rows, err := s.pool.Query(ctx, write, args...)
	if err != nil {
		return nil, fmt.Errorf("record outcomes: %w", badValue(err))
	}
	var (
		ord       int64
		state     string
		avail     time.Time
		attempted *time.Time
		c         errandstore.FollowColumns
	)
	_, err = pgx.ForEachRow(rows, []any{&ord, &state, &avail, &c.Kind, &c.BatchID, &c.WorkflowID, &attempted, &c.Output, &c.LastError}, func() error {
		i, err := oc.rowIndex(ord)
		if err != nil {
			return err
		}
		if attempted != nil {
			c.AttemptedAt = attempted.UTC()
		}
		rs[i] = errandstore.OutcomeResult{State: errandtype.JobState(state), AvailableAt: avail.UTC()}
		err = rs[i].Followed(&c)
		c, attempted = errandstore.FollowColumns{}, nil // new strings for the next row's
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("record outcomes: %w", badValue(err))
	}
	return rs, nil
}

// byID returns the indexes 0..n-1 ordered by id(i). Batched writes send
// their rows in id order so that two batches touching the same jobs (a
// worker's heartbeats and its outcomes) lock them in the same order rather
// than deadlock.
func byID(n int, id func(i int) string) []int {
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int { return strings.Compare(id(a), id(b)) })
	return idx
}

// JobSweep implements [errandstore.JobStore]: its statements in one batch,
// one transaction, as a claim sends them.
func (s *Store) JobSweep(ctx context.Context, _ *errandstore.JobSweepParams) (errandstore.SweepResult, error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return errandstore.SweepResult{}, fmt.Errorf("sweep: %w", err)
	}
	defer conn.Release()
	b := &pgx.Batch{}
	b.Queue(beginSQL)
	started := s.paceNow()
	s.queueSweep(b, s.nowArg())
	b.Queue("COMMIT")
	br := conn.SendBatch(ctx, b)
	_, err = br.Exec()
	var r errandstore.SweepResult
	if err == nil {
		r, err = readSweep(br)
	}
	if err == nil {
		_, err = br.Exec()
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		s.abortClaim(ctx, conn, false)
		return errandstore.SweepResult{}, fmt.Errorf("sweep: %w", err)
	}
	s.sweeps.Swept(started)
	return r, nil
}

const leaseExpiredMessage = "lease expired: the worker stopped renewing its lease (crashed, stopped or cut off)"

// sweepLeasesSQL ends expired leases: retrying, available now, or dead on
// the final attempt so that a job that kills its worker cannot crash-loop,
// or cancelled when a cancel was requested (a request wins over a retry).
// $4 and $5 are the cancelled entry's class and message. Rows another
// sweeper or claimer holds are skipped; it sweeps them.
var sweepLeasesSQL = func() string {
	entry, last := historyEntry("attempt", "m.class", "m.message", "''")
	return `UPDATE {jobs} SET
		errors = errors || ` + entry + `,
		last_error = ` + last + `,
		state = m.state,
		finished_at = CASE WHEN m.state = 'retrying' THEN finished_at ELSE {now} END,
		available_at = CASE WHEN m.state = 'retrying' THEN {now} ELSE available_at END,
		lease_token = NULL, lease_until = NULL
	FROM (SELECT CASE WHEN cancel_requested_at IS NOT NULL THEN $5::text
				WHEN attempt >= max_attempts THEN $3 || ' on the final attempt' ELSE $3 END AS message,
			CASE WHEN cancel_requested_at IS NOT NULL THEN $4::text ELSE $2::text END AS class,
			CASE WHEN cancel_requested_at IS NOT NULL THEN 'cancelled'
				WHEN attempt >= max_attempts THEN 'dead' ELSE 'retrying' END AS state,
			seq AS mseq
		FROM {jobs} WHERE state = 'running' AND lease_until <= {now}
		FOR UPDATE SKIP LOCKED) m
	WHERE seq = m.mseq
	RETURNING m.state`
}()

// sweepDeadlinesSQL dead-letters queued and retrying jobs past their
// deadline. It runs after the lease sweep in the same transaction, so it
// sees the jobs that sweep just made retrying.
// The deadline of a job never started that is its start-by ends it with
// class $4 and message $5 instead.
var sweepDeadlinesSQL = func() string {
	const startBy = `start_by = deadline AND attempted_at IS NULL`
	entry, last := historyEntry("attempt", "CASE WHEN "+startBy+" THEN $4::text ELSE $2::text END",
		"CASE WHEN "+startBy+" THEN $5::text ELSE $3::text END", "''")
	return `UPDATE {jobs} SET
		errors = errors || ` + entry + `,
		last_error = ` + last + `,
		state = 'dead', finished_at = {now}
	WHERE seq IN (SELECT seq FROM {jobs}
		WHERE state IN (` + waiting + `) AND deadline IS NOT NULL AND deadline <= {now}
		FOR UPDATE SKIP LOCKED)`
}()

// sweepPlans and sweepPlansEnd bracket the sweeps, in their transaction: no
// bitmap scans. Every job that ran leaves a dead entry in the lease index
// until a vacuum, and all of them match "lease_until <= now". A bitmap scan
// visits each one's heap page and never marks the entry dead, so without a
// vacuum every sweep did it again: 38,000 page reads a sweep with a
// million finished jobs, in the transaction of the claim that carried it
// (bench/pghistory). An index scan marks them dead the first time and
// skips them after.
const (
	sweepPlans    = "SET LOCAL enable_bitmapscan = off"
	sweepPlansEnd = "SET LOCAL enable_bitmapscan TO DEFAULT"
)

// queueSweep adds the sweep's statements to b: leases first, then
// deadlines. readSweep reads their results. b must be in an explicit
// transaction, for SET LOCAL.
func (s *Store) queueSweep(b *pgx.Batch, now any) {
	b.Queue(sweepPlans)
	b.Queue(s.sql(sweepLeasesSQL), now, errandstore.ClassLeaseExpired, leaseExpiredMessage,
		errandstore.ClassCancelled, errandstore.CancelledBySweepMessage)
	b.Queue(s.sql(sweepDeadlinesSQL), now, errandstore.ClassExpired, errandstore.ExpiredMessage,
		errandstore.ClassStartBy, errandstore.StartByMessage)
	b.Queue(sweepPlansEnd)
}

// readSweep reads the results of the statements queueSweep added.
func readSweep(br pgx.BatchResults) (errandstore.SweepResult, error) {
	var r errandstore.SweepResult
	if _, err := br.Exec(); err != nil {
		return r, err
	}
	rows, err := br.Query()
	if err != nil {
		return r, err
	}
	var state string
	_, err = pgx.ForEachRow(rows, []any{&state}, func() error {
		switch state {
		case string(errandtype.StateDead):
			r.Dead++
		case string(errandtype.StateCancelled):
			r.Cancelled++
		default:
			r.Retried++
		}
		return nil
	})
	if err != nil {
		return r, err
	}
	tag, err := br.Exec()
	if err != nil {
		return r, err
	}
	r.Dead += int(tag.RowsAffected())
	_, err = br.Exec()
	return r, err
}

// queueCountsSQL counts the jobs by queue, state and kind, each group of
// states from its own index (see statesWhere). The finished index carries
// the queue and the kind of each finished job, so on a vacuumed table the
// count of a long history is an index-only scan.
var queueCountsSQL = func() string {
	var parts []string
	for _, group := range [][]errandtype.JobState{errandstore.WaitingStates, {errandtype.StateRunning}, errandstore.TerminalStates} {
		parts = append(parts, `SELECT queue, state, kind, count(*) FROM {jobs} WHERE `+statesWhere(group)+` GROUP BY queue, state, kind`)
	}
	return strings.Join(parts, "\n\tUNION ALL ")
}()

// queueAgesSQL is the oldest ready age of each queue, waiting state and
// kind: it reads the waiting jobs alone, through the claim index.
var queueAgesSQL = `SELECT queue, state, kind, extract(epoch FROM {now} - min(available_at))::float8
	FROM {jobs} j WHERE state IN (` + waiting + `) AND available_at <= {now} AND ` + orderingFree + `
	GROUP BY queue, state, kind`

// QueueStats implements [errandstore.JobStore]: the counts and the ages in
// one snapshot (a repeatable-read transaction), without JIT (see
// operatorTx).
func (s *Store) QueueStats(ctx context.Context, _ *errandstore.QueueStatsParams) ([]errandtype.QueueStats, error) {
	var counts []errandstore.QueueCount
	err := s.operatorTx(ctx, pgx.TxOptions{AccessMode: pgx.ReadOnly, IsoLevel: pgx.RepeatableRead}, func(tx pgx.Tx) error {
		counts = counts[:0]
		rows, err := tx.Query(ctx, s.sql(queueCountsSQL))
		if err != nil {
			return err
		}
		var c errandstore.QueueCount
		var state string
		_, err = pgx.ForEachRow(rows, []any{&c.Queue, &state, &c.Kind, &c.Jobs}, func() error {
			c.State = errandtype.JobState(state)
			counts = append(counts, c)
			return nil
		})
		if err != nil {
			return err
		}
		type group struct{ queue, state, kind string }
		ages := map[group]float64{}
		var g group
		var age float64
		rows, err = tx.Query(ctx, s.sql(queueAgesSQL), s.nowArg())
		if err != nil {
			return err
		}
		_, err = pgx.ForEachRow(rows, []any{&g.queue, &g.state, &g.kind, &age}, func() error {
			ages[g] = age
			return nil
		})
		for i := range counts {
			counts[i].OldestReadyAgeSeconds = ages[group{counts[i].Queue, string(counts[i].State), counts[i].Kind}]
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("queue stats: %w", err)
	}
	return errandstore.AssembleQueueStats(counts), nil
}
