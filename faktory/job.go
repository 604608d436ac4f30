package faktory

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
)

// Faktory's job defaults and bounds.
const (
	// DefaultPriority is Faktory's default priority, errand's 0.
	DefaultPriority = 5
	// DefaultRetry is Faktory's default retry count: 26 attempts.
	DefaultRetry = 25
	// DefaultReserveFor is Faktory's default reservation, the lease of a
	// fetched job.
	DefaultReserveFor = 1800 * time.Second
	// MinReserveFor is Faktory's shortest reservation: a shorter
	// reserve_for is raised to it, as Faktory does.
	MinReserveFor = 60 * time.Second
	// MaxReserveFor is errand's longest lease.
	MaxReserveFor = errand.MaxLease
)

// pushJob is a job as a Faktory client pushes it. Fields errand does not
// use (created_at, enqueued_at, backtrace, failure, and any other) are
// ignored, as Faktory ignores fields it does not know.
type pushJob struct {
	Jid        string          `json:"jid"`
	Type       string          `json:"jobtype"`
	Args       json.RawMessage `json:"args"`
	Queue      string          `json:"queue"`
	Priority   *int            `json:"priority"`
	At         string          `json:"at"`
	ReserveFor *int            `json:"reserve_for"`
	Retry      *int            `json:"retry"`
	Custom     json.RawMessage `json:"custom"`
}

// decodeJob decodes one pushed job, saying which field is wrong.
func decodeJob(b []byte, j *pushJob) error {
	if t := bytes.TrimSpace(b); len(t) == 0 || t[0] != '{' {
		return errors.New(`the job is not a JSON object; send {"jid":"...","jobtype":"...","args":[...]}`)
	}
	if err := json.Unmarshal(b, j); err != nil {
		return errors.New(jsonProblem(err))
	}
	return nil
}

// jobError is a pushed job's field that errand cannot take.
func jobError(field, format string, args ...any) error {
	return fmt.Errorf("%s: %s", field, fmt.Sprintf(format, args...))
}

// params maps a pushed job onto errand's enqueue.
func (j *pushJob) params() (errand.EnqueueParams, error) {
	var none errand.EnqueueParams
	if j.Jid == "" {
		return none, jobError("jid", "is missing; give every job a unique jid")
	}
	if j.Type == "" {
		return none, jobError("jobtype", "is missing; name the job's type")
	}
	args := bytes.TrimSpace(j.Args)
	if len(args) == 0 || args[0] != '[' {
		return none, jobError("args", "must be a JSON array; send [] for none")
	}
	opts := &errand.EnqueueOpts{ID: j.Jid, Queue: j.Queue}
	var err error
	if opts.Priority, err = errandPriority(j.Priority); err != nil {
		return none, err
	}
	if opts.MaxAttempts, err = maxAttempts(j.Retry); err != nil {
		return none, err
	}
	if j.At != "" {
		at, err := time.Parse(time.RFC3339Nano, j.At)
		if err != nil {
			return none, jobError("at", "%q is not an RFC 3339 time; send e.g. \"2026-12-01T10:00:00Z\"", oneLine(j.At, 64))
		}
		if at.After(time.Now()) { // a time past is now, as in Faktory
			opts.RunAt = at
		}
	}
	var meta faktoryMeta
	rf, err := reserveForOf(j.ReserveFor)
	if err != nil {
		return none, err
	}
	if rf != DefaultReserveFor {
		meta.ReserveFor = int(rf.Seconds())
	}
	if j.Retry != nil && *j.Retry == -1 {
		meta.Retry = j.Retry
	}
	if c := bytes.TrimSpace(j.Custom); len(c) > 0 && string(c) != "null" {
		if c[0] != '{' {
			return none, jobError("custom", "must be a JSON object")
		}
		if string(c) != "{}" {
			meta.Custom = c
		}
	}
	if opts.Metadata, err = meta.metadata(); err != nil {
		return none, err
	}
	return errand.EnqueueParams{Args: errand.RawArgs{KindName: j.Type, JSON: args}, Opts: opts}, nil
}

// metadataKey is the key of a job's metadata under which it keeps what
// errand has no field for of a Faktory job (see faktoryMeta). Other keys,
// a Go producer's trace context say, are left alone.
const metadataKey = "faktory"

// faktoryMeta is what a job keeps, in its metadata, of Faktory's fields
// that errand has no field for, each only when it says something:
// {"faktory": {"custom": {...}, "reserve_for": 600, "retry": -1}}.
type faktoryMeta struct {
	// Custom is the job's custom object, returned on FETCH unchanged (on
	// PostgreSQL, its keys may come back in another order).
	Custom json.RawMessage `json:"custom,omitempty"`
	// ReserveFor is the job's reserve_for in seconds, when not the
	// default.
	ReserveFor int `json:"reserve_for,omitempty"`
	// Retry is -1 when the job was pushed with it: max_attempts 1 cannot
	// tell it from retry 0.
	Retry *int `json:"retry,omitempty"`
}

// metadata returns m as a job's metadata, nil when it says nothing.
func (m *faktoryMeta) metadata() (json.RawMessage, error) {
	if m.Custom == nil && m.ReserveFor == 0 && m.Retry == nil {
		return nil, nil
	}
	b, err := json.Marshal(map[string]*faktoryMeta{metadataKey: m})
	if err != nil {
		return nil, jobError("custom", "%v", err)
	}
	if len(b) > errandstore.MaxMetadataBytes {
		return nil, jobError("custom", "is %d bytes; keep custom fields under %d bytes: ids, not documents", len(m.Custom), errandstore.MaxMetadataBytes-64)
	}
	return b, nil
}

// readMeta returns what job j keeps of its Faktory fields; none for a job
// enqueued otherwise, or whose metadata another producer shaped
// differently.
func readMeta(j *errandtype.Job) faktoryMeta {
	var outer map[string]json.RawMessage
	var m faktoryMeta
	if json.Unmarshal(j.Metadata, &outer) == nil && outer[metadataKey] != nil {
		if json.Unmarshal(outer[metadataKey], &m) != nil {
			return faktoryMeta{}
		}
	}
	return m
}

// errandPriority maps Faktory's priority (1 to 9, 9 first, default 5) to
// errand's (lower first): 5-p, so that 5 is errand's default 0.
func errandPriority(p *int) (int, error) {
	if p == nil || *p == 0 {
		return 0, nil
	}
	if *p < 1 || *p > 9 {
		return 0, jobError("priority", "%d is out of range; give 1 (last) to 9 (first), default 5", *p)
	}
	return DefaultPriority - *p, nil
}

// faktoryPriority is errandPriority's inverse, bounded to Faktory's range
// for a job enqueued with any errand priority.
func faktoryPriority(p int) int {
	return min(9, max(1, DefaultPriority-p))
}

// maxAttempts maps Faktory's retry (default 25; 0 and -1: no retry) to
// errand's attempt budget.
func maxAttempts(retry *int) (int, error) {
	switch {
	case retry == nil:
		return DefaultRetry + 1, nil
	case *retry < -1:
		return 0, jobError("retry", "%d is out of range; give 0 or more retries, or -1", *retry)
	case *retry <= 0:
		return 1, nil
	case *retry >= errandtype.MaxAttemptsLimit:
		return 0, jobError("retry", "%d is too many; give at most %d", *retry, errandtype.MaxAttemptsLimit-1)
	}
	return *retry + 1, nil
}

// reserveForOf maps reserve_for (seconds; default 1800, at least 60) to a
// lease.
func reserveForOf(secs *int) (time.Duration, error) {
	switch {
	case secs == nil || *secs == 0:
		return DefaultReserveFor, nil
	case *secs < 0:
		return 0, jobError("reserve_for", "%d is negative; give seconds, at least %d", *secs, int(MinReserveFor.Seconds()))
	case time.Duration(*secs)*time.Second > MaxReserveFor:
		return 0, jobError("reserve_for", "%d is over errand's longest lease; give at most %d seconds", *secs, int(MaxReserveFor.Seconds()))
	}
	return max(MinReserveFor, time.Duration(*secs)*time.Second), nil
}

// reserveFor is the lease job j is held under once fetched: its
// reserve_for, within the bounds a push checks.
func reserveFor(m *faktoryMeta) time.Duration {
	if m.ReserveFor <= 0 {
		return DefaultReserveFor
	}
	return min(MaxReserveFor, max(MinReserveFor, time.Duration(m.ReserveFor)*time.Second))
}

// wireJob is a job as FETCH answers it, in Faktory's shape.
type wireJob struct {
	Jid        string          `json:"jid"`
	Type       string          `json:"jobtype"`
	Args       json.RawMessage `json:"args"`
	Queue      string          `json:"queue"`
	Priority   int             `json:"priority"`
	Retry      int             `json:"retry"`
	ReserveFor int             `json:"reserve_for"`
	CreatedAt  string          `json:"created_at"`
	EnqueuedAt string          `json:"enqueued_at"`
	Custom     json.RawMessage `json:"custom"`
	Failure    *wireFailure    `json:"failure,omitempty"`
}

// wireFailure is a fetched job's last failure in this delivery cycle.
type wireFailure struct {
	RetryCount int      `json:"retry_count"`
	Remaining  int      `json:"remaining"`
	FailedAt   string   `json:"failed_at"`
	Message    string   `json:"message,omitempty"`
	ErrType    string   `json:"errtype,omitempty"`
	Backtrace  []string `json:"backtrace,omitempty"`
}

// fetchedJob returns claimed job j in Faktory's shape. Args that are not
// a JSON array (a job enqueued through errand's API) become its one
// element.
func fetchedJob(j *errandtype.Job) *wireJob {
	args := bytes.TrimSpace(j.Args)
	if len(args) == 0 || args[0] != '[' {
		if len(args) == 0 {
			args = []byte("{}")
		}
		args = append(append([]byte("["), args...), ']')
	}
	m := readMeta(j)
	w := &wireJob{
		Jid: j.ID, Type: j.Kind, Args: args, Queue: j.Queue,
		Priority:   faktoryPriority(j.Priority),
		Retry:      j.MaxAttempts - 1,
		ReserveFor: int(reserveFor(&m).Seconds()),
		CreatedAt:  wireTime(j.CreatedAt),
		EnqueuedAt: wireTime(j.CreatedAt),
		Custom:     m.Custom,
		Failure:    lastFailure(j),
	}
	if m.Retry != nil {
		w.Retry = *m.Retry
	}
	if w.Custom == nil {
		w.Custom = json.RawMessage("{}") // a worker may read custom.x without a check
	}
	if j.AvailableAt.After(j.CreatedAt) { // scheduled, or a retry: when it became ready
		w.EnqueuedAt = wireTime(j.AvailableAt)
	}
	return w
}

// lastFailure is the failure of j's latest failed attempt in its current
// delivery cycle (since its last replay), or nil. retry_count counts the
// failures before it, as Faktory's does.
func lastFailure(j *errandtype.Job) *wireFailure {
	var n int
	var last *errandtype.AttemptError
	for i := range j.Errors {
		e := &j.Errors[i]
		if e.Replay != j.Replays || e.Class == errand.ClassInterrupted {
			continue // an earlier cycle, or a drain that did not count
		}
		n++
		last = e
	}
	if last == nil {
		return nil
	}
	f := &wireFailure{
		RetryCount: n - 1,
		Remaining:  max(0, j.MaxAttempts-n),
		FailedAt:   wireTime(last.At),
		Message:    last.Message,
		ErrType:    last.Class,
	}
	if last.Stack != "" {
		f.Backtrace = strings.Split(last.Stack, "\n")
	}
	return f
}

func wireTime(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// errorClass maps a Faktory errtype ("TypeError", "Net::ReadTimeout",
// "ECONNREFUSED") to errand's failure class, a short snake_case word:
// "type_error", "net_read_timeout", "econnrefused". None ("", or the
// "undefined" the Node client sends for an Error without a code) is
// errand's "error".
func errorClass(errtype string) string {
	if errtype == "" || errtype == "undefined" || errtype == "null" {
		return errand.ClassError
	}
	var b strings.Builder
	rs := []rune(errtype)
	sep := false // a separator is due before the next letter or digit
	for i, r := range rs {
		switch {
		case r < unicode.MaxASCII && (unicode.IsLetter(r) || unicode.IsDigit(r)):
			upper := unicode.IsUpper(r)
			// A word starts at an upper-case letter after a lower-case
			// one or a digit, or before a lower-case one ("HTTPError").
			if upper && i > 0 && (unicode.IsLower(rs[i-1]) || unicode.IsDigit(rs[i-1]) ||
				(unicode.IsUpper(rs[i-1]) && i+1 < len(rs) && unicode.IsLower(rs[i+1]))) {
				sep = true
			}
			if sep && b.Len() > 0 {
				b.WriteByte('_')
			}
			sep = false
			if b.Len() == 0 && unicode.IsDigit(r) {
				b.WriteString("e") // a class starts with a letter
			}
			b.WriteRune(unicode.ToLower(r))
		default:
			sep = true
		}
	}
	class := b.String()
	if len(class) > 64 {
		class = strings.TrimRight(class[:64], "_")
	}
	if class == "" {
		return errand.ClassError
	}
	return class
}
