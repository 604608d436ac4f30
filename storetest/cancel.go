package storetest

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
)

// Cancelling a running job: JobCancel records a request, the heartbeat
// reports it, the worker's cancelled outcome ends the job, and a request
// wins over an outcome or a sweep that would make the job wait again.
var cancelRunningCases = []testCase{
	{"Request", testCancelRunningRequest},
	{"RepeatedRequest", testCancelRunningRepeated},
	{"HeartbeatReportsRequest", testCancelRunningHeartbeat},
	{"CancelledOutcome", testCancelRunningOutcome},
	{"RequestWinsOverWaiting", testCancelRunningWinsOverWaiting},
	{"SuccessStands", testCancelRunningSuccessStands},
	{"SweepCancels", testCancelRunningSweep},
	{"ReplayClearsRequest", testCancelRunningReplay},
	{"Listen", testCancelRunningListen},
}

// succeed makes a succeeded job id.
func (e *env) succeed(id string) *errandtype.Job {
	e.t.Helper()
	return e.jobInState(id, errandtype.StateSucceeded)
}

// requestCancel cancels running job id and returns what JobCancel returned.
func (e *env) requestCancel(id string) *errandtype.Job {
	e.t.Helper()
	j, err := e.s.JobCancel(e.ctx, &errandstore.JobCancelParams{ID: id, Operator: "ana", Reason: "runaway"})
	if err != nil {
		e.t.Fatalf("cancel running job %s: %v", id, err)
	}
	return j
}

func (e *env) heartbeat(js ...*errandtype.Job) []errandstore.HeartbeatResult {
	e.t.Helper()
	leases := make([]errandstore.JobLease, len(js))
	for i, j := range js {
		leases[i] = leaseOf(j)
	}
	rs, err := e.s.JobHeartbeatMany(e.ctx, &errandstore.JobHeartbeatParams{Leases: leases, Lease: lease})
	if err != nil {
		e.t.Fatalf("JobHeartbeatMany: %v", err)
	}
	return rs
}

func cancelled(j *errandtype.Job) *errandstore.JobOutcome {
	return &errandstore.JobOutcome{JobLease: leaseOf(j), Kind: errandstore.OutcomeCancelled,
		Error: &errandtype.AttemptError{Attempt: j.Attempt, Class: errandstore.ClassCancelled, Message: errandstore.CancelledByRequestMessage}}
}

// testCancelRunningRequest checks that cancelling a running job records
// the request and leaves it running under its lease.
func testCancelRunningRequest(t *testing.T, h harness) {
	e := open(t, h)
	before := e.jobInState("a", errandtype.StateRunning)
	now := e.clock.Advance(time.Second)
	got := e.requestCancel("a")
	want := *before
	want.CancelRequestedAt = ptr(now)
	same(t, "JobCancel of a running job", &want, got)
	same(t, "running job with a cancel request", &want, e.get("a"))
	if !got.CancelPending() {
		t.Errorf("CancelPending = false after a request")
	}
	// Still held: nothing claims it.
	e.clock.Advance(time.Second)
	if js := e.claimWith(&errandstore.JobClaimParams{Queues: []string{"q-a"}, Limit: 5, Lease: lease, Owner: owner}); len(js) != 0 {
		t.Errorf("claimed a running job with a cancel request: %v", ids(js))
	}
}

// testCancelRunningRepeated checks that a second request changes nothing
// and is not audited again.
func testCancelRunningRepeated(t *testing.T, h harness) {
	e := open(t, h)
	e.jobInState("a", errandtype.StateRunning)
	e.clock.Advance(time.Second)
	first := e.requestCancel("a")
	e.clock.Advance(time.Second)
	second := e.requestCancel("a")
	same(t, "second request", first, second)
	if rs := e.auditList(&errandstore.AuditListParams{JobID: "a"}); len(rs) != 1 {
		t.Errorf("audit after two requests: %d records, want 1", len(rs))
	}
}

// testCancelRunningHeartbeat checks that the renewal reports the request,
// lease by lease, and still renews.
func testCancelRunningHeartbeat(t *testing.T, h harness) {
	e := open(t, h)
	a := e.jobInState("a", errandtype.StateRunning)
	b := e.jobInState("b", errandtype.StateRunning)
	if rs := e.heartbeat(a, b); rs[0].CancelRequested || rs[1].CancelRequested {
		t.Fatalf("heartbeat before any request: %+v", rs)
	}
	e.requestCancel("b")
	now := e.clock.Advance(time.Second)
	rs := e.heartbeat(a, b)
	for i, want := range []bool{false, true} {
		if rs[i].Err != nil || rs[i].CancelRequested != want || !rs[i].LeaseUntil.Equal(now.Add(lease)) {
			t.Errorf("heartbeat %d: %+v, want renewed to %v with CancelRequested %v", i, rs[i], now.Add(lease), want)
		}
	}
}

// testCancelRunningOutcome checks the worker's cancelled outcome: the job
// ends cancelled with the attempt's entry, fenced by the token.
func testCancelRunningOutcome(t *testing.T, h harness) {
	e := open(t, h)
	e.jobInState("a", errandtype.StateRunning)
	req := e.clock.Advance(time.Second)
	j := e.requestCancel("a")
	stale := *j
	stale.LeaseToken = ptr("not-the-token")
	if r := e.record(cancelled(&stale))[0]; r.Err == nil {
		t.Fatalf("cancelled outcome under a wrong token applied: %+v", r)
	}
	now := e.clock.Advance(time.Second)
	o := cancelled(j)
	if r := e.recordOK(o); r.State != errandtype.StateCancelled {
		t.Errorf("outcome state %s, want cancelled", r.State)
	}
	want := *j
	want.State = errandtype.StateCancelled
	want.LeaseToken, want.LeaseUntil = nil, nil
	want.FinishedAt = ptr(now)
	want.CancelRequestedAt = ptr(req)
	ent := entry(o, 0, now)
	want.Errors = []errandtype.AttemptError{ent}
	want.LastError = lastErr(ent)
	same(t, "job after its cancelled outcome", &want, e.get("a"))
}

// testCancelRunningWinsOverWaiting checks that an attempt that ends in a
// retry, a snooze or a drain while a cancel is pending ends the job
// cancelled: a request the worker did not hear of in time still stops it.
func testCancelRunningWinsOverWaiting(t *testing.T, h harness) {
	for _, mk := range []func(j *errandtype.Job) *errandstore.JobOutcome{
		func(j *errandtype.Job) *errandstore.JobOutcome { return retry(j, time.Minute) },
		func(j *errandtype.Job) *errandstore.JobOutcome {
			return &errandstore.JobOutcome{JobLease: leaseOf(j), Kind: errandstore.OutcomeSnooze, Delay: time.Minute}
		},
		func(j *errandtype.Job) *errandstore.JobOutcome {
			return &errandstore.JobOutcome{JobLease: leaseOf(j), Kind: errandstore.OutcomeSnooze}
		},
		func(j *errandtype.Job) *errandstore.JobOutcome {
			return &errandstore.JobOutcome{JobLease: leaseOf(j), Kind: errandstore.OutcomeInterrupted,
				Error: &errandtype.AttemptError{Attempt: j.Attempt, Class: errand.ClassInterrupted, Message: "worker draining"}}
		},
	} {
		e := open(t, h)
		e.jobInState("a", errandtype.StateRunning)
		j := e.requestCancel("a")
		o := mk(j)
		now := e.clock.Advance(time.Second)
		if r := e.recordOK(o); r.State != errandtype.StateCancelled {
			t.Errorf("%s outcome with a cancel pending: state %s, want cancelled", o.Kind, r.State)
		}
		got := e.get("a")
		if got.State != errandtype.StateCancelled || got.FinishedAt == nil || !got.FinishedAt.Equal(now) {
			t.Errorf("%s outcome with a cancel pending: job %s finished %v, want cancelled at %v", o.Kind, got.State, got.FinishedAt, now)
		}
		e.clock.Advance(time.Hour)
		if js := e.claimWith(&errandstore.JobClaimParams{Queues: []string{"q-a"}, Limit: 5, Lease: lease, Owner: owner}); len(js) != 0 {
			t.Errorf("%s outcome with a cancel pending: job claimed again", o.Kind)
		}
	}
}

// testCancelRunningSuccessStands checks that a success recorded after a
// request is a success: the work was done.
func testCancelRunningSuccessStands(t *testing.T, h harness) {
	e := open(t, h)
	e.jobInState("a", errandtype.StateRunning)
	j := e.requestCancel("a")
	if r := e.recordOK(succeeded(j)); r.State != errandtype.StateSucceeded {
		t.Errorf("success after a request: state %s, want succeeded", r.State)
	}
	if got := e.get("a"); got.CancelRequestedAt == nil {
		t.Errorf("the request is kept on the finished job for operators")
	}
}

// testCancelRunningSweep checks that a job whose worker died with a cancel
// pending is cancelled by the sweep, not retried, on any attempt.
func testCancelRunningSweep(t *testing.T, h harness) {
	for _, maxAttempts := range []int{1, 5} {
		e := open(t, h)
		p := newJob("a")
		p.MaxAttempts = maxAttempts
		e.insert(p)
		e.claimOne("a")
		req := e.clock.Advance(time.Second)
		j := e.requestCancel("a")
		now := e.clock.Advance(lease + time.Second)
		r, err := e.s.JobSweep(e.ctx, &errandstore.JobSweepParams{})
		if err != nil {
			t.Fatalf("JobSweep: %v", err)
		}
		if r != (errandstore.SweepResult{Cancelled: 1}) {
			t.Errorf("max attempts %d: sweep = %+v, want one cancelled", maxAttempts, r)
		}
		got := e.get("a")
		ent := expiredEntry(t, got, 1, 0, now, errandstore.ClassCancelled)
		if ent.Message != errandstore.CancelledBySweepMessage {
			t.Errorf("sweep entry message %q, want %q", ent.Message, errandstore.CancelledBySweepMessage)
		}
		want := *j
		want.State = errandtype.StateCancelled
		want.LeaseToken, want.LeaseUntil = nil, nil
		want.FinishedAt = ptr(now)
		want.CancelRequestedAt = ptr(req)
		want.Errors = []errandtype.AttemptError{ent}
		want.LastError = lastErr(ent)
		same(t, "swept job with a cancel request", &want, got)
		e.claimNone()
	}
}

// testCancelRunningReplay checks that a replay clears the request and keeps
// the checkpoint, unless asked to clear it.
func testCancelRunningReplay(t *testing.T, h harness) {
	for _, clear := range []bool{false, true} {
		e := open(t, h)
		j := e.jobInState("a", errandtype.StateRunning)
		if err := e.s.JobSetProgress(e.ctx, &errandstore.JobSetProgressParams{ID: "a", LeaseToken: token(j),
			Progress: json.RawMessage(`{"row":5000}`)}); err != nil {
			t.Fatalf("JobSetProgress: %v", err)
		}
		j = e.requestCancel("a")
		e.recordOK(cancelled(j))
		got, err := e.s.JobReplay(e.ctx, &errandstore.JobReplayParams{ID: "a", Operator: "ana", Reason: "resume", ClearProgress: clear})
		if err != nil {
			t.Fatalf("JobReplay: %v", err)
		}
		if got.CancelRequestedAt != nil || got.State != errandtype.StateQueued {
			t.Errorf("replayed: state %s, cancel request %v; want queued, no request", got.State, got.CancelRequestedAt)
		}
		switch {
		case clear && got.Progress != nil:
			t.Errorf("replay with ClearProgress kept progress %s", got.Progress)
		case !clear && string(got.Progress) != `{"row": 5000}` && string(got.Progress) != `{"row":5000}`:
			t.Errorf("replay lost the checkpoint: progress %s", got.Progress)
		}
		// The next attempt is not cancelled by the old request.
		next := e.claimWith(&errandstore.JobClaimParams{Queues: []string{"q-a"}, Limit: 1, Lease: lease, Owner: owner})
		if len(next) != 1 {
			t.Fatalf("claim after replay: %v", ids(next))
		}
		if rs := e.heartbeat(next[0]); rs[0].CancelRequested {
			t.Errorf("the replayed job's new attempt sees the old cancel request")
		}
	}
}

// testCancelRunningListen checks, for a store that is an
// [errandstore.CancelListener], that a request reaches a listener in another
// store on the same database: the cross-process path. The bound is a
// liveness bound, far above the fraction of a second it takes.
func testCancelRunningListen(t *testing.T, h harness) {
	e := open(t, h)
	if _, ok := e.s.(errandstore.CancelListener); !ok {
		t.Skip("the store is not a CancelListener")
	}
	other := e.second()
	ch, err := other.(errandstore.CancelListener).ListenCancels(e.ctx)
	if err != nil {
		t.Fatalf("ListenCancels: %v", err)
	}
	e.jobInState("a", errandtype.StateRunning)
	e.jobInState("b", errandtype.StateRunning)
	e.requestCancel("b")
	deadline := time.After(10 * time.Second)
	for {
		select {
		case id := <-ch:
			if id == "b" {
				return
			}
			if id != "" {
				t.Fatalf("listener delivered %q; only b has a request", id)
			}
		case <-deadline:
			t.Fatal("no cancel notification for b within 10s")
		}
	}
}

// checkpointCases check that a checkpoint is the next attempt's resume
// point whatever ended the attempt.
var checkpointCases = []testCase{
	{"KeptForNextAttempt", testCheckpointKept},
}

// testCheckpointKept checks that a retry, a snooze, a drain and an expired
// lease keep the job's checkpoint, and the next claim returns it.
func testCheckpointKept(t *testing.T, h harness) {
	ends := map[string]func(e *env, j *errandtype.Job){
		"retry": func(e *env, j *errandtype.Job) { e.recordOK(retry(j, 0)) },
		"snooze": func(e *env, j *errandtype.Job) {
			e.recordOK(&errandstore.JobOutcome{JobLease: leaseOf(j), Kind: errandstore.OutcomeSnooze})
		},
		"interrupted": func(e *env, j *errandtype.Job) {
			e.recordOK(&errandstore.JobOutcome{JobLease: leaseOf(j), Kind: errandstore.OutcomeInterrupted,
				Error: &errandtype.AttemptError{Attempt: j.Attempt, Class: errand.ClassInterrupted, Message: "worker draining"}})
		},
		"lease-expired": func(e *env, _ *errandtype.Job) { e.clock.Advance(lease + time.Second) },
	}
	for name, end := range ends {
		e := open(t, h)
		e.insertIDs("a")
		j := e.claimOne("a")
		if err := e.s.JobSetProgress(e.ctx, &errandstore.JobSetProgressParams{ID: "a", LeaseToken: token(j),
			Progress: json.RawMessage(`{"next":3000}`)}); err != nil {
			t.Fatalf("%s: JobSetProgress: %v", name, err)
		}
		end(e, j)
		e.clock.Advance(time.Second)
		next := e.claimOne("a")
		var cp struct{ Next int }
		if err := json.Unmarshal(next.Progress, &cp); err != nil || cp.Next != 3000 {
			t.Errorf("%s: the next attempt's progress is %s; want the checkpoint {\"next\":3000}", name, next.Progress)
		}
	}
}
