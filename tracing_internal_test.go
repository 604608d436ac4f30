package errand

import (
	"context"
	"encoding/json"
	"testing"

	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Until the application sets a global tracer provider, a client given none
// traces nothing: the check that keeps spans off the hot path must
// recognise the global no-op. No test in this package sets the global
// provider, which would be for the whole process.
func TestTracingOffUntilAProviderIsSet(t *testing.T) {
	if unsetGlobalProvider == nil {
		t.Fatal("the global tracer provider's default is not recognised: tracing would be on, and cost, without a provider")
	}
	if tr := newTracing(nil); tr.on() {
		t.Error("a client without a provider traces")
	}
	if tr := newTracing(noop.NewTracerProvider()); tr.on() {
		t.Error("a client given the no-op provider traces")
	}
	if tr := (&engine{}).tracing; tr.on() {
		t.Error("the zero tracing is on")
	}
}

func TestWithTraceContext(t *testing.T) {
	sc := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID:    trace.TraceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36},
		SpanID:     trace.SpanID{0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7},
		TraceFlags: trace.FlagsSampled,
	})
	ts, err := trace.ParseTraceState("vendor=opaque")
	if err != nil {
		t.Fatal(err)
	}
	ctx := trace.ContextWithSpanContext(context.Background(), sc)
	withState := trace.ContextWithSpanContext(context.Background(), sc.WithTraceState(ts))
	const tp = `"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"`
	for _, tt := range []struct {
		name string
		ctx  context.Context
		meta string
		want string
	}{
		{"no span", context.Background(), `{"a":1}`, `{"a":1}`},
		{"no span, no metadata", context.Background(), ``, ``},
		{"no metadata", ctx, ``, `{` + tp + `}`},
		{"empty object", ctx, ` { } `, `{` + tp + `}`},
		{"tracestate", withState, ``, `{` + tp + `,"tracestate":"vendor=opaque"}`},
		{"caller's keys kept", ctx, `{"tenant": "t1", "n": [1, 2]}`, `{` + tp + `,"tenant": "t1", "n": [1, 2]}`},
		{"caller's traceparent wins", ctx, `{"traceparent":"00-11111111111111111111111111111111-2222222222222222-01"}`, `{"traceparent":"00-11111111111111111111111111111111-2222222222222222-01"}`},
		{"caller's tracestate is theirs", ctx, `{"tracestate":"x=y"}`, `{"tracestate":"x=y"}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := withTraceContext(tt.ctx, json.RawMessage(tt.meta))
			if string(got) != tt.want {
				t.Fatalf("got %s, want %s", got, tt.want)
			}
			if len(got) > 0 && !json.Valid(got) {
				t.Fatalf("%s is not JSON", got)
			}
			if tt.ctx == context.Background() || tt.want == tt.meta {
				return
			}
			back := metadataSpanContext(got)
			if back.TraceID() != sc.TraceID() || back.SpanID() != sc.SpanID() || !back.IsRemote() || !back.IsSampled() {
				t.Fatalf("read back %v from %s", back, got)
			}
			if tt.ctx == withState && back.TraceState().String() != "vendor=opaque" {
				t.Fatalf("tracestate read back as %q", back.TraceState())
			}
		})
	}
	for _, meta := range []string{``, `{"a":1}`, `{"traceparent":7}`, `{"traceparent":"garbage"}`, `[1]`} {
		if sc := metadataSpanContext(json.RawMessage(meta)); sc.IsValid() {
			t.Errorf("metadata %s gives a span context %v", meta, sc)
		}
	}
}
