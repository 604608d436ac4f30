package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
)

var auditCases = []testCase{
	{"Cancel", testAuditCancel},
	{"ReplayArgs", testAuditReplayArgs},
	{"ReplayArgsWrongState", testAuditReplayArgsWrongState},
	{"ListFilters", testAuditListFilters},
}

// auditList reads the audit with p.
func (e *env) auditList(p *errandstore.AuditListParams) []errandtype.AuditRecord {
	e.t.Helper()
	rs, err := e.s.AuditList(e.ctx, p)
	if err != nil {
		e.t.Fatalf("AuditList(%+v): %v", *p, err)
	}
	if rs == nil {
		e.t.Fatalf("AuditList(%+v) returned nil, want a non-nil slice", *p)
	}
	return rs
}

// checkRecords compares audit records field by field, details by JSON
// value; ids must be positive and descending.
func checkRecords(t *testing.T, what string, got, want []errandtype.AuditRecord) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d records %+v, want %d", what, len(got), got, len(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.ID <= 0 || (i > 0 && g.ID >= got[i-1].ID) {
			t.Errorf("%s: record %d has id %d; want positive ids, newest (greatest) first", what, i, g.ID)
		}
		if !sameRecord(g, w) {
			t.Errorf("%s: record %d:\n got %s\nwant %s", what, i, recordString(g), recordString(w))
		}
	}
}

// sameRecord reports whether audit records g and w are the same, field by
// field (but the id), details by JSON value.
func sameRecord(g, w errandtype.AuditRecord) bool {
	jobOK := (g.JobID == nil) == (w.JobID == nil) && (g.JobID == nil || *g.JobID == *w.JobID)
	detailsOK := (g.Details == nil) == (w.Details == nil) && (g.Details == nil || sameJSON(g.Details, w.Details))
	return g.Action == w.Action && jobOK && g.Operator == w.Operator && g.Reason == w.Reason &&
		g.At.Equal(w.At) && g.PriorState == w.PriorState && g.Replay == w.Replay && detailsOK
}

func recordString(r errandtype.AuditRecord) string {
	job := "<nil>"
	if r.JobID != nil {
		job = *r.JobID
	}
	return fmt.Sprintf("{%s job=%s op=%q reason=%q at=%s prior=%q replay=%d details=%s}",
		r.Action, job, r.Operator, r.Reason, r.At.UTC().Format(time.RFC3339Nano), r.PriorState, r.Replay, r.Details)
}

// testAuditCancel checks that a cancel records who, why, the prior state
// and when, and that a refused cancel records nothing.
func testAuditCancel(t *testing.T, h harness) {
	e := open(t, h)
	e.jobInState("a", errandtype.StateRetrying)
	e.jobInState("r", errandtype.StateRunning)
	now := e.clock.Advance(time.Minute)
	if _, err := e.s.JobCancel(e.ctx, &errandstore.JobCancelParams{ID: "a", Operator: "ana", Reason: "order withdrawn"}); err != nil {
		t.Fatalf("JobCancel: %v", err)
	}
	if _, err := e.s.JobCancel(e.ctx, &errandstore.JobCancelParams{ID: "r", Operator: "bo", Reason: "runaway import"}); err != nil {
		t.Fatalf("cancel of a running job: %v", err)
	}
	e.succeed("a-done")
	if _, err := e.s.JobCancel(e.ctx, &errandstore.JobCancelParams{ID: "a-done", Operator: "ana", Reason: "no"}); !errors.Is(err, errandtype.ErrWrongState) {
		t.Fatalf("cancel of a succeeded job: %v, want ErrWrongState", err)
	}
	if _, err := e.s.JobCancel(e.ctx, &errandstore.JobCancelParams{ID: "missing", Operator: "ana", Reason: "no"}); !errors.Is(err, errandtype.ErrNotFound) {
		t.Fatalf("cancel of an unknown job: %v, want ErrNotFound", err)
	}
	checkRecords(t, "audit after a cancel", e.auditList(&errandstore.AuditListParams{}), []errandtype.AuditRecord{
		{Action: errandtype.AuditCancel, JobID: ptr("r"), Operator: "bo", Reason: "runaway import", At: now, PriorState: errandtype.StateRunning},
		{Action: errandtype.AuditCancel, JobID: ptr("a"), Operator: "ana", Reason: "order withdrawn", At: now, PriorState: errandtype.StateRetrying},
	})
	if rs := e.audit("a"); len(rs) != 0 {
		t.Errorf("a cancel is not a replay: JobReplayAudit = %+v", rs)
	}
}

// testAuditReplayArgs checks the fix-and-replay case: the args replaced in
// the replay's transaction, the old and new args both kept in the audit.
func testAuditReplayArgs(t *testing.T, h harness) {
	e := open(t, h)
	deadJob := e.jobInState("a", errandtype.StateDead)
	now := e.clock.Advance(time.Hour)
	newArgs := json.RawMessage(`{"n":2,"fixed":true}`)
	got, err := e.s.JobReplay(e.ctx, &errandstore.JobReplayParams{ID: "a", Operator: "ana", Reason: "typo in the address", Args: newArgs})
	if err != nil {
		t.Fatalf("JobReplay with args: %v", err)
	}
	want := replayed(deadJob, now)
	want.Args = newArgs
	same(t, "job replayed with new args", want, got)
	same(t, "JobGet after a replay with new args", want, e.get("a"))
	details := json.RawMessage(`{"old_args":{"n":1},"new_args":{"n":2,"fixed":true}}`)
	checkRecords(t, "audit of a replay with new args", e.auditList(&errandstore.AuditListParams{JobID: "a"}), []errandtype.AuditRecord{
		{Action: errandtype.AuditReplayArgs, JobID: ptr("a"), Operator: "ana", Reason: "typo in the address", At: now,
			PriorState: errandtype.StateDead, Replay: 1, Details: details},
	})
	checkAudit(t, e.audit("a"), []errandtype.ReplayRecord{
		{JobID: "a", Replay: 1, PriorState: errandtype.StateDead, Operator: "ana", Reason: "typo in the address", At: now},
	})
}

// testAuditReplayArgsWrongState checks that a refused replay with new args
// changes neither the args nor the audit.
func testAuditReplayArgsWrongState(t *testing.T, h harness) {
	e := open(t, h)
	before := e.jobInState("a", errandtype.StateRetrying)
	_, err := e.s.JobReplay(e.ctx, &errandstore.JobReplayParams{ID: "a", Operator: "ana", Reason: "r", Args: json.RawMessage(`{"n":9}`)})
	if !errors.Is(err, errandtype.ErrWrongState) {
		t.Fatalf("replay with args of a retrying job: %v, want ErrWrongState", err)
	}
	e.unchanged("refused replay with args", before)
	checkRecords(t, "audit after a refused replay", e.auditList(&errandstore.AuditListParams{}), nil)
}

// testAuditListFilters checks the audit's filters, order and paging.
func testAuditListFilters(t *testing.T, h harness) {
	e := open(t, h)
	e.jobInState("a", errandtype.StateDead)
	e.jobInState("b", errandtype.StateQueued)
	e.jobInState("c", errandtype.StateQueued)
	t1 := e.clock.Advance(time.Minute)
	if _, err := e.s.JobReplay(e.ctx, &errandstore.JobReplayParams{ID: "a", Operator: "ana", Reason: "one"}); err != nil {
		t.Fatal(err)
	}
	t2 := e.clock.Advance(time.Minute)
	if _, err := e.s.JobCancel(e.ctx, &errandstore.JobCancelParams{ID: "b", Operator: "bo", Reason: "two"}); err != nil {
		t.Fatal(err)
	}
	t3 := e.clock.Advance(time.Minute)
	if _, err := e.s.JobCancel(e.ctx, &errandstore.JobCancelParams{ID: "c", Operator: "cy", Reason: "three"}); err != nil {
		t.Fatal(err)
	}
	t4 := e.clock.Advance(time.Minute)
	if _, err := e.s.JobReplay(e.ctx, &errandstore.JobReplayParams{ID: "b", Operator: "bo", Reason: "four"}); err != nil {
		t.Fatal(err)
	}
	rA := errandtype.AuditRecord{Action: errandtype.AuditReplay, JobID: ptr("a"), Operator: "ana", Reason: "one", At: t1, PriorState: errandtype.StateDead, Replay: 1}
	rB := errandtype.AuditRecord{Action: errandtype.AuditCancel, JobID: ptr("b"), Operator: "bo", Reason: "two", At: t2, PriorState: errandtype.StateQueued}
	rC := errandtype.AuditRecord{Action: errandtype.AuditCancel, JobID: ptr("c"), Operator: "cy", Reason: "three", At: t3, PriorState: errandtype.StateQueued}
	rD := errandtype.AuditRecord{Action: errandtype.AuditReplay, JobID: ptr("b"), Operator: "bo", Reason: "four", At: t4, PriorState: errandtype.StateCancelled, Replay: 1}

	all := e.auditList(&errandstore.AuditListParams{})
	checkRecords(t, "whole audit", all, []errandtype.AuditRecord{rD, rC, rB, rA})
	checkRecords(t, "job b", e.auditList(&errandstore.AuditListParams{JobID: "b"}), []errandtype.AuditRecord{rD, rB})
	checkRecords(t, "cancels", e.auditList(&errandstore.AuditListParams{Action: errandtype.AuditCancel}), []errandtype.AuditRecord{rC, rB})
	checkRecords(t, "t2 <= at < t4", e.auditList(&errandstore.AuditListParams{Since: t2, Until: t4}), []errandtype.AuditRecord{rC, rB})
	checkRecords(t, "replays of b", e.auditList(&errandstore.AuditListParams{JobID: "b", Action: errandtype.AuditReplay}), []errandtype.AuditRecord{rD})
	checkRecords(t, "unknown job", e.auditList(&errandstore.AuditListParams{JobID: "zzz"}), nil)

	page1 := e.auditList(&errandstore.AuditListParams{Limit: 3})
	checkRecords(t, "page 1", page1, []errandtype.AuditRecord{rD, rC, rB})
	page2 := e.auditList(&errandstore.AuditListParams{Limit: 3, BeforeID: page1[2].ID})
	checkRecords(t, "page 2", page2, []errandtype.AuditRecord{rA})
	if page2[0].ID != all[3].ID {
		t.Errorf("page 2 id %d, want %d", page2[0].ID, all[3].ID)
	}
}
