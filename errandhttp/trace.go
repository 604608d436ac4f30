package errandhttp

import (
	"context"
	"net/http"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// enqueueContext returns the context of r, an enqueue, carrying the W3C
// trace context of its traceparent and tracestate headers, so that the
// jobs it enqueues join the caller's trace (docs/tracing.md). A context
// that carries a span already, a tracing middleware's in front of the API,
// is kept: that span is the caller's child.
func enqueueContext(r *http.Request) context.Context {
	ctx := r.Context()
	if r.Header.Get("traceparent") == "" || trace.SpanContextFromContext(ctx).IsValid() {
		return ctx
	}
	return propagation.TraceContext{}.Extract(ctx, propagation.HeaderCarrier(r.Header))
}
