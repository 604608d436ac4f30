package errand

import (
	"fmt"
	"math"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// The limits below are one rule for every store. SQLite would store values
// that PostgreSQL refuses or alters (a NUL byte, invalid UTF-8, a number past
// 32 bits, a time past the year 9999), so the Client checks or cleans every
// value before any write, and the stores' Validate methods refuse what slips
// past, so no store ever holds what another could not.

// Limits on identifiers: ids, kinds, queues, keys and tags.
const (
	// MaxNameBytes bounds a kind or a queue name.
	MaxNameBytes = 128
	// MaxIDBytes bounds a job id, a unique key, an ordering key and a
	// worker id.
	MaxIDBytes = 255
	// MaxEffectKeyBytes bounds an effect ledger key, which is often a job
	// id with a prefix.
	MaxEffectKeyBytes = 512
	// MaxTagBytes bounds one tag; MaxTags bounds how many a job has.
	MaxTagBytes = 128
	MaxTags     = 64
)

// Limits on numbers. The stores keep them in 32-bit columns.
const (
	// MinPriority and MaxPriority bound a job's priority.
	MinPriority = math.MinInt32
	MaxPriority = math.MaxInt32
	// MaxAttemptsLimit bounds a job's attempt budget.
	MaxAttemptsLimit = math.MaxInt32
	// MaxArgsVersion bounds a job's args version.
	MaxArgsVersion = math.MaxInt32
)

// Limits on times and durations.
const (
	// MinLease is the shortest lease a worker may claim with. A claim,
	// a heartbeat and an outcome must each fit well inside a lease; below
	// a second a loaded machine or a busy database loses leases to
	// ordinary pauses, and every job dies of lease_expired.
	MinLease = time.Second
	// MinMaxAge is the shortest maximum age a job may have. Stores keep
	// times in microseconds; a shorter one would mean different things to
	// different stores.
	MinMaxAge = time.Millisecond
)

// Times a job may be scheduled at: within the years that every store and
// RFC 3339 can represent.
var (
	minRunAt = time.Date(1, time.January, 1, 0, 0, 0, 0, time.UTC)
	maxRunAt = time.Date(9999, time.December, 31, 23, 59, 59, 0, time.UTC)
)

// Limits on free text: failure messages and stacks. Longer text is cut, with
// a note saying so: a history entry is for a person to read, and one huge
// message should not bloat every read of the job.
const (
	MaxMessageBytes = 16 << 10
	MaxStackBytes   = 64 << 10
)

// checkName validates a kind or queue name: 1 to MaxNameBytes bytes of
// valid UTF-8, printable, without spaces.
func checkName(field, s string) error {
	if s == "" {
		return &InputError{Field: field, Message: "is empty; name it, e.g. \"send_receipt\""}
	}
	if len(s) > MaxNameBytes {
		return &InputError{Field: field, Message: fmt.Sprintf("is %d bytes; use at most %d", len(s), MaxNameBytes)}
	}
	if !utf8.ValidString(s) {
		return &InputError{Field: field, Message: fmt.Sprintf("%q is not valid UTF-8; use letters, digits, '.', '-', '_' or ':'", s)}
	}
	for _, r := range s {
		if unicode.IsSpace(r) || !unicode.IsPrint(r) {
			return &InputError{Field: field, Message: fmt.Sprintf("%q contains a space or control character; use letters, digits, '.', '-', '_' or ':'", s)}
		}
	}
	return nil
}

// checkIdentifier validates an id, a key or a tag: 1 to max bytes of valid
// UTF-8, printable characters only (spaces inside are allowed; none at
// either end), so that it reads the same back from every store and from
// --json, and can be typed again to address the job.
func checkIdentifier(field, s string, max int) error {
	switch {
	case s == "":
		return &InputError{Field: field, Message: "is empty"}
	case len(s) > max:
		return &InputError{Field: field, Message: fmt.Sprintf("is %d bytes; use at most %d", len(s), max)}
	case !utf8.ValidString(s):
		return &InputError{Field: field, Message: fmt.Sprintf("%q is not valid UTF-8", s)}
	case strings.TrimSpace(s) != s:
		return &InputError{Field: field, Message: fmt.Sprintf("%q starts or ends with a space; remove it", s)}
	}
	for _, r := range s {
		if r != ' ' && !unicode.IsPrint(r) {
			return &InputError{Field: field, Message: fmt.Sprintf("%q contains a control or invisible character (%U); use printable characters", s, r)}
		}
	}
	return nil
}

// checkRange validates a number that the stores keep in 32 bits.
func checkRange(field string, v, lo, hi int) error {
	if v < lo || v > hi {
		return &InputError{Field: field, Message: fmt.Sprintf("%d is out of range; use %d to %d", v, lo, hi)}
	}
	return nil
}

// checkText reports whether s can be stored as text by every store: valid
// UTF-8 without NUL.
func checkText(field, s string) error {
	if !StorableText(s) {
		return &InputError{Field: field, Message: "is not valid UTF-8 without NUL bytes; clean it with errand.CleanText"}
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

// checkJSONText validates a JSON document for every store: valid UTF-8 and
// no \u0000 escape, which PostgreSQL's jsonb cannot hold.
func checkJSONText(field string, b []byte) error {
	if !utf8.Valid(b) {
		return &InputError{Field: field, Message: "is not valid UTF-8; encode the text as UTF-8"}
	}
	if hasNULEscape(b) {
		return &InputError{Field: field, Message: `contains \u0000, which not every store can keep; remove the NUL character`}
	}
	return nil
}

// hasNULEscape reports whether a JSON document holds the escape \u0000 in a
// string (a backslash that is itself escaped does not count).
func hasNULEscape(b []byte) bool {
	for i := 0; i+5 < len(b); i++ {
		if b[i] != '\\' {
			continue
		}
		if b[i+1] == 'u' && string(b[i+2:i+6]) == "0000" {
			return true
		}
		i++ // skip the escaped character, so "\\u0000" is not a NUL
	}
	return false
}

// checkRunAt validates a scheduled time.
func checkRunAt(t time.Time) error {
	if t.IsZero() {
		return nil
	}
	if t.Before(minRunAt) || t.After(maxRunAt) {
		return &InputError{Field: "run_at", Message: fmt.Sprintf("%s is out of range; give a time between years 1 and 9999", t.UTC().Format(time.RFC3339))}
	}
	return nil
}

// checkLease validates a claim's lease.
func checkLease(field string, d time.Duration) error {
	if d < MinLease {
		return &InputError{Field: field, Message: fmt.Sprintf("%s is too short; give at least %s (default %s)", d, MinLease, DefaultLease)}
	}
	return nil
}

// MaxReasonBytes bounds a replay's reason.
const MaxReasonBytes = 4 << 10

// checkReason validates an operator's free-text reason: valid UTF-8 without
// control characters other than line breaks and tabs.
func checkReason(s string) error {
	if len(s) > MaxReasonBytes {
		return &InputError{Field: "reason", Message: fmt.Sprintf("is %d bytes; use at most %d", len(s), MaxReasonBytes)}
	}
	if !utf8.ValidString(s) {
		return &InputError{Field: "reason", Message: "is not valid UTF-8"}
	}
	for _, r := range s {
		if unicode.IsControl(r) && r != '\n' && r != '\t' {
			return &InputError{Field: "reason", Message: fmt.Sprintf("contains the control character %U; write plain text", r)}
		}
	}
	return nil
}

// StorableText reports whether every store can keep s as text: valid UTF-8
// without NUL. A lookup by an id that is not storable finds nothing on any
// store.
func StorableText(s string) bool {
	return utf8.ValidString(s) && strings.IndexByte(s, 0) < 0
}
