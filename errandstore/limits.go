package errandstore

import (
	"fmt"
	"math"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/errandhq/errand/errandtype"
	"github.com/errandhq/errand/internal/plainjson"
)

const (
	// MaxIDBytes bounds a job id, a unique key, an ordering key and a
	// worker id.
	MaxIDBytes = 255
	// MaxEffectKeyBytes bounds an effect ledger key, which is often a job
	// id with a prefix.
	MaxEffectKeyBytes = 512
	// MaxTagBytes bounds one tag; MaxTags bounds how many a job has.
	MaxTagBytes = 128
	MaxTags     = 64
	// MaxMetadataBytes bounds a job's metadata: a trace context and a few
	// fields, not a document.
	MaxMetadataBytes = 64 << 10
)

const (
	// MinPriority and MaxPriority bound a job's priority.
	MinPriority = math.MinInt32
	MaxPriority = math.MaxInt32
	// MaxArgsVersion bounds a job's args version.
	MaxArgsVersion = math.MaxInt32
	// MaxClaimNames bounds the queues and kinds one claim names: a store
	// may send each as a parameter of its statement, and SQLite takes at
	// most 32766.
	MaxClaimNames = 10000
)

const (
	// MinMaxAge is the shortest maximum age a job may have. Stores keep
	// times in microseconds; a shorter one would mean different things to
	// different stores.
	MinMaxAge = time.Millisecond
	// MinInterval is the shortest PollInterval, HeartbeatInterval and
	// SweepInterval a Worker takes, and the shortest heartbeat interval a
	// worker may register with. A shorter one would make an idle worker
	// query its store in a tight loop, and one under a microsecond, the
	// stores' unit, would be kept as none at all.
	MinInterval = time.Millisecond
	// MaxDelay bounds a wait given as a duration: an enqueue's Delay (a
	// batch callback's and a workflow step's too), a failure's RetryAfter.
	// A hundred years holds any real plan (records kept for decades, then
	// deleted), while the waits that come of mistakes, a number read in
	// the wrong unit or a "forever" such as math.MaxInt64 (292 years), are
	// refused instead of kept as a job that never runs. A bound at the
	// year 9999, as for a run-at time, no duration could reach.
	MaxDelay = 100 * 365 * 24 * time.Hour
)

const (
	MaxMessageBytes = 16 << 10
)

// CheckName validates a kind or queue name: see [errandtype.CheckName].
func CheckName(field, s string) error { return errandtype.CheckName(field, s) }

// checkStepName validates a workflow step's name: a name of at most
// MaxStepNameBytes, without '.', since it ends its job's id
// (ID.step.NAME).
func checkStepName(field, s string) error {
	const rule = "use printable characters without spaces or '.'"
	if err := errandtype.CheckNameWith(field, s, rule); err != nil {
		return err
	}
	if len(s) > MaxStepNameBytes {
		return &errandtype.InputError{Field: field, Message: fmt.Sprintf("is %d bytes; use at most %d", len(s), MaxStepNameBytes)}
	}
	if strings.Contains(s, ".") {
		return &errandtype.InputError{Field: field, Message: fmt.Sprintf("%q contains '.'; a step's name ends its job's id (ID.step.NAME), so %s", s, rule)}
	}
	return nil
}

// CheckIdentifier validates an id, a key or a tag: 1 to max bytes of valid
// UTF-8, printable characters only (spaces inside are allowed; none at
// either end), so that it reads the same back from every store and from
// --json, and can be typed again to address the job.
func CheckIdentifier(field, s string, max int) error {
	switch {
	case s == "":
		return &errandtype.InputError{Field: field, Message: "is empty"}
	case len(s) > max:
		return &errandtype.InputError{Field: field, Message: fmt.Sprintf("is %d bytes; use at most %d", len(s), max)}
	case !utf8.ValidString(s):
		return &errandtype.InputError{Field: field, Message: fmt.Sprintf("%q is not valid UTF-8", s)}
	case strings.TrimSpace(s) != s:
		return &errandtype.InputError{Field: field, Message: fmt.Sprintf("%q starts or ends with a space; remove it", s)}
	}
	for _, r := range s {
		if r != ' ' && !unicode.IsPrint(r) {
			return &errandtype.InputError{Field: field, Message: fmt.Sprintf("%q contains a control or invisible character (%U); use printable characters", s, r)}
		}
	}
	return nil
}

// checkBatchID validates a batch id: an identifier short enough for its
// callback's id, and not ending in ".step" or ".undo", which would give the
// callback a workflow job's id.
func checkBatchID(id string) error {
	if err := checkID("batch id", id, MaxBatchIDBytes); err != nil {
		return err
	}
	if strings.HasSuffix(id, ".step") || strings.HasSuffix(id, ".undo") {
		return &errandtype.InputError{Field: "batch id", Message: fmt.Sprintf("%q ends in \".step\" or \".undo\", so its callback's id would have the shape of a workflow job's id; choose another id", id)}
	}
	return nil
}

// checkID validates the id of a job, a batch or a workflow: an identifier
// that is not "." or "..", which a URL path (the API's, the dashboard's)
// cannot hold, since clients and browsers resolve them as dot segments.
func checkID(field, s string, max int) error {
	if err := CheckIdentifier(field, s, max); err != nil {
		return err
	}
	if s == "." || s == ".." {
		return &errandtype.InputError{Field: field, Message: fmt.Sprintf("%q cannot be addressed in a URL, where it means a directory; choose another id", s)}
	}
	return nil
}

// checkRange validates a number that the stores keep in 32 bits.
func checkRange(field string, v, lo, hi int) error {
	if v < lo || v > hi {
		return &errandtype.InputError{Field: field, Message: fmt.Sprintf("%d is out of range; use %d to %d", v, lo, hi)}
	}
	return nil
}

// checkText reports whether s can be stored as text by every store: valid
// UTF-8 without NUL.
func checkText(field, s string) error {
	if !errandtype.StorableText(s) {
		return &errandtype.InputError{Field: field, Message: "is not valid UTF-8 without NUL bytes; clean it with errand.CleanText"}
	}
	return nil
}

// CleanText returns s as text every store keeps unchanged: invalid UTF-8 and
// NUL bytes become U+FFFD, and text longer than max bytes (when max > 0) is
// cut at a character boundary with a note of how much was cut. The Client
// cleans failure messages and stacks with it, since they come from handlers
// and commands it does not control; a store refuses text it has not
// cleaned.
func CleanText(s string, max int) string {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	if strings.IndexByte(s, 0) >= 0 {
		s = strings.ReplaceAll(s, "\x00", "\uFFFD")
	}
	if max > 0 && len(s) > max {
		cut := max
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + fmt.Sprintf("… (%d more bytes cut)", len(s)-cut)
	}
	return s
}

// checkJSONText validates a JSON document, already known to be valid JSON,
// for every store: see [plainjson.Check].
func checkJSONText(field string, b []byte, max int) (rewrite bool, err error) {
	return plainjson.Check(field, b, max)
}

// CheckDelay refuses a wait past MaxDelay.
func CheckDelay(field string, d time.Duration) error {
	if d > MaxDelay {
		return &errandtype.InputError{Field: field, Message: fmt.Sprintf("%s is longer than %s (100 years, errand.MaxDelay); give a shorter one", d, MaxDelay)}
	}
	return nil
}

// checkRunAt validates a scheduled time.
func checkRunAt(t time.Time) error { return checkTime("run_at", t) }

// checkTime refuses a time, other than zero (none), that the stores cannot
// keep: before year 1 or past the last second of year 9999.
func checkTime(field string, t time.Time) error {
	if !t.IsZero() && (t.Before(errandtype.MinRunAt) || t.After(errandtype.MaxRunAt)) {
		return &errandtype.InputError{Field: field, Message: fmt.Sprintf("%s is out of range; give a time from %s to %s", t.UTC().Format(time.RFC3339Nano), errandtype.MinRunAt.Format(time.RFC3339), errandtype.MaxRunAt.Format(time.RFC3339))}
	}
	return nil
}

// CheckInterval refuses a worker's interval shorter than MinInterval;
// example is a value to suggest instead.
func CheckInterval(field string, d time.Duration, example string) error {
	if d < MinInterval {
		return &errandtype.InputError{Field: field, Message: fmt.Sprintf("%s is too short; give at least %s, e.g. %s", d, MinInterval, example)}
	}
	return nil
}

// MaxReasonBytes bounds a replay's reason.
const MaxReasonBytes = 4 << 10

// checkReason validates an operator's free-text reason: valid UTF-8 without
// control characters other than line breaks and tabs.
func checkReason(s string) error {
	if len(s) > MaxReasonBytes {
		return &errandtype.InputError{Field: "reason", Message: fmt.Sprintf("is %d bytes; use at most %d", len(s), MaxReasonBytes)}
	}
	if !utf8.ValidString(s) {
		return &errandtype.InputError{Field: "reason", Message: "is not valid UTF-8"}
	}
	for _, r := range s {
		if unicode.IsControl(r) && r != '\n' && r != '\t' {
			return &errandtype.InputError{Field: "reason", Message: fmt.Sprintf("contains the control character %U; write plain text", r)}
		}
	}
	return nil
}

// CheckLeaseText refuses a lease whose job id or token is not text every
// store can keep. Such a lease names no job; without the check, SQLite
// would find nothing to change and PostgreSQL would refuse the write, so
// every fenced write checks it, in the Client and in the stores.
func CheckLeaseText(id, token string) error {
	if !errandtype.StorableText(id) {
		return &errandtype.InputError{Field: "id", Message: "is not valid UTF-8 without NUL bytes, so it names no job; pass the id the claim returned"}
	}
	if !errandtype.StorableText(token) {
		return &errandtype.InputError{Field: "lease_token", Message: "is not valid UTF-8 without NUL bytes, so it is no lease token; pass the lease_token the claim returned"}
	}
	return nil
}
