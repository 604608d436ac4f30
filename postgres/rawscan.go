package postgres

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
)

// A claim's rows, the hot path's largest read, are decoded from the wire
// values pgx received rather than through its Scan: Scan finds a plan per
// column and allocates each nullable value and each string on its own, and
// was a ninth of a busy worker's CPU. decodeJobRow reads the 38 columns of
// jobColumns straight from their binary encodings, and puts each row's text
// in one string that the job's strings are slices of. scanClaimedJobs falls
// back to Scan whenever the columns do not come as it expects.

// jobColumnTypes are the types of jobColumns, in their order.
var jobColumnTypes = [...]uint32{
	pgtype.Int8OID,        // seq
	pgtype.TextOID,        // id
	pgtype.TextOID,        // queue
	pgtype.TextOID,        // kind
	pgtype.TextOID,        // args::text
	pgtype.Int4OID,        // args_version
	pgtype.Int4OID,        // priority
	pgtype.TextOID,        // state
	pgtype.Int4OID,        // attempt
	pgtype.Int4OID,        // max_attempts
	pgtype.Int8OID,        // backoff_base_us
	pgtype.Int8OID,        // backoff_max_us
	pgtype.TimestamptzOID, // available_at
	pgtype.TimestamptzOID, // deadline
	pgtype.TextOID,        // lease_token
	pgtype.TimestamptzOID, // lease_until
	pgtype.TextOID,        // lease_owner
	pgtype.TextOID,        // unique_key
	pgtype.TextOID,        // ordering_key
	pgtype.TextOID,        // progress::text
	pgtype.TimestamptzOID, // created_at
	pgtype.TimestamptzOID, // attempted_at
	pgtype.TimestamptzOID, // finished_at
	pgtype.TextOID,        // last_error::text
	pgtype.TextOID,        // errors::text
	pgtype.Int4OID,        // replays
	pgtype.TextOID,        // tags::text
	pgtype.Int4OID,        // unique_states
	pgtype.Int8OID,        // unique_window_us
	pgtype.Int2OID,        // ordering_hold
	pgtype.TimestamptzOID, // cancel_requested_at
	pgtype.TextOID,        // fairness_key
	pgtype.TextOID,        // batch_id
	pgtype.TextOID,        // workflow_id
	pgtype.TextOID,        // output
	pgtype.TextOID,        // metadata::text
	pgtype.TimestamptzOID, // start_by
	pgtype.Int4OID,        // base_priority
}

// decodable reports whether fds are jobColumns in the encodings
// decodeJobRow reads: text as it is (either format spells it the same),
// every other type in the binary format.
func decodable(fds []pgconn.FieldDescription) bool {
	if len(fds) != len(jobColumnTypes) {
		return false
	}
	for i, fd := range fds {
		if fd.DataTypeOID != jobColumnTypes[i] {
			return false
		}
		if fd.DataTypeOID != pgtype.TextOID && fd.Format != pgtype.BinaryFormatCode {
			return false
		}
	}
	return true
}

// scanClaimedJobs reads every row of rs, of jobColumns, and closes rs.
func scanClaimedJobs(rs pgx.Rows) ([]*errandtype.Job, error) {
	defer rs.Close()
	if !decodable(rs.FieldDescriptions()) {
		return scanJobs(rs, jobScanner())
	}
	var (
		jobs []*errandtype.Job
		text []byte // a row's text columns, end to end; reused
	)
	for rs.Next() {
		j, err := decodeJobRow(rs.RawValues(), &text)
		if err != nil {
			return nil, err
		}
		jobs = append(jobs, j)
	}
	if err := rs.Err(); err != nil {
		return nil, err
	}
	return jobs, nil
}

// Columns of jobColumns read from a row that does not decode, to give its
// job back: id and lease_token are text, alike in either format.
const (
	colID, colAttempt, colLeaseToken = 1, 8, 14
)

// scanCommittedClaim reads every row of rs, of jobColumns, from a claim
// that committed before its rows were read, and closes rs. Every row is a
// job now running under a lease of this claim, so a row that does not
// decode fails only itself: it comes back in unread, to be given back
// (see errandstore.GiveBackUnread), and the rest are the caller's. Only a row
// without its id and lease token, which the claim has just written, fails
// the whole read.
func scanCommittedClaim(rs pgx.Rows) ([]*errandtype.Job, []errandstore.UnreadJob, error) {
	defer rs.Close()
	var decode func() (*errandtype.Job, error)
	if decodable(rs.FieldDescriptions()) {
		var text []byte // a row's text columns, end to end; reused
		decode = func() (*errandtype.Job, error) { return decodeJobRow(rs.RawValues(), &text) }
	} else {
		scan := jobScanner()
		decode = func() (*errandtype.Job, error) { return scan(rs) }
	}
	var c errandstore.ClaimedRows
	for rs.Next() {
		j, err := decode()
		if err := c.Add(j, err, func() (errandstore.UnreadJob, bool) { return unreadLease(rs.FieldDescriptions(), rs.RawValues()) }); err != nil {
			return nil, nil, err
		}
	}
	if err := rs.Err(); err != nil {
		return nil, nil, err
	}
	return c.Jobs, c.Unread, nil
}

// unreadLease reads the lease and attempt of a row of jobColumns that did
// not decode as a whole.
func unreadLease(fds []pgconn.FieldDescription, vals [][]byte) (errandstore.UnreadJob, bool) {
	if len(vals) != len(jobColumnTypes) || len(fds) != len(vals) || vals[colID] == nil || vals[colLeaseToken] == nil {
		return errandstore.UnreadJob{}, false
	}
	u := errandstore.UnreadJob{Lease: errandstore.JobLease{ID: string(vals[colID]), LeaseToken: string(vals[colLeaseToken])}}
	v := vals[colAttempt]
	switch {
	case fds[colAttempt].Format == pgtype.BinaryFormatCode && len(v) == 4:
		u.Attempt = int(int32(binary.BigEndian.Uint32(v)))
	case fds[colAttempt].Format == pgtype.TextFormatCode:
		u.Attempt, _ = strconv.Atoi(string(v))
	}
	return u, true
}

// decodedJob is a Job with room for what its pointers point to, so that a
// decoded row costs one allocation for all of them.
type decodedJob struct {
	job          errandtype.Job
	times        [6]time.Time // deadline, lease_until, attempted_at, finished_at, cancel_requested_at, start_by
	texts        [7]string    // lease_token, lease_owner, unique_key, ordering_key, fairness_key, batch_id, workflow_id
	basePriority int
}

var errRawNull = errors.New("NULL in a column that is never NULL")

// decodeJobRow decodes one row of jobColumns whose fields decodable
// accepted. text is scratch space kept from row to row.
func decodeJobRow(vals [][]byte, text *[]byte) (*errandtype.Job, error) {
	if len(vals) != len(jobColumnTypes) {
		return nil, fmt.Errorf("decode job: %d columns, want %d", len(vals), len(jobColumnTypes))
	}
	r := rowDecoder{vals: (*[len(jobColumnTypes)][]byte)(vals), d: new(decodedJob)}
	r.joinText(text)
	c, ustates, uwindow := r.columns()
	if r.err != nil {
		return nil, fmt.Errorf("decode job: %w", r.err)
	}
	j := &r.d.job
	j.SetUniqueColumns(ustates, uwindow)
	if err := j.DecodeColumns(&c); err != nil {
		return nil, err
	}
	return j, nil
}

// rowDecoder reads the wire values of one row of jobColumns. The readers
// of text and nullable columns inline into columns, which reads the row in
// one pass; the first error sticks, and later reads return zero values.
type rowDecoder struct {
	vals   *[len(jobColumnTypes)][]byte // an array, so that reading a column needs no bounds check
	all    string                       // every text column of the row, end to end
	lo, hi [len(jobColumnTypes)]int     // text column i is all[lo[i]:hi[i]]
	err    error
	d      *decodedJob
}

// joinText puts every text column of the row in one string, r.all: its
// substrings are the job's strings, so they cost one allocation.
func (r *rowDecoder) joinText(text *[]byte) {
	t := (*text)[:0]
	for i, v := range r.vals {
		if jobColumnTypes[i] == pgtype.TextOID && v != nil {
			r.lo[i], r.hi[i] = len(t), len(t)+len(v)
			t = append(t, v...)
		}
	}
	*text = t
	r.all = string(t)
}

// columns reads the row, in column order, into the job r decodes and the
// columns the job decodes with DecodeColumns, c, and returns them with the
// unique columns it sets with SetUniqueColumns. c is a result, not a
// pointer, so that its strings are written to the stack with no write
// barrier.
func (r *rowDecoder) columns() (c errandtype.JobColumns, ustates, uwindow int64) {
	j := &r.d.job
	j.Seq = r.integer(0, 8)
	j.ID, j.Queue, j.Kind, c.Args = r.str(1), r.str(2), r.str(3), r.str(4)
	j.ArgsVersion, j.Priority = int(r.integer(5, 4)), int(r.integer(6, 4))
	c.State = r.str(7)
	j.Attempt, j.MaxAttempts = int(r.integer(8, 4)), int(r.integer(9, 4))
	c.BackoffBaseUS, c.BackoffMaxUS = r.integer(10, 8), r.integer(11, 8)
	j.AvailableAt = r.timestamp(12)
	j.Deadline = r.optTime(13, &r.d.times[0])
	j.LeaseToken = r.optText(14, 0)
	j.LeaseUntil = r.optTime(15, &r.d.times[1])
	j.LeaseOwner = r.optText(16, 1)
	j.UniqueKey, j.OrderingKey = r.optText(17, 2), r.optText(18, 3)
	c.Progress = r.optJSON(19)
	j.CreatedAt = r.timestamp(20)
	j.AttemptedAt, j.FinishedAt = r.optTime(21, &r.d.times[2]), r.optTime(22, &r.d.times[3])
	c.LastError = r.optJSON(23)
	c.Errors = r.str(24)
	j.Replays = int(r.integer(25, 4))
	c.Tags = r.str(26)
	ustates, uwindow = r.integer(27, 4), r.integer(28, 8)
	j.OrderingHold = r.integer(29, 2) == 1
	j.CancelRequestedAt = r.optTime(30, &r.d.times[4])
	j.FairnessKey, j.BatchID, j.WorkflowID = r.optText(31, 4), r.optText(32, 5), r.optText(33, 6)
	if r.vals[34] != nil { // copied: vals are pgx's buffer, reused for the next row
		j.Output = json.RawMessage(r.text(34))
	}
	c.Metadata = r.optJSON(35)
	j.StartBy = r.optTime(36, &r.d.times[5])
	if r.vals[37] != nil {
		r.d.basePriority = int(r.integer(37, 4))
		j.BasePriority = &r.d.basePriority
	}
	return c, ustates, uwindow
}

// text is text column i, a substring of r.all.
func (r *rowDecoder) text(i int) string { return r.all[r.lo[i]:r.hi[i]] }

// str is text column i, which is never NULL.
func (r *rowDecoder) str(i int) string {
	if r.vals[i] == nil {
		r.null(i)
	}
	return r.all[r.lo[i]:r.hi[i]]
}

// null records that column i, which is never NULL, was, unless an error
// came first. Kept out of str so that str inlines.
func (r *rowDecoder) null(i int) {
	if r.err == nil {
		r.err = fmt.Errorf("column %d: %w", i+1, errRawNull)
	}
}

// integer is the size-byte integer column i, which is never NULL.
func (r *rowDecoder) integer(i, size int) int64 {
	v := r.vals[i]
	switch {
	case r.err != nil:
		return 0
	case v == nil:
		r.null(i)
		return 0
	case len(v) != size:
		r.err = fmt.Errorf("column %d: %d bytes, want %d", i+1, len(v), size)
		return 0
	}
	switch size {
	case 8:
		return int64(binary.BigEndian.Uint64(v))
	case 4:
		return int64(int32(binary.BigEndian.Uint32(v)))
	default:
		return int64(int16(binary.BigEndian.Uint16(v)))
	}
}

// timestamp is the timestamptz column i, which is never NULL nor infinite.
func (r *rowDecoder) timestamp(i int) time.Time {
	us := r.integer(i, 8)
	if r.err == nil && (us == math.MaxInt64 || us == math.MinInt64) {
		r.err = fmt.Errorf("column %d: an infinite timestamp", i+1)
	}
	return time.UnixMicro(us + postgresEpochUS).UTC()
}

// optTime is the nullable timestamptz column i, kept in t, one of the
// decoded job's slots.
func (r *rowDecoder) optTime(i int, t *time.Time) *time.Time {
	if r.vals[i] == nil {
		return nil
	}
	*t = r.timestamp(i)
	return t
}

// optText is the nullable text column i, kept in the decoded job's slot.
func (r *rowDecoder) optText(i, slot int) *string {
	if r.vals[i] == nil {
		return nil
	}
	r.d.texts[slot] = r.text(i)
	return &r.d.texts[slot]
}

// optJSON is the nullable JSON column i.
func (r *rowDecoder) optJSON(i int) *string {
	if r.vals[i] == nil {
		return nil
	}
	s := r.text(i)
	return &s
}

// postgresEpochUS is PostgreSQL's epoch for timestamps, 2000-01-01 UTC, in
// Unix microseconds.
const postgresEpochUS = 946_684_800_000_000

// scanOutcomeRows reads the rows of an outcome write (outcomesWrite
// without follow: ord, state, available_at) into rs, at the index each
// row's ord gives. Like a claim's rows, they are decoded from their wire
// values when they come as expected, and scanned otherwise: a batch of 500
// successes returns 500 rows, and Scan allocated each state's string.
func scanOutcomeRows(rows pgx.Rows, rs []errandstore.OutcomeResult, index func(ord int64) (int, error)) error {
	defer rows.Close()
	if !outcomeRowsDecodable(rows.FieldDescriptions()) {
		return scanOutcomeRowsSlow(rows, rs, index)
	}
	for rows.Next() {
		ord, r, err := decodeOutcomeRow(rows.RawValues())
		if err != nil {
			return err
		}
		i, err := index(ord)
		if err != nil {
			return err
		}
		rs[i] = r
	}
	return rows.Err()
}

// outcomeRowsDecodable reports whether fds are an outcome write's columns
// in the encodings decodeOutcomeRow reads.
func outcomeRowsDecodable(fds []pgconn.FieldDescription) bool {
	return len(fds) == 3 && fds[0].Format == pgtype.BinaryFormatCode && fds[2].Format == pgtype.BinaryFormatCode &&
		(fds[0].DataTypeOID == pgtype.Int4OID || fds[0].DataTypeOID == pgtype.Int8OID) &&
		fds[1].DataTypeOID == pgtype.TextOID && fds[2].DataTypeOID == pgtype.TimestamptzOID
}

// scanOutcomeRowsSlow is scanOutcomeRows for rows that come in other
// encodings, read with Scan.
func scanOutcomeRowsSlow(rows pgx.Rows, rs []errandstore.OutcomeResult, index func(ord int64) (int, error)) error {
	var ord int64
	var state string
	var avail time.Time
	_, err := pgx.ForEachRow(rows, []any{&ord, &state, &avail}, func() error {
		i, err := index(ord)
		if err != nil {
			return err
		}
		rs[i] = errandstore.OutcomeResult{State: errandtype.JobState(state), AvailableAt: avail.UTC()}
		return nil
	})
	return err
}

// decodeOutcomeRow decodes the wire values of one outcome row that
// outcomeRowsDecodable accepted: its ord and its result.
func decodeOutcomeRow(vals [][]byte) (int64, errandstore.OutcomeResult, error) {
	var ord int64
	switch v := vals[0]; len(v) {
	case 4:
		ord = int64(int32(binary.BigEndian.Uint32(v)))
	case 8:
		ord = int64(binary.BigEndian.Uint64(v))
	default:
		return 0, errandstore.OutcomeResult{}, fmt.Errorf("outcome row: ord of %d bytes", len(v))
	}
	state, ok := knownState(vals[1])
	if !ok {
		return 0, errandstore.OutcomeResult{}, fmt.Errorf("outcome row: state %q", vals[1])
	}
	if len(vals[2]) != 8 {
		return 0, errandstore.OutcomeResult{}, fmt.Errorf("outcome row: available_at of %d bytes", len(vals[2]))
	}
	us := int64(binary.BigEndian.Uint64(vals[2]))
	if us == math.MaxInt64 || us == math.MinInt64 {
		return 0, errandstore.OutcomeResult{}, errors.New("outcome row: an infinite available_at")
	}
	return ord, errandstore.OutcomeResult{State: state, AvailableAt: time.UnixMicro(us + postgresEpochUS).UTC()}, nil
}

// knownState is the job state spelled b, without allocating its string.
func knownState(b []byte) (errandtype.JobState, bool) {
	for _, s := range errandtype.JobStates {
		if string(b) == string(s) {
			return s, true
		}
	}
	return "", false
}
