package postgres

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// copyMinJobs is the smallest batch inserted with COPY. COPY costs a
// round trip more than insertSQL (taking the seqs first) and saves, per
// job, insertSQL's speculative insertion, its RETURNING and the reading
// of the returned rows; below this size the round trip dominates.
const copyMinJobs = 64

// copyColumns are the columns the COPY path may write; the rest take their
// defaults, as they do in insertSQL. unique_key stays NULL: a job with a
// unique key never goes through COPY.
var copyColumns = [...]string{"seq", "id", "queue", "kind", "args", "args_version", "priority", "state",
	"max_attempts", "backoff_base_us", "backoff_max_us", "max_age_us", "available_at", "deadline",
	"ordering_key", "created_at", "tags", "ordering_hold", "fairness_key", "metadata", "start_by"}

// copyOptional reports, for each of copyColumns, whether a job's value may
// be the column's default (NULL for a nullable column without one). A
// column whose value is the default for every job of a batch is left out
// of its COPY: fewer values to encode, send and parse, and the rows hold
// what they would have held.
var copyOptional = [len(copyColumns)]func(p *errandstore.JobInsertParams, tags string) bool{
	5:  func(p *errandstore.JobInsertParams, _ string) bool { return p.ArgsVersion == 1 },
	6:  func(p *errandstore.JobInsertParams, _ string) bool { return p.Priority == 0 },
	9:  func(p *errandstore.JobInsertParams, _ string) bool { return us(p.BackoffBase) == 0 },
	10: func(p *errandstore.JobInsertParams, _ string) bool { return us(p.BackoffMax) == 0 },
	11: func(p *errandstore.JobInsertParams, _ string) bool { return us(p.MaxAge) == 0 },
	13: func(p *errandstore.JobInsertParams, _ string) bool { return p.MaxAge <= 0 && p.StartBy.IsZero() },
	14: func(p *errandstore.JobInsertParams, _ string) bool { return p.OrderingKey == "" },
	16: func(_ *errandstore.JobInsertParams, tags string) bool { return tags == "[]" },
	17: func(p *errandstore.JobInsertParams, _ string) bool { return !p.OrderingHold },
	18: func(p *errandstore.JobInsertParams, _ string) bool { return p.FairnessKey == "" },
	19: func(p *errandstore.JobInsertParams, _ string) bool { return p.Metadata == nil },
	20: func(p *errandstore.JobInsertParams, _ string) bool { return p.StartBy.IsZero() },
}

// copySeqsSQL returns the statement's now and $2 new values of the jobs
// table's seq ($3 names the table), ascending. COPY writes an identity
// column as given: taking the seqs first keeps seq in the batch's order
// and makes every column of the new rows known without reading them back.
// The sequence is looked up once, in a scalar subquery (an InitPlan): a
// subquery in FROM is pulled up into the join, and pg_get_serial_sequence
// then ran once per seq, a catalog lookup costing several times the
// nextval it named.
const copySeqsSQL = `SELECT {now}, array(SELECT nextval((SELECT pg_get_serial_sequence($3, 'seq')::regclass))
	FROM generate_series(1, $2) ORDER BY 1)`

// errCopyConflict reports that a COPY met an id already taken; the
// transaction it ran in is aborted.
var errCopyConflict = errors.New("copy jobs: an id is taken")

// copyable reports whether a batch goes through COPY: at least copyMinJobs
// jobs, none of them with a unique key. Unique keys are given to be
// deduplicated, so a batch with them meets taken keys often, and a COPY
// that meets one is wasted; ids are new unless the caller chose them.
func copyable(params []*errandstore.JobInsertParams) bool {
	return len(params) >= copyMinJobs && !slices.ContainsFunc(params, func(p *errandstore.JobInsertParams) bool { return p.UniqueKey != "" })
}

// insertOwnTx is JobInsertMany on the pool: a copyable batch is written
// with COPY, the way River's InsertManyFast writes, and inserted with
// insertSQL only if the COPY met a taken id.
func (s *Store) insertOwnTx(ctx context.Context, params []*errandstore.JobInsertParams) ([]errandstore.JobInsertResult, error) {
	// insert's one INSERT statement is a transaction of its own: all the
	// batch or none of it, committed when the statement ends. Sent on the
	// pool, without BEGIN and COMMIT, it costs one round trip instead of
	// three, which is most of what enqueueing one job costs.
	if errandstore.HasDebounce(params) {
		return s.insertKeyedOwnTx(ctx, params)
	}
	insert := func() ([]errandstore.JobInsertResult, error) {
		return s.insert(ctx, pgxQuerier{s.pool}, s.own, params)
	}
	if !copyable(params) {
		return insert()
	}
	if err := validate(params); err != nil {
		return nil, err
	}
	rs, err := s.copyOwnTx(ctx, params)
	if errors.Is(err, errCopyConflict) {
		return insert()
	}
	return rs, err
}

// copyOwnTx is copyJobs in a transaction of its own on one of the pool's
// connections: BEGIN goes in one pipelined batch with the query for the
// seqs, so the whole costs three round trips (BEGIN and the seqs, COPY,
// COMMIT) rather than four. Anything that fails rolls the transaction
// back.
func (s *Store) copyOwnTx(ctx context.Context, params []*errandstore.JobInsertParams) ([]errandstore.JobInsertResult, error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("insert jobs: %w", err)
	}
	defer conn.Release()
	b := &pgx.Batch{}
	b.Queue(beginSQL)
	b.Queue(s.sql(copySeqsSQL), s.nowArg(), len(params), s.table("errand_jobs"))
	br := conn.SendBatch(ctx, b)
	var taken takenSeqs
	_, err = br.Exec()
	if err == nil {
		err = br.QueryRow().Scan(&taken.now, &taken.seqs)
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	var rs []errandstore.JobInsertResult
	if err != nil {
		err = fmt.Errorf("insert jobs: take seqs: %w", err)
	} else {
		rs, err = s.copyWith(ctx, conn.Conn().PgConn(), params, taken)
	}
	if err == nil {
		if _, err = conn.Exec(ctx, "COMMIT"); err != nil {
			err = fmt.Errorf("insert jobs: %w", err)
		}
	}
	if err != nil {
		// As a claim does: roll back on a context of its own, and close a
		// connection that cannot.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		if _, rerr := conn.Exec(rctx, "ROLLBACK"); rerr != nil {
			conn.Conn().Close(rctx)
		}
		cancel()
		return nil, err
	}
	return rs, nil
}

// insertCallerTx is JobInsertManyTx: as insertOwnTx, but in the caller's
// tx, with the COPY in a savepoint so that a conflict leaves tx usable.
func (s *Store) insertCallerTx(ctx context.Context, tx pgx.Tx, params []*errandstore.JobInsertParams) ([]errandstore.JobInsertResult, error) {
	if errandstore.HasDebounce(params) {
		return errandstore.InsertKeyed(ctx, keyedTx{s, pgxQuerier{tx}, s.inTx}, params)
	}
	if !copyable(params) {
		return s.insert(ctx, pgxQuerier{tx}, s.inTx, params)
	}
	if err := validate(params); err != nil { // a bad job costs no savepoint
		return nil, err
	}
	sp, err := tx.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("insert jobs: %w", err)
	}
	rs, err := s.copyJobs(ctx, sp, s.inTx, params)
	if err != nil {
		if rbErr := sp.Rollback(ctx); rbErr != nil {
			return nil, fmt.Errorf("insert jobs: %w", rbErr)
		}
		if errors.Is(err, errCopyConflict) {
			return s.insert(ctx, pgxQuerier{tx}, s.inTx, params)
		}
		return nil, err
	}
	if err := sp.Commit(ctx); err != nil {
		return nil, fmt.Errorf("insert jobs: %w", err)
	}
	return rs, nil
}

// copyJobs writes params, none with a unique key, with one COPY, and
// returns the new jobs as insertSQL would: every column is known once the
// seqs and the statement's now are, so nothing is read back. Args are
// returned as given, the JSON value the jsonb column holds (which may
// space or order its keys differently). It returns errCopyConflict, with
// tx aborted, when an id is taken.
func (s *Store) copyJobs(ctx context.Context, tx pgx.Tx, r *strings.Replacer, params []*errandstore.JobInsertParams) ([]errandstore.JobInsertResult, error) {
	for _, p := range params {
		if err := p.Validate(); err != nil {
			return nil, err
		}
	}
	var taken takenSeqs
	if err := tx.QueryRow(ctx, r.Replace(copySeqsSQL), s.nowArg(), len(params), s.table("errand_jobs")).Scan(&taken.now, &taken.seqs); err != nil {
		return nil, fmt.Errorf("insert jobs: take seqs: %w", err)
	}
	return s.copyWith(ctx, tx.Conn().PgConn(), params, taken)
}

// takenSeqs is what copySeqsSQL returns: the statement's now and the seqs.
type takenSeqs struct {
	now  time.Time
	seqs []int64
}

// copyWith is copyJobs once the seqs are taken, writing through conn, a
// connection inside a transaction. It encodes the rows in COPY's binary
// format itself: every column's type is known, and pgx's CopyFrom would
// look up an encode plan for each of the batch's values.
func (s *Store) copyWith(ctx context.Context, conn *pgconn.PgConn, params []*errandstore.JobInsertParams, taken takenSeqs) ([]errandstore.JobInsertResult, error) {
	now, seqs := taken.now, taken.seqs
	if len(seqs) != len(params) {
		return nil, fmt.Errorf("insert jobs: took %d seqs for %d jobs", len(seqs), len(params))
	}
	slices.Sort(seqs)
	now = now.UTC()
	tagsJSON, keep, cols, err := copyKept(params)
	if err != nil {
		return nil, err
	}
	// Sized for the batch up front: grown by append, the buffer of a
	// 5,000-job batch was copied a dozen times, a fifth of the client's CPU
	// in a bulk enqueue.
	size := 21
	for i, p := range params {
		size += copyRowFixed + len(p.ID) + len(p.Queue) + len(p.Kind) + len(p.Args) + len(p.OrderingKey) + len(p.FairnessKey) + len(tagsJSON[i]) + len(p.Metadata)
	}
	buf := make([]byte, 0, size)
	buf = append(buf, "PGCOPY\n\377\r\n\000"...)
	buf = binary.BigEndian.AppendUint64(buf, 0) // no flags, no header extension
	out := make([]errandstore.JobInsertResult, len(params))
	for i, p := range params {
		r := copyRow{p: p, j: copiedJob(p, seqs[i], now), tags: tagsJSON[i], now: now}
		buf = binary.BigEndian.AppendUint16(buf, uint16(len(cols)))
		for c, enc := range copyEncoders {
			if keep[c] {
				buf = enc(buf, &r)
			}
		}
		out[i] = errandstore.JobInsertResult{Job: r.j}
	}
	buf = append(buf, 0xff, 0xff) // the trailer: a row of -1 columns
	copySQL := "COPY " + pgx.Identifier{s.name, "errand_jobs"}.Sanitize() + " (" + strings.Join(cols, ", ") + ") FROM STDIN (FORMAT binary)"
	if _, err := conn.CopyFrom(ctx, bytes.NewReader(buf), copySQL); err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "23505" { // unique_violation
			return nil, errCopyConflict
		}
		return nil, fmt.Errorf("insert jobs: %w", badValue(err))
	}
	return out, nil
}

// copyRowFixed bounds what a row of COPY's binary format takes besides the
// strings of its params: the column count, a length for each column, the
// fixed-size values, the jsonb version bytes and the state's name.
const copyRowFixed = 2 + len(copyColumns)*4 + 8*8 + 4*4 + 2 + 16

// copyKept encodes the tags of params, and chooses the columns of
// copyColumns to send: those some job does not leave at their default.
func copyKept(params []*errandstore.JobInsertParams) (tagsJSON []string, keep [len(copyColumns)]bool, cols []string, err error) {
	tagsJSON = make([]string, len(params))
	for i, p := range params {
		tags, err := p.TagsJSON()
		if err != nil {
			return nil, keep, nil, err
		}
		tagsJSON[i] = tags
		for c, isDefault := range copyOptional {
			keep[c] = keep[c] || isDefault == nil || !isDefault(p, tags)
		}
	}
	for c, name := range copyColumns {
		if keep[c] {
			cols = append(cols, name)
		}
	}
	return tagsJSON, keep, cols, nil
}

// copiedJob is the job that p's row, of seq, inserted at now, holds.
func copiedJob(p *errandstore.JobInsertParams, seq int64, now time.Time) *errandtype.Job {
	j := &errandtype.Job{Seq: seq, ID: p.ID, Queue: p.Queue, Kind: p.Kind, Args: slices.Clone(p.Args),
		ArgsVersion: p.ArgsVersion, Priority: p.Priority, State: errandtype.StateQueued, MaxAttempts: p.MaxAttempts,
		BackoffBase: errandtype.Duration(microseconds(p.BackoffBase)), BackoffMax: errandtype.Duration(microseconds(p.BackoffMax)),
		AvailableAt: now.Add(microseconds(p.Delay)), OrderingKey: nullIfEmpty(p.OrderingKey), FairnessKey: nullIfEmpty(p.FairnessKey), CreatedAt: now,
		Errors: []errandtype.AttemptError{}, Tags: slices.Clone(p.Tags), OrderingHold: p.OrderingHold, Metadata: slices.Clone(p.Metadata)}
	if !p.RunAt.IsZero() {
		j.AvailableAt = micro(p.RunAt)
	}
	startBy := micro(p.StartBy)
	if !startBy.IsZero() {
		j.StartBy = &startBy
	}
	j.Deadline = errandstore.FirstDeadline(now, microseconds(p.MaxAge), startBy)
	if j.Tags == nil {
		j.Tags = []string{}
	}
	return j
}

// copyRow is what one row's fields are encoded from.
type copyRow struct {
	p    *errandstore.JobInsertParams
	j    *errandtype.Job
	tags string
	now  time.Time
}

// copyEncoders append each of copyColumns' fields of a row, in order.
var copyEncoders = [len(copyColumns)]func(b []byte, r *copyRow) []byte{
	func(b []byte, r *copyRow) []byte { return copyInt8(b, r.j.Seq) },
	func(b []byte, r *copyRow) []byte { return copyText(b, r.j.ID) },
	func(b []byte, r *copyRow) []byte { return copyText(b, r.j.Queue) },
	func(b []byte, r *copyRow) []byte { return copyText(b, r.j.Kind) },
	func(b []byte, r *copyRow) []byte { return copyJSONB(b, r.p.Args) },
	func(b []byte, r *copyRow) []byte { return copyInt4(b, int32(r.j.ArgsVersion)) },
	func(b []byte, r *copyRow) []byte { return copyInt4(b, int32(r.j.Priority)) },
	func(b []byte, r *copyRow) []byte { return copyText(b, string(r.j.State)) },
	func(b []byte, r *copyRow) []byte { return copyInt4(b, int32(r.j.MaxAttempts)) },
	func(b []byte, r *copyRow) []byte { return copyInt8(b, us(r.p.BackoffBase)) },
	func(b []byte, r *copyRow) []byte { return copyInt8(b, us(r.p.BackoffMax)) },
	func(b []byte, r *copyRow) []byte { return copyInt8(b, us(r.p.MaxAge)) },
	func(b []byte, r *copyRow) []byte { return copyTime(b, &r.j.AvailableAt) },
	func(b []byte, r *copyRow) []byte { return copyTime(b, r.j.Deadline) },
	func(b []byte, r *copyRow) []byte { return copyNullText(b, r.j.OrderingKey) },
	func(b []byte, r *copyRow) []byte { return copyTime(b, &r.now) },
	func(b []byte, r *copyRow) []byte { return copyJSONB(b, r.tags) },
	func(b []byte, r *copyRow) []byte { // ordering_hold, a smallint
		b = binary.BigEndian.AppendUint32(b, 2)
		return binary.BigEndian.AppendUint16(b, uint16(boolInt(r.p.OrderingHold)))
	},
	func(b []byte, r *copyRow) []byte { return copyNullText(b, r.j.FairnessKey) },
	func(b []byte, r *copyRow) []byte { return copyNullJSONB(b, r.p.Metadata) },
	func(b []byte, r *copyRow) []byte { return copyTime(b, r.j.StartBy) },
}

// The fields of COPY's binary format: a length (-1 for NULL), then the
// value as the type's binary receive function reads it.

func copyInt4(b []byte, v int32) []byte {
	b = binary.BigEndian.AppendUint32(b, 4)
	return binary.BigEndian.AppendUint32(b, uint32(v))
}

func copyInt8(b []byte, v int64) []byte {
	b = binary.BigEndian.AppendUint32(b, 8)
	return binary.BigEndian.AppendUint64(b, uint64(v))
}

func copyText(b []byte, v string) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(v)))
	return append(b, v...)
}

func copyNullText(b []byte, v *string) []byte {
	if v == nil {
		return copyNull(b)
	}
	return copyText(b, *v)
}

// copyNullJSONB writes a jsonb value, or NULL for nil.
func copyNullJSONB(b []byte, v []byte) []byte {
	if v == nil {
		return copyNull(b)
	}
	return copyJSONB(b, v)
}

// copyJSONB writes a jsonb value: format version 1, then the JSON text.
func copyJSONB[T ~string | ~[]byte](b []byte, v T) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(v)+1))
	b = append(b, 1)
	return append(b, v...)
}

// pgEpochMicros is PostgreSQL's epoch, 2000-01-01 UTC, in Unix microseconds.
const pgEpochMicros = 946684800 * 1_000_000

// copyTime writes a timestamptz: microseconds since PostgreSQL's epoch.
func copyTime(b []byte, t *time.Time) []byte {
	if t == nil {
		return copyNull(b)
	}
	return copyInt8(b, t.UnixMicro()-pgEpochMicros)
}

func copyNull(b []byte) []byte { return binary.BigEndian.AppendUint32(b, 0xffffffff) }

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func validate(params []*errandstore.JobInsertParams) error {
	for _, p := range params {
		if err := p.Validate(); err != nil {
			return err
		}
	}
	return nil
}

// microseconds is d truncated to whole microseconds, as insertSQL and the
// columns hold durations.
func microseconds(d time.Duration) time.Duration { return time.Duration(us(d)) * time.Microsecond }
