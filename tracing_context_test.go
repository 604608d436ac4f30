package errand_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtest"
	"github.com/errandhq/errand/errandtype"
)

// storedSpanContext returns the trace context a job's metadata holds.
func storedSpanContext(t *testing.T, j *errandtype.Job) trace.SpanContext {
	t.Helper()
	var m map[string]string
	if err := json.Unmarshal(j.Metadata, &m); err != nil {
		t.Fatalf("job %s: metadata %s: %v", j.ID, j.Metadata, err)
	}
	ctx := propagation.TraceContext{}.Extract(context.Background(), propagation.MapCarrier(m))
	return trace.SpanContextFromContext(ctx)
}

// A job enqueued inside a span stores the enqueue span's context, itself
// the caller's child, and every attempt of the job, the failed one and
// the one that succeeds, is a child of it in the caller's trace.
func TestTracingAttemptsJoinTheEnqueuingTrace(t *testing.T) {
	clockedStores(t, func(t *testing.T, st errandstore.TxStore[*sql.Tx], clock *errandtest.Clock) {
		tp, sr := newRecorder(t)
		c := newClient(t, st, &errand.Config{Clock: clock, TracerProvider: tp, Kinds: kindsOf([]testKind{{
			Name: "flaky",
			Handler: errand.HandlerFunc(func(ctx context.Context, j *errandtype.Job) error {
				if j.Attempt == 1 {
					return errors.New("not yet")
				}
				return nil
			}),
		}})})
		ctx, request := tp.Tracer("app").Start(context.Background(), "POST /payments")
		r, err := c.Enqueue(ctx, errand.RawArgs{KindName: "flaky"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		request.End()
		parent := request.SpanContext()

		enqueues := spansNamed(sr, "errand.enqueue")
		if len(enqueues) != 1 {
			t.Fatalf("%d enqueue spans, want 1", len(enqueues))
		}
		enq := enqueues[0]
		if enq.Parent().SpanID() != parent.SpanID() || enq.SpanContext().TraceID() != parent.TraceID() {
			t.Errorf("the enqueue span is not the request's child")
		}
		if enq.SpanKind() != trace.SpanKindProducer || attr(enq, "errand.job.id").AsString() != r.Job.ID {
			t.Errorf("enqueue span: kind %v, errand.job.id %q", enq.SpanKind(), attr(enq, "errand.job.id").AsString())
		}
		stored := storedSpanContext(t, getJob(t, c, r.Job.ID))
		if !stored.Equal(enq.SpanContext().WithRemote(true)) {
			t.Errorf("the job stores %v, not the enqueue span %v", stored.SpanID(), enq.SpanContext().SpanID())
		}

		opts := &errand.WorkOneOpts{Lease: time.Minute}
		if res := workOne(t, c, opts); res.Result != errand.ResultRetrying {
			t.Fatalf("first attempt: %s", res.Result)
		}
		clock.Advance(time.Hour)
		if res := workOne(t, c, opts); res.Result != errand.ResultSucceeded {
			t.Fatalf("second attempt: %s", res.Result)
		}
		runs := spansNamed(sr, "errand.run")
		if len(runs) != 2 {
			t.Fatalf("%d run spans, want 2", len(runs))
		}
		for i, s := range runs {
			if s.SpanContext().TraceID() != parent.TraceID() {
				t.Errorf("attempt %d runs in trace %v, not the request's %v", i+1, s.SpanContext().TraceID(), parent.TraceID())
			}
			if s.Parent().SpanID() != enq.SpanContext().SpanID() || !s.Parent().IsRemote() {
				t.Errorf("attempt %d: parent %v, want the enqueue span %v (remote)", i+1, s.Parent().SpanID(), enq.SpanContext().SpanID())
			}
		}
		if runs[0].Status().Code.String() != "Error" || runs[1].Status().Code.String() == "Error" {
			t.Errorf("statuses %v then %v, want an error then none", runs[0].Status(), runs[1].Status())
		}
	})
}

// Every way to enqueue stores the trace context of its context: in the
// caller's transaction, several at once, a batch's members, a workflow's
// first step and the later step its template enqueues; the caller's own
// metadata is kept, and a caller's traceparent wins.
func TestTracingEveryEnqueueStoresTheContext(t *testing.T) {
	clockedStores(t, func(t *testing.T, st errandstore.TxStore[*sql.Tx], clock *errandtest.Clock) {
		tp, _ := newRecorder(t)
		noop := errand.HandlerFunc(func(context.Context, *errandtype.Job) error { return nil })
		c := newClient(t, st, &errand.Config{Clock: clock, TracerProvider: tp, Kinds: kindsOf([]testKind{{Name: "a", Handler: noop}, {Name: "b", Handler: noop}})})
		ctx, request := tp.Tracer("app").Start(context.Background(), "request")
		defer request.End()
		traceID := request.SpanContext().TraceID()
		var ids []string

		err := c.InTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
			r, err := c.EnqueueTx(ctx, tx, errand.RawArgs{KindName: "a"}, &errand.EnqueueOpts{Metadata: json.RawMessage(`{"tenant":"t1"}`)})
			if err == nil {
				ids = append(ids, r.Job.ID)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		rs, err := c.EnqueueMany(ctx, []errand.EnqueueParams{{Args: errand.RawArgs{KindName: "a"}}, {Args: errand.RawArgs{KindName: "a"}}})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, rs[0].Job.ID, rs[1].Job.ID)
		b, err := c.EnqueueBatch(ctx, []errand.EnqueueParams{{Args: errand.RawArgs{KindName: "a"}}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, b.Jobs[0].ID)
		wf, err := c.EnqueueWorkflow(ctx, []errand.WorkflowStep{
			{Name: "first", Args: errand.RawArgs{KindName: "a"}, Opts: &errand.EnqueueOpts{Queue: "wf"}},
			{Name: "second", Args: errand.RawArgs{KindName: "b"}, Opts: &errand.EnqueueOpts{Queue: "wf"}, DependsOn: []string{"first"}},
		}, nil)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, wf.Jobs[0].ID)
		if r := workOne(t, c, &errand.WorkOneOpts{Queues: []string{"wf"}, Lease: time.Minute}); r.Result != errand.ResultSucceeded {
			t.Fatalf("first step: %s", r.Result)
		}
		second, err := c.List(context.Background(), &errand.ListOpts{Queue: "wf", Kind: "b"})
		if err != nil || len(second) != 1 {
			t.Fatalf("the second step: %v, %v", second, err)
		}
		ids = append(ids, second[0].ID)

		for _, id := range ids {
			j := getJob(t, c, id)
			if sc := storedSpanContext(t, j); sc.TraceID() != traceID {
				t.Errorf("job %s (%s) stores trace %v, not the request's %v: metadata %s", id, j.Kind, sc.TraceID(), traceID, j.Metadata)
			}
		}
		var m map[string]any
		if err := json.Unmarshal(getJob(t, c, ids[0]).Metadata, &m); err != nil || m["tenant"] != "t1" {
			t.Errorf("the caller's metadata is lost: %v (%v)", m, err)
		}

		const own = "00-11111111111111111111111111111111-2222222222222222-01"
		r, err := c.Enqueue(ctx, errand.RawArgs{KindName: "a"}, &errand.EnqueueOpts{Metadata: json.RawMessage(`{"traceparent":"` + own + `"}`)})
		if err != nil {
			t.Fatal(err)
		}
		if sc := storedSpanContext(t, getJob(t, c, r.Job.ID)); sc.TraceID().String() != "11111111111111111111111111111111" {
			t.Errorf("a caller's own traceparent was replaced: %v", sc.TraceID())
		}
	})
}

// Without a tracer provider and without a span in the enqueue's context,
// tracing writes no metadata and makes no span; a context that carries
// another provider's span still gets its trace context stored, so that the
// workers of a client that does trace continue it.
func TestTracingOffWritesNoMetadata(t *testing.T) {
	clockedStores(t, func(t *testing.T, st errandstore.TxStore[*sql.Tx], clock *errandtest.Clock) {
		c := newClient(t, st, &errand.Config{Clock: clock, Kinds: kindsOf([]testKind{{Name: "a"}})})
		plain := enqueue(t, c, "a", nil)
		if j := getJob(t, c, plain.ID); j.Metadata != nil {
			t.Errorf("tracing off wrote metadata %s", j.Metadata)
		}
		own := enqueue(t, c, "a", &errand.EnqueueOpts{Metadata: json.RawMessage(`{"tenant":"t1"}`)})
		if j := getJob(t, c, own.ID); string(j.Metadata) != `{"tenant": "t1"}` && string(j.Metadata) != `{"tenant":"t1"}` {
			t.Errorf("tracing off changed the caller's metadata to %s", j.Metadata)
		}

		other := sdktrace.NewTracerProvider()
		defer other.Shutdown(context.Background())
		ctx, span := other.Tracer("app").Start(context.Background(), "request")
		defer span.End()
		r, err := c.Enqueue(ctx, errand.RawArgs{KindName: "a"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if sc := storedSpanContext(t, getJob(t, c, r.Job.ID)); sc.SpanID() != span.SpanContext().SpanID() {
			t.Errorf("stored %v, not the caller's span %v", sc.SpanID(), span.SpanContext().SpanID())
		}
	})
}
