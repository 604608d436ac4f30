package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
)

// The batch cases run on stores that implement the optional
// [errandstore.BatchStore]; the dead-hook cases on [errandstore.DeadHookStore]
// stores; others skip them.
var batchCases = []testCase{
	{"InsertGetComplete", testBatchLifecycle},
	{"DuplicatesAndRefusals", testBatchDuplicates},
	{"InsertTxRollsBack", testBatchInsertTx},
	{"CompleteOnceAcrossStores", testBatchCompleteOnce},
	{"ReplayAfterCompletion", testBatchReplayAfterCompletion},
	{"CallbackBound", testBatchCallbackBound},
	{"CompleteFailureSkipped", testBatchCompleteFailureSkipped},
	{"List", testBatchList},
	{"DeadUnhooked", testDeadUnhooked},
	{"DeadHookCursors", testDeadHookCursors},
	{"ScheduleDelete", testScheduleDelete},
}

func (e *env) batches() errandstore.BatchStore {
	e.t.Helper()
	bs, ok := e.s.(errandstore.BatchStore)
	if !ok {
		e.t.Skip("the store is not an errandstore.BatchStore")
	}
	return bs
}

func batchParams(id string, n int) *errandstore.BatchInsertParams {
	p := &errandstore.BatchInsertParams{ID: id, Callback: &errandstore.BatchCallback{Kind: "import_done", Queue: "callbacks",
		Args: json.RawMessage(`{"import":7}`), ArgsVersion: 1, MaxAttempts: 5, Tags: []string{"fan-in"}}}
	for i := range n {
		p.Jobs = append(p.Jobs, newJob(fmt.Sprintf("%s-m%d", id, i)))
	}
	return p
}

func (e *env) insertBatch(p *errandstore.BatchInsertParams) *errandstore.BatchInsertResult {
	e.t.Helper()
	r, err := e.batches().BatchInsert(e.ctx, p)
	if err != nil {
		e.t.Fatalf("BatchInsert(%s): %v", p.ID, err)
	}
	return r
}

func (e *env) batch(id string) *errandstore.Batch {
	e.t.Helper()
	b, err := e.batches().BatchGet(e.ctx, &errandstore.BatchGetParams{ID: id})
	if err != nil {
		e.t.Fatalf("BatchGet(%s): %v", id, err)
	}
	return b
}

func (e *env) completeBatches(ids ...string) []*errandstore.Batch {
	e.t.Helper()
	bs, err := e.batches().BatchComplete(e.ctx, &errandstore.BatchCompleteParams{IDs: ids})
	if err != nil {
		e.t.Fatalf("BatchComplete(%v): %v", ids, err)
	}
	return bs
}

func counts(kv ...any) map[errandtype.JobState]int {
	m := errandstore.NewBatchCounts()
	for i := 0; i < len(kv); i += 2 {
		m[kv[i].(errandtype.JobState)] = kv[i+1].(int)
	}
	return m
}

// testBatchLifecycle: a batch's members carry its id; the batch counts them
// by state and does not complete while one is not finished; when the last
// finishes, it completes once, with its callback job, whose args hold the
// batch's result.
func testBatchLifecycle(t *testing.T, h harness) {
	e := open(t, h)
	e.wantBatchInserted("b1")

	// Claimed members are running; one succeeds, one dies.
	e.clock.Advance(time.Second)
	js := e.claim(3)
	if len(js) != 3 || js[0].BatchID == nil {
		t.Fatalf("claim: got %v, want the 3 members with their batch", ids(js))
	}
	e.recordOK(succeeded(js[0]))
	e.recordOK(dead(js[1]))
	if got := e.batch("b1").Counts; !reflect.DeepEqual(got, counts(errandtype.StateRunning, 1, errandtype.StateSucceeded, 1, errandtype.StateDead, 1)) {
		t.Fatalf("counts with one running = %v", got)
	}
	if done := e.completeBatches("b1"); len(done) != 0 {
		t.Fatalf("BatchComplete with a member running completed %d batches", len(done))
	}
	if done := e.completeBatches(); len(done) != 0 {
		t.Fatalf("BatchComplete of every open batch with a member running completed %d", len(done))
	}
	e.notFound(errandstore.BatchCallbackJobID("b1"))

	// The last member finishes: the batch completes once, with the
	// callback job.
	e.clock.Advance(time.Second)
	t2 := e.now()
	e.recordOK(succeeded(js[2]))
	done := e.completeBatches()
	if len(done) != 1 || done[0].ID != "b1" {
		t.Fatalf("BatchComplete = %v, want b1", done)
	}
	final := &errandstore.BatchResult{ID: "b1", Total: 3, Succeeded: 2, Dead: 1, CompletedAt: t2}
	if !reflect.DeepEqual(done[0].Final, final) || done[0].CompletedAt == nil || !done[0].CompletedAt.Equal(t2) {
		t.Fatalf("completed batch final = %+v at %v, want %+v", done[0].Final, done[0].CompletedAt, final)
	}
	e.wantBatchCallback("b1", final)
	if again := e.completeBatches("b1"); len(again) != 0 {
		t.Fatalf("a second BatchComplete completed %d batches", len(again))
	}
	if again := e.completeBatches(); len(again) != 0 {
		t.Fatalf("a second BatchComplete of every open batch completed %d", len(again))
	}
}

// wantBatchInserted inserts batch id of 3 members, and checks that its
// members, as inserted and as stored, carry its id, that the batch, as
// inserted and as read, counts them queued, and that an unknown batch is
// not found.
func (e *env) wantBatchInserted(id string) {
	t := e.t
	t.Helper()
	t0 := e.now()
	r := e.insertBatch(batchParams(id, 3))
	if r.Duplicate || len(r.Jobs) != 3 {
		t.Fatalf("BatchInsert = duplicate %v, %d jobs; want a new batch of 3", r.Duplicate, len(r.Jobs))
	}
	for _, j := range r.Jobs {
		if j.BatchID == nil || *j.BatchID != id {
			t.Fatalf("inserted job %s has batch %v, want %s", j.ID, j.BatchID, id)
		}
		if g := e.get(j.ID); g.BatchID == nil || *g.BatchID != id {
			t.Fatalf("stored job %s has batch %v, want %s", j.ID, g.BatchID, id)
		}
	}
	want := &errandstore.Batch{ID: id, Total: 3, Counts: counts(errandtype.StateQueued, 3),
		Callback: batchParams(id, 0).Callback, CreatedAt: t0}
	if !reflect.DeepEqual(r.Batch, want) {
		t.Fatalf("BatchInsert batch =\n  %+v\nwant\n  %+v", r.Batch, want)
	}
	if got := e.batch(id); !reflect.DeepEqual(got, want) {
		t.Fatalf("BatchGet =\n  %+v\nwant\n  %+v", got, want)
	}
	if _, err := e.batches().BatchGet(e.ctx, &errandstore.BatchGetParams{ID: "nope"}); !errors.Is(err, errandtype.ErrNotFound) {
		t.Fatalf("BatchGet(unknown) = %v, want ErrNotFound", err)
	}
}

// wantBatchCallback checks the callback job of completed batch id: queued
// as batchParams asks, outside the batch, with the callback's args and the
// batch's result final; and that the batch names it and keeps final.
func (e *env) wantBatchCallback(id string, final *errandstore.BatchResult) {
	t := e.t
	t.Helper()
	cb := e.get(errandstore.BatchCallbackJobID(id))
	if n := len(e.list(&errandstore.JobListParams{Kind: "import_done", Limit: 100})); n != 1 {
		t.Fatalf("batch %s: %d callback jobs, want 1", id, n)
	}
	if cb.Kind != "import_done" || cb.Queue != "callbacks" || cb.MaxAttempts != 5 || cb.State != errandtype.StateQueued || cb.BatchID != nil {
		t.Fatalf("callback job = %+v", cb)
	}
	var args struct {
		Import int                     `json:"import"`
		Batch  errandstore.BatchResult `json:"batch"`
	}
	if err := json.Unmarshal(cb.Args, &args); err != nil {
		t.Fatal(err)
	}
	if args.Import != 7 || !reflect.DeepEqual(args.Batch, *final) {
		t.Fatalf("callback args = %s, want the callback's args with the batch result %+v", cb.Args, final)
	}
	got := e.batch(id)
	if got.CallbackJobID == nil || *got.CallbackJobID != cb.ID || !reflect.DeepEqual(got.Final, final) {
		t.Fatalf("completed batch = %+v", got)
	}
}

func testBatchDuplicates(t *testing.T, h harness) {
	e := open(t, h)
	first := e.insertBatch(batchParams("b1", 2))
	e.clock.Advance(time.Second)
	r := e.insertBatch(batchParams("b1", 5))
	if !r.Duplicate || r.Jobs != nil || r.Batch.Total != 2 || !r.Batch.CreatedAt.Equal(first.Batch.CreatedAt) {
		t.Fatalf("second BatchInsert(b1) = %+v, want the first batch as a duplicate", r)
	}
	if n := len(e.listAll()); n != 2 {
		t.Fatalf("%d jobs after a duplicate batch, want 2", n)
	}

	// A member whose id is taken refuses the whole batch.
	e.insertIDs("taken")
	p := batchParams("b2", 2)
	p.Jobs = append(p.Jobs, newJob("taken"))
	var ie *errandtype.InputError
	if _, err := e.batches().BatchInsert(e.ctx, p); !errors.As(err, &ie) {
		t.Fatalf("BatchInsert with a taken id = %v, want an *InputError", err)
	}
	if _, err := e.batches().BatchGet(e.ctx, &errandstore.BatchGetParams{ID: "b2"}); !errors.Is(err, errandtype.ErrNotFound) {
		t.Fatalf("refused batch exists: %v", err)
	}
	e.notFound("b2-m0")
	if e.get("taken").BatchID != nil {
		t.Fatal("the job holding the taken id joined the refused batch")
	}

	for name, bad := range map[string]*errandstore.BatchInsertParams{
		"no jobs":          {ID: "b3"},
		"no id":            {Jobs: []*errandstore.JobInsertParams{newJob("x")}},
		"callback array":   {ID: "b4", Jobs: []*errandstore.JobInsertParams{newJob("y")}, Callback: &errandstore.BatchCallback{Kind: "k", Queue: "q", Args: json.RawMessage(`[1]`), ArgsVersion: 1, MaxAttempts: 1}},
		"callback no kind": {ID: "b5", Jobs: []*errandstore.JobInsertParams{newJob("z")}, Callback: &errandstore.BatchCallback{Queue: "q", Args: json.RawMessage(`{}`), ArgsVersion: 1, MaxAttempts: 1}},
		"one id twice":     {ID: "b6", Jobs: []*errandstore.JobInsertParams{newJob("same"), newJob("same")}},
		// Its callback's id, "w.step.callback", would be a workflow step's.
		"id ending .step": {ID: "w.step", Jobs: []*errandstore.JobInsertParams{newJob("v")}},
	} {
		if _, err := e.batches().BatchInsert(e.ctx, bad); !errors.As(err, &ie) {
			t.Errorf("BatchInsert(%s) = %v, want an *InputError", name, err)
		}
	}
}

func testBatchInsertTx(t *testing.T, h harness) {
	e := open(t, h)
	e.batches()
	err := e.h.inTx(e.ctx, e.s, func(ctx context.Context, tx txOps) error {
		_, err := tx.(batchTxOps).BatchInsert(ctx, batchParams("b1", 2))
		if err != nil {
			return err
		}
		return errRollback
	})
	if errors.Is(err, errNoBatchTx) {
		t.Skip("the store is not an errandstore.BatchTxStore of its transaction type")
	}
	if !errors.Is(err, errRollback) {
		t.Fatalf("InTx = %v", err)
	}
	if _, err := e.batches().BatchGet(e.ctx, &errandstore.BatchGetParams{ID: "b1"}); !errors.Is(err, errandtype.ErrNotFound) {
		t.Fatalf("batch of a rolled back transaction: %v", err)
	}
	e.notFound("b1-m0")

	err = e.h.inTx(e.ctx, e.s, func(ctx context.Context, tx txOps) error {
		_, err := tx.(batchTxOps).BatchInsert(ctx, batchParams("b1", 2))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if b := e.batch("b1"); b.Total != 2 || b.Counts[errandtype.StateQueued] != 2 {
		t.Fatalf("committed batch = %+v", b)
	}
}

// testBatchCompleteOnce finishes a batch and has many goroutines on two
// stores complete it at once: exactly one completes it.
func testBatchCompleteOnce(t *testing.T, h harness) {
	e := open(t, h)
	e.batches()
	other := e.second().(errandstore.BatchStore)
	e.insertBatch(batchParams("b1", 4))
	for _, j := range e.claim(4) {
		e.recordOK(succeeded(j))
	}
	var (
		wg        sync.WaitGroup
		mu        sync.Mutex
		completed int
	)
	for i := range 8 {
		s := e.batches()
		if i%2 == 1 {
			s = other
		}
		wg.Go(func() {
			var ids []string
			if i%4 < 2 {
				ids = []string{"b1"}
			}
			done, err := s.BatchComplete(e.ctx, &errandstore.BatchCompleteParams{IDs: ids})
			if err != nil {
				t.Errorf("BatchComplete: %v", err)
				return
			}
			mu.Lock()
			completed += len(done)
			mu.Unlock()
		})
	}
	wg.Wait()
	if completed != 1 {
		t.Fatalf("%d completions, want exactly 1", completed)
	}
	e.get(errandstore.BatchCallbackJobID("b1"))
}

// testBatchReplayAfterCompletion: a batch completes once; a member replayed
// afterwards is counted in its new state, and the final counts stay.
func testBatchReplayAfterCompletion(t *testing.T, h harness) {
	e := open(t, h)
	e.insertBatch(batchParams("b1", 2))
	js := e.claim(2)
	e.recordOK(succeeded(js[0]))
	e.recordOK(dead(js[1]))
	if done := e.completeBatches("b1"); len(done) != 1 {
		t.Fatalf("completed %d", len(done))
	}
	if _, err := e.s.JobReplay(e.ctx, &errandstore.JobReplayParams{ID: js[1].ID, Operator: "ops", Reason: "fixed"}); err != nil {
		t.Fatal(err)
	}
	b := e.batch("b1")
	if b.Final.Dead != 1 || b.Counts[errandtype.StateQueued] != 1 || b.Counts[errandtype.StateDead] != 0 || b.Pending() != 1 {
		t.Fatalf("batch after a replay = final %+v, counts %v", b.Final, b.Counts)
	}
	j := e.claimOne(js[1].ID)
	e.recordOK(succeeded(j))
	if done := e.completeBatches(); len(done) != 0 {
		t.Fatalf("a completed batch completed again: %d", len(done))
	}
}

func testDeadUnhooked(t *testing.T, h harness) {
	e := open(t, h)
	ds, ok := e.s.(errandstore.DeadHookStore)
	if !ok {
		t.Skip("the store is not an errandstore.DeadHookStore")
	}
	list := func(since time.Time, kinds ...string) []string {
		t.Helper()
		js, err := ds.JobListDeadUnhooked(e.ctx, &errandstore.JobListDeadUnhookedParams{Kinds: kinds, Since: since})
		if err != nil {
			t.Fatal(err)
		}
		return ids(js)
	}
	t0 := e.now()
	e.deadWith("a", "q", "charge", "permanent")
	e.clock.Advance(time.Minute)
	t1 := e.now()
	e.deadWith("b", "q", "charge", "permanent")
	e.deadWith("c", "q", "other", "permanent")
	e.insertIDs("running")
	if got := list(t0, "charge"); !reflect.DeepEqual(got, []string{"a", "b"}) {
		t.Fatalf("dead without hook = %v, want [a b]", got)
	}
	if got := list(t1, "charge", "other"); !reflect.DeepEqual(got, []string{"b", "c"}) {
		t.Fatalf("dead since t1 = %v, want [b c]", got)
	}
	if got := list(t0); len(got) != 0 {
		t.Fatalf("no kinds = %v, want none", got)
	}
	// a's hook job exists: a is no longer listed. After a replay, a's next
	// death needs a hook of its own.
	hook := newJob(errand.DeadHookJobID("a", 0))
	e.insert(hook)
	if got := list(t0, "charge"); !reflect.DeepEqual(got, []string{"b"}) {
		t.Fatalf("dead without hook after a's hook = %v, want [b]", got)
	}
	if _, err := e.s.JobReplay(e.ctx, &errandstore.JobReplayParams{ID: "a", Operator: "ops", Reason: "again"}); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(time.Minute)
	j := e.claimWith(&errandstore.JobClaimParams{Queues: []string{"q"}, Limit: 1, Lease: lease, Owner: owner})
	if len(j) != 1 || j[0].ID != "a" {
		t.Fatalf("claim replayed a: %v", ids(j))
	}
	e.recordOK(dead(j[0]))
	if got := list(t0, "charge"); !reflect.DeepEqual(got, []string{"b", "a"}) {
		t.Fatalf("dead without hook after a died again = %v, want [b a]", got)
	}
}

// testDeadHookCursors: a kind has no cursor until one is advanced; a cursor
// only moves forward; bad parameters write nothing.
func testDeadHookCursors(t *testing.T, h harness) {
	e := open(t, h)
	cs, ok := e.s.(errandstore.DeadHookCursorStore)
	if !ok {
		t.Skip("the store is not an errandstore.DeadHookCursorStore")
	}
	read := func(kinds ...string) map[string]time.Time {
		t.Helper()
		m, err := cs.DeadHookCursors(e.ctx, &errandstore.DeadHookCursorsParams{Kinds: kinds})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	advance := func(to time.Time, kinds ...string) {
		t.Helper()
		if err := cs.DeadHookCursorAdvance(e.ctx, &errandstore.DeadHookCursorAdvanceParams{Kinds: kinds, To: to}); err != nil {
			t.Fatal(err)
		}
	}
	if m := read("charge", "ship"); len(m) != 0 {
		t.Fatalf("cursors before any look = %v, want none", m)
	}
	t0 := e.now().Add(-30 * 24 * time.Hour).Truncate(time.Microsecond)
	t1 := e.now().Truncate(time.Microsecond)
	advance(t1, "charge")
	advance(t0, "charge", "ship")
	m := read("charge", "ship", "other")
	if len(m) != 2 || !m["charge"].Equal(t1) || !m["ship"].Equal(t0) {
		t.Fatalf("cursors = %v, want charge at %v (not moved back) and ship at %v", m, t1, t0)
	}
	t2 := t1.Add(time.Hour)
	advance(t2, "ship")
	if m := read("ship"); !m["ship"].Equal(t2) {
		t.Fatalf("ship's cursor = %v, want %v", m["ship"], t2)
	}
	var ie *errandtype.InputError
	for _, bad := range []*errandstore.DeadHookCursorAdvanceParams{{Kinds: []string{"charge"}}, {Kinds: []string{""}, To: t2}} {
		if err := cs.DeadHookCursorAdvance(e.ctx, bad); !errors.As(err, &ie) {
			t.Fatalf("advance %+v: %v, want an InputError", bad, err)
		}
	}
	if m := read("charge"); !m["charge"].Equal(t1) {
		t.Fatalf("charge's cursor after refusals = %v, want %v", m["charge"], t1)
	}
}

func testScheduleDelete(t *testing.T, h harness) {
	e := open(t, h)
	n1 := e.now().Add(time.Minute)
	e.upsertSchedule(scheduleParams("digest", "@every 1m", n1))
	e.upsertSchedule(scheduleParams("other", "@hourly", n1))
	e.clock.Advance(time.Second)
	r, err := e.schedules().ScheduleDelete(e.ctx, &errandstore.ScheduleDeleteParams{Name: "digest", Operator: "ops", Reason: "retired"})
	if err != nil {
		t.Fatal(err)
	}
	if r.Name != "digest" || r.Spec != "@every 1m" {
		t.Fatalf("deleted schedule = %+v", r)
	}
	list, err := e.schedules().ScheduleList(e.ctx, &errandstore.ScheduleListParams{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].Name != "other" {
		t.Fatalf("schedules after delete = %v", list)
	}
	e.wantScheduleDeleteAudit()
	if _, err := e.schedules().ScheduleDelete(e.ctx, &errandstore.ScheduleDeleteParams{Name: "digest", Operator: "ops", Reason: "again"}); !errors.Is(err, errandtype.ErrNotFound) {
		t.Fatalf("deleting again = %v, want ErrNotFound", err)
	}
	if n := len(e.auditList(&errandstore.AuditListParams{Action: errandtype.AuditScheduleDelete})); n != 1 {
		t.Fatalf("%d audit records after a failed delete, want 1", n)
	}
}

// wantScheduleDeleteAudit checks testScheduleDelete's audit of deleting
// schedule digest: one record, of no job, saying who, why and when, with
// the schedule's name and spec in its details.
func (e *env) wantScheduleDeleteAudit() {
	t := e.t
	t.Helper()
	recs := e.auditList(&errandstore.AuditListParams{Action: errandtype.AuditScheduleDelete})
	if len(recs) != 1 || recs[0].JobID != nil || recs[0].Operator != "ops" || recs[0].Reason != "retired" || !recs[0].At.Equal(e.now()) {
		t.Fatalf("audit = %+v", recs)
	}
	var d map[string]string
	if err := json.Unmarshal(recs[0].Details, &d); err != nil || d["name"] != "digest" || d["spec"] != "@every 1m" {
		t.Fatalf("audit details = %s (%v)", recs[0].Details, err)
	}
}

// testBatchCallbackBound: a callback whose args fit with an empty result
// but not with the counts and time of a completion is refused at insert:
// accepted, its batch could never complete.
func testBatchCallbackBound(t *testing.T, h harness) {
	e := open(t, h)
	p := batchParams("b1", 1)
	p.Callback.Args = json.RawMessage(`{"pad":""}`)
	empty, err := (&errandstore.Batch{ID: p.ID, Total: len(p.Jobs), Callback: p.Callback}).CallbackJob()
	if err != nil {
		t.Fatal(err)
	}
	p.Callback.Args = json.RawMessage(`{"pad":"` + strings.Repeat("a", 1<<20-len(empty.Args)) + `"}`)
	_, err = e.batches().BatchInsert(e.ctx, p)
	var ie *errandtype.InputError
	if !errors.As(err, &ie) || !strings.Contains(err.Error(), "callback") {
		if err == nil {
			e.recordOK(succeeded(e.claimIn(errand.DefaultQueue, "b1-m0")))
			_, err = e.batches().BatchComplete(e.ctx, &errandstore.BatchCompleteParams{IDs: []string{"b1"}})
			t.Fatalf("BatchInsert accepted a callback of %d bytes of args; completing the batch: %v", len(p.Callback.Args), err)
		}
		t.Fatalf("BatchInsert = %v, want an *InputError naming the callback", err)
	}
	e.noBatch("b1")
	e.notFound("b1-m0")
}

// testBatchCompleteFailureSkipped: a batch whose completion fails (here its
// callback, which the database refuses) is named in the error and stays
// open, and the batches after it in the leader's pass complete all the
// same, on every pass.
func testBatchCompleteFailureSkipped(t *testing.T, h harness) {
	e := open(t, h)
	e.insertBatch(batchParams("b1", 1))
	e.clock.Advance(time.Second)
	e.insertBatch(batchParams("b2", 1))
	e.refuseJob(errandstore.BatchCallbackJobID("b1"))
	e.recordOK(succeeded(e.claimIn(errand.DefaultQueue, "b1-m0")))
	e.recordOK(succeeded(e.claimIn(errand.DefaultQueue, "b2-m0")))
	for pass := range 2 {
		done, err := e.batches().BatchComplete(e.ctx, &errandstore.BatchCompleteParams{})
		if err == nil || !strings.Contains(err.Error(), "b1") {
			t.Errorf("pass %d: error %v, want one naming b1", pass, err)
		}
		if pass == 0 && (len(done) != 1 || done[0].ID != "b2") {
			t.Fatalf("pass %d completed %d batches, want b2", pass, len(done))
		}
		if pass == 1 && len(done) != 0 {
			t.Fatalf("pass %d completed %d batches, want none", pass, len(done))
		}
	}
	if b := e.batch("b1"); b.CompletedAt != nil || b.CallbackJobID != nil {
		t.Fatalf("b1 completed at %v with callback %v, want it open", b.CompletedAt, b.CallbackJobID)
	}
	e.notFound(errandstore.BatchCallbackJobID("b1"))
	if b := e.batch("b2"); b.CompletedAt == nil || b.CallbackJobID == nil {
		t.Fatalf("b2 is not completed with its callback")
	}
}
