package storetest

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
)

var replayCases = []testCase{
	{"Dead", testReplayDead},
	{"Cancelled", testReplayCancelled},
	{"WrongState", testReplayWrongState},
	{"NotFound", testReplayNotFound},
	{"RenewsDeadline", testReplayRenewsDeadline},
}

var cancelCases = []testCase{
	{"QueuedOrRetrying", testCancel},
	{"WrongState", testCancelWrongState},
	{"NotFound", testCancelNotFound},
}

// jobInState returns a job with id in state st, made the way workers and
// operators make it.
func (e *env) jobInState(id string, st errandtype.JobState) *errandtype.Job {
	e.t.Helper()
	return e.kindInState(id, "email", st)
}

// kindInState is jobInState for a job of kind.
func (e *env) kindInState(id, kind string, st errandtype.JobState) *errandtype.Job {
	e.t.Helper()
	p := newJob(id)
	p.Kind = kind
	p.Queue = "q-" + id // so claims here touch this job only
	e.insert(p)
	claim := func() *errandtype.Job {
		js := e.claimWith(&errandstore.JobClaimParams{Queues: []string{p.Queue}, Limit: 1, Lease: lease, Owner: owner})
		if len(js) != 1 {
			e.t.Fatalf("claim %s: got %v", id, ids(js))
		}
		return js[0]
	}
	switch st {
	case errandtype.StateQueued:
	case errandtype.StateRunning:
		claim()
	case errandtype.StateRetrying:
		e.recordOK(retry(claim(), time.Minute))
	case errandtype.StateSucceeded:
		e.recordOK(succeeded(claim()))
	case errandtype.StateDead:
		e.recordOK(dead(claim()))
	case errandtype.StateCancelled:
		if _, err := e.s.JobCancel(e.ctx, &errandstore.JobCancelParams{ID: id}); err != nil {
			e.t.Fatalf("cancel %s: %v", id, err)
		}
	}
	j := e.get(id)
	if j.State != st {
		e.t.Fatalf("job %s: state %s, want %s", id, j.State, st)
	}
	return j
}

func (e *env) audit(id string) []errandtype.ReplayRecord {
	e.t.Helper()
	rs, err := e.s.JobReplayAudit(e.ctx, &errandstore.JobReplayAuditParams{JobID: id})
	if err != nil {
		e.t.Fatalf("JobReplayAudit(%s): %v", id, err)
	}
	return rs
}

// replayed is what a replay at now should make of before.
func replayed(before *errandtype.Job, now time.Time) *errandtype.Job {
	w := *before
	w.State = errandtype.StateQueued
	w.Attempt = 0
	w.AvailableAt = now
	w.Replays = before.Replays + 1
	w.LeaseToken, w.LeaseUntil = nil, nil
	w.FinishedAt = nil
	return &w
}

func checkAudit(t *testing.T, got []errandtype.ReplayRecord, want []errandtype.ReplayRecord) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("replay audit: %+v, want %d records", got, len(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.ID == 0 || (i > 0 && g.ID <= got[i-1].ID) {
			t.Errorf("audit record %d: id %d, want a positive id after the previous record's", i, g.ID)
		}
		w.ID = g.ID
		if g.JobID != w.JobID || g.Replay != w.Replay || g.PriorState != w.PriorState ||
			g.Operator != w.Operator || g.Reason != w.Reason || !g.At.Equal(w.At) {
			t.Errorf("audit record %d: %+v, want %+v", i, g, w)
		}
	}
}

// testReplayDead checks guarantee 5's replay: a new delivery cycle for the
// same job, its history kept and tagged, the replay audited.
func testReplayDead(t *testing.T, h harness) {
	e := open(t, h)
	p := newJob("a")
	p.MaxAttempts = 2
	e.insert(p)
	j := e.claimOne("a")
	o1 := retry(j, 0)
	e.recordOK(o1)
	j = e.claimOne("a")
	o2 := dead(j)
	t1 := e.now()
	e.recordOK(o2)
	deadJob := e.get("a")

	now := e.clock.Advance(time.Hour)
	got, err := e.s.JobReplay(e.ctx, &errandstore.JobReplayParams{ID: "a", Operator: "ana", Reason: "template fixed"})
	if err != nil {
		t.Fatalf("JobReplay: %v", err)
	}
	want := replayed(deadJob, now)
	same(t, "replayed job", want, got)
	same(t, "JobGet after replay", want, e.get("a"))
	checkAudit(t, e.audit("a"), []errandtype.ReplayRecord{
		{JobID: "a", Replay: 1, PriorState: errandtype.StateDead, Operator: "ana", Reason: "template fixed", At: now},
	})

	// The new cycle runs from attempt 1 with the full budget; its failures
	// are tagged with replay 1 after the old ones.
	j = e.claimOne("a")
	if j.Attempt != 1 || j.Replays != 1 {
		t.Fatalf("claim after replay: attempt %d replays %d, want 1 and 1", j.Attempt, j.Replays)
	}
	o3 := retry(j, 0)
	t2 := e.now()
	e.recordOK(o3)
	j = e.claimOne("a")
	if j.Attempt != 2 {
		t.Fatalf("second attempt after replay: attempt %d", j.Attempt)
	}
	o4 := dead(j)
	e.recordOK(o4)
	history := []errandtype.AttemptError{entry(o1, 0, t1), entry(o2, 0, t1), entry(o3, 1, t2), entry(o4, 1, t2)}
	if g := e.get("a"); !slices.Equal(g.Errors, history) {
		t.Errorf("history across a replay:\n got %+v\nwant %+v", g.Errors, history)
	}

	later := e.clock.Advance(time.Hour)
	got, err = e.s.JobReplay(e.ctx, &errandstore.JobReplayParams{ID: "a", Operator: "bo", Reason: "again"})
	if err != nil {
		t.Fatalf("second JobReplay: %v", err)
	}
	if got.Replays != 2 || got.Attempt != 0 || got.State != errandtype.StateQueued || !slices.Equal(got.Errors, history) {
		t.Errorf("second replay: %+v", got)
	}
	checkAudit(t, e.audit("a"), []errandtype.ReplayRecord{
		{JobID: "a", Replay: 1, PriorState: errandtype.StateDead, Operator: "ana", Reason: "template fixed", At: now},
		{JobID: "a", Replay: 2, PriorState: errandtype.StateDead, Operator: "bo", Reason: "again", At: later},
	})
}

func testReplayCancelled(t *testing.T, h harness) {
	e := open(t, h)
	c := e.jobInState("a", errandtype.StateCancelled)
	now := e.clock.Advance(time.Minute)
	got, err := e.s.JobReplay(e.ctx, &errandstore.JobReplayParams{ID: "a", Operator: "ana", Reason: "cancelled by mistake"})
	if err != nil {
		t.Fatalf("JobReplay: %v", err)
	}
	same(t, "replayed cancelled job", replayed(c, now), got)
	checkAudit(t, e.audit("a"), []errandtype.ReplayRecord{
		{JobID: "a", Replay: 1, PriorState: errandtype.StateCancelled, Operator: "ana", Reason: "cancelled by mistake", At: now},
	})
}

func testReplayWrongState(t *testing.T, h harness) {
	e := open(t, h)
	for _, st := range []errandtype.JobState{errandtype.StateQueued, errandtype.StateRunning, errandtype.StateRetrying, errandtype.StateSucceeded} {
		id := string(st)
		before := e.jobInState(id, st)
		j, err := e.s.JobReplay(e.ctx, &errandstore.JobReplayParams{ID: id, Operator: "ana", Reason: "try"})
		var se *errandtype.StateError
		if !errors.As(err, &se) || !errors.Is(err, errandtype.ErrWrongState) {
			t.Errorf("replay of a %s job = %v, %v; want a *StateError", st, j, err)
			continue
		}
		want := errandtype.StateError{Op: "replay", ID: id, State: st, Allowed: []errandtype.JobState{errandtype.StateDead, errandtype.StateCancelled}}
		if se.Op != want.Op || se.ID != want.ID || se.State != want.State || !slices.Equal(se.Allowed, want.Allowed) {
			t.Errorf("replay of a %s job: %+v, want %+v", st, *se, want)
		}
		e.unchanged("replay of a "+string(st)+" job", before)
		if a := e.audit(id); len(a) != 0 {
			t.Errorf("refused replay of a %s job was audited: %+v", st, a)
		}
	}
}

func testReplayNotFound(t *testing.T, h harness) {
	e := open(t, h)
	j, err := e.s.JobReplay(e.ctx, &errandstore.JobReplayParams{ID: "missing", Operator: "ana", Reason: "r"})
	if !errors.Is(err, errandtype.ErrNotFound) {
		t.Errorf("replay of an unknown job = %v, %v; want ErrNotFound", j, err)
	}
	if a := e.audit("missing"); len(a) != 0 {
		t.Errorf("audit of an unknown job: %+v, want empty", a)
	}
}

// testReplayRenewsDeadline checks that a job with a maximum age gets a new
// deadline from its replay, or it would die again before a worker saw it.
func testReplayRenewsDeadline(t *testing.T, h harness) {
	e := open(t, h)
	p := newJob("a")
	p.MaxAge = time.Minute
	e.insert(p)
	e.clock.Advance(2 * time.Minute)
	e.claimNone()
	expired := e.get("a")
	if expired.State != errandtype.StateDead {
		t.Fatalf("state %s, want dead", expired.State)
	}
	now := e.clock.Advance(time.Hour)
	got, err := e.s.JobReplay(e.ctx, &errandstore.JobReplayParams{ID: "a", Operator: "ana", Reason: "r"})
	if err != nil {
		t.Fatalf("JobReplay: %v", err)
	}
	want := replayed(expired, now)
	want.Deadline = ptr(now.Add(time.Minute))
	same(t, "replayed expired job", want, got)
	e.clock.Advance(time.Minute - time.Microsecond)
	e.claimOne("a")
}

func testCancel(t *testing.T, h harness) {
	e := open(t, h)
	sched := newJob("scheduled")
	sched.Delay = time.Hour
	sched.Queue = "q-scheduled"
	e.insert(sched)
	for _, id := range []string{"queued", "retrying", "scheduled"} {
		var before *errandtype.Job
		if id == "scheduled" {
			before = e.get(id)
		} else {
			before = e.jobInState(id, errandtype.JobState(id))
		}
		now := e.clock.Advance(time.Second)
		got, err := e.s.JobCancel(e.ctx, &errandstore.JobCancelParams{ID: id})
		if err != nil {
			t.Fatalf("cancel %s job: %v", id, err)
		}
		want := *before
		want.State = errandtype.StateCancelled
		want.FinishedAt = ptr(now)
		same(t, "cancelled "+id+" job", &want, got)
		same(t, "JobGet of cancelled "+id+" job", &want, e.get(id))
	}
	e.clock.Advance(24 * time.Hour)
	for _, q := range []string{"q-queued", "q-retrying", "q-scheduled"} {
		if js := e.claimWith(&errandstore.JobClaimParams{Queues: []string{q}, Limit: 5, Lease: lease, Owner: owner}); len(js) != 0 {
			t.Errorf("claimed cancelled job %v", ids(js))
		}
	}
}

func testCancelWrongState(t *testing.T, h harness) {
	e := open(t, h)
	for _, st := range []errandtype.JobState{errandtype.StateSucceeded, errandtype.StateDead, errandtype.StateCancelled} {
		id := string(st)
		before := e.jobInState(id, st)
		j, err := e.s.JobCancel(e.ctx, &errandstore.JobCancelParams{ID: id})
		var se *errandtype.StateError
		if !errors.As(err, &se) || !errors.Is(err, errandtype.ErrWrongState) {
			t.Errorf("cancel of a %s job = %v, %v; want a *StateError", st, j, err)
			continue
		}
		want := errandtype.StateError{Op: "cancel", ID: id, State: st, Allowed: []errandtype.JobState{errandtype.StateQueued, errandtype.StateRunning, errandtype.StateRetrying}}
		if se.Op != want.Op || se.ID != want.ID || se.State != want.State || !slices.Equal(se.Allowed, want.Allowed) {
			t.Errorf("cancel of a %s job: %+v, want %+v", st, *se, want)
		}
		e.unchanged("cancel of a "+string(st)+" job", before)
	}
}

func testCancelNotFound(t *testing.T, h harness) {
	e := open(t, h)
	if j, err := e.s.JobCancel(e.ctx, &errandstore.JobCancelParams{ID: "missing"}); !errors.Is(err, errandtype.ErrNotFound) {
		t.Errorf("cancel of an unknown job = %v, %v; want ErrNotFound", j, err)
	}
}
