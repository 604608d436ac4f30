package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
)

var outcomeCases = []testCase{
	{"Kinds", testOutcomeKinds},
	{"Batch", testOutcomeBatch},
	{"BatchOfOneKind", testOutcomeBatchOfOneKind},
	{"AttemptsBounded", testOutcomeAttemptsBounded},
	{"Invalid", testOutcomeInvalid},
	{"Delete", testOutcomeDelete},
}

// testOutcomeKinds checks the whole record each outcome kind writes.
func testOutcomeKinds(t *testing.T, h harness) {
	for _, c := range outcomeKindCases() {
		t.Run(string(c.kind), func(t *testing.T) { testOutcomeKind(t, h, c) })
	}
}

// outcomeKindCase is an outcome of a job's first attempt and what it
// writes: expect turns the claimed job into the one the outcome leaves at
// now, given the history entry it writes (nil for none).
type outcomeKindCase struct {
	kind    errandstore.OutcomeKind
	delay   time.Duration
	err     *errandtype.AttemptError
	expect  func(want *errandtype.Job, now time.Time, entry *errandtype.AttemptError)
	state   errandtype.JobState
	nextRun func(now time.Time) time.Time
}

const outcomeStack = "goroutine 7 [running]:\nmain.handler(...)\n\t/src/main.go:42 +0x1d"

// outcomeKindCases are testOutcomeKinds' cases, made afresh for each run.
func outcomeKindCases() []outcomeKindCase {
	return []outcomeKindCase{
		{
			kind:  errandstore.OutcomeSucceeded,
			state: errandtype.StateSucceeded,
			expect: func(w *errandtype.Job, now time.Time, _ *errandtype.AttemptError) {
				w.FinishedAt = ptr(now)
			},
		},
		{
			kind:  errandstore.OutcomeRetry,
			delay: 2 * time.Minute,
			err:   &errandtype.AttemptError{Attempt: 1, Class: "receipt_unavailable", Message: "mail server said 451"},
			state: errandtype.StateRetrying,
			expect: func(w *errandtype.Job, now time.Time, e *errandtype.AttemptError) {
				w.AvailableAt = now.Add(2 * time.Minute)
				w.Errors = []errandtype.AttemptError{*e}
				w.LastError = lastErr(*e)
			},
			nextRun: func(now time.Time) time.Time { return now.Add(2 * time.Minute) },
		},
		{
			kind:  errandstore.OutcomeDead,
			err:   &errandtype.AttemptError{Attempt: 1, Class: errand.ClassPanic, Message: "panic: nil map", Stack: outcomeStack},
			state: errandtype.StateDead,
			expect: func(w *errandtype.Job, now time.Time, e *errandtype.AttemptError) {
				w.FinishedAt = ptr(now)
				w.Errors = []errandtype.AttemptError{*e}
				w.LastError = lastErr(*e)
			},
		},
		{
			kind:  errandstore.OutcomeSnooze,
			delay: 10 * time.Minute,
			state: errandtype.StateQueued,
			expect: func(w *errandtype.Job, now time.Time, _ *errandtype.AttemptError) {
				w.Attempt = 0
				w.AvailableAt = now.Add(10 * time.Minute)
			},
			nextRun: func(now time.Time) time.Time { return now.Add(10 * time.Minute) },
		},
		{
			// No delay and no error: a store may write it as it writes
			// successes, and it is still a snooze.
			kind:  errandstore.OutcomeSnooze,
			state: errandtype.StateQueued,
			expect: func(w *errandtype.Job, now time.Time, _ *errandtype.AttemptError) {
				w.Attempt = 0
				w.AvailableAt = now
			},
			nextRun: func(now time.Time) time.Time { return now },
		},
		{
			kind:  errandstore.OutcomeInterrupted,
			err:   &errandtype.AttemptError{Attempt: 1, Class: errand.ClassInterrupted, Message: "worker draining"},
			state: errandtype.StateQueued,
			expect: func(w *errandtype.Job, now time.Time, e *errandtype.AttemptError) {
				w.Attempt = 0
				w.AvailableAt = now
				w.Errors = []errandtype.AttemptError{*e}
				w.LastError = lastErr(*e)
			},
			nextRun: func(now time.Time) time.Time { return now },
		},
		{
			kind:  errandstore.OutcomeCancelled,
			err:   &errandtype.AttemptError{Attempt: 1, Class: errandstore.ClassCancelled, Message: errandstore.CancelledByRequestMessage},
			state: errandtype.StateCancelled,
			expect: func(w *errandtype.Job, now time.Time, e *errandtype.AttemptError) {
				w.FinishedAt = ptr(now)
				w.Errors = []errandtype.AttemptError{*e}
				w.LastError = lastErr(*e)
			},
		},
	}
}

// testOutcomeKind records outcome c of a claimed job's first attempt, and
// checks the result and the whole record it leaves.
func testOutcomeKind(t *testing.T, h harness, c outcomeKindCase) {
	e := open(t, h)
	e.insertIDs("a")
	j := e.claimOne("a")
	now := e.clock.Advance(5 * time.Second)
	o := &errandstore.JobOutcome{JobLease: leaseOf(j), Kind: c.kind, Delay: c.delay, Error: c.err}
	r := e.recordOK(o)
	if r.State != c.state {
		t.Errorf("result state %s, want %s", r.State, c.state)
	}
	if c.nextRun != nil && !r.AvailableAt.Equal(c.nextRun(now)) {
		t.Errorf("result available_at %v, want %v", r.AvailableAt, c.nextRun(now))
	}
	// Every outcome ends the lease; lease_owner keeps the last
	// worker for operators.
	want := *j
	want.State = c.state
	want.LeaseToken, want.LeaseUntil = nil, nil
	var ent *errandtype.AttemptError
	if c.err != nil {
		en := entry(o, 0, now)
		ent = &en
	}
	c.expect(&want, now, ent)
	same(t, "job after "+string(c.kind), &want, e.get("a"))
}

// testOutcomeBatch checks that outcomes in one call are fenced one by one.
func testOutcomeBatch(t *testing.T, h harness) {
	e := open(t, h)
	e.insertIDs("a", "b", "c", "d")
	js := e.claim(4)
	if len(js) != 4 {
		t.Fatalf("claimed %d of 4", len(js))
	}
	a, b, c, d := js[0], js[1], js[2], js[3]
	beforeB := e.get("b")
	staleB := succeeded(b)
	staleB.LeaseToken = "stale"
	now := e.clock.Advance(time.Second)
	rs := e.record(
		succeeded(a),
		staleB,
		dead(c),
		&errandstore.JobOutcome{JobLease: leaseOf(d), Kind: errandstore.OutcomeSnooze, Delay: time.Minute},
		succeeded(a), // a second outcome for a: its lease ended with the first
	)
	want := []struct {
		state errandtype.JobState
		err   error
	}{
		{errandtype.StateSucceeded, nil},
		{"", errandtype.ErrLeaseLost},
		{errandtype.StateDead, nil},
		{errandtype.StateQueued, nil},
		{"", errandtype.ErrLeaseLost},
	}
	for i, w := range want {
		if rs[i].State != w.state || !errors.Is(rs[i].Err, w.err) || (w.err == nil) != (rs[i].Err == nil) {
			t.Errorf("outcome %d: state %q err %v, want state %q err %v", i, rs[i].State, rs[i].Err, w.state, w.err)
		}
	}
	e.unchanged("job b with a stale outcome", beforeB)
	if got := e.get("a"); got.State != errandtype.StateSucceeded || got.FinishedAt == nil || !got.FinishedAt.Equal(now) {
		t.Errorf("job a: state %s finished_at %v, want succeeded at %v", got.State, got.FinishedAt, now)
	}
	if got := e.get("c"); got.State != errandtype.StateDead || len(got.Errors) != 1 {
		t.Errorf("job c: state %s with %d history entries, want dead with 1", got.State, len(got.Errors))
	}
	if got := e.get("d"); got.State != errandtype.StateQueued || !got.AvailableAt.Equal(now.Add(time.Minute)) {
		t.Errorf("job d: state %s available_at %v, want queued at %v", got.State, got.AvailableAt, now.Add(time.Minute))
	}
	// b's holder still owns it and can finish.
	if r := e.recordOK(succeeded(b)); r.State != errandtype.StateSucceeded {
		t.Errorf("job b with its own token: state %s", r.State)
	}
}

// testOutcomeBatchOfOneKind: a batch of many outcomes of one kind (which a
// store may write in one statement) is still fenced outcome by outcome: a
// stale token and a finished job are lease lost, with nothing written, and
// every other job takes its outcome.
func testOutcomeBatchOfOneKind(t *testing.T, h harness) {
	e := open(t, h)
	e.insertIDs("a", "b", "c", "d", "e", "f", "g")
	js := e.claim(7)
	if len(js) != 7 {
		t.Fatalf("claimed %d of 7", len(js))
	}
	e.recordOK(succeeded(js[6])) // g is finished before the batch
	beforeB, beforeG := e.get("b"), e.get("g")
	staleB := succeeded(js[1])
	staleB.LeaseToken = "stale"
	now := e.clock.Advance(time.Second)
	rs := e.record(succeeded(js[0]), staleB, succeeded(js[2]), succeeded(js[3]), succeeded(js[4]), succeeded(js[5]), succeeded(js[6]))
	for i, r := range rs {
		lost := i == 1 || i == 6
		switch {
		case lost && !errors.Is(r.Err, errandtype.ErrLeaseLost):
			t.Errorf("outcome %d: %+v, want lease lost", i, r)
		case !lost && (r.Err != nil || r.State != errandtype.StateSucceeded):
			t.Errorf("outcome %d: %+v, want succeeded", i, r)
		}
	}
	for _, id := range []string{"a", "c", "d", "e", "f"} {
		if got := e.get(id); got.State != errandtype.StateSucceeded || got.FinishedAt == nil || !got.FinishedAt.Equal(now) || got.LeaseToken != nil {
			t.Errorf("job %s: state %s finished_at %v lease %v, want succeeded at %v with no lease", id, got.State, got.FinishedAt, got.LeaseToken, now)
		}
	}
	e.unchanged("job b with a stale outcome", beforeB)
	e.unchanged("job g finished before", beforeG)
}

// testOutcomeAttemptsBounded runs a job with three attempts to the dead
// letter the way errand's client does: retry while attempts are left, dead
// on the last.
func testOutcomeAttemptsBounded(t *testing.T, h harness) {
	e := open(t, h)
	p := newJob("a")
	p.MaxAttempts = 3
	inserted := e.insert(p)[0]
	var history []errandtype.AttemptError
	var j *errandtype.Job
	for attempt := 1; attempt <= 3; attempt++ {
		claimAt := e.now()
		j = e.claimOne("a")
		if j.Attempt != attempt {
			t.Fatalf("claim %d: attempt %d", attempt, j.Attempt)
		}
		now := e.clock.Advance(time.Second)
		o := retry(j, time.Minute)
		o.Error.Class = "smtp_" + string(rune('0'+attempt))
		if attempt == j.MaxAttempts {
			o.Kind, o.Delay = errandstore.OutcomeDead, 0
		}
		r := e.recordOK(o)
		history = append(history, entry(o, 0, now))
		if attempt < 3 {
			if r.State != errandtype.StateRetrying {
				t.Fatalf("attempt %d: state %s, want retrying", attempt, r.State)
			}
			e.claimNone()
			e.clock.Advance(time.Minute)
			continue
		}
		if r.State != errandtype.StateDead {
			t.Fatalf("last attempt: state %s, want dead", r.State)
		}
		want := claimed(inserted, token(j), claimAt, lease, owner)
		want.Attempt = 3
		want.State = errandtype.StateDead
		want.AvailableAt = claimAt
		want.LeaseToken, want.LeaseUntil = nil, nil
		want.FinishedAt = ptr(now)
		want.Errors = history
		want.LastError = lastErr(history[2])
		same(t, "dead job", want, e.get("a"))
	}
	e.clock.Advance(time.Hour)
	e.claimNone()
}

func testOutcomeInvalid(t *testing.T, h harness) {
	e := open(t, h)
	e.insertIDs("a")
	j := e.claimOne("a")
	for _, o := range []*errandstore.JobOutcome{
		{JobLease: leaseOf(j), Kind: errandstore.OutcomeRetry},       // no error entry
		{JobLease: leaseOf(j), Kind: errandstore.OutcomeDead},        // no error entry
		{JobLease: leaseOf(j), Kind: errandstore.OutcomeInterrupted}, // no error entry
		{JobLease: leaseOf(j), Kind: "vanished"},
		{JobLease: leaseOf(j), Kind: errandstore.OutcomeCancelled, Delete: true, Error: &errandtype.AttemptError{Attempt: 1, Class: "cancelled", Message: "x"}},
	} {
		rs, err := e.s.JobRecordOutcomes(e.ctx, &errandstore.JobRecordOutcomesParams{Outcomes: []*errandstore.JobOutcome{o}})
		if !errors.Is(err, errandtype.ErrInvalid) {
			t.Errorf("outcome %q without what it needs: %+v, %v; want ErrInvalid", o.Kind, rs, err)
		}
	}
	e.unchanged("job after invalid outcomes", j)
}

// testOutcomeDelete: a success that deletes its job (JobOutcome.Delete) is
// fenced like any outcome and reported succeeded; the job is gone and its
// id free. Batches delete all their jobs, some of them (beside outcomes
// that keep theirs), in groups and one by one, with and without Follow.
func testOutcomeDelete(t *testing.T, h harness) {
	e := open(t, h)
	e.insertIDs("a", "b", "c", "d", "e", "f", "g", "h")
	js := e.claim(8)
	if len(js) != 8 {
		t.Fatalf("claimed %d of 8", len(js))
	}
	del := func(j *errandtype.Job) *errandstore.JobOutcome {
		o := succeeded(j)
		o.Delete = true
		return o
	}
	beforeB := e.get("b")
	staleB := del(js[1])
	staleB.LeaseToken = "stale"
	now := e.clock.Advance(time.Second)
	rs := e.record(del(js[0]), staleB, succeeded(js[2]), dead(js[3]), del(js[4]), del(js[5]), del(js[6]), del(js[7]))
	for i, want := range []errandtype.JobState{"succeeded", "", "succeeded", "dead", "succeeded", "succeeded", "succeeded", "succeeded"} {
		if want == "" {
			if !errors.Is(rs[i].Err, errandtype.ErrLeaseLost) {
				t.Errorf("outcome %d with a stale token: %+v, want lease lost", i, rs[i])
			}
			continue
		}
		if rs[i].Err != nil || rs[i].State != want {
			t.Errorf("outcome %d: %+v, want state %s", i, rs[i], want)
		}
	}
	for _, id := range []string{"a", "e", "f", "g", "h"} {
		e.notFound(id)
	}
	e.unchanged("job b with a stale outcome", beforeB)
	if got := e.get("c"); got.State != errandtype.StateSucceeded || got.FinishedAt == nil || !got.FinishedAt.Equal(now) {
		t.Errorf("job c, kept: state %s finished_at %v, want succeeded at %v", got.State, got.FinishedAt, now)
	}
	if got := e.get("d"); got.State != errandtype.StateDead {
		t.Errorf("job d: state %s, want dead", got.State)
	}

	// A batch that deletes every job, one of successes alone that deletes
	// some, one that deletes one, and one that asks for the follow-up
	// columns.
	e.insertIDs("i", "j", "k", "l", "m", "n", "o", "p")
	js = e.claim(8)
	if len(js) != 8 {
		t.Fatalf("claimed %d of 8", len(js))
	}
	for i, r := range e.record(succeeded(js[6]), del(js[7])) {
		if r.Err != nil || r.State != errandtype.StateSucceeded {
			t.Errorf("successes, one deleting, outcome %d: %+v", i, r)
		}
	}
	if got := e.get("o"); got.State != errandtype.StateSucceeded {
		t.Errorf("job o, kept beside a deleting success: state %s", got.State)
	}
	e.notFound("p")
	for i, r := range e.record(del(js[0]), del(js[1]), del(js[2]), del(js[3]), del(js[1])) {
		if lost := i == 4; lost != errors.Is(r.Err, errandtype.ErrLeaseLost) || (!lost && r.State != errandtype.StateSucceeded) {
			t.Errorf("all deleting, outcome %d: %+v", i, r)
		}
	}
	if r := e.recordOK(del(js[4])); r.State != errandtype.StateSucceeded {
		t.Errorf("one deleting: %+v", r)
	}
	rs, err := e.s.JobRecordOutcomes(e.ctx, &errandstore.JobRecordOutcomesParams{Follow: true, Outcomes: []*errandstore.JobOutcome{del(js[5])}})
	if err != nil || len(rs) != 1 || rs[0].Err != nil || rs[0].State != errandtype.StateSucceeded || rs[0].Kind != "email" ||
		js[5].AttemptedAt == nil || !rs[0].AttemptedAt.Equal(*js[5].AttemptedAt) {
		t.Errorf("deleting with Follow: %+v, %v; want succeeded of kind email, attempted at the claim's %v", rs, err, js[5].AttemptedAt)
	}
	for _, id := range []string{"i", "j", "k", "l", "m", "n"} {
		e.notFound(id)
	}

	// The id is free again: an enqueue makes a new job.
	if got := e.insertIDs("a")[0]; got.State != errandtype.StateQueued || got.Attempt != 0 {
		t.Errorf("job a enqueued again: %+v", got)
	}
}
