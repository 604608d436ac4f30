package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
)

var bulkReplayCases = []testCase{
	{"Filters", testBulkReplayFilters},
	{"PagesAndAudits", testBulkReplayPagesAndAudits},
	{"DryRun", testBulkReplayDryRun},
	{"BadParams", testBulkReplayBadParams},
}

var pruneCases = []testCase{
	{"NeverLiveJobs", testPruneNeverLive},
	{"Ages", testPruneAges},
	{"Batches", testPruneBatches},
	{"DryRun", testPruneDryRun},
	{"BadParams", testPruneBadParams},
	{"BatchesAndWorkflowsWithLastJob", testPruneBatchesAndWorkflows},
	{"BatchesLimitedAndAged", testPruneBatchesLimited},
	{"KeepsOpenWorkflowJobs", testPruneKeepsOpenWorkflowJobs},
	{"KeepsOpenBatchMembers", testPruneKeepsOpenBatchMembers},
	{"KeepsResumableWorkflowJobs", testPruneKeepsResumableWorkflowJobs},
	{"FailedStepGoesFirst", testPruneFailedStepGoesFirst},
	{"KindAges", testPruneKindAges},
	{"OnlyKinds", testPruneOnlyKinds},
	{"KindBatches", testPruneKindBatches},
}

// deadWith makes a dead job of kind in queue, killed by class, now.
func (e *env) deadWith(id, queue, kind, class string) *errandtype.Job {
	e.t.Helper()
	p := newJob(id)
	p.Queue, p.Kind = queue, kind
	e.insert(p)
	js := e.claimWith(&errandstore.JobClaimParams{Queues: []string{queue}, Limit: 1, Lease: lease, Owner: owner})
	if len(js) != 1 || js[0].ID != id {
		e.t.Fatalf("claim %s: got %v", id, ids(js))
	}
	e.recordOK(&errandstore.JobOutcome{JobLease: leaseOf(js[0]), Kind: errandstore.OutcomeDead,
		Error: &errandtype.AttemptError{Attempt: 1, Class: class, Message: "failed"}})
	return e.get(id)
}

func (e *env) replayMany(p *errandstore.JobReplayManyParams) []*errandtype.Job {
	e.t.Helper()
	js, err := e.s.JobReplayMany(e.ctx, p)
	if err != nil {
		e.t.Fatalf("JobReplayMany(%+v): %v", *p, err)
	}
	return js
}

func bulk(f errandstore.DeadFilter) *errandstore.JobReplayManyParams {
	return &errandstore.JobReplayManyParams{Filter: f, Limit: errandstore.ReplayBatch, Operator: "ana", Reason: "fixed", Bulk: "bulk-1"}
}

// testBulkReplayFilters checks that each filter selects exactly the dead
// jobs it names, and that no other state is touched.
func testBulkReplayFilters(t *testing.T, h harness) {
	e := open(t, h)
	t0 := e.now()
	e.deadWith("a", "mail", "email", "timeout")
	e.clock.Advance(time.Hour)
	t1 := e.now()
	e.deadWith("b", "mail", "sms", "timeout")
	e.clock.Advance(time.Hour)
	t2 := e.now()
	e.deadWith("c", "bills", "email", errand.ClassPermanent)
	e.clock.Advance(time.Hour)
	live := []*errandtype.Job{e.jobInState("q", errandtype.StateQueued), e.jobInState("r", errandtype.StateRetrying),
		e.jobInState("s", errandtype.StateSucceeded), e.jobInState("x", errandtype.StateCancelled)}

	for _, tt := range []struct {
		name   string
		filter errandstore.DeadFilter
		want   []string
	}{
		{"kind", errandstore.DeadFilter{Kind: "email"}, []string{"a", "c"}},
		{"queue", errandstore.DeadFilter{Queue: "mail"}, []string{"a", "b"}},
		{"class", errandstore.DeadFilter{Class: "timeout"}, []string{"a", "b"}},
		{"died since", errandstore.DeadFilter{DiedSince: t1}, []string{"b", "c"}},
		{"died until", errandstore.DeadFilter{DiedUntil: t1}, []string{"a"}},
		{"range and kind", errandstore.DeadFilter{DiedSince: t0, DiedUntil: t2.Add(time.Microsecond), Kind: "email"}, []string{"a", "c"}},
		{"nothing", errandstore.DeadFilter{Kind: "email", Queue: "mail", Class: errand.ClassPermanent}, nil},
	} {
		p := bulk(tt.filter)
		p.DryRun = true
		if got := ids(e.replayMany(p)); !slices.Equal(got, tt.want) && !(len(got) == 0 && len(tt.want) == 0) {
			t.Errorf("dry run by %s: %v, want %v", tt.name, got, tt.want)
		}
	}
	now := e.now()
	got := e.replayMany(bulk(errandstore.DeadFilter{Class: "timeout"}))
	if !slices.Equal(ids(got), []string{"a", "b"}) {
		t.Fatalf("replayed %v, want [a b]", ids(got))
	}
	for _, j := range got {
		if j.State != errandtype.StateQueued || j.Replays != 1 || j.Attempt != 0 || !j.AvailableAt.Equal(now) || j.FinishedAt != nil {
			t.Errorf("replayed job %s: %+v", j.ID, j)
		}
		same(t, "JobGet of bulk-replayed "+j.ID, j, e.get(j.ID))
	}
	if c := e.get("c"); c.State != errandtype.StateDead {
		t.Errorf("job c outside the filter: %s", c.State)
	}
	for _, j := range live {
		e.unchanged("bulk replay", j)
	}
	// Everything dead now: only c, since a and b were replayed.
	if rest := e.replayMany(bulk(errandstore.DeadFilter{})); !slices.Equal(ids(rest), []string{"c"}) {
		t.Errorf("second bulk replay: %v, want [c]", ids(rest))
	}
}

// testBulkReplayPagesAndAudits checks Limit and AfterSeq, and one audit
// record per job with the bulk id and filter.
func testBulkReplayPagesAndAudits(t *testing.T, h harness) {
	e := open(t, h)
	var seqs []int64
	for _, id := range []string{"a", "b", "c"} {
		seqs = append(seqs, e.deadWith(id, "mail", "email", "timeout").Seq)
	}
	now := e.clock.Advance(time.Minute)
	f := errandstore.DeadFilter{Kind: "email", DiedSince: T0}
	p := bulk(f)
	p.Limit = 2
	first := e.replayMany(p)
	if !slices.Equal(ids(first), []string{"a", "b"}) {
		t.Fatalf("first batch %v, want [a b]", ids(first))
	}
	p.AfterSeq = seqs[0]
	p.Limit = 5
	// a and b are queued now; after a's seq only c is dead.
	if second := e.replayMany(p); !slices.Equal(ids(second), []string{"c"}) {
		t.Fatalf("second batch %v, want [c]", ids(second))
	}
	details := errandstore.BulkReplayDetails("bulk-1", f)
	var want []errandtype.AuditRecord
	for _, id := range []string{"c", "b", "a"} {
		want = append(want, errandtype.AuditRecord{Action: errandtype.AuditBulkReplay, JobID: ptr(id), Operator: "ana", Reason: "fixed",
			At: now, PriorState: errandtype.StateDead, Replay: 1, Details: details})
	}
	checkRecords(t, "audit of a bulk replay", e.auditList(&errandstore.AuditListParams{}), want)
	var d struct {
		Bulk   string `json:"bulk"`
		Filter struct {
			Kind      string    `json:"kind"`
			DiedSince time.Time `json:"died_since"`
		} `json:"filter"`
	}
	if err := json.Unmarshal(details, &d); err != nil || d.Bulk != "bulk-1" || d.Filter.Kind != "email" || !d.Filter.DiedSince.Equal(T0) {
		t.Errorf("details %s: %+v, %v", details, d, err)
	}
	checkAudit(t, e.audit("a"), []errandtype.ReplayRecord{
		{JobID: "a", Replay: 1, PriorState: errandtype.StateDead, Operator: "ana", Reason: "fixed", At: now},
	})
}

// testBulkReplayDryRun checks that a dry run returns the jobs unchanged
// and writes nothing.
func testBulkReplayDryRun(t *testing.T, h harness) {
	e := open(t, h)
	a := e.deadWith("a", "mail", "email", "timeout")
	p := bulk(errandstore.DeadFilter{})
	p.DryRun = true
	p.Operator, p.Reason, p.Bulk = "", "", ""
	got := e.replayMany(p)
	if len(got) != 1 {
		t.Fatalf("dry run: %v", ids(got))
	}
	same(t, "dry run result", a, got[0])
	e.unchanged("dry run", a)
	checkRecords(t, "audit after a dry run", e.auditList(&errandstore.AuditListParams{}), nil)
}

// testBulkReplayBadParams checks that bad params are an *InputError and
// nothing is written.
func testBulkReplayBadParams(t *testing.T, h harness) {
	e := open(t, h)
	a := e.deadWith("a", "mail", "email", "timeout")
	for _, mod := range []func(p *errandstore.JobReplayManyParams){
		func(p *errandstore.JobReplayManyParams) { p.Limit = 0 },
		func(p *errandstore.JobReplayManyParams) { p.Limit = errandstore.ReplayBatch + 1 },
		func(p *errandstore.JobReplayManyParams) { p.Operator = "" },
		func(p *errandstore.JobReplayManyParams) { p.Reason = " " },
		func(p *errandstore.JobReplayManyParams) { p.Bulk = "" },
		func(p *errandstore.JobReplayManyParams) { p.AfterSeq = -1 },
		func(p *errandstore.JobReplayManyParams) { p.Filter.Kind = "bad kind" },
		func(p *errandstore.JobReplayManyParams) { p.Filter.DiedSince, p.Filter.DiedUntil = T0, T0 },
		func(p *errandstore.JobReplayManyParams) { p.Held = true }, // lists only: needs DryRun
	} {
		p := bulk(errandstore.DeadFilter{})
		mod(p)
		js, err := e.s.JobReplayMany(e.ctx, p)
		var ie *errandtype.InputError
		if !errors.As(err, &ie) {
			t.Errorf("JobReplayMany(%+v) = %v, %v; want an *InputError", *p, ids(js), err)
		}
	}
	e.unchanged("refused bulk replays", a)
	checkRecords(t, "audit after refused bulk replays", e.auditList(&errandstore.AuditListParams{}), nil)
}

func (e *env) prune(p *errandstore.JobPruneParams) errandstore.PruneResult {
	e.t.Helper()
	r, err := e.s.JobPrune(e.ctx, p)
	if err != nil {
		e.t.Fatalf("JobPrune(%+v): %v", *p, err)
	}
	return r
}

func pruneParams(succeeded, dead time.Duration) *errandstore.JobPruneParams {
	return &errandstore.JobPruneParams{SucceededAge: succeeded, DeadAge: dead, Limit: errandstore.MaxPruneBatch,
		Operator: "ana", Reason: "retention"}
}

// testPruneNeverLive checks that a prune old enough to catch every
// finished job leaves every unfinished one alone, however old.
func testPruneNeverLive(t *testing.T, h harness) {
	e := open(t, h)
	var live []*errandtype.Job
	for _, st := range []errandtype.JobState{errandtype.StateQueued, errandtype.StateRunning, errandtype.StateRetrying} {
		live = append(live, e.jobInState(string(st), st))
	}
	sched := newJob("scheduled")
	sched.Delay = 1000 * time.Hour
	live = append(live, e.insert(sched)...)
	for _, st := range []errandtype.JobState{errandtype.StateSucceeded, errandtype.StateCancelled, errandtype.StateDead} {
		e.jobInState(string(st), st)
	}
	e.clock.Advance(100 * time.Hour)
	// Every running lease has expired by now; the prune must not care.
	r := e.prune(pruneParams(time.Hour, time.Hour))
	if r != (errandstore.PruneResult{Succeeded: 1, Cancelled: 1, Dead: 1}) {
		t.Errorf("prune: %+v, want one of each finished state", r)
	}
	for _, j := range live {
		e.unchanged("prune", j)
	}
	for _, id := range []string{"succeeded", "cancelled", "dead"} {
		e.notFound(id)
	}
}

// testPruneAges checks the two ages, each counted from finished_at: a job
// exactly at its age stays, one older goes.
func testPruneAges(t *testing.T, h harness) {
	e := open(t, h)
	e.jobInState("s", errandtype.StateSucceeded) // finished at T0
	e.jobInState("d", errandtype.StateDead)      // died at T0
	e.clock.Advance(time.Hour)
	if r := e.prune(pruneParams(time.Hour, 2*time.Hour)); r.Total() != 0 {
		t.Errorf("prune at exactly the succeeded age: %+v, want nothing", r)
	}
	e.clock.Advance(time.Microsecond)
	if r := e.prune(pruneParams(time.Hour, 2*time.Hour)); r != (errandstore.PruneResult{Succeeded: 1}) {
		t.Errorf("prune past the succeeded age: %+v, want the succeeded job", r)
	}
	e.notFound("s")
	e.get("d")
	e.clock.Advance(time.Hour)
	if r := e.prune(pruneParams(0, 2*time.Hour)); r != (errandstore.PruneResult{Dead: 1}) {
		t.Errorf("prune past the dead age: %+v, want the dead job", r)
	}
	e.notFound("d")
}

// testPruneBatches checks that Limit bounds one call, oldest first, and
// that each deleting call is audited once.
func testPruneBatches(t *testing.T, h harness) {
	e := open(t, h)
	for _, id := range []string{"s1", "s2", "s3"} {
		e.jobInState(id, errandtype.StateSucceeded)
		e.clock.Advance(time.Second)
	}
	e.jobInState("d1", errandtype.StateDead)
	e.clock.Advance(time.Hour)
	p := pruneParams(time.Minute, time.Minute)
	p.Limit = 2
	now := e.now()
	if r := e.prune(p); r != (errandstore.PruneResult{Succeeded: 2}) {
		t.Errorf("first batch: %+v, want 2 succeeded", r)
	}
	e.notFound("s1")
	e.notFound("s2")
	e.get("s3")
	if r := e.prune(p); r != (errandstore.PruneResult{Succeeded: 1, Dead: 1}) {
		t.Errorf("second batch: %+v, want 1 succeeded and 1 dead", r)
	}
	if r := e.prune(p); r.Total() != 0 {
		t.Errorf("third batch: %+v, want nothing", r)
	}
	rec := func(s, d int) errandtype.AuditRecord {
		return errandtype.AuditRecord{Action: errandtype.AuditPrune, Operator: "ana", Reason: "retention", At: now,
			Details: errandstore.PruneDetails(p, errandstore.PruneResult{Succeeded: s, Dead: d})}
	}
	checkRecords(t, "audit of prunes", e.auditList(&errandstore.AuditListParams{}), []errandtype.AuditRecord{rec(1, 1), rec(2, 0)})
}

// testPruneDryRun checks that a dry run counts without a limit and writes
// nothing.
func testPruneDryRun(t *testing.T, h harness) {
	e := open(t, h)
	s := e.jobInState("s", errandtype.StateSucceeded)
	c := e.jobInState("c", errandtype.StateCancelled)
	e.clock.Advance(time.Hour)
	p := &errandstore.JobPruneParams{SucceededAge: time.Minute, DryRun: true}
	if r := e.prune(p); r != (errandstore.PruneResult{Succeeded: 1, Cancelled: 1, DryRun: true}) {
		t.Errorf("dry run: %+v", r)
	}
	e.unchanged("dry run", s)
	e.unchanged("dry run", c)
	checkRecords(t, "audit after a dry run", e.auditList(&errandstore.AuditListParams{Action: errandtype.AuditPrune}), nil)
}

// kindParams are pruneParams with kinds of their own: "hourly" keeps its
// succeeded jobs an hour and its dead ones as the default, "monthly" both
// for 720h; the default is a day and two.
func kindParams() *errandstore.JobPruneParams {
	p := pruneParams(24*time.Hour, 48*time.Hour)
	p.Kinds = map[string]errandstore.KindRetention{
		"hourly":  {SucceededAge: time.Hour},
		"monthly": {SucceededAge: 720 * time.Hour, DeadAge: 720 * time.Hour},
	}
	return p
}

// testPruneKindAges checks that each kind with ages of its own goes
// exactly at them, shorter or longer than the default, and every other
// kind and state at the default; a dry run counts the same, and the audit
// records the kinds' ages.
func testPruneKindAges(t *testing.T, h harness) {
	e := open(t, h)
	e.kindInState("h-s", "hourly", errandtype.StateSucceeded)
	e.kindInState("h-c", "hourly", errandtype.StateCancelled)
	e.kindInState("h-d", "hourly", errandtype.StateDead)
	e.kindInState("m-s", "monthly", errandtype.StateSucceeded)
	e.kindInState("m-d", "monthly", errandtype.StateDead)
	e.kindInState("o-s", "email", errandtype.StateSucceeded)
	e.kindInState("o-d", "email", errandtype.StateDead)
	start := e.now()
	step := func(at time.Duration, want errandstore.PruneResult, gone ...string) {
		t.Helper()
		e.clock.Advance(start.Add(at).Sub(e.now()))
		dry := kindParams()
		dry.DryRun = true
		wantDry := want
		wantDry.DryRun = true
		if r := e.prune(dry); r != wantDry {
			t.Errorf("dry run at %s: %+v, want %+v", at, r, wantDry)
		}
		if r := e.prune(kindParams()); r != want {
			t.Errorf("prune at %s: %+v, want %+v", at, r, want)
		}
		for _, id := range gone {
			e.notFound(id)
		}
	}
	step(time.Hour, errandstore.PruneResult{})
	step(time.Hour+time.Microsecond, errandstore.PruneResult{Succeeded: 1, Cancelled: 1}, "h-s", "h-c")
	e.get("h-d")
	e.get("o-s")
	step(24*time.Hour, errandstore.PruneResult{})
	step(24*time.Hour+time.Microsecond, errandstore.PruneResult{Succeeded: 1}, "o-s")
	e.get("m-s")
	step(48*time.Hour+time.Microsecond, errandstore.PruneResult{Dead: 2}, "h-d", "o-d")
	e.get("m-d")
	step(720*time.Hour, errandstore.PruneResult{})
	step(720*time.Hour+time.Microsecond, errandstore.PruneResult{Succeeded: 1, Dead: 1}, "m-s", "m-d")
	var details []map[string]any
	for _, rec := range e.auditList(&errandstore.AuditListParams{Action: errandtype.AuditPrune}) {
		var d map[string]any
		if err := json.Unmarshal(rec.Details, &d); err != nil {
			t.Fatal(err)
		}
		details = append(details, d)
	}
	want := map[string]any{"hourly": map[string]any{"succeeded_age": "1h0m0s", "dead_age": "0s"},
		"monthly": map[string]any{"succeeded_age": "720h0m0s", "dead_age": "720h0m0s"}}
	if len(details) != 4 || !reflect.DeepEqual(details[0]["kinds"], want) {
		t.Errorf("audit of prunes by kind: %v, want 4 records with kinds %v", details, want)
	}
}

// testPruneOnlyKinds checks that with no default age only the kinds given
// ages go.
func testPruneOnlyKinds(t *testing.T, h harness) {
	e := open(t, h)
	e.kindInState("h-s", "hourly", errandtype.StateSucceeded)
	e.kindInState("h-d", "hourly", errandtype.StateDead)
	o := e.jobInState("o-s", errandtype.StateSucceeded)
	e.clock.Advance(1000 * time.Hour)
	p := pruneParams(0, 0)
	p.Kinds = map[string]errandstore.KindRetention{"hourly": {SucceededAge: time.Hour}}
	if r := e.prune(p); r != (errandstore.PruneResult{Succeeded: 1}) {
		t.Errorf("prune of one kind: %+v, want its succeeded job", r)
	}
	e.notFound("h-s")
	e.get("h-d")
	e.unchanged("prune of another kind", o)
}

// testPruneKindBatches checks that a completed batch goes with its last
// job when a kind's own age, shorter than the defaults, prunes its jobs.
func testPruneKindBatches(t *testing.T, h harness) {
	e := open(t, h)
	e.finishedBatch("b", true, true, true)
	e.clock.Advance(time.Hour + time.Microsecond)
	p := pruneParams(720*time.Hour, 720*time.Hour)
	p.Kinds = map[string]errandstore.KindRetention{"email": {SucceededAge: time.Hour}, "import_done": {SucceededAge: time.Hour}}
	if r := e.prune(p); r != (errandstore.PruneResult{Succeeded: 3, Batches: 1}) {
		t.Errorf("prune of the batch's kinds: %+v, want its 3 jobs and the batch", r)
	}
	e.noBatch("b")
}

// testPruneBadParams checks that bad params are an *InputError and
// nothing is deleted.
func testPruneBadParams(t *testing.T, h harness) {
	e := open(t, h)
	s := e.jobInState("s", errandtype.StateSucceeded)
	e.clock.Advance(time.Hour)
	for _, p := range []*errandstore.JobPruneParams{
		{Limit: 10, Operator: "ana", Reason: "r"},
		{SucceededAge: -time.Minute, Limit: 10, Operator: "ana", Reason: "r"},
		{SucceededAge: time.Minute, DeadAge: -time.Minute, Limit: 10, Operator: "ana", Reason: "r"},
		{SucceededAge: time.Hour, DeadAge: time.Minute, Limit: 10, Operator: "ana", Reason: "r"},
		{SucceededAge: time.Minute, Limit: 0, Operator: "ana", Reason: "r"},
		{SucceededAge: time.Minute, Limit: errandstore.MaxPruneBatch + 1, Operator: "ana", Reason: "r"},
		{SucceededAge: time.Minute, Limit: 10, Reason: "r"},
		{Kinds: map[string]errandstore.KindRetention{"": {SucceededAge: time.Minute}}, Limit: 10, Operator: "ana", Reason: "r"},
		{Kinds: map[string]errandstore.KindRetention{"email": {}}, Limit: 10, Operator: "ana", Reason: "r"},
		{Kinds: map[string]errandstore.KindRetention{"email": {SucceededAge: -time.Minute}}, Limit: 10, Operator: "ana", Reason: "r"},
		{Kinds: map[string]errandstore.KindRetention{"email": {SucceededAge: time.Minute, DeadAge: -time.Minute}}, Limit: 10, Operator: "ana", Reason: "r"},
		{Kinds: map[string]errandstore.KindRetention{"email": {SucceededAge: time.Hour, DeadAge: time.Minute}}, Limit: 10, Operator: "ana", Reason: "r"},
		// Its dead jobs would go at the default, before its succeeded ones.
		{DeadAge: time.Hour, Kinds: map[string]errandstore.KindRetention{"email": {SucceededAge: 2 * time.Hour}}, Limit: 10, Operator: "ana", Reason: "r"},
		{SucceededAge: time.Hour, DeadAge: -time.Hour, Kinds: map[string]errandstore.KindRetention{"email": {SucceededAge: time.Minute}}, Limit: 10, Operator: "ana", Reason: "r"},
		{Kinds: manyKinds(errandstore.MaxPruneKinds + 1), Limit: 10, Operator: "ana", Reason: "r"},
	} {
		r, err := e.s.JobPrune(e.ctx, p)
		var ie *errandtype.InputError
		if !errors.As(err, &ie) {
			t.Errorf("JobPrune(%+v) = %+v, %v; want an *InputError", *p, r, err)
		}
	}
	e.unchanged("refused prunes", s)
}

func manyKinds(n int) map[string]errandstore.KindRetention {
	m := map[string]errandstore.KindRetention{}
	for i := range n {
		m[fmt.Sprintf("k%d", i)] = errandstore.KindRetention{SucceededAge: time.Hour}
	}
	return m
}

// finishedBatch inserts batch id with members that each succeed (ok) or
// die, completes it and, when callbackDone, runs its callback job.
func (e *env) finishedBatch(id string, callbackDone bool, ok ...bool) {
	e.t.Helper()
	e.insertBatch(batchParams(id, len(ok)))
	for i, good := range ok {
		j := e.claimIn(errand.DefaultQueue, fmt.Sprintf("%s-m%d", id, i))
		if good {
			e.recordOK(succeeded(j))
		} else {
			e.recordOK(dead(j))
		}
	}
	if done := e.completeBatches(id); len(done) != 1 {
		e.t.Fatalf("BatchComplete(%s) completed %d batches", id, len(done))
	}
	if callbackDone {
		e.recordOK(succeeded(e.claimIn("callbacks", errandstore.BatchCallbackJobID(id))))
	}
}

func (e *env) noBatch(id string) {
	e.t.Helper()
	if b, err := e.batches().BatchGet(e.ctx, &errandstore.BatchGetParams{ID: id}); !errors.Is(err, errandtype.ErrNotFound) {
		e.t.Fatalf("BatchGet(%s) = %+v, %v; want ErrNotFound", id, b, err)
	}
}

// testPruneBatchesAndWorkflows: a completed batch and a finished workflow
// go in the prune that deletes their last job, counted; a batch with a
// member or its callback job left, an open workflow (and its finished
// jobs) and a failed workflow (and its other jobs) whose dead step dead-job retention keeps
// stay, until their jobs go too.
func testPruneBatchesAndWorkflows(t *testing.T, h harness) {
	e := open(t, h)
	e.batches()
	e.workflows()
	e.finishedBatch("b-done", true, true, true)
	e.finishedBatch("b-dead", true, true, false)
	e.finishedBatch("b-callback", false, true)
	e.insertWorkflow(wfParams("w-done", wfStep("one")))
	e.finishStep("w-done", "one", "", true)
	e.wantAdvance("w-done", errandtype.WorkflowSucceeded)
	// Open: its job and itself stay, however old.
	e.insertWorkflow(wfParams("w-open", wfStep("p"), wfStep("q", "p")))
	e.finishStep("w-open", "p", "", true)
	e.insertWorkflow(wfParams("w-failed", wfUndoStep("r"), wfStep("s", "r")))
	e.finishStep("w-failed", "r", "", true)
	e.wantAdvance("w-failed", errandtype.WorkflowRunning, "w-failed.step.s")
	e.finishStep("w-failed", "s", "", false)
	e.wantAdvance("w-failed", errandtype.WorkflowCompensating, "w-failed.undo.r")
	e.finishUndo("w-failed", "r", true)
	e.wantAdvance("w-failed", errandtype.WorkflowFailed)

	e.clock.Advance(2 * time.Hour)
	p := pruneParams(time.Hour, 1000*time.Hour)
	dry := *p
	dry.DryRun = true
	if r := e.prune(&dry); r.Batches != 1 || r.Workflows != 1 {
		t.Errorf("dry run: %+v, want 1 batch (b-done) and 1 workflow (w-done)", r)
	}
	e.batch("b-done")
	e.workflow("w-done")
	r := e.prune(p)
	if want := (errandstore.PruneResult{Succeeded: 7, Batches: 1, Workflows: 1}); r != want {
		t.Errorf("prune: %+v, want %+v", r, want)
	}
	e.noBatch("b-done")
	e.noWorkflow("w-done")
	e.batch("b-dead")
	e.batch("b-callback")
	if w := e.workflow("w-open"); w.State != errandtype.WorkflowRunning {
		t.Errorf("w-open after the prune is %s", w.State)
	}
	e.get("w-open.step.p")
	e.workflow("w-failed")
	e.get("w-failed.step.s")
	e.get("w-failed.step.r") // kept while the failed step s may resume it
	e.get("w-failed.undo.r")
	if r := e.prune(p); r.Total() != 0 || r.Batches != 0 || r.Workflows != 0 {
		t.Errorf("second prune: %+v, want nothing", r)
	}

	// Past the dead age, the dead jobs go, and their batch with them; the
	// failed workflow's other jobs, and the workflow, in the next prune.
	e.clock.Advance(1000 * time.Hour)
	if r := e.prune(p); r != (errandstore.PruneResult{Dead: 2, Batches: 1}) {
		t.Errorf("prune past the dead age: %+v, want 2 dead and b-dead", r)
	}
	e.noBatch("b-dead")
	e.get("w-failed.step.r")
	if r := e.prune(p); r != (errandstore.PruneResult{Succeeded: 2, Workflows: 1}) {
		t.Errorf("prune after the failed step's job went: %+v, want w-failed's 2 other jobs and w-failed", r)
	}
	e.noWorkflow("w-failed")
	e.batch("b-callback")
	e.workflow("w-open")
	recs := e.auditList(&errandstore.AuditListParams{Action: errandtype.AuditPrune})
	var got, want map[string]any
	if len(recs) != 3 || json.Unmarshal(recs[0].Details, &got) != nil ||
		json.Unmarshal(errandstore.PruneDetails(p, errandstore.PruneResult{Succeeded: 2, Workflows: 1}), &want) != nil ||
		!reflect.DeepEqual(got, want) {
		t.Errorf("audit of prunes: %d records, newest %s", len(recs), recs[0].Details)
	}
}

// testPruneBatchesLimited: batches whose jobs are gone go at most Limit
// per call, oldest first, and only once they completed before the shorter
// age: one completed since its members finished waits.
func testPruneBatchesLimited(t *testing.T, h harness) {
	e := open(t, h)
	e.batches()
	ids := []string{"b1", "b2", "b3"}
	for _, id := range ids {
		p := batchParams(id, 1)
		p.Callback = nil
		e.insertBatch(p)
		e.recordOK(succeeded(e.claimIn(errand.DefaultQueue, id+"-m0")))
	}
	// Completed half an hour after their members finished.
	e.clock.Advance(30 * time.Minute)
	for _, id := range ids {
		e.completeBatches(id)
		e.clock.Advance(time.Second)
	}
	e.clock.Advance(31 * time.Minute)
	p := pruneParams(time.Hour, 0)
	p.Limit = 2
	if r := e.prune(p); r != (errandstore.PruneResult{Succeeded: 2}) {
		t.Errorf("first prune: %+v, want 2 members and no batch (completed within the hour)", r)
	}
	if r := e.prune(p); r != (errandstore.PruneResult{Succeeded: 1}) {
		t.Errorf("second prune: %+v, want the last member and no batch", r)
	}
	e.batch("b1")
	e.clock.Advance(time.Hour)
	if r := e.prune(p); r != (errandstore.PruneResult{Batches: 2}) {
		t.Errorf("prune an hour on: %+v, want 2 batches", r)
	}
	e.noBatch("b1")
	e.noBatch("b2")
	e.batch("b3")
	if r := e.prune(p); r != (errandstore.PruneResult{Batches: 1}) {
		t.Errorf("last prune: %+v, want b3", r)
	}
	e.noBatch("b3")
}

// testPruneKeepsOpenWorkflowJobs: a prune leaves the finished jobs of an
// open workflow, however old: the workflow still reads them to start a
// step, to know it succeeded and to compensate a step should a later one
// fail.
func testPruneKeepsOpenWorkflowJobs(t *testing.T, h harness) {
	e := open(t, h)
	e.workflows()
	e.insertWorkflow(wfParams("w1", wfUndoStep("a"), wfStep("b", "a")))
	e.finishStep("w1", "a", `{"charge":1}`, true)
	e.wantAdvance("w1", errandtype.WorkflowRunning, "w1.step.b")
	e.insertWorkflow(wfParams("w2", wfStep("c"), wfStep("d"), wfStep("e", "c", "d")))
	e.finishStep("w2", "c", "", true)
	e.wantAdvance("w2", errandtype.WorkflowRunning)

	e.clock.Advance(2 * time.Hour)
	p := pruneParams(time.Hour, time.Hour)
	dry := *p
	dry.DryRun = true
	if r := e.prune(&dry); r != (errandstore.PruneResult{DryRun: true}) {
		t.Errorf("dry run: %+v, want nothing (every finished job belongs to an open workflow)", r)
	}
	if r := e.prune(p); r != (errandstore.PruneResult{}) {
		t.Errorf("prune: %+v, want nothing (every finished job belongs to an open workflow)", r)
	}
	e.get("w1.step.a")
	e.get("w2.step.c")

	// A later step's failure still compensates the step that finished
	// long ago.
	e.finishStep("w1", "b", "", false)
	e.wantAdvance("w1", errandtype.WorkflowCompensating, "w1.undo.a")
	// A join on a step that finished long ago still starts, and the
	// workflow succeeds.
	e.finishStep("w2", "d", "", true)
	e.wantAdvance("w2", errandtype.WorkflowRunning, "w2.step.e")
	if _, wc := wfArgs(t, e.get("w2.step.e")); wc.Step != "e" {
		t.Fatalf("w2.step.e's workflow context: %+v", wc)
	}
	e.finishStep("w2", "e", "", true)
	e.wantAdvance("w2", errandtype.WorkflowSucceeded)

	// Once the workflow finished, its old jobs go.
	e.clock.Advance(2 * time.Hour)
	if got := e.prune(p); got.Succeeded != 3 || got.Workflows != 1 {
		t.Errorf("prune after w2 succeeded: %+v, want its 3 jobs and itself", got)
	}
}

// testPruneKeepsOpenBatchMembers: a prune leaves the finished members of
// an open batch, however old, so that the batch's final counts, and its
// callback's, count every member.
func testPruneKeepsOpenBatchMembers(t *testing.T, h harness) {
	e := open(t, h)
	e.batches()
	e.insertBatch(batchParams("b1", 2))
	e.recordOK(succeeded(e.claimIn(errand.DefaultQueue, "b1-m0")))
	if done := e.completeBatches("b1"); len(done) != 0 {
		t.Fatalf("BatchComplete with a member queued completed %d", len(done))
	}
	e.clock.Advance(2 * time.Hour)
	if r := e.prune(pruneParams(time.Hour, time.Hour)); r.Total() != 0 {
		t.Errorf("prune: %+v, want nothing (the member belongs to an open batch)", r)
	}
	e.get("b1-m0")
	e.recordOK(succeeded(e.claimIn(errand.DefaultQueue, "b1-m1")))
	done := e.completeBatches("b1")
	if len(done) != 1 {
		t.Fatalf("BatchComplete completed %d batches, want b1", len(done))
	}
	if f := done[0].Final; f.Succeeded != 2 || f.Total != 2 {
		t.Errorf("final counts %+v, want both members succeeded", *f)
	}
	e.clock.Advance(2 * time.Hour)
	if r := e.prune(pruneParams(time.Hour, time.Hour)); r.Succeeded != 2 {
		t.Errorf("prune after completion: %+v, want both members", r)
	}
}

// testPruneKeepsResumableWorkflowJobs: a failed workflow that compensated
// nothing can be resumed by replaying its failed step, so its other jobs
// stay while that step's job does, and go after it. A workflow resumed
// after a prune still succeeds.
func testPruneKeepsResumableWorkflowJobs(t *testing.T, h harness) {
	e := open(t, h)
	e.workflows()
	fail := func(id string) {
		t.Helper()
		e.insertWorkflow(wfParams(id, wfStep("a"), wfStep("b", "a"), wfStep("c", "b")))
		e.finishStep(id, "a", `{"charge":1}`, true)
		e.wantAdvance(id, errandtype.WorkflowRunning, id+".step.b")
		e.finishStep(id, "b", "", false)
		e.wantAdvance(id, errandtype.WorkflowFailed)
	}
	fail("w1")
	fail("w2")
	e.clock.Advance(2 * time.Hour)
	p := pruneParams(time.Hour, 10*time.Hour)
	dry := *p
	dry.DryRun = true
	if r := e.prune(&dry); r != (errandstore.PruneResult{DryRun: true}) {
		t.Errorf("dry run: %+v, want nothing (the failed workflows may be resumed)", r)
	}
	if r := e.prune(p); r != (errandstore.PruneResult{}) {
		t.Errorf("prune: %+v, want nothing (the failed workflows may be resumed)", r)
	}

	// Resumed, w1 runs from its failed step to success.
	if _, err := e.s.JobReplay(e.ctx, &errandstore.JobReplayParams{ID: "w1.step.b", Operator: "ops", Reason: "fixed"}); err != nil {
		t.Fatal(err)
	}
	e.wantAdvance("w1", errandtype.WorkflowRunning)
	e.finishStep("w1", "b", "", true)
	e.wantAdvance("w1", errandtype.WorkflowRunning, "w1.step.c")
	e.finishStep("w1", "c", "", true)
	e.wantAdvance("w1", errandtype.WorkflowSucceeded)

	// Past the dead age, w2's dead step goes, and the rest of w2 in the
	// next prune; w1, succeeded, goes whole.
	e.clock.Advance(10 * time.Hour)
	if r := e.prune(&dry); r != (errandstore.PruneResult{Succeeded: 3, Dead: 1, Workflows: 1, DryRun: true}) {
		t.Errorf("dry run past the dead age: %+v, want w1 whole and w2's dead step", r)
	}
	if r := e.prune(p); r != (errandstore.PruneResult{Succeeded: 3, Dead: 1, Workflows: 1}) {
		t.Errorf("prune past the dead age: %+v, want w1 whole and w2's dead step", r)
	}
	e.noWorkflow("w1")
	e.get("w2.step.a")
	if r := e.prune(p); r != (errandstore.PruneResult{Succeeded: 1, Workflows: 1}) {
		t.Errorf("next prune: %+v, want the rest of w2", r)
	}
	e.noWorkflow("w2")
}

// testPruneFailedStepGoesFirst: a prune that stops at its limit between a
// failed workflow's jobs never leaves the failed step's job without the
// others: a replay of that step would resume a workflow that waits for
// ever on jobs that are gone. The failed step's job goes first, and the
// replay then finds nothing to resume.
func testPruneFailedStepGoesFirst(t *testing.T, h harness) {
	e := open(t, h)
	e.workflows()
	e.insertWorkflow(wfParams("w", wfStep("a"), wfStep("b", "a"), wfStep("c", "b")))
	e.finishStep("w", "a", `{"charge":1}`, true)
	e.wantAdvance("w", errandtype.WorkflowRunning, "w.step.b")
	e.finishStep("w", "b", "", false)
	e.wantAdvance("w", errandtype.WorkflowFailed)
	e.clock.Advance(2 * time.Hour)
	p := pruneParams(time.Hour, time.Hour)
	p.Limit = 1
	if r := e.prune(p); r != (errandstore.PruneResult{Dead: 1}) {
		t.Errorf("first prune of one job: %+v, want the failed step's", r)
	}
	_, err := e.s.JobReplay(e.ctx, &errandstore.JobReplayParams{ID: "w.step.b", Operator: "ops", Reason: "fixed"})
	if !errors.Is(err, errandtype.ErrNotFound) {
		t.Fatalf("replay of the pruned failed step: %v, want ErrNotFound", err)
	}
	e.get("w.step.a")
	if r := e.prune(p); r != (errandstore.PruneResult{Succeeded: 1, Workflows: 1}) {
		t.Errorf("second prune: %+v, want the other job and the workflow", r)
	}
	e.noWorkflow("w")
}
