package errandhttp_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandhttp"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtest"
	"github.com/errandhq/errand/errandtype"
)

// A job enqueued through the JSON API with a traceparent header joins the
// caller's trace: the enqueue span is the header's child, the job stores
// the enqueue span's context, a Go worker's attempt continues it, and a
// remote worker's claim answers it in the envelope's metadata.
func TestAPIEnqueueContinuesTheCallersTrace(t *testing.T) {
	const (
		traceID    = "4bf92f3577b34da6a3ce929d0e0e4736"
		callerSpan = "00f067aa0ba902b7"
	)
	eachStore(t, func(t *testing.T, st errandstore.TxStore[*sql.Tx], clock *errandtest.Clock) {
		sr := tracetest.NewSpanRecorder()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr))
		defer tp.Shutdown(context.Background())
		kinds := errand.NewKinds()
		kinds.HandleRaw("task", errand.HandlerFunc(func(context.Context, *errandtype.Job) error { return nil }), nil)
		c, err := errand.NewClient(st, &errand.Config{Kinds: kinds, AllowUnknownKinds: true, Clock: clock, TracerProvider: tp})
		if err != nil {
			t.Fatal(err)
		}
		h, err := errandhttp.New(c, &errandhttp.Options{Auth: &errandhttp.AuthOptions{Tokens: testTokens}})
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(h)
		defer srv.Close()
		s := &server{Server: srv, c: c}

		header := map[string]string{"traceparent": "00-" + traceID + "-" + callerSpan + "-01", "tracestate": "vendor=opaque"}
		for _, kind := range []string{"task", "remote"} {
			r := s.do(t, req{method: "POST", path: "/api/v1/jobs", token: operatorSecret, header: header,
				body: map[string]any{"kind": kind, "queue": kind, "metadata": map[string]any{"tenant": "t1"}}})
			want(t, "enqueue "+kind, r, http.StatusCreated, "")
		}
		enq := spansNamed(sr.Ended(), "errand.enqueue")
		if len(enq) != 2 {
			t.Fatalf("%d enqueue spans, want 2", len(enq))
		}
		for _, s := range enq {
			if s.SpanContext().TraceID().String() != traceID || s.Parent().SpanID().String() != callerSpan {
				t.Errorf("enqueue span in trace %v under %v, not the header's", s.SpanContext().TraceID(), s.Parent().SpanID())
			}
		}

		if res, err := c.WorkOne(context.Background(), &errand.WorkOneOpts{Queues: []string{"task"}, Lease: time.Minute}); err != nil || res.Result != errand.ResultSucceeded {
			t.Fatalf("work: %v, %v", res, err)
		}
		runs := spansNamed(sr.Ended(), "errand.run")
		if len(runs) != 1 {
			t.Fatalf("%d run spans, want 1", len(runs))
		}
		if runs[0].SpanContext().TraceID().String() != traceID || runs[0].Parent().SpanID() != enq[0].SpanContext().SpanID() {
			t.Errorf("the attempt runs in trace %v under %v, not under the enqueue span", runs[0].SpanContext().TraceID(), runs[0].Parent().SpanID())
		}
		if got := runs[0].SpanContext().TraceState().String(); got != "vendor=opaque" {
			t.Errorf("tracestate %q lost on the way", got)
		}

		r := s.do(t, req{method: "POST", path: "/api/v1/queues/remote/claim", token: operatorSecret, body: map[string]any{"kinds": []string{"remote"}, "worker": "w1"}})
		want(t, "claim", r, http.StatusOK, "")
		var claimed struct {
			Jobs []struct {
				Metadata map[string]string `json:"metadata"`
			} `json:"jobs"`
		}
		if err := json.Unmarshal(r.body, &claimed); err != nil || len(claimed.Jobs) != 1 {
			t.Fatalf("claim: %s (%v)", r.body, err)
		}
		m := claimed.Jobs[0].Metadata
		wantParent := "00-" + traceID + "-" + enq[1].SpanContext().SpanID().String() + "-01"
		if m["traceparent"] != wantParent || m["tracestate"] != "vendor=opaque" || m["tenant"] != "t1" {
			t.Errorf("the claim's envelope carries metadata %v; want traceparent %s, the tracestate and the caller's tenant", m, wantParent)
		}
	})
}

// spansNamed returns the spans called name.
func spansNamed(spans []sdktrace.ReadOnlySpan, name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range spans {
		if s.Name() == name {
			out = append(out, s)
		}
	}
	return out
}

// A webhook's request carries the attempt's span as a traceparent header,
// so that the endpoint's spans nest under the attempt.
func TestWebhookCarriesTheAttemptsSpan(t *testing.T) {
	got := make(chan string, 1)
	endpoint := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Get("traceparent")
	}))
	defer endpoint.Close()
	hook, err := errandhttp.NewWebhook(endpoint.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	sr := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr))
	defer tp.Shutdown(context.Background())
	kinds := errand.NewKinds()
	kinds.HandleRaw("hook", hook, nil)
	clock := newTestClock()
	c, err := errand.NewClient(openSQLite(t, clock), &errand.Config{Kinds: kinds, Clock: clock, TracerProvider: tp})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Enqueue(context.Background(), errand.RawArgs{KindName: "hook"}, nil); err != nil {
		t.Fatal(err)
	}
	if res, err := c.WorkOne(context.Background(), &errand.WorkOneOpts{Lease: time.Minute}); err != nil || res.Result != errand.ResultSucceeded {
		t.Fatalf("work: %v, %v", res, err)
	}
	runs := spansNamed(sr.Ended(), "errand.run")
	if len(runs) != 1 {
		t.Fatalf("%d run spans, want 1", len(runs))
	}
	sc := runs[0].SpanContext()
	if want := "00-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-01"; <-got != want {
		t.Errorf("the webhook's traceparent is not the attempt's span %s", want)
	}
}
