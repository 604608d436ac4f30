package errand_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/errandhq/errand"
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
}, st errand.Store, args errand.JobArgs) *errand.Job {
	t.Helper()
	ctx := context.Background()
	r, err := c.Enqueue(ctx, args, &errand.EnqueueOpts{Queue: "q-" + args.Kind()})
	if err != nil {
		t.Fatal(err)
	}
	js, err := st.JobClaimMany(ctx, &errand.JobClaimParams{Queues: []string{r.Job.Queue}, Limit: 1, Lease: errand.DefaultLease, Owner: "w"})
	if err != nil || len(js) != 1 {
		t.Fatalf("claim: %v %v", js, err)
	}
	rs, err := st.JobRecordOutcomes(ctx, &errand.JobRecordOutcomesParams{Outcomes: []*errand.JobOutcome{{
		JobLease: errand.JobLease{ID: js[0].ID, LeaseToken: *js[0].LeaseToken}, Kind: errand.OutcomeDead,
		Error: &errand.AttemptError{Attempt: 1, Class: errand.ClassPermanent, Message: "bad address"}}}})
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
	errand.Handle(kinds, func(ctx context.Context, job *errand.Job, args fixArgs) error { return nil }, nil)
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
		var ie *errand.InputError
		if !errors.As(err, &ie) || ie.Field != tt.field {
			t.Errorf("%s: %v, want an *InputError on %s", tt.name, err, tt.field)
		}
	}
	if got := rowCounts(t, st.DB()); got != before {
		t.Fatalf("refused replays wrote rows: %v, before %v", got, before)
	}
	if j := getJob(t, c, job.ID); j.State != errand.StateDead {
		t.Fatalf("state %s after refused replays", j.State)
	}

	j, err := c.Replay(ctx, job.ID, &errand.ReplayOpts{Operator: "ana", Reason: "address fixed", Args: json.RawMessage(`{"to": "ana@example.com", "count": 1}`)})
	if err != nil {
		t.Fatal(err)
	}
	if string(j.Args) != `{"to":"ana@example.com","count":1}` || j.State != errand.StateQueued {
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
	if audit[0].Action != errand.AuditReplayArgs || d.OldArgs.To != "nobody@" || d.NewArgs.To != "ana@example.com" {
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
		var ie *errand.InputError
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
	if j := getJob(t, c, job.ID); j.State != errand.StateQueued {
		t.Fatalf("state %s after refused cancels", j.State)
	}
	for _, o := range []errand.AuditOpts{{Limit: -1}, {Limit: errand.MaxAuditLimit + 1}, {Action: "delete"}, {BeforeID: -1}} {
		if _, err := c.Audit(ctx, &o); err == nil {
			t.Errorf("Audit(%+v) succeeded, want an *InputError", o)
		}
	}
}
