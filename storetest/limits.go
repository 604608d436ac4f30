package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
)

// One rule for every store: a value that one store could keep and another
// would refuse or alter is refused by both, before anything is written, and
// every value inside the limits reads back exactly as it was written.
var limitCases = []testCase{
	{"RefusedBeforeWriting", testLimitsRefused},
	{"ExtremesRoundTrip", testLimitsExtremes},
	{"OutcomeText", testLimitsOutcomeText},
	{"CleanTextRoundTrips", testLimitsCleanText},
	{"ProgressAndEffectKeys", testLimitsProgressAndKeys},
	{"LeaseText", testLimitsLeaseText},
}

// testLimitsRefused checks that every store refuses the same bad values with
// an *InputError and writes nothing of the batch.
func testLimitsRefused(t *testing.T, h harness) {
	for _, c := range []struct {
		name string
		bad  func(p *errandstore.JobInsertParams)
	}{
		{"id-nul", func(p *errandstore.JobInsertParams) { p.ID = "pay\x001" }},
		{"id-invalid-utf8", func(p *errandstore.JobInsertParams) { p.ID = "pay\xff1" }},
		{"id-escape", func(p *errandstore.JobInsertParams) { p.ID = "pay\x1b[2J" }},
		{"id-c1-control", func(p *errandstore.JobInsertParams) { p.ID = "pay\u009b1" }},
		{"id-bidi-override", func(p *errandstore.JobInsertParams) { p.ID = "pay\u202e1" }},
		{"id-too-long", func(p *errandstore.JobInsertParams) { p.ID = strings.Repeat("i", errandstore.MaxIDBytes+1) }},
		{"kind-invalid-utf8", func(p *errandstore.JobInsertParams) { p.Kind = "email\xc3" }},
		{"queue-control", func(p *errandstore.JobInsertParams) { p.Queue = "mail\x07" }},
		{"unique-key-nul", func(p *errandstore.JobInsertParams) { p.UniqueKey = "k\x00" }},
		{"ordering-key-invalid-utf8", func(p *errandstore.JobInsertParams) { p.OrderingKey = "\xfe" }},
		{"fairness-key-nul", func(p *errandstore.JobInsertParams) { p.FairnessKey = "tenant\x00a" }},
		{"fairness-key-too-long", func(p *errandstore.JobInsertParams) { p.FairnessKey = strings.Repeat("t", errandstore.MaxIDBytes+1) }},
		{"tag-control", func(p *errandstore.JobInsertParams) { p.Tags = []string{"ok", "bad\n"} }},
		{"tag-empty", func(p *errandstore.JobInsertParams) { p.Tags = []string{""} }},
		{"too-many-tags", func(p *errandstore.JobInsertParams) { p.Tags = make([]string, errandstore.MaxTags+1) }},
		{"args-nul-escape", func(p *errandstore.JobInsertParams) { p.Args = json.RawMessage(`{"note": "a\u0000b"}`) }},
		{"args-invalid-utf8", func(p *errandstore.JobInsertParams) { p.Args = json.RawMessage("{\"note\": \"\xff\"}") }},
		{"args-lone-surrogate", func(p *errandstore.JobInsertParams) { p.Args = json.RawMessage(`{"note": "\ud800"}`) }},
		{"args-number-beyond-numeric", func(p *errandstore.JobInsertParams) { p.Args = json.RawMessage(`{"n": 1e200000}`) }},
		{"priority-past-32-bits", func(p *errandstore.JobInsertParams) { p.Priority = math.MaxInt32 + 1 }},
		{"priority-below-32-bits", func(p *errandstore.JobInsertParams) { p.Priority = math.MinInt32 - 1 }},
		{"max-attempts-past-32-bits", func(p *errandstore.JobInsertParams) { p.MaxAttempts = 1<<32 + 1 }},
		{"negative-max-attempts", func(p *errandstore.JobInsertParams) { p.MaxAttempts = -1 }},
		{"args-version-past-32-bits", func(p *errandstore.JobInsertParams) { p.ArgsVersion = 1<<32 + 5 }},
		{"run-at-year-300000", func(p *errandstore.JobInsertParams) {
			p.RunAt = time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC).AddDate(290000, 0, 0)
		}},
		{"run-at-before-year-1", func(p *errandstore.JobInsertParams) { p.RunAt = time.Date(0, 12, 31, 0, 0, 0, 0, time.UTC) }},
		{"max-age-under-a-microsecond", func(p *errandstore.JobInsertParams) { p.MaxAge = 500 * time.Nanosecond }},
		{"max-age-under-a-millisecond", func(p *errandstore.JobInsertParams) { p.MaxAge = 999 * time.Microsecond }},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := open(t, h)
			bad := newJob("bad")
			c.bad(bad)
			rs, err := e.s.JobInsertMany(e.ctx, &errandstore.JobInsertManyParams{Jobs: []*errandstore.JobInsertParams{newJob("good"), bad}})
			var ie *errandtype.InputError
			if !errors.As(err, &ie) {
				t.Fatalf("JobInsertMany = %v, %v; want an *InputError", rs, err)
			}
			e.notFound("good")
			if bad.ID != "bad" {
				e.notFound(bad.ID)
			}
			err = e.h.inTx(e.ctx, e.s, func(ctx context.Context, tx txOps) error {
				_, err := tx.JobInsertMany(ctx, &errandstore.JobInsertManyParams{Jobs: []*errandstore.JobInsertParams{bad}})
				return err
			})
			if !errors.As(err, &ie) {
				t.Fatalf("JobInsertManyTx = %v; want an *InputError", err)
			}
		})
	}
}

// testLimitsExtremes checks that the largest and smallest values inside the
// limits read back unchanged: no store truncates a number to fewer bits or
// moves a far-off time.
func testLimitsExtremes(t *testing.T, h harness) {
	e := open(t, h)
	far := time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC)
	hi := newJob("hi")
	hi.Priority = errandstore.MaxPriority
	hi.MaxAttempts = errandtype.MaxAttemptsLimit
	hi.ArgsVersion = errandstore.MaxArgsVersion
	hi.RunAt = far
	hi.MaxAge = errandstore.MinMaxAge
	hi.UniqueKey = strings.Repeat("u", errandstore.MaxIDBytes)
	hi.Tags = []string{"café ☕", "日本語", strings.Repeat("t", errandstore.MaxTagBytes)}
	lo := newJob(strings.Repeat("é", errandstore.MaxIDBytes/2)) // two bytes a character
	lo.Priority = errandstore.MinPriority
	for _, j := range e.insert(hi, lo) {
		got := e.get(j.ID)
		same(t, "job "+j.ID[:2], j, got)
	}
	got := e.get("hi")
	if got.Priority != math.MaxInt32 || got.MaxAttempts != math.MaxInt32 || got.ArgsVersion != math.MaxInt32 {
		t.Errorf("priority %d, max attempts %d, args version %d; want %d for each", got.Priority, got.MaxAttempts, got.ArgsVersion, math.MaxInt32)
	}
	if !got.AvailableAt.Equal(far) {
		t.Errorf("available at %v, want %v", got.AvailableAt, far)
	}
	if got.Deadline == nil || !got.Deadline.Equal(e.now().Add(errandstore.MinMaxAge)) {
		t.Errorf("deadline %v, want %v", got.Deadline, e.now().Add(errandstore.MinMaxAge))
	}
	if low := e.get(lo.ID); low.Priority != math.MinInt32 {
		t.Errorf("priority %d, want %d", low.Priority, math.MinInt32)
	}
	// The far-off job is not claimable now; the lowest priority is first.
	if js := e.claim(2); len(js) != 1 || js[0].ID != lo.ID {
		t.Errorf("claimed %v, want only the low-priority job available now", ids(js))
	}
}

// testLimitsOutcomeText checks that a store refuses outcome text it could
// not keep, with an *InputError and nothing written, so that a caller knows
// not to retry it.
func testLimitsOutcomeText(t *testing.T, h harness) {
	for _, c := range []struct{ name, class, message, stack string }{
		{"message-nul", errand.ClassError, "bad\x00byte", ""},
		{"message-invalid-utf8", errand.ClassError, "bad\xffbyte", ""},
		{"stack-nul", errand.ClassPanic, "panic", "goroutine 1\x00"},
		{"class-not-a-word", "Bad Class", "m", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := open(t, h)
			e.insertIDs("a")
			j := e.claimOne("a")
			o := retry(j, time.Second)
			o.Error.Class, o.Error.Message, o.Error.Stack = c.class, c.message, c.stack
			rs, err := e.s.JobRecordOutcomes(e.ctx, &errandstore.JobRecordOutcomesParams{Outcomes: []*errandstore.JobOutcome{o}})
			var ie *errandtype.InputError
			if !errors.As(err, &ie) {
				t.Fatalf("JobRecordOutcomes = %v, %v; want an *InputError", rs, err)
			}
			e.unchanged("refused outcome", j)
		})
	}
}

// testLimitsCleanText checks that text cleaned by errandstore.CleanText, which is
// what the Client sends for handlers' messages, is kept exactly.
func testLimitsCleanText(t *testing.T, h harness) {
	e := open(t, h)
	e.insertIDs("a")
	j := e.claimOne("a")
	msg := errandstore.CleanText("bad\x00byte \xff\xfe and \x1b[2J \u2028 ☕ \"quoted\" \\ back", errandstore.MaxMessageBytes)
	stack := errandstore.CleanText("goroutine 1 [running]:\n\tmain.go:1\x00", errand.MaxStackBytes)
	o := retry(j, time.Second)
	o.Error.Message, o.Error.Stack = msg, stack
	e.recordOK(o)
	got := e.get("a")
	if len(got.Errors) != 1 || got.Errors[0].Message != msg || got.Errors[0].Stack != stack {
		t.Fatalf("history %+v, want message %q and stack %q", got.Errors, msg, stack)
	}
	if got.LastError == nil || got.LastError.Message != msg {
		t.Fatalf("last error %+v, want message %q", got.LastError, msg)
	}
}

// testLimitsProgressAndKeys checks the checkpoint and effect-key rules.
func testLimitsProgressAndKeys(t *testing.T, h harness) {
	e := open(t, h)
	e.insertIDs("a")
	j := e.claimOne("a")
	var ie *errandtype.InputError
	if err := e.s.JobSetProgress(e.ctx, &errandstore.JobSetProgressParams{ID: j.ID, LeaseToken: token(j), Progress: json.RawMessage(`{"at": "\u0000"}`)}); !errors.As(err, &ie) {
		t.Errorf("JobSetProgress with \\u0000 = %v; want an *InputError", err)
	}
	if err := e.s.JobSetProgress(e.ctx, &errandstore.JobSetProgressParams{ID: j.ID, LeaseToken: token(j), Progress: json.RawMessage("{\"at\": \"\xff\"}")}); !errors.As(err, &ie) {
		t.Errorf("JobSetProgress with invalid UTF-8 = %v; want an *InputError", err)
	}
	e.unchanged("refused progress", j)
	for _, key := range []string{"k\x00", "k\xff", "k\x1b"} {
		if _, err := e.s.EffectBegin(e.ctx, &errandstore.EffectParams{Key: key, JobID: j.ID, LeaseToken: token(j)}); !errors.As(err, &ie) {
			t.Errorf("EffectBegin with key %q = %v; want an *InputError", key, err)
		}
		if _, err := e.s.EffectGet(e.ctx, &errandstore.EffectGetParams{Key: key}); !errors.Is(err, errandtype.ErrNotFound) {
			t.Errorf("EffectGet %q after a refused begin = %v; want ErrNotFound", key, err)
		}
	}
}

// testLimitsLeaseText checks that every fenced write refuses a lease whose
// job id or token is not text every store keeps (SQLite would find nothing
// to change, PostgreSQL would refuse the write) with an *InputError, and
// writes nothing of the batch it came in.
func testLimitsLeaseText(t *testing.T, h harness) {
	e := open(t, h)
	e.insertIDs("a", "b")
	jobs := e.claim(2)
	if len(jobs) != 2 {
		t.Fatalf("claimed %d jobs, want 2", len(jobs))
	}
	a, b := jobs[0], jobs[1]
	var ie *errandtype.InputError
	for _, bad := range []errandstore.JobLease{
		{ID: b.ID + "\x00", LeaseToken: token(b)},
		{ID: b.ID + "\xff", LeaseToken: token(b)},
		{ID: b.ID, LeaseToken: token(b) + "\x00"},
		{ID: b.ID, LeaseToken: "\xc3" + token(b)},
	} {
		_, err := e.s.JobHeartbeatMany(e.ctx, &errandstore.JobHeartbeatParams{Leases: []errandstore.JobLease{{ID: a.ID, LeaseToken: token(a)}, bad}, Lease: time.Minute})
		if !errors.As(err, &ie) {
			t.Errorf("JobHeartbeatMany with lease %q = %v; want an *InputError", bad, err)
		}
		o := succeeded(b)
		o.JobLease = bad
		rs, err := e.s.JobRecordOutcomes(e.ctx, &errandstore.JobRecordOutcomesParams{Outcomes: []*errandstore.JobOutcome{succeeded(a), o}})
		if !errors.As(err, &ie) {
			t.Errorf("JobRecordOutcomes with lease %q = %v, %v; want an *InputError", bad, rs, err)
		}
		if err := e.s.JobSetProgress(e.ctx, &errandstore.JobSetProgressParams{ID: bad.ID, LeaseToken: bad.LeaseToken, Progress: json.RawMessage(`{}`)}); !errors.As(err, &ie) {
			t.Errorf("JobSetProgress with lease %q = %v; want an *InputError", bad, err)
		}
		if _, err := e.s.EffectBegin(e.ctx, &errandstore.EffectParams{Key: "k", JobID: bad.ID, LeaseToken: bad.LeaseToken}); !errors.As(err, &ie) {
			t.Errorf("EffectBegin with lease %q = %v; want an *InputError", bad, err)
		}
	}
	e.unchanged("a, after the refused batches", a)
	e.unchanged("b, after the refused writes", b)
}
