package errand_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
)

type fixArgs struct {
	To    string `json:"to"`
	Count int    `json:"count"`
}

func (fixArgs) Kind() string { return "fix" }

// deadJob enqueues a job of kind and makes it dead, as a permanent failure
// would.
func deadJob(t *testing.T, c interface {
	Enqueue(context.Context, errand.JobArgs, *errand.EnqueueOpts) (*errand.EnqueueResult, error)
}, st errandstore.Store, args errand.JobArgs) *errandtype.Job {
	t.Helper()
	ctx := context.Background()
	r, err := c.Enqueue(ctx, args, &errand.EnqueueOpts{Queue: "q-" + args.Kind()})
	if err != nil {
		t.Fatal(err)
	}
	js, err := st.JobClaimMany(ctx, &errandstore.JobClaimParams{Queues: []string{r.Job.Queue}, Limit: 1, Lease: errand.DefaultLease, Owner: "w"})
	if err != nil || len(js) != 1 {
		t.Fatalf("claim: %v %v", js, err)
	}
	rs, err := st.JobRecordOutcomes(ctx, &errandstore.JobRecordOutcomesParams{Outcomes: []*errandstore.JobOutcome{{
		JobLease: errandstore.JobLease{ID: js[0].ID, LeaseToken: *js[0].LeaseToken}, Kind: errandstore.OutcomeDead,
		Error: &errandtype.AttemptError{Attempt: 1, Class: errand.ClassPermanent, Message: "bad address"}}}})
	if err != nil || rs[0].Err != nil {
		t.Fatalf("record dead: %v %v", rs, err)
	}
	return js[0]
}

// TestReplayWithArgs checks the fix-and-replay case through the client:
// bad args are refused with nothing written, good ones replace the args
// and the audit keeps both.
func TestReplayWithArgs(t *testing.T) {
	ctx := context.Background()
	st := openStore(t, newTestClock())
	kinds := errand.NewKinds()
	errand.Handle(kinds, func(ctx context.Context, job *errandtype.Job, args fixArgs) error { return nil }, nil)
	c := newClient(t, st, &errand.Config{Kinds: kinds})
	job := deadJob(t, c, st, fixArgs{To: "nobody@", Count: 1})
	before := rowCounts(t, st.DB())

	for _, tt := range []struct {
		name, args, field string
	}{
		{"invalid JSON", `{"to":`, "args"},
		{"not the kind's type", `{"to": 7}`, "args"},
		{"NUL escape", `{"to": "a\u0000b"}`, "args"},
		{"too big", `{"to": "` + strings.Repeat("x", 1<<20) + `"}`, "args"},
	} {
		_, err := c.Replay(ctx, job.ID, &errand.ReplayOpts{Operator: "ana", Reason: "fix", Args: json.RawMessage(tt.args)})
		var ie *errandtype.InputError
		if !errors.As(err, &ie) || ie.Field != tt.field {
			t.Errorf("%s: %v, want an *InputError on %s", tt.name, err, tt.field)
		}
	}
	if got := rowCounts(t, st.DB()); got != before {
		t.Fatalf("refused replays wrote rows: %v, before %v", got, before)
	}
	if j := getJob(t, c, job.ID); j.State != errandtype.StateDead {
		t.Fatalf("state %s after refused replays", j.State)
	}

	j, err := c.Replay(ctx, job.ID, &errand.ReplayOpts{Operator: "ana", Reason: "address fixed", Args: json.RawMessage(`{"to": "ana@example.com", "count": 1}`)})
	if err != nil {
		t.Fatal(err)
	}
	if string(j.Args) != `{"to":"ana@example.com","count":1}` || j.State != errandtype.StateQueued {
		t.Fatalf("replayed job: args %s state %s", j.Args, j.State)
	}
	audit, err := c.Audit(ctx, &errand.AuditOpts{JobID: job.ID})
	if err != nil || len(audit) != 1 {
		t.Fatalf("audit: %+v, %v", audit, err)
	}
	var d struct{ OldArgs, NewArgs fixArgs }
	if err := json.Unmarshal(audit[0].Details, &struct {
		OldArgs *fixArgs `json:"old_args"`
		NewArgs *fixArgs `json:"new_args"`
	}{&d.OldArgs, &d.NewArgs}); err != nil {
		t.Fatal(err)
	}
	if audit[0].Action != errandtype.AuditReplayArgs || d.OldArgs.To != "nobody@" || d.NewArgs.To != "ana@example.com" {
		t.Errorf("audit record %+v, details %s", audit[0], audit[0].Details)
	}
}

// TestOperatorActionsNeedWhoAndWhy checks that a cancel or a replay
// without an operator or a reason is refused with nothing written.
func TestOperatorActionsNeedWhoAndWhy(t *testing.T) {
	ctx := context.Background()
	st := openStore(t, newTestClock())
	c := newClient(t, st, &errand.Config{})
	job := enqueue(t, c, "task", nil)
	before := rowCounts(t, st.DB())
	for _, o := range []errand.CancelOpts{{}, {Operator: "ana"}, {Reason: "r"}, {Operator: " ana", Reason: "r"}, {Operator: "ana", Reason: "bell\a"}} {
		_, err := c.Cancel(ctx, job.ID, &o)
		var ie *errandtype.InputError
		if !errors.As(err, &ie) {
			t.Errorf("cancel with %+v: %v, want an *InputError", o, err)
		}
	}
	if _, err := c.Cancel(ctx, job.ID, nil); err == nil {
		t.Error("cancel with nil opts succeeded")
	}
	if got := rowCounts(t, st.DB()); got != before {
		t.Fatalf("refused cancels wrote rows: %v, before %v", got, before)
	}
	if j := getJob(t, c, job.ID); j.State != errandtype.StateQueued {
		t.Fatalf("state %s after refused cancels", j.State)
	}
	for _, o := range []errand.AuditOpts{{Limit: -1}, {Limit: errandstore.MaxAuditLimit + 1}, {Action: "delete"}, {BeforeID: -1}} {
		if _, err := c.Audit(ctx, &o); err == nil {
			t.Errorf("Audit(%+v) succeeded, want an *InputError", o)
		}
	}
}

// TestReplayManyRateAndLimit checks a bulk replay through the client: the
// limit, the rate (batches wait on the clock, never a sleep in the store),
// one audit record per job, and refused options.
func TestReplayManyRateAndLimit(t *testing.T) {
	ctx := context.Background()
	clock := newTestClock()
	st := openStore(t, clock)
	c := newClient(t, st, &errand.Config{Clock: clock})
	for range 5 {
		deadJob(t, c, st, errand.RawArgs{KindName: "mail"})
	}
	before := rowCounts(t, st.DB())
	for _, o := range []errand.ReplayManyOpts{
		{Operator: "ana"},
		{Reason: "fixed"},
		{Operator: "ana", Reason: "fixed", Limit: errand.MaxReplayMany + 1},
		{Operator: "ana", Reason: "fixed", Limit: -1},
		{Operator: "ana", Reason: "fixed", Rate: -1},
		{Operator: "ana", Reason: "fixed", Rate: 1e-10}, // would overflow the pacing
		{Operator: "ana", Reason: "fixed", Filter: errandstore.DeadFilter{Queue: "no such queue"}},
	} {
		var ie *errandtype.InputError
		if _, err := c.ReplayMany(ctx, &o); !errors.As(err, &ie) {
			t.Errorf("ReplayMany(%+v): %v, want an *InputError", o, err)
		}
	}
	if got := rowCounts(t, st.DB()); got != before {
		t.Fatalf("refused bulk replays wrote rows: %v, before %v", got, before)
	}

	dry, err := c.ReplayMany(ctx, &errand.ReplayManyOpts{DryRun: true, Filter: errandstore.DeadFilter{Kind: "mail"}})
	if err != nil || len(dry.Jobs) != 5 || !dry.DryRun {
		t.Fatalf("dry run: %+v, %v", dry, err)
	}
	start := clock.Now()
	type result struct {
		r   *errand.ReplayManyResult
		err error
	}
	done := make(chan result, 1)
	go func() {
		r, err := c.ReplayMany(ctx, &errand.ReplayManyOpts{Operator: "ana", Reason: "provider back", Limit: 4, Rate: 2})
		done <- result{r, err}
	}()
	// Two jobs a second: a batch of two, then a wait until one second in.
	blockUntilAt(t, clock, start.Add(time.Second), 1)
	if n := countState(t, c, errandtype.StateQueued); n != 2 {
		t.Fatalf("after the first batch %d jobs queued, want 2", n)
	}
	clock.Advance(time.Second)
	var r result
	select {
	case r = <-done:
	case <-time.After(clockWait):
		t.Fatal("ReplayMany did not return")
	}
	if r.err != nil || len(r.r.Jobs) != 4 {
		t.Fatalf("ReplayMany: %+v, %v", r.r, r.err)
	}
	if n := countState(t, c, errandtype.StateDead); n != 1 {
		t.Errorf("%d jobs dead after replaying 4 of 5, want 1", n)
	}
	audit, err := c.Audit(ctx, &errand.AuditOpts{Action: errandtype.AuditBulkReplay})
	if err != nil || len(audit) != 4 {
		t.Fatalf("audit: %d records, %v; want 4", len(audit), err)
	}
	var d struct{ Bulk string }
	if err := json.Unmarshal(audit[0].Details, &d); err != nil || d.Bulk != r.r.Bulk {
		t.Errorf("audit details %s, want bulk %s", audit[0].Details, r.r.Bulk)
	}
}

func countState(t *testing.T, c interface {
	List(context.Context, *errand.ListOpts) ([]*errandtype.Job, error)
}, st errandtype.JobState) int {
	t.Helper()
	js, err := c.List(context.Background(), &errand.ListOpts{States: []errandtype.JobState{st}, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	return len(js)
}

// TestPruneInBatches checks that Prune keeps deleting batches until none
// is left, and refuses bad ages.
func TestPruneInBatches(t *testing.T) {
	ctx := context.Background()
	clock := newTestClock()
	st := openStore(t, clock)
	c := newClient(t, st, &errand.Config{Clock: clock, AllowUnknownKinds: true, Kinds: kindsOf([]testKind{{Name: "task",
		Handler: errand.HandlerFunc(func(context.Context, *errandtype.Job) error { return nil })}})})
	for range 5 {
		enqueue(t, c, "task", nil)
		workOne(t, c, &errand.WorkOneOpts{})
	}
	queued := enqueue(t, c, "later", &errand.EnqueueOpts{Queue: "other"})
	clock.Advance(48 * time.Hour)
	for _, o := range []errand.PruneOpts{{}, {SucceededAge: -time.Hour}, {SucceededAge: time.Hour, DeadAge: time.Minute}, {SucceededAge: time.Hour, BatchSize: errandstore.MaxPruneBatch + 1}} {
		var ie *errandtype.InputError
		if _, err := c.Prune(ctx, &o); !errors.As(err, &ie) {
			t.Errorf("Prune(%+v): %v, want an *InputError", o, err)
		}
	}
	dry, err := c.Prune(ctx, &errand.PruneOpts{SucceededAge: 24 * time.Hour, DryRun: true})
	if err != nil || dry != (errandstore.PruneResult{Succeeded: 5, DryRun: true}) {
		t.Fatalf("dry run: %+v, %v", dry, err)
	}
	r, err := c.Prune(ctx, &errand.PruneOpts{SucceededAge: 24 * time.Hour, BatchSize: 2})
	if err != nil || r != (errandstore.PruneResult{Succeeded: 5}) {
		t.Fatalf("Prune: %+v, %v; want 5 succeeded", r, err)
	}
	if j := getJob(t, c, queued.ID); j.State != errandtype.StateQueued {
		t.Errorf("queued job: %s", j.State)
	}
	audit, err := c.Audit(ctx, &errand.AuditOpts{Action: errandtype.AuditPrune})
	if err != nil || len(audit) != 3 || audit[0].Operator != errand.RetentionOperator {
		t.Errorf("audit: %+v, %v; want 3 prune records by %s", audit, err, errand.RetentionOperator)
	}
}

// TestPruneGoesOnForBatches checks that Prune keeps going while a
// transaction deletes a full batch of errand batches, even with no job
// left to delete, and that a batch completed since its members finished
// waits for the age.
func TestPruneGoesOnForBatches(t *testing.T) {
	ctx := context.Background()
	clock := newTestClock()
	st := openStore(t, clock)
	c := newClient(t, st, &errand.Config{Clock: clock, AllowUnknownKinds: true})
	for i := range 5 {
		id := fmt.Sprintf("b%d", i)
		if _, err := st.BatchInsert(ctx, &errandstore.BatchInsertParams{ID: id, Jobs: []*errandstore.JobInsertParams{{ID: id + "-m",
			Queue: errand.DefaultQueue, Kind: "task", Args: json.RawMessage(`{}`), ArgsVersion: 1, MaxAttempts: 1}}}); err != nil {
			t.Fatal(err)
		}
	}
	js, err := st.JobClaimMany(ctx, &errandstore.JobClaimParams{Queues: []string{errand.DefaultQueue}, Limit: 5, Lease: time.Minute, Owner: "w"})
	if err != nil || len(js) != 5 {
		t.Fatalf("claim: %d jobs, %v", len(js), err)
	}
	var outs []*errandstore.JobOutcome
	for _, j := range js {
		outs = append(outs, &errandstore.JobOutcome{JobLease: errandstore.JobLease{ID: j.ID, LeaseToken: *j.LeaseToken}, Kind: errandstore.OutcomeSucceeded})
	}
	if _, err := st.JobRecordOutcomes(ctx, &errandstore.JobRecordOutcomesParams{Outcomes: outs}); err != nil {
		t.Fatal(err)
	}
	// The batches complete half an hour after their members finished.
	clock.Advance(30 * time.Minute)
	if bs, err := st.BatchComplete(ctx, &errandstore.BatchCompleteParams{}); err != nil || len(bs) != 5 {
		t.Fatalf("BatchComplete: %d, %v", len(bs), err)
	}
	clock.Advance(31 * time.Minute)
	if r, err := c.Prune(ctx, &errand.PruneOpts{SucceededAge: time.Hour}); err != nil || r != (errandstore.PruneResult{Succeeded: 5}) {
		t.Fatalf("Prune: %+v, %v; want the 5 members and no batch yet", r, err)
	}
	clock.Advance(time.Hour)
	dry, err := c.Prune(ctx, &errand.PruneOpts{SucceededAge: time.Hour, DryRun: true})
	if err != nil || dry != (errandstore.PruneResult{Batches: 5, DryRun: true}) {
		t.Fatalf("dry run: %+v, %v; want 5 batches", dry, err)
	}
	if r, err := c.Prune(ctx, &errand.PruneOpts{SucceededAge: time.Hour, BatchSize: 2}); err != nil || r != (errandstore.PruneResult{Batches: 5}) {
		t.Fatalf("Prune: %+v, %v; want the 5 batches", r, err)
	}
	if _, err := c.Batch(ctx, "b4"); !errors.Is(err, errandtype.ErrNotFound) {
		t.Errorf("Batch(b4) after the prune: %v, want ErrNotFound", err)
	}
	audit, err := c.Audit(ctx, &errand.AuditOpts{Action: errandtype.AuditPrune})
	if err != nil || len(audit) != 4 {
		t.Errorf("audit: %d prune records, %v; want 4 (one, then three of at most 2 batches)", len(audit), err)
	}
}

// TestLeaderAppliesRetention checks that a worker with a retention policy
// prunes when it leads, and again every interval.
func TestLeaderAppliesRetention(t *testing.T) {
	ctx := context.Background()
	clock := newTestClock()
	st := openStore(t, clock)
	c := newClient(t, st, &errand.Config{Clock: clock, Kinds: kindsOf([]testKind{{Name: "task",
		Handler: errand.HandlerFunc(func(context.Context, *errandtype.Job) error { return nil })}})})
	old := enqueue(t, c, "task", nil)
	workOne(t, c, &errand.WorkOneOpts{})
	clock.Advance(2 * time.Hour)
	recent := enqueue(t, c, "task", nil)
	workOne(t, c, &errand.WorkOneOpts{})
	waiting := enqueue(t, c, "task", &errand.EnqueueOpts{Queue: "elsewhere"})

	policy := &errand.RetentionPolicy{SucceededAge: time.Hour, DeadAge: 24 * time.Hour, Interval: 30 * time.Minute}
	if _, err := c.NewWorker(&errand.WorkerConfig{Retention: &errand.RetentionPolicy{}}); err == nil {
		t.Error("a retention policy without ages was accepted")
	}
	// A leadership lease of a day outlasts the hours the clock moves
	// below, so the worker leads throughout and only the retention ticker
	// matters.
	w, err := c.NewWorker(&errand.WorkerConfig{PollInterval: time.Hour, SweepInterval: time.Hour, HeartbeatInterval: time.Hour,
		LeaderTTL: 24 * time.Hour, Retention: policy})
	if err != nil {
		t.Fatal(err)
	}
	if policy.Interval != 30*time.Minute || policy.BatchSize != 0 {
		t.Errorf("NewWorker changed the caller's policy: %+v", policy)
	}
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer w.Stop(ctx)
	gone := func(id string) bool {
		_, err := c.Get(ctx, id)
		return errors.Is(err, errandtype.ErrNotFound)
	}
	workerWaitFor(t, clockWait, func() bool { return gone(old.ID) })
	if gone(recent.ID) || gone(waiting.ID) {
		t.Fatal("the leader pruned a job younger than the policy's age")
	}
	// The retention ticker starts once the duties on election are done.
	blockUntilAt(t, clock, clock.Now().Add(policy.Interval), 1)
	// More than an hour later the recent job is old enough; the next run,
	// due every 30 minutes, deletes it.
	for range 3 {
		clock.Advance(30 * time.Minute)
	}
	workerWaitFor(t, clockWait, func() bool { return gone(recent.ID) })
	if gone(waiting.ID) {
		t.Error("the leader pruned a waiting job")
	}
}

// greetV2 is version 2 of the greet_v args: version 1 was {"name": ...}.
type greetV2 struct {
	First string `json:"first"`
}

func (greetV2) Kind() string     { return "greet_v" }
func (greetV2) ArgsVersion() int { return 2 }
func (greetV2) UpgradeArgs(from int, raw json.RawMessage) (json.RawMessage, error) {
	var v1 struct {
		Name string `json:"name"`
	}
	if err := json.Unmarshal(raw, &v1); err != nil {
		return nil, err
	}
	return json.Marshal(greetV2{First: v1.Name})
}

// TestReplayWithArgsRecordsTheirVersion: corrected args are checked as the
// handler's current version, so the job records that version with them and
// a worker hands them over as they are, not "upgraded" from the job's old
// version.
func TestReplayWithArgsRecordsTheirVersion(t *testing.T) {
	ctx := context.Background()
	st := openStore(t, newTestClock())
	kinds := errand.NewKinds()
	got := make(chan string, 1)
	errand.Handle(kinds, func(ctx context.Context, job *errandtype.Job, args greetV2) error {
		got <- args.First
		return nil
	}, nil)
	c := newClient(t, st, &errand.Config{Kinds: kinds})
	job := deadJob(t, c, st, errand.RawArgs{KindName: "greet_v", JSON: json.RawMessage(`{"name":"Anna"}`), Version: 1})
	j, err := c.Replay(ctx, job.ID, &errand.ReplayOpts{Operator: "ana", Reason: "name fixed", Args: json.RawMessage(`{"first":"Ana"}`)})
	if err != nil {
		t.Fatal(err)
	}
	if j.ArgsVersion != 2 {
		t.Fatalf("replayed with version-2 args: args_version %d, want 2", j.ArgsVersion)
	}
	r, err := c.WorkOne(ctx, &errand.WorkOneOpts{Queues: []string{job.Queue}})
	if err != nil {
		t.Fatal(err)
	}
	if r.Result != errand.ResultSucceeded {
		t.Fatalf("work: %+v", r)
	}
	if first := <-got; first != "Ana" {
		t.Fatalf("handler got first=%q, want the corrected %q", first, "Ana")
	}
	// A replay without new args keeps the version the job has.
	dead := deadJob(t, c, st, errand.RawArgs{KindName: "greet_v", JSON: json.RawMessage(`{"name":"Bo"}`), Version: 1})
	if j, err := c.Replay(ctx, dead.ID, &errand.ReplayOpts{Operator: "ana", Reason: "retry"}); err != nil || j.ArgsVersion != 1 {
		t.Fatalf("plain replay: %+v, %v; want args_version 1 kept", j, err)
	}
}

// TestLeaderAppliesRetentionByKind checks that a policy of a kind's own
// age alone prunes that kind's jobs and no other's.
func TestLeaderAppliesRetentionByKind(t *testing.T) {
	ctx := context.Background()
	clock := newTestClock()
	st := openStore(t, clock)
	ok := errand.HandlerFunc(func(context.Context, *errandtype.Job) error { return nil })
	c := newClient(t, st, &errand.Config{Clock: clock, Kinds: kindsOf([]testKind{{Name: "task", Handler: ok}, {Name: "report", Handler: ok}})})
	task := enqueue(t, c, "task", nil)
	workOne(t, c, &errand.WorkOneOpts{})
	report := enqueue(t, c, "report", nil)
	workOne(t, c, &errand.WorkOneOpts{})
	clock.Advance(2 * time.Hour)

	policy := &errand.RetentionPolicy{Kinds: map[string]errand.KindRetention{"task": {SucceededAge: time.Hour}}}
	w, err := c.NewWorker(&errand.WorkerConfig{PollInterval: time.Hour, SweepInterval: time.Hour, HeartbeatInterval: time.Hour,
		LeaderTTL: 24 * time.Hour, Retention: policy})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer w.Stop(ctx)
	gone := func(id string) bool {
		_, err := c.Get(ctx, id)
		return errors.Is(err, errandtype.ErrNotFound)
	}
	workerWaitFor(t, clockWait, func() bool { return gone(task.ID) })
	if gone(report.ID) {
		t.Error("the leader pruned a job of a kind its policy gives no age")
	}
}
