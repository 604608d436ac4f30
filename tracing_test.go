package errand_test

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtest"
	"github.com/errandhq/errand/errandtype"
	"github.com/errandhq/errand/internal/pgschemas"
	"github.com/errandhq/errand/postgres"
	"github.com/errandhq/errand/postgres/pgtest"
)

// clockedStores runs f on a fresh SQLite store and, when the PostgreSQL
// tests are enabled, on a fresh PostgreSQL schema, each with a fake clock
// of its own that the test moves.
func clockedStores(t *testing.T, f func(t *testing.T, st errandstore.TxStore[*sql.Tx], clock *errandtest.Clock)) {
	t.Run("sqlite", func(t *testing.T) {
		clock := newTestClock()
		f(t, openStore(t, clock), clock)
	})
	t.Run("postgres", func(t *testing.T) {
		url := pgtest.URL(t)
		clock := newTestClock()
		st, err := postgres.Open(t.Context(), url, &postgres.Options{Schema: pgschemas.Take(t, url), MaxConns: 4, Clock: clock})
		if err != nil {
			t.Fatal(err)
		}
		v := st.SQL(nil)
		t.Cleanup(func() { v.Close() })
		f(t, v, clock)
	})
}

// newRecorder returns a tracer provider that keeps every span it ends.
func newRecorder(t *testing.T) (*sdktrace.TracerProvider, *tracetest.SpanRecorder) {
	sr := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return tp, sr
}

// spansNamed returns the ended spans called name, in the order they ended.
func spansNamed(sr *tracetest.SpanRecorder, name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range sr.Ended() {
		if s.Name() == name {
			out = append(out, s)
		}
	}
	return out
}

// attr returns the value of span's attribute key, or an invalid value.
func attr(s sdktrace.ReadOnlySpan, key string) attribute.Value {
	for _, kv := range s.Attributes() {
		if string(kv.Key) == key {
			return kv.Value
		}
	}
	return attribute.Value{}
}

// A job that fails once and then succeeds makes two run spans, one per
// attempt, each with its attempt, outcome and class, the failed one with
// an error status; each links to the claim that took its job, and is the
// span the handler's context carries.
func TestTracingRunSpanPerAttempt(t *testing.T) {
	clockedStores(t, func(t *testing.T, st errandstore.TxStore[*sql.Tx], clock *errandtest.Clock) {
		tp, sr := newRecorder(t)
		var handlerSpans []trace.SpanContext
		c := newClient(t, st, &errand.Config{Clock: clock, TracerProvider: tp, Kinds: kindsOf([]testKind{{
			Name: "flaky",
			Handler: errand.HandlerFunc(func(ctx context.Context, j *errandtype.Job) error {
				handlerSpans = append(handlerSpans, trace.SpanContextFromContext(ctx))
				if j.Attempt == 1 {
					return errand.WithClass("receipt_unavailable", errors.New("mail server down"))
				}
				return nil
			}),
		}})})
		job := enqueue(t, c, "flaky", nil)
		opts := &errand.WorkOneOpts{Lease: time.Minute}
		if r := workOne(t, c, opts); r.Result != errand.ResultRetrying {
			t.Fatalf("first attempt: %s, want retrying", r.Result)
		}
		clock.Advance(time.Hour) // past the backoff
		if r := workOne(t, c, opts); r.Result != errand.ResultSucceeded {
			t.Fatalf("second attempt: %s, want succeeded", r.Result)
		}

		runs := spansNamed(sr, "errand.run")
		if len(runs) != 2 {
			t.Fatalf("%d run spans, want 2", len(runs))
		}
		claims := spansNamed(sr, "errand.claim")
		if len(claims) != 2 {
			t.Fatalf("%d claim spans, want 2", len(claims))
		}
		for i, s := range runs {
			if s.SpanKind() != trace.SpanKindConsumer {
				t.Errorf("run %d: kind %v, want consumer", i, s.SpanKind())
			}
			if got := attr(s, "errand.job.id").AsString(); got != job.ID {
				t.Errorf("run %d: errand.job.id %q, want %q", i, got, job.ID)
			}
			if got := attr(s, "errand.job.kind").AsString(); got != "flaky" {
				t.Errorf("run %d: errand.job.kind %q", i, got)
			}
			if got := attr(s, "errand.queue").AsString(); got != errand.DefaultQueue {
				t.Errorf("run %d: errand.queue %q", i, got)
			}
			if got := attr(s, "errand.job.attempt").AsInt64(); got != int64(i+1) {
				t.Errorf("run %d: errand.job.attempt %d, want %d", i, got, i+1)
			}
			if !handlerSpans[i].Equal(s.SpanContext()) {
				t.Errorf("run %d: the handler's context carries %v, not the run span %v", i, handlerSpans[i].SpanID(), s.SpanContext().SpanID())
			}
			if ls := s.Links(); len(ls) != 1 || !ls[0].SpanContext.Equal(claims[i].SpanContext()) {
				t.Errorf("run %d: links %v, want the claim span %v", i, ls, claims[i].SpanContext().SpanID())
			}
			if got := attr(claims[i], "errand.claim.jobs").AsInt64(); got != 1 {
				t.Errorf("claim %d: errand.claim.jobs %d, want 1", i, got)
			}
		}
		failed, ok := runs[0], runs[1]
		if got := attr(failed, "errand.outcome").AsString(); got != "retrying" {
			t.Errorf("failed attempt: errand.outcome %q, want retrying", got)
		}
		if got := attr(failed, "errand.error.class").AsString(); got != "receipt_unavailable" {
			t.Errorf("failed attempt: errand.error.class %q", got)
		}
		if st := failed.Status(); st.Code != codes.Error || !strings.Contains(st.Description, "receipt_unavailable") || !strings.Contains(st.Description, "mail server down") {
			t.Errorf("failed attempt: status %+v, want an error naming the class and the message", st)
		}
		if got := attr(ok, "errand.outcome").AsString(); got != "succeeded" {
			t.Errorf("second attempt: errand.outcome %q, want succeeded", got)
		}
		if st := ok.Status(); st.Code == codes.Error {
			t.Errorf("second attempt: status %+v, want no error", st)
		}
		if attr(ok, "errand.error.class").Type() != attribute.INVALID {
			t.Errorf("second attempt has an error class")
		}
	})
}

// A Worker's claims make claim spans counting the jobs they took, and
// every attempt links to the claim that took its job.
func TestTracingWorkerClaimSpans(t *testing.T) {
	clockedStores(t, func(t *testing.T, st errandstore.TxStore[*sql.Tx], clock *errandtest.Clock) {
		tp, sr := newRecorder(t)
		c := newClient(t, st, &errand.Config{Clock: clock, TracerProvider: tp, Kinds: kindsOf([]testKind{{
			Name:    "task",
			Handler: errand.HandlerFunc(func(context.Context, *errandtype.Job) error { return nil }),
		}})})
		const n = 5
		enqueueN(t, c, "task", n)
		events, cancel := c.Subscribe(errand.ResultSucceeded)
		defer cancel()
		w, err := c.NewWorker(&errand.WorkerConfig{Queues: map[string]int{errand.DefaultQueue: n}, Owner: "tracer-1"})
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		defer w.Stop(context.Background())
		for range n {
			select {
			case <-events:
			case <-time.After(clockWait):
				t.Fatal("jobs did not finish")
			}
		}
		claims := map[trace.SpanID]sdktrace.ReadOnlySpan{}
		claimed := int64(0)
		for _, s := range spansNamed(sr, "errand.claim") {
			claims[s.SpanContext().SpanID()] = s
			claimed += attr(s, "errand.claim.jobs").AsInt64()
			if got := attr(s, "errand.worker.id").AsString(); got != "tracer-1" {
				t.Errorf("claim span: errand.worker.id %q", got)
			}
		}
		if claimed != n {
			t.Errorf("claim spans count %d jobs, want %d", claimed, n)
		}
		runs := spansNamed(sr, "errand.run")
		if len(runs) != n {
			t.Fatalf("%d run spans, want %d", len(runs), n)
		}
		for _, s := range runs {
			if ls := s.Links(); len(ls) != 1 || claims[ls[0].SpanContext.SpanID()] == nil {
				t.Errorf("run span of %s links to %v, not to a claim span", attr(s, "errand.job.id").AsString(), ls)
			}
		}
	})
}

// Without a tracer provider, given or global, an attempt's handler gets
// no span.
func TestTracingOffWithoutProvider(t *testing.T) {
	clockedStores(t, func(t *testing.T, st errandstore.TxStore[*sql.Tx], clock *errandtest.Clock) {
		var sc trace.SpanContext
		c := newClient(t, st, &errand.Config{Clock: clock, Kinds: kindsOf([]testKind{{
			Name: "task",
			Handler: errand.HandlerFunc(func(ctx context.Context, j *errandtype.Job) error {
				sc = trace.SpanContextFromContext(ctx)
				return nil
			}),
		}})})
		enqueue(t, c, "task", nil)
		if r := workOne(t, c, &errand.WorkOneOpts{Lease: time.Minute}); r.Result != errand.ResultSucceeded {
			t.Fatalf("result %s", r.Result)
		}
		if sc.IsValid() {
			t.Errorf("the handler's context carries a span (%v) with tracing off", sc.SpanID())
		}
	})
}
