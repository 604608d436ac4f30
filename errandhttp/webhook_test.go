package errandhttp_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandhttp"
	"github.com/errandhq/errand/errandtype"
)

// webhookJob is a claimed job as a worker hands it to a handler.
func webhookJob() *errandtype.Job {
	token, until := "lease-token-1", time.Date(2026, 11, 29, 12, 0, 30, 0, time.UTC)
	return &errandtype.Job{ID: "job-1", Kind: "send_receipt", ArgsVersion: 1, Attempt: 2, MaxAttempts: 5,
		Args: json.RawMessage(`{"payment_id":"p1","url":"http://evil.example/steal"}`), LeaseToken: &token, LeaseUntil: &until}
}

func TestWebhookDeliversTheEnvelope(t *testing.T) {
	var got errandtype.Envelope
	var header http.Header
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		header = r.Header.Clone()
		if r.Method != "POST" || r.URL.Path != "/hooks/receipt" {
			t.Errorf("request %s %s", r.Method, r.URL.Path)
		}
		if err := json.NewDecoder(r.Body).Decode(&got); err != nil {
			t.Error(err)
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	h, err := errandhttp.NewWebhook(srv.URL+"/hooks/receipt", &errandhttp.WebhookOptions{Header: http.Header{"Authorization": {"Bearer hook"}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Work(context.Background(), webhookJob()); err != nil {
		t.Fatal(err)
	}
	want := webhookJob().Envelope()
	if got.ID != want.ID || got.LeaseToken != "lease-token-1" || got.Attempt != 2 || got.MaxAttempts != 5 ||
		string(got.Args) != string(want.Args) || !got.LeaseUntil.Equal(want.LeaseUntil) {
		t.Fatalf("envelope %+v", got)
	}
	if header.Get("Content-Type") != "application/json" || header.Get("Errand-Job-Id") != "job-1" ||
		header.Get("Errand-Attempt") != "2" || header.Get("Authorization") != "Bearer hook" {
		t.Fatalf("headers %v", header)
	}
	if hits.Load() != 1 {
		t.Fatalf("%d deliveries, want 1 (to the configured URL, whatever the args say)", hits.Load())
	}
}

func TestWebhookClassifiesAnswers(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	redirected := atomic.Bool{}
	for _, tc := range []struct {
		name      string
		status    int
		header    map[string]string
		body      string
		class     string
		permanent bool
		delay     time.Duration
	}{
		{"ok", 200, nil, "", "", false, 0},
		{"created", 201, nil, "", "", false, 0},
		{"not found", 404, nil, "no such receipt", "http_404", true, 0},
		{"bad request", 400, nil, `{"error":"bad"}`, "http_400", true, 0},
		{"request timeout", 408, nil, "", "http_408", false, 0},
		{"too many, seconds", 429, map[string]string{"Retry-After": "120"}, "", "http_429", false, 120 * time.Second},
		{"too many, no hint", 429, nil, "", "http_429", false, 0},
		{"unavailable, date", 503, map[string]string{"Retry-After": now.Add(90 * time.Second).Format(http.TimeFormat)}, "", "http_503", false, 90 * time.Second},
		{"unavailable, past date", 503, map[string]string{"Retry-After": now.Add(-time.Hour).Format(http.TimeFormat)}, "", "http_503", false, time.Millisecond},
		{"unavailable, huge", 503, map[string]string{"Retry-After": "99999999"}, "", "http_503", false, 24 * time.Hour},
		{"server error", 500, nil, "boom", "http_500", false, 0},
		{"bad gateway", 502, nil, "", "http_502", false, 0},
		{"redirect", 302, map[string]string{"Location": "/elsewhere"}, "", "http_302", true, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/elsewhere" {
					redirected.Store(true)
				}
				for k, v := range tc.header {
					w.Header().Set(k, v)
				}
				w.WriteHeader(tc.status)
				io.WriteString(w, tc.body)
			}))
			defer srv.Close()
			h, err := errandhttp.NewWebhook(srv.URL, &errandhttp.WebhookOptions{Now: func() time.Time { return now }})
			if err != nil {
				t.Fatal(err)
			}
			err = h.Work(context.Background(), webhookJob())
			if tc.class == "" {
				if err != nil {
					t.Fatalf("%d: %v, want success", tc.status, err)
				}
				return
			}
			var je *errand.JobError
			if !errors.As(err, &je) {
				t.Fatalf("%d: %v, want a classified error", tc.status, err)
			}
			if je.Class() != tc.class || je.IsPermanent() != tc.permanent || je.RetryDelay() != tc.delay {
				t.Fatalf("%d: class %s permanent %v delay %s; want %s %v %s", tc.status, je.Class(), je.IsPermanent(), je.RetryDelay(), tc.class, tc.permanent, tc.delay)
			}
			if tc.body != "" && !strings.Contains(err.Error(), strconv.Quote(tc.body)) {
				t.Fatalf("the message does not quote the body: %v", err)
			}
		})
	}
	if redirected.Load() {
		t.Fatal("a redirect was followed")
	}
}

func TestWebhookBoundsTimeAndBody(t *testing.T) {
	release := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer slow.Close()
	defer close(release)
	h, err := errandhttp.NewWebhook(slow.URL, &errandhttp.WebhookOptions{Timeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	err = h.Work(context.Background(), webhookJob())
	var je *errand.JobError
	if !errors.As(err, &je) || je.Class() != errand.ClassTimeout || je.IsPermanent() {
		t.Fatalf("slow endpoint: %v, want a retryable timeout", err)
	}

	huge := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(500)
		io.WriteString(w, strings.Repeat("x", 1<<20))
	}))
	defer huge.Close()
	h, err = errandhttp.NewWebhook(huge.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Work(context.Background(), webhookJob()); err == nil || len(err.Error()) > 4<<10 || !strings.Contains(err.Error(), "(cut)") {
		t.Fatalf("a huge error body: %d bytes of message", len(err.Error()))
	}

	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close()
	h, _ = errandhttp.NewWebhook(dead.URL, nil)
	if err := h.Work(context.Background(), webhookJob()); !errors.As(err, &je) || je.Class() != "network" || je.IsPermanent() {
		t.Fatalf("a refused connection: %v, want a retryable network error", err)
	}
}

func TestNewWebhookRefusesBadURLs(t *testing.T) {
	for _, u := range []string{"", "/relative", "ftp://host/x", "http://", "https://user:pw@host/x", "host:80/x"} {
		if _, err := errandhttp.NewWebhook(u, nil); err == nil {
			t.Errorf("NewWebhook(%q) accepted it", u)
		}
	}
	if _, err := errandhttp.NewWebhook("https://host/x", &errandhttp.WebhookOptions{Timeout: time.Hour}); err == nil {
		t.Error("an hour's timeout was accepted")
	}
}

// TestWebhookJobRetriesThroughAWorker runs a webhook as a kind's handler:
// a 503 with Retry-After leaves the job retrying then, with its class.
func TestWebhookJobRetriesThroughAWorker(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "45")
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	h, err := errandhttp.NewWebhook(srv.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	clock := newTestClock()
	kinds := errand.NewKinds()
	kinds.HandleRaw("hook", h, nil)
	c, err := errand.NewClient(openSQLite(t, clock), &errand.Config{Kinds: kinds, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Enqueue(context.Background(), errand.RawArgs{KindName: "hook"}, nil); err != nil {
		t.Fatal(err)
	}
	res, err := c.WorkOne(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Result != errand.ResultRetrying || res.Class != "http_503" || !res.AvailableAt.Equal(clock.Now().Add(45*time.Second)) {
		t.Fatalf("result %+v", res)
	}
}
