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

// TestCheckEnqueueAgreesWithEnqueue: CheckEnqueue, CheckEnqueueBatch and
// CheckEnqueueWorkflow, which need no store, refuse exactly what
// Enqueue, EnqueueBatch and EnqueueWorkflow of a client that declares no
// kinds refuse, with the same error, and accept what they accept.
func TestCheckEnqueueAgreesWithEnqueue(t *testing.T) {
	ctx := context.Background()
	st := openStore(t, nil)
	c := newClient(t, st, &errand.Config{})
	raw := func(kind, args string) errand.RawArgs {
		return errand.RawArgs{KindName: kind, JSON: json.RawMessage(args)}
	}
	count := func() int {
		js, err := c.List(ctx, &errand.ListOpts{Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		return len(js)
	}
	// unchanged fails the test if a refused call wrote jobs.
	unchanged := func(what string, ok bool, before int) {
		if after := count(); !ok && after != before {
			t.Errorf("%s: refused, but the jobs went from %d to %d", what, before, after)
		}
	}

	jobs := []struct {
		name string
		args errand.JobArgs
		opts *errand.EnqueueOpts
		ok   bool
	}{
		{"plain", raw("k", `{"n": 1}`), nil, true},
		{"every option", raw("k", `{}`), &errand.EnqueueOpts{Queue: "q", Priority: 3, MaxAttempts: 4, Delay: time.Minute,
			BackoffBase: time.Second, BackoffMax: time.Hour, MaxAge: time.Hour, OrderingKey: "o", FairnessKey: "tenant:1",
			Tags: []string{"a"}}, true},
		{"unique", raw("k", `{}`), &errand.EnqueueOpts{Unique: &errand.UniqueOpts{Key: "u", Scope: errandtype.UniqueUntilFinished}}, true},
		{"kind with a space", raw("bad kind", `{}`), nil, false},
		{"empty kind", raw("", `{}`), nil, false},
		{"queue with a space", raw("k", `{}`), &errand.EnqueueOpts{Queue: "a b"}, false},
		{"NUL in args", raw("k", `{"a": "\u0000"}`), nil, false},
		{"lone surrogate in args", raw("k", `{"a": "\ud800"}`), nil, false},
		{"args not JSON", raw("k", `{bad`), nil, false},
		{"id with a leading space", raw("k", `{}`), &errand.EnqueueOpts{ID: " x"}, false},
		{"unique key twice", raw("k", `{}`), &errand.EnqueueOpts{UniqueKey: "a", Unique: &errand.UniqueOpts{Key: "a"}}, false},
		{"priority out of range", raw("k", `{}`), &errand.EnqueueOpts{Priority: errandstore.MaxPriority + 1}, false},
		{"backoff max under base", raw("k", `{}`), &errand.EnqueueOpts{BackoffBase: time.Hour, BackoffMax: time.Second}, false},
		{"delay and run-at", raw("k", `{}`), &errand.EnqueueOpts{Delay: time.Second, RunAt: time.Now().Add(time.Hour)}, false},
		{"max age too short", raw("k", `{}`), &errand.EnqueueOpts{MaxAge: time.Microsecond}, false},
		{"ordering-on-dead not a choice", raw("k", `{}`), &errand.EnqueueOpts{OrderingKey: "o", OrderingOnDead: 9}, false},
	}
	for i, tt := range jobs {
		checked := errand.CheckEnqueue(tt.args, tt.opts)
		opts := tt.opts
		if opts != nil && tt.ok {
			o := *opts
			o.ID = fmt.Sprintf("check-%d", i) // the same job is enqueued again below, in a batch
			opts = &o
		}
		before := count()
		_, enqueued := c.Enqueue(ctx, tt.args, opts)
		agree(t, "CheckEnqueue "+tt.name, tt.ok, checked, enqueued)
		unchanged("Enqueue "+tt.name, tt.ok, before)
	}

	// Batches of the good jobs but the unique one, whose key the job
	// enqueued above holds (the store refuses that, not the check), and
	// of those with each bad one.
	var good []errand.EnqueueParams
	for _, tt := range jobs {
		if tt.ok && (tt.opts == nil || tt.opts.Unique == nil) {
			good = append(good, errand.EnqueueParams{Args: tt.args, Opts: tt.opts})
		}
	}
	batches := []struct {
		name   string
		params []errand.EnqueueParams
		opts   *errand.BatchOpts
		ok     bool
	}{
		{"good jobs", good, nil, true},
		{"good jobs and a callback", good, &errand.BatchOpts{Callback: raw("done", `{}`)}, true},
		{"no jobs", nil, nil, false},
		{"callback with an id", good, &errand.BatchOpts{Callback: raw("done", `{}`), CallbackOpts: &errand.EnqueueOpts{ID: "x"}}, false},
		{"callback with a bad kind", good, &errand.BatchOpts{Callback: raw("do ne", `{}`)}, false},
		{"batch id with a control character", good, &errand.BatchOpts{ID: "b\x07"}, false},
	}
	for _, tt := range jobs {
		if !tt.ok {
			batches = append(batches, struct {
				name   string
				params []errand.EnqueueParams
				opts   *errand.BatchOpts
				ok     bool
			}{"good jobs and " + tt.name, append(good[:len(good):len(good)], errand.EnqueueParams{Args: tt.args, Opts: tt.opts}), nil, false})
		}
	}
	for _, tt := range batches {
		checked := errand.CheckEnqueueBatch(tt.params, tt.opts)
		before := count()
		_, enqueued := c.EnqueueBatch(ctx, tt.params, tt.opts)
		agree(t, "CheckEnqueueBatch "+tt.name, tt.ok, checked, enqueued)
		unchanged("EnqueueBatch "+tt.name, tt.ok, before)
	}

	step := func(name string, deps ...string) errand.WorkflowStep {
		return errand.WorkflowStep{Name: name, Args: raw("k", `{}`), DependsOn: deps}
	}
	workflows := []struct {
		name  string
		steps []errand.WorkflowStep
		opts  *errand.WorkflowOpts
		ok    bool
	}{
		{"two steps", []errand.WorkflowStep{step("a"), step("b", "a")}, nil, true},
		{"no steps", nil, nil, false},
		{"step name with a space", []errand.WorkflowStep{step("a b")}, nil, false},
		{"a step depends on itself", []errand.WorkflowStep{step("a", "a")}, nil, false},
		{"a step depends on a later one", []errand.WorkflowStep{step("a", "b"), step("b")}, nil, false},
		{"the same name twice", []errand.WorkflowStep{step("a"), step("a")}, nil, false},
		{"a step with an id", []errand.WorkflowStep{{Name: "a", Args: raw("k", `{}`), Opts: &errand.EnqueueOpts{ID: "x"}}}, nil, false},
		{"a step whose args are not an object", []errand.WorkflowStep{{Name: "a", Args: raw("k", `[1]`)}}, nil, false},
		{"a step with NUL in its args", []errand.WorkflowStep{{Name: "a", Args: raw("k", `{"a": "\u0000"}`)}}, nil, false},
		{"options without a compensation", []errand.WorkflowStep{{Name: "a", Args: raw("k", `{}`), CompensateOpts: &errand.EnqueueOpts{}}}, nil, false},
		{"a bad compensation", []errand.WorkflowStep{{Name: "a", Args: raw("k", `{}`), Compensate: raw("un do", `{}`)}}, nil, false},
	}
	for _, tt := range workflows {
		checked := errand.CheckEnqueueWorkflow(tt.steps, tt.opts)
		before := count()
		_, enqueued := c.EnqueueWorkflow(ctx, tt.steps, tt.opts)
		agree(t, "CheckEnqueueWorkflow "+tt.name, tt.ok, checked, enqueued)
		unchanged("EnqueueWorkflow "+tt.name, tt.ok, before)
	}
}

// agree checks that a Check function and the call it stands for gave the
// same verdict, as wanted, and the same error.
func agree(t *testing.T, what string, ok bool, checked, done error) {
	t.Helper()
	switch {
	case ok && (checked != nil || done != nil):
		t.Errorf("%s: check %v, enqueue %v; want both to succeed", what, checked, done)
	case !ok && (checked == nil || done == nil):
		t.Errorf("%s: check %v, enqueue %v; want both to fail", what, checked, done)
	case !ok && checked.Error() != done.Error():
		t.Errorf("%s: check says %q, enqueue %q; want the same", what, checked, done)
	case !ok && !isInvalid(checked):
		t.Errorf("%s: check %v is not an input error", what, checked)
	}
}

func isInvalid(err error) bool {
	var ie *errandtype.InputError
	return errors.As(err, &ie)
}

// TestValidateName: the names a Client and Worker refuse.
func TestValidateName(t *testing.T) {
	for _, s := range []string{"send_receipt", "emails.high", "tenant:42", "a-b"} {
		if err := errand.ValidateName(s); err != nil {
			t.Errorf("ValidateName(%q) = %v", s, err)
		}
	}
	for _, s := range []string{"", "a b", "a\x00", "a\x07", "\xff", ".", "..", strings.Repeat("a", errandtype.MaxNameBytes+1)} {
		if err := errand.ValidateName(s); !isInvalid(err) {
			t.Errorf("ValidateName(%q) = %v, want an InputError", s, err)
		}
		if err := errand.CheckEnqueue(errand.RawArgs{KindName: s}, nil); !isInvalid(err) {
			t.Errorf("CheckEnqueue of kind %q = %v, want an InputError", s, err)
		}
	}
}

// TestCheckWorkerAgreesWithNewWorker: CheckWorker, which needs no store,
// refuses what NewWorker of a client on a real store refuses, with the
// same error, and accepts what it accepts.
func TestCheckWorkerAgreesWithNewWorker(t *testing.T) {
	st := openStore(t, nil)
	ks := errand.NewKinds()
	ks.HandleRaw("task", errand.HandlerFunc(func(context.Context, *errandtype.Job) error { return nil }), &errand.KindOpts{Dependency: "smtp"})
	cfg := &errand.Config{Kinds: ks}
	c := newClient(t, st, cfg)
	hourly, err := errand.NewSchedule("hourly", "@hourly", errand.RawArgs{KindName: "task"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		wc   *errand.WorkerConfig
		ok   bool
	}{
		{"defaults", nil, true},
		{"everything", &errand.WorkerConfig{Queues: map[string]int{"default": 4, "mail": 2}, Lease: time.Minute, PollInterval: time.Second,
			Schedules: []*errand.Schedule{hourly}, Retention: &errand.RetentionPolicy{SucceededAge: time.Hour},
			RateLimits:   []errand.RateLimit{{Queue: "mail", Limit: 10, Per: time.Second}, {Kind: "task", Limit: 5, Per: time.Second}},
			RetryBudgets: []errand.RetryBudget{{Kind: "task", Ratio: 0.1}}}, true},
		{"retention dead age under succeeded age", &errand.WorkerConfig{Retention: &errand.RetentionPolicy{SucceededAge: 720 * time.Hour, DeadAge: time.Hour}}, false},
		{"rate limit of a queue not worked", &errand.WorkerConfig{RateLimits: []errand.RateLimit{{Queue: "zzz", Limit: 1, Per: time.Second}}}, false},
		{"rate limit of a kind not handled", &errand.WorkerConfig{RateLimits: []errand.RateLimit{{Kind: "zzz", Limit: 1, Per: time.Second}}}, false},
		{"retry budget of a kind not handled", &errand.WorkerConfig{RetryBudgets: []errand.RetryBudget{{Kind: "zzz", Ratio: 0.1}}}, false},
		{"concurrency past the limit", &errand.WorkerConfig{Queues: map[string]int{"default": errand.MaxConcurrency + 1}}, false},
		{"lease past the limit", &errand.WorkerConfig{Lease: errand.MaxLease + 1}, false},
		{"a schedule twice", &errand.WorkerConfig{Schedules: []*errand.Schedule{hourly, hourly}}, false},
	} {
		checked := errand.CheckWorker(cfg, tt.wc)
		_, made := c.NewWorker(tt.wc)
		agree(t, tt.name, tt.ok, checked, made)
	}
}
