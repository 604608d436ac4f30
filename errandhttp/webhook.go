package errandhttp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/propagation"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandtype"
)

// Defaults and bounds of a webhook delivery.
const (
	// DefaultWebhookTimeout bounds one delivery: connecting, sending and
	// reading the answer.
	DefaultWebhookTimeout = 30 * time.Second
	// MaxWebhookTimeout is the longest timeout a webhook may have; a
	// longer wait belongs in a job that checks back later.
	MaxWebhookTimeout = 15 * time.Minute
	// webhookBodyQuote is how much of an error response the failure
	// message quotes.
	webhookBodyQuote = 2 << 10
	// maxRetryAfter bounds the wait a Retry-After header asks for.
	maxRetryAfter = 24 * time.Hour
)

// WebhookOptions configure [NewWebhook].
type WebhookOptions struct {
	// Timeout bounds one delivery. Zero means DefaultWebhookTimeout; at
	// most MaxWebhookTimeout. The job's own timeout (errand.KindOpts) and
	// lease still apply.
	Timeout time.Duration
	// Header is added to every request, e.g. an Authorization header the
	// endpoint expects.
	Header http.Header
	// Transport sends the requests. Nil means a clone of
	// http.DefaultTransport.
	Transport http.RoundTripper
	// Now tells the time, to turn a Retry-After date into a wait. Nil
	// means time.Now.
	Now func() time.Time
}

// Webhook is an errand.Handler that delivers each job by POSTing its
// envelope ([errandtype.Envelope]: id, kind, args_version, args, attempt,
// max_attempts, lease_token, lease_until, deadline), as JSON, to one URL
// fixed when the handler is built: nothing in a job's payload can change
// where it goes. Redirects are not followed, for the same reason.
//
// The answer decides the outcome:
//
//   - 2xx: the job succeeded.
//   - 429 or 503: retry, after the Retry-After header's wait (seconds or an
//     HTTP date) when it gives one; class http_429 or http_503.
//   - 408 and other 5xx: retry on the retry policy, class http_NNN.
//   - any other 4xx, and 3xx: permanent, class http_NNN: sending the same
//     request again would get the same answer.
//   - a timeout: retry, class timeout; another network error: retry,
//     class network.
//
// A failure's message quotes the start of the response body.
type Webhook struct {
	url     string
	client  *http.Client
	timeout time.Duration
	header  http.Header
	now     func() time.Time
}

// NewWebhook returns a webhook handler that POSTs to rawURL, which must be
// an absolute http or https URL.
func NewWebhook(rawURL string, opts *WebhookOptions) (*Webhook, error) {
	if opts == nil {
		opts = &WebhookOptions{}
	}
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("webhook URL %q: give an absolute http:// or https:// URL, e.g. https://billing.internal/jobs/send_receipt", rawURL)
	}
	if u.User != nil {
		return nil, fmt.Errorf("webhook URL %s: remove the user info; send credentials with a header instead", u.Redacted())
	}
	timeout := opts.Timeout
	if timeout == 0 {
		timeout = DefaultWebhookTimeout
	}
	if timeout < 0 || timeout > MaxWebhookTimeout {
		return nil, fmt.Errorf("webhook timeout %s: give up to %s", timeout, MaxWebhookTimeout)
	}
	transport := opts.Transport
	if transport == nil {
		transport = http.DefaultTransport.(*http.Transport).Clone()
	}
	w := &Webhook{
		url:     u.String(),
		timeout: timeout,
		header:  opts.Header.Clone(),
		now:     opts.Now,
		client: &http.Client{
			Transport: transport,
			Timeout:   timeout,
			CheckRedirect: func(*http.Request, []*http.Request) error {
				return http.ErrUseLastResponse
			},
		},
	}
	if w.now == nil {
		w.now = time.Now
	}
	return w, nil
}

// URL returns where the webhook delivers.
func (w *Webhook) URL() string { return w.url }

// Work delivers job and classifies the answer.
func (w *Webhook) Work(ctx context.Context, job *errandtype.Job) error {
	ctx, cancel := context.WithTimeout(ctx, w.timeout)
	defer cancel()
	req, err := w.request(ctx, job)
	if err != nil {
		return err
	}
	resp, err := w.client.Do(req)
	if err != nil {
		var ne net.Error
		if errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()) {
			return errand.WithClass(errand.ClassTimeout, fmt.Errorf("webhook %s: no answer within %s", w.url, w.timeout))
		}
		if ctx.Err() != nil {
			return err // the worker stopped or lost the lease; it decides
		}
		return errand.WithClass("network", fmt.Errorf("webhook %s: %w", w.url, err))
	}
	defer resp.Body.Close()
	quote, _ := io.ReadAll(io.LimitReader(resp.Body, webhookBodyQuote+1))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // lets the connection be reused
	return w.classify(resp, quote)
}

// request is the POST that delivers job's envelope.
func (w *Webhook) request(ctx context.Context, job *errandtype.Job) (*http.Request, error) {
	body, err := json.Marshal(job.Envelope())
	if err != nil {
		return nil, errand.Permanent(fmt.Errorf("encode envelope: %w", err))
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.url, bytes.NewReader(body))
	if err != nil {
		return nil, errand.Permanent(fmt.Errorf("webhook request: %w", err))
	}
	for k, vs := range w.header {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "errand-webhook")
	req.Header.Set("Errand-Job-Id", job.ID)
	req.Header.Set("Errand-Attempt", strconv.Itoa(job.Attempt))
	// The attempt's span, when tracing is on, so that the endpoint's spans
	// nest under it (docs/tracing.md); nothing otherwise.
	propagation.TraceContext{}.Inject(ctx, propagation.HeaderCarrier(req.Header))
	return req, nil
}

// classify makes an answer the attempt's outcome: 2xx succeeds; 408, 429,
// 503 and other 5xx retry (429 and 503 after Retry-After, when given);
// any other status is permanent. quote is the start of the body.
func (w *Webhook) classify(resp *http.Response, quote []byte) error {
	code := resp.StatusCode
	if code >= 200 && code < 300 {
		return nil
	}
	failure := fmt.Errorf("webhook %s answered %s: %s", w.url, resp.Status, quoteBody(quote))
	class := "http_" + strconv.Itoa(code)
	switch {
	case code == http.StatusTooManyRequests || code == http.StatusServiceUnavailable:
		if d, ok := retryAfter(resp.Header.Get("Retry-After"), w.now()); ok {
			return errand.RetryAfter(d, errand.WithClass(class, failure))
		}
		return errand.WithClass(class, failure)
	case code == http.StatusRequestTimeout || code >= 500:
		return errand.WithClass(class, failure)
	}
	return errand.Permanent(errand.WithClass(class, failure))
}

// quoteBody quotes the start of a response body for an error message.
func quoteBody(b []byte) string {
	if len(b) == 0 {
		return "(empty body)"
	}
	cut := ""
	if len(b) > webhookBodyQuote {
		b, cut = b[:webhookBodyQuote], " (cut)"
	}
	return strconv.Quote(strings.TrimSpace(string(b))) + cut
}

// retryAfter reads a Retry-After header: delay-seconds or an HTTP date.
// A wait past maxRetryAfter is cut to it.
func retryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	var d time.Duration
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		if n < 0 {
			return 0, false
		}
		if n > int64(maxRetryAfter/time.Second) {
			n = int64(maxRetryAfter / time.Second)
		}
		d = time.Duration(n) * time.Second
	} else if t, err := http.ParseTime(v); err == nil {
		d = t.Sub(now)
	} else {
		return 0, false
	}
	if d <= 0 {
		d = time.Millisecond // due now: retry at once, the attempt counted
	}
	return min(d, maxRetryAfter), true
}
