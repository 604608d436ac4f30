package errand

// OpenTelemetry traces (docs/tracing.md): an errand.enqueue span around an
// enqueue, the W3C trace context stored in the job's metadata, an
// errand.claim span per claim that took jobs, and an errand.run span per
// attempt, a child of the stored context, so that every attempt joins the
// trace of the request that enqueued the job.
//
// Tracing is off until the application installs a tracer provider, in
// Config.TracerProvider or globally, and off costs a check per claim and
// per attempt: no span is started, since a no-op span still costs a
// context and a span value per call.

import (
	"bytes"
	"context"
	"encoding/json"
	"reflect"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/errandhq/errand/errandtype"
)

// TracerName is the instrumentation scope of errand's spans.
const TracerName = "github.com/errandhq/errand"

// The attributes of errand's spans.
const (
	attrJobID        = attribute.Key("errand.job.id")
	attrJobKind      = attribute.Key("errand.job.kind")
	attrQueue        = attribute.Key("errand.queue")
	attrAttempt      = attribute.Key("errand.job.attempt")
	attrOutcome      = attribute.Key("errand.outcome")
	attrErrorClass   = attribute.Key("errand.error.class")
	attrClaimJobs    = attribute.Key("errand.claim.jobs")
	attrEnqueueJobs  = attribute.Key("errand.enqueue.jobs")
	attrBatchID      = attribute.Key("errand.batch.id")
	attrWorkflowID   = attribute.Key("errand.workflow.id")
	attrWorkerID     = attribute.Key("errand.worker.id")
	eventHandlerDone = "errand.handler.returned"
)

// unsetGlobalProvider is the global tracer provider as it is before the
// application sets one: otel.GetTracerProvider returns this value, the
// package's delegating no-op, until otel.SetTracerProvider, and the
// provider set after. Nil when a provider was set before this package's
// initialization, when no comparison with it can match.
var unsetGlobalProvider = func() trace.TracerProvider {
	tp := otel.GetTracerProvider()
	if t := reflect.TypeOf(tp); t.Kind() == reflect.Pointer && t.Elem().PkgPath() == "go.opentelemetry.io/otel/internal/global" {
		return tp
	}
	return nil
}()

// tracing is a client's tracer, resolved once in NewClient.
type tracing struct {
	tracer trace.Tracer // nil: off for good (a no-op provider was given)
	// global: tracer is the global provider's, on once the application
	// has set one, even after NewClient.
	global bool
}

func newTracing(tp trace.TracerProvider) tracing {
	if tp == nil {
		return tracing{tracer: otel.GetTracerProvider().Tracer(TracerName), global: true}
	}
	if _, ok := tp.(noop.TracerProvider); ok {
		return tracing{}
	}
	return tracing{tracer: tp.Tracer(TracerName)}
}

// on reports whether spans are to be started. An atomic load and a
// comparison, no allocation: it is asked per claim and per attempt.
func (t *tracing) on() bool {
	return t.tracer != nil && (!t.global || otel.GetTracerProvider() != unsetGlobalProvider)
}

// now is the start of a span that is started only once its end is known
// (see claimSpan): the wall clock, spans being read beside other
// services' spans, not the engine's clock. Zero when tracing is off.
func (t *tracing) now() time.Time {
	if !t.on() {
		return time.Time{}
	}
	return time.Now()
}

// startEnqueue starts the errand.enqueue span of an enqueue of n jobs, when
// tracing is on. The jobs then carry its context (see withTraceContext);
// with tracing off they carry ctx's, if any.
func (c *engine) startEnqueue(ctx context.Context, n int) (context.Context, trace.Span) {
	if !c.tracing.on() {
		return ctx, nil
	}
	return c.tracing.tracer.Start(ctx, "errand.enqueue", trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithAttributes(attrEnqueueJobs.Int(n)))
}

// endEnqueue ends an enqueue's span, naming job when it enqueued one, and
// with an error status when it failed. A nil span is tracing off.
func endEnqueue(span trace.Span, job *errandtype.Job, err error) {
	if span == nil {
		return
	}
	if job != nil {
		span.SetAttributes(attrJobID.String(job.ID), attrJobKind.String(job.Kind), attrQueue.String(job.Queue))
	}
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// onlyJob returns the job of an enqueue that returned one, else nil.
func onlyJob(rs []EnqueueResult) *errandtype.Job {
	if len(rs) != 1 {
		return nil
	}
	return rs[0].Job
}

// claimSpan records the errand.claim span of a claim of queue sent at
// start (see tracing.now) that returned n jobs or err, and returns its
// context for the attempts to link to, nil when it made none. A claim that
// found nothing makes no span: an idle queue claims every poll, and such
// spans would bury the ones that matter.
func (c *engine) claimSpan(start time.Time, queue, owner string, n int, err error) *trace.SpanContext {
	if start.IsZero() || (n == 0 && err == nil) {
		return nil
	}
	_, span := c.tracing.tracer.Start(context.Background(), "errand.claim", trace.WithTimestamp(start),
		trace.WithAttributes(attrQueue.String(queue), attrClaimJobs.Int(n), attrWorkerID.String(owner)))
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
	}
	sc := span.SpanContext()
	span.End()
	return &sc
}

// startRun starts the errand.run span of an attempt of job, when tracing
// is on: a child of the trace context stored with the job, or else of
// ctx's span, linked to the span of the claim that took it, if any. The
// handler's context carries it, so that the handler's own spans nest under
// it.
func (c *engine) startRun(ctx context.Context, job *errandtype.Job, claim *trace.SpanContext) (context.Context, *runSpan) {
	if !c.tracing.on() {
		return ctx, nil
	}
	if sc := jobSpanContext(job); sc.IsValid() {
		ctx = trace.ContextWithRemoteSpanContext(ctx, sc)
	}
	opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindConsumer), trace.WithAttributes(
		attrJobID.String(job.ID), attrJobKind.String(job.Kind), attrQueue.String(job.Queue), attrAttempt.Int(job.Attempt))}
	if claim != nil && claim.IsValid() {
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: *claim}))
	}
	ctx, span := c.tracing.tracer.Start(ctx, "errand.run", opts...)
	return ctx, &runSpan{span}
}

// runSpan is an attempt's errand.run span.
type runSpan struct{ span trace.Span }

// handlerReturned marks the handler's return on a's run span, which ends
// only once the outcome is recorded.
func (a *attempt) handlerReturned() {
	if a.run != nil {
		a.run.span.AddEvent(eventHandlerDone)
	}
}

// endRun ends a's run span with the attempt's result, or with err when its
// outcome could not be recorded. The outcome is attributes and a status on
// the run span rather than a span of its own: one span per attempt, and
// an outcome written in a batch would show mostly the batch's wait.
func (a *attempt) endRun(res *WorkResult, err error) {
	if a.run == nil {
		return
	}
	span := a.run.span
	switch {
	case err != nil:
		span.SetStatus(codes.Error, "record outcome: "+err.Error())
	default:
		span.SetAttributes(attrOutcome.String(string(res.Result)))
		if res.Class != "" {
			span.SetAttributes(attrErrorClass.String(res.Class))
		}
		switch res.Result {
		case ResultRetrying, ResultDead:
			span.SetStatus(codes.Error, res.Class+": "+res.Error)
		case ResultLeaseLost:
			span.SetStatus(codes.Error, "lease lost: the outcome was not recorded")
		}
	}
	span.End()
}

// jobSpanContext returns the trace context stored with job, or an invalid
// one.
func jobSpanContext(job *errandtype.Job) trace.SpanContext {
	return metadataSpanContext(job.Metadata)
}

// The keys of a job's metadata that hold its trace context: W3C Trace
// Context's own header names, so that a worker in any language extracts it
// with its propagator as from HTTP headers.
const (
	traceparentKey = "traceparent"
	tracestateKey  = "tracestate"
)

// withTraceContext returns meta, a job's metadata (a JSON object, or
// empty), with the trace context of ctx's span added under traceparent
// and tracestate. It returns meta unchanged when ctx carries no valid span
// context, or when meta names either key: a caller who stores a trace
// context of their own wins.
func withTraceContext(ctx context.Context, meta json.RawMessage) json.RawMessage {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return meta
	}
	body := bytes.TrimSpace(meta)
	if len(body) > 0 {
		var own map[string]json.RawMessage
		if json.Unmarshal(body, &own) != nil {
			return meta // not an object: the enqueue refuses it
		}
		if _, ok := own[traceparentKey]; ok {
			return meta
		}
		if _, ok := own[tracestateKey]; ok {
			return meta
		}
	}
	carrier := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, carrier)
	out := []byte{'{'}
	out = appendMember(out, traceparentKey, carrier[traceparentKey])
	if ts := carrier[tracestateKey]; ts != "" {
		out = append(out, ',')
		out = appendMember(out, tracestateKey, ts)
	}
	// The caller's members follow ours, as they were written.
	rest := bytes.TrimSpace(bytes.TrimPrefix(body, []byte("{")))
	if len(rest) > 0 && rest[0] != '}' {
		out = append(out, ',')
		return append(out, rest...)
	}
	return append(out, '}')
}

// appendMember appends "key":"value" to b.
func appendMember(b []byte, key, value string) []byte {
	k, _ := json.Marshal(key)
	v, _ := json.Marshal(value)
	b = append(b, k...)
	b = append(b, ':')
	return append(b, v...)
}

// metadataSpanContext returns the trace context stored in meta, a job's
// metadata, or an invalid one.
func metadataSpanContext(meta json.RawMessage) trace.SpanContext {
	if !bytes.Contains(meta, []byte(`"`+traceparentKey+`"`)) {
		return trace.SpanContext{}
	}
	var tc struct {
		Traceparent string `json:"traceparent"`
		Tracestate  string `json:"tracestate"`
	}
	if json.Unmarshal(meta, &tc) != nil || tc.Traceparent == "" {
		return trace.SpanContext{} // not ours to read: the caller's own value
	}
	carrier := propagation.MapCarrier{traceparentKey: tc.Traceparent, tracestateKey: tc.Tracestate}
	return trace.SpanContextFromContext(propagation.TraceContext{}.Extract(context.Background(), carrier))
}
