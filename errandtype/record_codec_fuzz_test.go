package errandtype

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// encodeColumns writes j's coded fields as a store does: JSON arrays and
// documents, durations in microseconds.
func encodeColumns(t *testing.T, j *Job) *JobColumns {
	t.Helper()
	c := &JobColumns{Args: string(j.Args), State: string(j.State),
		BackoffBaseUS: time.Duration(j.BackoffBase).Microseconds(), BackoffMaxUS: time.Duration(j.BackoffMax).Microseconds()}
	if j.Progress != nil {
		p := string(j.Progress)
		c.Progress = &p
	}
	if j.LastError != nil {
		b, err := json.Marshal(j.LastError)
		if err != nil {
			t.Fatal(err)
		}
		s := string(b)
		c.LastError = &s
	}
	for _, v := range []struct {
		dst *string
		src any
	}{{&c.Errors, j.Errors}, {&c.Tags, j.Tags}} {
		b, err := json.Marshal(v.src)
		if err != nil {
			t.Fatal(err)
		}
		*v.dst = string(b)
	}
	return c
}

// codedFields are the fields DecodeColumns fills.
func codedFields(j *Job) []any {
	return []any{string(j.Args), j.State, j.BackoffBase, j.BackoffMax, string(j.Progress), j.LastError, j.Errors, j.Tags}
}

// FuzzJobColumnsRoundTrip checks that a job's coded fields, written as a
// store writes them, decode to the same values: times in UTC at microsecond
// precision, text valid UTF-8, as the columns hold them.
func FuzzJobColumnsRoundTrip(f *testing.F) {
	f.Add(`{}`, "queued", int64(0), int64(0), "", "", int64(0), "", "", "", "")
	f.Add(`{"row":1}`, "retrying", int64(1_000_000), int64(60_000_000), "error", "boom", int64(1767323045_123456), "panic\ngoroutine 1", "a", "b", `{"done":3}`)
	f.Add(`[1,"x"]`, "dead", int64(1), int64(-1), "timeout", "ünïcode \u2028", int64(-62135596800_000000), "", "", "tag,with\"quote", `null`)
	f.Fuzz(func(t *testing.T, args, state string, baseUS, maxUS int64, class, message string, atUS int64, stack, tag1, tag2, progress string) {
		for _, s := range []string{state, class, message, stack, tag1, tag2} {
			if !utf8.ValidString(s) {
				return // the columns hold UTF-8 text
			}
		}
		at := time.UnixMicro(atUS).UTC()
		if at.Year() < 0 || at.Year() > 9999 {
			return // outside RFC 3339
		}
		j := &Job{Args: json.RawMessage(args), State: JobState(state),
			BackoffBase: Duration(time.Duration(baseUS) * time.Microsecond), BackoffMax: Duration(time.Duration(maxUS) * time.Microsecond),
			Errors: []AttemptError{}, Tags: []string{}}
		if baseUS != int64(time.Duration(baseUS)*time.Microsecond/time.Microsecond) || maxUS != int64(time.Duration(maxUS)*time.Microsecond/time.Microsecond) {
			return // past time.Duration's range
		}
		if json.Valid([]byte(progress)) {
			j.Progress = json.RawMessage(progress)
		}
		if class != "" {
			j.LastError = &LastError{Class: class, Message: message, At: at}
			j.Errors = append(j.Errors, AttemptError{Attempt: 1, At: at, Class: class, Message: message, Stack: stack})
		}
		for _, tag := range []string{tag1, tag2} {
			if tag != "" {
				j.Tags = append(j.Tags, tag)
			}
		}
		var got Job
		if err := got.DecodeColumns(encodeColumns(t, j)); err != nil {
			t.Fatalf("decode of encoded %+v: %v", j, err)
		}
		if want, have := codedFields(j), codedFields(&got); !reflect.DeepEqual(want, have) {
			t.Fatalf("round trip:\n got %#v\nwant %#v", have, want)
		}
	})
}

// FuzzJobColumnsDecode feeds DecodeColumns arbitrary history, tags and
// last_error columns. It refuses with an error naming the column, or
// decodes to a record that encodes and decodes to itself, its history and
// tags never nil.
func FuzzJobColumnsDecode(f *testing.F) {
	f.Add(`[]`, `[]`, `{"class":"error","message":"boom","at":"2026-01-02T03:04:05Z"}`, true)
	f.Add(`[ ]`, ` []`, ``, false)
	f.Add(`null`, `null`, `null`, true)
	f.Add(`[{"attempt":1,"replay":0,"at":"2026-01-02T03:04:05.123456Z","class":"error","message":"boom","stack":null}]`, `["a","b"]`, `{}`, true)
	f.Add(`[{"attempt":2,"at":"2026-01-02T03:04:05+02:00","class":"panic","stack":"goroutine 1"}]`, `["x"]`, `{"at":"bad"}`, true)
	f.Add(`[`, `[]`, ``, false)
	f.Add(`[]`, `[1]`, ``, false)
	f.Add(`{}`, `"a"`, `[]`, true)
	f.Fuzz(func(t *testing.T, errs, tags, lastError string, hasLastError bool) {
		c := &JobColumns{Args: `{}`, State: "queued", Errors: errs, Tags: tags}
		if hasLastError {
			c.LastError = &lastError
		}
		var j Job
		j.ID = "job-1"
		if err := j.DecodeColumns(c); err != nil {
			if msg := err.Error(); !strings.Contains(msg, "job-1: decode ") {
				t.Fatalf("error %q names neither the job nor the column", msg)
			}
			return
		}
		if j.Errors == nil || j.Tags == nil {
			t.Fatalf("decoded nil history (%v) or tags (%v)", j.Errors == nil, j.Tags == nil)
		}
		if (j.LastError != nil) != hasLastError {
			t.Fatalf("last_error %v decoded from hasLastError %v", j.LastError, hasLastError)
		}
		var again Job
		again.ID = j.ID
		if err := again.DecodeColumns(encodeColumns(t, &j)); err != nil {
			t.Fatalf("decode of re-encoded %+v: %v", j, err)
		}
		if want, have := codedFields(&j), codedFields(&again); !reflect.DeepEqual(want, have) {
			t.Fatalf("second round trip:\n got %#v\nwant %#v", have, want)
		}
	})
}

// FuzzDurationJSON checks Duration's JSON: what it reads it writes back
// the same, zero is null, and what it refuses is a *json.UnmarshalTypeError
// naming Duration.
func FuzzDurationJSON(f *testing.F) {
	for _, s := range []string{`"250ms"`, `"1h"`, `"1h2m3.5s"`, `"-1s"`, `"0s"`, `null`, `"0"`, `"1"`, `""`, `1`, `"1x"`,
		`"9223372036854775807ns"`, `"9223372036854775808ns"`, `"\u0031s"`, `{}`, `"1µs"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var d Duration
		if err := json.Unmarshal(b, &d); err != nil {
			var te *json.UnmarshalTypeError
			if json.Valid(b) && (!errors.As(err, &te) || te.Type != reflect.TypeFor[Duration]()) {
				t.Fatalf("%q: refused with %T %v, want a *json.UnmarshalTypeError naming Duration", b, err, err)
			}
			return
		}
		out, err := json.Marshal(d)
		if err != nil {
			t.Fatalf("%q read as %d, which does not marshal: %v", b, d, err)
		}
		if (d == 0) != (string(out) == "null") {
			t.Fatalf("%q read as %d, marshalled as %s", b, d, out)
		}
		var back Duration
		if err := json.Unmarshal(out, &back); err != nil || back != d {
			t.Fatalf("%q read as %d, marshalled as %s, read back as %d (%v)", b, d, out, back, err)
		}
	})
}
