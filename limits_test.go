package errand_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
	"github.com/errandhq/errand/internal/pgschemas"
	"github.com/errandhq/errand/postgres"
	"github.com/errandhq/errand/postgres/pgtest"
	"github.com/errandhq/errand/sqlite"
)

// bothStores runs f on a fresh SQLite store and, when the PostgreSQL tests
// are enabled, on a fresh PostgreSQL schema.
func bothStores(t *testing.T, f func(t *testing.T, st errandstore.TxStore[*sql.Tx])) {
	t.Run("sqlite", func(t *testing.T) { f(t, openStore(t, nil)) })
	t.Run("postgres", func(t *testing.T) {
		url := pgtest.URL(t)
		st, err := postgres.Open(t.Context(), url, &postgres.Options{Schema: pgschemas.Take(t, url), MaxConns: 4})
		if err != nil {
			t.Fatal(err)
		}
		v := st.SQL(nil)
		t.Cleanup(func() { v.Close() })
		f(t, v)
	})
}

// A handler's failure text is whatever its error says, NUL bytes and
// invalid UTF-8 included. It must reach the job's history on every store,
// cleaned, with its class: PostgreSQL refuses such text, and an outcome
// retried on that refusal would be lost when the lease ran out.
func TestHostileFailureTextIsRecorded(t *testing.T) {
	bothStores(t, func(t *testing.T, st errandstore.TxStore[*sql.Tx]) {
		for _, tt := range []struct {
			name string
			err  error
			want string
		}{
			{"nul", errand.WithClass("receipt_unavailable", errors.New("bad\x00byte")), "bad\uFFFDbyte"},
			{"invalid-utf8", errand.WithClass("receipt_unavailable", errors.New("\xff")), "\uFFFD"},
			{"zero-job-error", fmt.Errorf("wrapped: %w", &errand.JobError{}), "wrapped: "},
		} {
			t.Run(tt.name, func(t *testing.T) {
				c := newClient(t, st, &errand.Config{Kinds: kindsOf([]testKind{{
					Name:    "k",
					Handler: errand.HandlerFunc(func(context.Context, *errandtype.Job) error { return tt.err }),
				}})})
				job := enqueue(t, c, "k", &errand.EnqueueOpts{Queue: "q-" + tt.name})
				r, err := c.WorkOne(t.Context(), &errand.WorkOneOpts{Queues: []string{"q-" + tt.name}, Lease: 5 * time.Second})
				if err != nil {
					t.Fatalf("work one: %v", err)
				}
				if r.Result != errand.ResultRetrying || r.Error != tt.want {
					t.Fatalf("result %+v, want retrying with message %q", r, tt.want)
				}
				j := getJob(t, c, job.ID)
				wantClass := "receipt_unavailable"
				if tt.name == "zero-job-error" {
					wantClass = errand.ClassError
				}
				if j.State != errandtype.StateRetrying || len(j.Errors) != 1 || j.Errors[0].Message != tt.want || j.Errors[0].Class != wantClass {
					t.Fatalf("job %s history %+v, want retrying with one %s entry %q", j.State, j.Errors, wantClass, tt.want)
				}
			})
		}
	})
}

// A store's refusal of a value is a bug in the value, not an outage: the
// outcome is recorded at once in plain ASCII, never retried until the lease
// runs out and lost.
func TestRefusedOutcomeTextIsRecordedInASCII(t *testing.T) {
	st := &refusingStore{TxStore: openStore(t, nil)}
	c := newClient(t, st, &errand.Config{Kinds: kindsOf([]testKind{{
		Name:    "k",
		Handler: errand.HandlerFunc(func(context.Context, *errandtype.Job) error { return errors.New("café ☕") }),
	}})})
	job := enqueue(t, c, "k", nil)
	start := time.Now()
	r := workOne(t, c, &errand.WorkOneOpts{Lease: time.Minute})
	if took := time.Since(start); took > 30*time.Second {
		t.Fatalf("recording took %v: the refusal was retried as an outage", took)
	}
	want := `"caf\u00e9 \u2615"`
	if r.Result != errand.ResultRetrying || r.Error != want {
		t.Fatalf("result %+v, want retrying with message %s", r, want)
	}
	if j := getJob(t, c, job.ID); j.State != errandtype.StateRetrying || len(j.Errors) != 1 || j.Errors[0].Message != want {
		t.Fatalf("job %s history %+v, want one entry %s", j.State, j.Errors, want)
	}
	if n := st.refused.Load(); n != 1 {
		t.Fatalf("the store refused %d writes, want 1", n)
	}
}

// refusingStore refuses outcome text that is not ASCII, as a store with a
// narrower encoding might.
type refusingStore struct {
	errandstore.TxStore[*sql.Tx]
	refused atomic.Int64
}

func (s *refusingStore) JobRecordOutcomes(ctx context.Context, p *errandstore.JobRecordOutcomesParams) ([]errandstore.OutcomeResult, error) {
	for _, o := range p.Outcomes {
		if o.Error != nil && strings.ContainsFunc(o.Error.Message, func(r rune) bool { return r > 127 }) {
			s.refused.Add(1)
			return nil, fmt.Errorf("record outcomes: %w", &errandtype.InputError{Field: "value", Message: "not ASCII"})
		}
	}
	return s.TxStore.JobRecordOutcomes(ctx, p)
}

// The client refuses what a store could not keep the same way as the
// others, naming the field and its range, before writing anything.
func TestEnqueueLimits(t *testing.T) {
	bothStores(t, func(t *testing.T, st errandstore.TxStore[*sql.Tx]) {
		c := newClient(t, st, &errand.Config{})
		ctx := t.Context()
		for _, tt := range []struct {
			name    string
			opts    errand.EnqueueOpts
			field   string
			version int
		}{
			{"max-attempts-past-32-bits", errand.EnqueueOpts{MaxAttempts: 1<<32 + 1}, "max_attempts", 0},
			{"priority-past-32-bits", errand.EnqueueOpts{Priority: math.MaxInt32 + 1}, "priority", 0},
			{"args-version-past-32-bits", errand.EnqueueOpts{}, "args_version", 1<<32 + 5},
			{"run-at-year-300000", errand.EnqueueOpts{RunAt: time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC).AddDate(290000, 0, 0)}, "run_at", 0},
			{"max-age-under-a-microsecond", errand.EnqueueOpts{MaxAge: time.Nanosecond}, "max_age", 0},
			{"id-invalid-utf8", errand.EnqueueOpts{ID: "pay\xff"}, "id", 0},
			{"id-escape", errand.EnqueueOpts{ID: "\x1b]0;pwned\x07"}, "id", 0},
			{"ordering-key-control", errand.EnqueueOpts{OrderingKey: "c\x00"}, "ordering_key", 0},
			{"tag-invalid-utf8", errand.EnqueueOpts{Tags: []string{"\xc3"}}, "tag", 0},
		} {
			t.Run(tt.name, func(t *testing.T) {
				_, err := c.Enqueue(ctx, errand.RawArgs{KindName: "task", Version: tt.version}, &tt.opts)
				var ie *errandtype.InputError
				if !errors.As(err, &ie) || ie.Field != tt.field {
					t.Fatalf("Enqueue = %v; want an *InputError naming %s", err, tt.field)
				}
			})
		}
		if js, err := c.List(ctx, nil); err != nil || len(js) != 0 {
			t.Fatalf("List = %d jobs, %v; want none written", len(js), err)
		}
		// A lookup by an id no job can have finds nothing, on every store.
		for _, id := range []string{"pay\xff", "pay\x00"} {
			if _, err := c.Get(ctx, id); !errors.Is(err, errandtype.ErrNotFound) {
				t.Errorf("Get(%q) = %v; want ErrNotFound", id, err)
			}
			if _, err := c.Cancel(ctx, id, &errand.CancelOpts{Operator: "ana", Reason: "not needed"}); !errors.Is(err, errandtype.ErrNotFound) {
				t.Errorf("Cancel(%q) = %v; want ErrNotFound", id, err)
			}
		}
	})
}

// A lease shorter than MinLease is refused with an error naming the
// minimum, by WorkOne and by NewWorker.
func TestMinimumLease(t *testing.T) {
	st := openStore(t, nil)
	c := handlerClient(t, st, func(context.Context, *errandtype.Job) error { return nil })
	job := enqueue(t, c, "task", nil)
	for _, lease := range []time.Duration{time.Millisecond, errand.MinLease - time.Microsecond} {
		_, err := c.WorkOne(t.Context(), &errand.WorkOneOpts{Lease: lease})
		if !errors.Is(err, errandtype.ErrInvalid) || !strings.Contains(err.Error(), errand.MinLease.String()) {
			t.Errorf("WorkOne with lease %v = %v; want an input error naming %v", lease, err, errand.MinLease)
		}
		if _, err := c.NewWorker(&errand.WorkerConfig{Lease: lease}); !errors.Is(err, errandtype.ErrInvalid) {
			t.Errorf("NewWorker with lease %v = %v; want an input error", lease, err)
		}
	}
	if j := getJob(t, c, job.ID); j.State != errandtype.StateQueued || j.Attempt != 0 {
		t.Fatalf("job %s on attempt %d, want queued and untouched", j.State, j.Attempt)
	}
}

// A claim's own timeout is not the lease: a claim that takes longer than
// the lease (a busy database) still returns its jobs, and the fenced writes
// that follow decide what becomes of them.
func TestSlowClaimIsNotCutAtTheLease(t *testing.T) {
	t.Parallel()
	st := &slowClaimStore{TxStore: openStore(t, nil), delay: errand.MinLease + 500*time.Millisecond}
	c := handlerClient(t, st, func(context.Context, *errandtype.Job) error { return nil })
	job := enqueue(t, c, "task", nil)
	// The worker times the lease from when it sent the claim, so it may
	// find the lease over before it records the outcome: what matters here
	// is that the claim itself went through.
	r, err := c.WorkOne(t.Context(), &errand.WorkOneOpts{Lease: errand.MinLease})
	if err != nil && strings.Contains(err.Error(), "claim job") {
		t.Fatalf("work one with a claim slower than the lease: %v", err)
	}
	if r != nil && r.Result == errand.ResultIdle {
		t.Fatalf("result %+v, want the job claimed", r)
	}
	if j := getJob(t, c, job.ID); j.Attempt != 1 {
		t.Fatalf("job %s on attempt %d, want claimed once", j.State, j.Attempt)
	}
}

// slowClaimStore delays every claim by delay, then claims unless the
// claim's context ended meanwhile.
type slowClaimStore struct {
	errandstore.TxStore[*sql.Tx]
	delay time.Duration
}

func (s *slowClaimStore) JobClaimMany(ctx context.Context, p *errandstore.JobClaimParams) ([]*errandtype.Job, error) {
	select {
	case <-time.After(s.delay):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return s.TxStore.JobClaimMany(ctx, p)
}

// A client that declares kinds refuses to enqueue one it does not know, so
// a typo fails at once instead of waiting forever; a producer that declares
// none, or one that opts out, accepts any kind.
func TestEnqueueOfAnUnknownKind(t *testing.T) {
	st := openStore(t, nil)
	ctx := t.Context()
	c := newClient(t, st, &errand.Config{Kinds: kindsOf([]testKind{{Name: "export_order"}})})
	_, err := c.Enqueue(ctx, errand.RawArgs{KindName: "export_ordr"}, nil)
	var ie *errandtype.InputError
	if !errors.As(err, &ie) || ie.Field != "kind" || !strings.Contains(err.Error(), "export_order") {
		t.Fatalf("Enqueue of a typo = %v; want an input error on kind listing the declared kinds", err)
	}
	if _, err := c.EnqueueMany(ctx, []errand.EnqueueParams{{Args: errand.RawArgs{KindName: "export_order"}}, {Args: errand.RawArgs{KindName: "export_ordr"}}}); !errors.As(err, &ie) {
		t.Fatalf("EnqueueMany with a typo = %v; want an input error", err)
	}
	if js, _ := c.List(ctx, nil); len(js) != 0 {
		t.Fatalf("%d jobs written, want none", len(js))
	}
	enqueue(t, c, "export_order", nil)
	enqueue(t, newClient(t, st, &errand.Config{}), "anything", nil)
	enqueue(t, newClient(t, st, &errand.Config{Kinds: kindsOf([]testKind{{Name: "export_order"}}), AllowUnknownKinds: true}), "other_program_kind", nil)
}

// Enqueue, rather than EnqueueTx, while this goroutine holds a transaction
// on the SQLite writer would wait for itself forever: it fails after the
// busy timeout with an error that says to use EnqueueTx, and the
// application's transaction is unharmed.
func TestEnqueueWhileHoldingTheWriterFailsFast(t *testing.T) {
	st, err := sqlite.Open(t.Context(), t.TempDir()+"/errand.db", &sqlite.Options{BusyTimeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	c := newClient(t, st, &errand.Config{})
	ctx := t.Context()
	tx, err := st.DB().BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := c.Enqueue(ctx, errand.RawArgs{KindName: "task"}, nil)
		done <- err
	}()
	select {
	case err = <-done:
	case <-time.After(time.Minute):
		t.Fatal("Enqueue while the writer is held did not return within a minute")
	}
	if !errors.Is(err, sqlite.ErrWriterBusy) || !strings.Contains(err.Error(), "EnqueueTx") {
		t.Fatalf("Enqueue = %v; want ErrWriterBusy advising EnqueueTx", err)
	}
	if _, err := c.EnqueueTx(ctx, tx, errand.RawArgs{KindName: "task"}, nil); err != nil {
		t.Fatalf("EnqueueTx in the held transaction: %v", err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if js, _ := c.List(ctx, nil); len(js) != 1 {
		t.Fatalf("%d jobs, want the one enqueued in the transaction", len(js))
	}
}

// TestNameRefusalsSayTheRule: a refused name's message gives the rule
// that names follow, a step name's its own.
func TestNameRefusalsSayTheRule(t *testing.T) {
	step := func(name string) error {
		return errand.CheckEnqueueWorkflow([]errand.WorkflowStep{{Name: name, Args: errand.RawArgs{KindName: "k", JSON: json.RawMessage(`{}`)}}},
			&errand.WorkflowOpts{ID: "w"})
	}
	for _, tt := range []struct {
		what string
		err  error
		want string
	}{
		{"a name with a space", errand.ValidateName("send receipt"), "use printable characters without spaces"},
		{"a name not UTF-8", errand.ValidateName("k\xff"), "use printable characters without spaces"},
		{"a step name with a space", step("book flight"), "use printable characters without spaces or '.'"},
		{"a step name with a dot", step("book.flight"), "use printable characters without spaces or '.'"},
	} {
		if tt.err == nil || !strings.Contains(tt.err.Error(), tt.want) {
			t.Errorf("%s: %v, want it to say %q", tt.what, tt.err, tt.want)
		}
	}
	if err := errand.ValidateName("envoyer.reçu:v2"); err != nil {
		t.Errorf("a printable name without spaces: %v", err)
	}
}

// TestWaitsAreBounded: a wait given as a duration past MaxDelay, an
// enqueue's delay (a callback's, a step's) or a failure's retry-after, is
// refused naming the field; errand.RetryAfter, which cannot refuse, keeps
// the policy's backoff and says why in the failure.
func TestWaitsAreBounded(t *testing.T) {
	over := errandstore.MaxDelay + time.Hour
	if err := errand.CheckEnqueue(errand.RawArgs{KindName: "k"}, &errand.EnqueueOpts{Delay: errandstore.MaxDelay}); err != nil {
		t.Fatalf("a delay of MaxDelay: %v", err)
	}
	var ie *errandtype.InputError
	if err := errand.CheckEnqueue(errand.RawArgs{KindName: "k"}, &errand.EnqueueOpts{Delay: over}); !errors.As(err, &ie) || ie.Field != "delay" {
		t.Fatalf("a delay past MaxDelay: %v, want an *InputError of delay", err)
	}
	err := errand.CheckEnqueueBatch([]errand.EnqueueParams{{Args: errand.RawArgs{KindName: "k"}}},
		&errand.BatchOpts{Callback: errand.RawArgs{KindName: "done"}, CallbackOpts: &errand.EnqueueOpts{Delay: over}})
	if !errors.As(err, &ie) || ie.Field != "delay" {
		t.Fatalf("a callback's delay past MaxDelay: %v", err)
	}
	err = errand.CheckEnqueueWorkflow([]errand.WorkflowStep{{Name: "a", Args: errand.RawArgs{KindName: "k"}, Opts: &errand.EnqueueOpts{Delay: over}}}, nil)
	if !errors.As(err, &ie) || ie.Field != "delay" {
		t.Fatalf("a step's delay past MaxDelay: %v", err)
	}

	c := newClient(t, openStore(t, nil), &errand.Config{})
	_, err = c.Fail(t.Context(), "job-1", "token", &errand.FailOpts{RetryAfter: over})
	if !errors.As(err, &ie) || ie.Field != "retry_after" {
		t.Fatalf("Fail with a retry-after past MaxDelay: %v, want an *InputError of retry_after", err)
	}

	var je *errand.JobError
	if !errors.As(errand.RetryAfter(errandstore.MaxDelay, errors.New("503")), &je) || je.RetryDelay() != errandstore.MaxDelay {
		t.Fatalf("RetryAfter(MaxDelay) = %v", je)
	}
	refused := errand.RetryAfter(over, errors.New("503"))
	if !errors.As(refused, &je) || je.RetryDelay() != 0 || !strings.Contains(refused.Error(), "503") || !strings.Contains(refused.Error(), "retry_after") {
		t.Fatalf("RetryAfter past MaxDelay = %q, delay %s; want the policy's backoff and a message that says why", refused, je.RetryDelay())
	}
}
