package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

func newTestServer(t *testing.T) (*httptest.Server, *app) {
	t.Helper()
	a := openTestApp(t, filepath.Join(t.TempDir(), "serve.sqlite"), nil)
	srv := httptest.NewServer(newHandler(a, slog.New(slog.DiscardHandler)))
	t.Cleanup(srv.Close)
	return srv, a
}

// noRedirects returns a redirect as the answer, so a test sees every
// response the server sends.
var noRedirects = &http.Client{
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}

// call sends one request and returns the status, the body and the response.
// A "Host" entry in header replaces the Host the URL implies.
func call(t *testing.T, method, url string, header map[string]string) (int, string, *http.Response) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		if http.CanonicalHeaderKey(k) == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := noRedirects.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b), resp
}

// errorMessage decodes a {"error": "..."} body, failing on any other shape.
func errorMessage(t *testing.T, body string) string {
	t.Helper()
	var e map[string]string
	if err := json.Unmarshal([]byte(body), &e); err != nil || len(e) != 1 || e["error"] == "" {
		t.Fatalf("body %q; want {\"error\": \"...\"}", body)
	}
	return e["error"]
}

// TestOriginRefused: any request carrying an Origin header is refused with
// 403 and changes nothing, whatever the route.
func TestOriginRefused(t *testing.T) {
	srv, a := newTestServer(t)
	for _, origin := range []string{"https://evil.example", "null", srv.URL} {
		for _, r := range []struct{ method, path string }{
			{"GET", "/wallet"}, {"GET", "/documents"}, {"POST", "/documents/document-7/purchase"}, {"GET", "/nowhere"},
		} {
			status, body, _ := call(t, r.method, srv.URL+r.path, map[string]string{"Origin": origin})
			if status != http.StatusForbidden {
				t.Fatalf("%s %s with Origin %s: %d; want 403", r.method, r.path, origin, status)
			}
			errorMessage(t, body)
		}
	}
	if n := count(t, a, `SELECT count(*) FROM payments`); n != 0 {
		t.Fatalf("%d payments after refused purchases; want 0", n)
	}
	if status, body, _ := call(t, "GET", srv.URL+"/wallet", nil); status != http.StatusOK || strings.TrimSpace(body) != `{"balance_cents":10000}` {
		t.Fatalf("GET /wallet without Origin: %d %s; want 200 {\"balance_cents\":10000}", status, body)
	}
}

// TestHostRefused: a request whose Host is not loopback with the server's
// port, as a DNS-rebinding page sends, is refused with 421 and changes
// nothing, whatever the route; loopback Hosts with the right port are
// served.
func TestHostRefused(t *testing.T) {
	srv, a := newTestServer(t)
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	self, other := strconv.Itoa(port), strconv.Itoa(port%65535+1)
	for _, host := range []string{
		"evil.example", "evil.example:" + self, "127.0.0.1.evil.example:" + self, "localhost.:" + self,
		"0.0.0.0:" + self, "192.0.2.1:" + self, "127.0.0.1", "127.0.0.1:" + other, "[::1]:" + other, "localhost",
	} {
		for _, r := range []struct{ method, path string }{
			{"GET", "/wallet"}, {"GET", "/documents"}, {"POST", "/documents/document-7/purchase"}, {"GET", "/nowhere"},
		} {
			status, body, _ := call(t, r.method, srv.URL+r.path, map[string]string{"Host": host})
			if status != http.StatusMisdirectedRequest {
				t.Fatalf("%s %s with Host %s: %d %s; want 421", r.method, r.path, host, status, body)
			}
			errorMessage(t, body)
		}
	}
	if n := count(t, a, `SELECT count(*) FROM payments`); n != 0 {
		t.Fatalf("%d payments after refused purchases; want 0", n)
	}
	for _, host := range []string{"127.0.0.1:" + self, "127.0.0.2:" + self, "localhost:" + self, "LocalHost:" + self, "[::1]:" + self} {
		if status, body, _ := call(t, "GET", srv.URL+"/wallet", map[string]string{"Host": host}); status != http.StatusOK {
			t.Fatalf("GET /wallet with Host %s: %d %s; want 200", host, status, body)
		}
	}
}

// TestRequestBodyRefused: no endpoint takes a body, so a request with one,
// of known or unknown length, is refused with 413 and changes nothing.
func TestRequestBodyRefused(t *testing.T) {
	srv, a := newTestServer(t)
	for _, c := range []struct {
		name string
		body io.Reader
	}{
		{"with Content-Length", strings.NewReader(`{"document_id":"document-7"}`)},
		{"chunked", io.MultiReader(strings.NewReader(`{}`))}, // a reader of unknown length
	} {
		req, err := http.NewRequest("POST", srv.URL+"/documents/document-7/purchase", c.body)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusRequestEntityTooLarge {
			t.Fatalf("purchase with a body, %s: %d %s; want 413", c.name, resp.StatusCode, b)
		}
		errorMessage(t, string(b))
	}
	if n := count(t, a, `SELECT count(*) FROM payments`); n != 0 {
		t.Fatalf("%d payments after refused purchases; want 0", n)
	}
}

// TestServerLimits: the server bounds how long a client may take to send a
// request, to wait for the answer and to sit idle, and how large its headers
// may be.
func TestServerLimits(t *testing.T) {
	srv := newServer(http.NotFoundHandler(), slog.New(slog.DiscardHandler))
	for name, d := range map[string]time.Duration{
		"ReadHeaderTimeout": srv.ReadHeaderTimeout,
		"ReadTimeout":       srv.ReadTimeout,
		"WriteTimeout":      srv.WriteTimeout,
		"IdleTimeout":       srv.IdleTimeout,
	} {
		if d <= 0 || d > 5*time.Minute {
			t.Errorf("%s = %v; want a bound above 0 and at most 5m", name, d)
		}
	}
	if srv.ReadHeaderTimeout > srv.ReadTimeout {
		t.Errorf("ReadHeaderTimeout %v > ReadTimeout %v", srv.ReadHeaderTimeout, srv.ReadTimeout)
	}
	if srv.WriteTimeout <= 10*time.Second {
		t.Errorf("WriteTimeout = %v; want more than the store's 10s busy timeout a purchase may wait", srv.WriteTimeout)
	}
	if srv.MaxHeaderBytes <= 0 || srv.MaxHeaderBytes > 64<<10 {
		t.Errorf("MaxHeaderBytes = %d; want a bound above 0 and at most 64 KiB", srv.MaxHeaderBytes)
	}
}

// TestResponseHeaders: every answer, success, refusal or redirect, is JSON
// that a browser may not sniff as anything else, may not cache and may not
// frame.
func TestResponseHeaders(t *testing.T) {
	srv, _ := newTestServer(t)
	purchase := srv.URL + "/documents/document-7/purchase"
	key := map[string]string{"Idempotency-Key": "headers-1"}
	for _, c := range []struct {
		method, url string
		header      map[string]string
		status      int // 0: any redirect
	}{
		{"GET", srv.URL + "/wallet", nil, http.StatusOK},
		{"GET", srv.URL + "/documents", nil, http.StatusOK},
		{"POST", purchase, key, http.StatusCreated},
		{"POST", purchase, key, http.StatusCreated}, // replayed from the stored response
		{"POST", purchase, nil, http.StatusConflict},
		{"POST", purchase, map[string]string{"Idempotency-Key": "two words"}, http.StatusBadRequest},
		{"GET", srv.URL + "/nowhere", nil, http.StatusNotFound},
		{"GET", srv.URL + "/documents/../wallet", nil, 0}, // the mux's redirect to the clean path
		{"GET", srv.URL + "/wallet", map[string]string{"Origin": "https://evil.example"}, http.StatusForbidden},
		{"GET", srv.URL + "/wallet", map[string]string{"Host": "evil.example"}, http.StatusMisdirectedRequest},
	} {
		status, body, resp := call(t, c.method, c.url, c.header)
		if c.status == 0 && (status < 300 || status > 399) || c.status != 0 && status != c.status {
			t.Fatalf("%s %s %v: %d %s; want %d (0: any redirect)", c.method, c.url, c.header, status, body, c.status)
		}
		for name, want := range map[string]string{
			"Content-Type":            "application/json",
			"X-Content-Type-Options":  "nosniff",
			"Cache-Control":           "no-store",
			"Content-Security-Policy": "default-src 'none'; frame-ancestors 'none'",
		} {
			if got := resp.Header.Values(name); len(got) != 1 || got[0] != want {
				t.Errorf("%s %s %v (%d): %s = %q; want %q", c.method, c.url, c.header, status, name, got, want)
			}
		}
	}
}

// TestPurchaseAPI covers the purchase endpoint's answers.
func TestPurchaseAPI(t *testing.T) {
	srv, a := newTestServer(t)
	purchaseURL := func(doc string) string { return srv.URL + "/documents/" + doc + "/purchase" }

	status, body, _ := call(t, "POST", purchaseURL("document-7"), nil)
	var p purchaseResponse
	if err := json.Unmarshal([]byte(body), &p); err != nil || status != http.StatusCreated ||
		!strings.HasPrefix(p.PaymentID, "pay_") || p.JobID != p.PaymentID || p.BalanceCents != 9500 {
		t.Fatalf("purchase: %d %s; want 201 with payment_id = job_id and balance_cents 9500", status, body)
	}
	if status, body, _ = call(t, "POST", purchaseURL("document-7"), nil); status != http.StatusConflict || !strings.Contains(errorMessage(t, body), "already purchased") {
		t.Fatalf("second purchase: %d %s; want 409 already purchased", status, body)
	}
	if status, body, _ = call(t, "POST", purchaseURL("document-9"), nil); status != http.StatusNotFound {
		t.Fatalf("unknown document: %d %s; want 404", status, body)
	}
	errorMessage(t, body)
	if _, err := a.db.Exec(`UPDATE wallet SET balance_cents = 100`); err != nil {
		t.Fatal(err)
	}
	if status, body, _ = call(t, "POST", purchaseURL("document-8"), map[string]string{"Idempotency-Key": "k-short"}); status != http.StatusConflict || !strings.Contains(errorMessage(t, body), "100 cents") {
		t.Fatalf("short wallet: %d %s; want 409 naming the balance", status, body)
	}
	if _, err := a.db.Exec(`UPDATE wallet SET balance_cents = 9500`); err != nil {
		t.Fatal(err)
	}
	status, body, _ = call(t, "POST", purchaseURL("document-8"), map[string]string{"Idempotency-Key": "k-short"})
	if status != http.StatusCreated {
		t.Fatalf("purchase after topping up, same key: %d %s; want 201 (a refusal stores no key)", status, body)
	}
	if status, body, _ = call(t, "POST", purchaseURL("document-7"), map[string]string{"Idempotency-Key": "k-short"}); status != http.StatusUnprocessableEntity {
		t.Fatalf("key reused for another document: %d %s; want 422", status, body)
	}
	if status, _, _ = call(t, "POST", purchaseURL("document-8"), map[string]string{"Idempotency-Key": "two words"}); status != http.StatusBadRequest {
		t.Fatalf("bad key: %d; want 400", status)
	}
	if status, body, _ = call(t, "POST", srv.URL+"/wallet", nil); status != http.StatusNotFound {
		t.Fatalf("POST /wallet: %d %s; want a JSON 404", status, body)
	}
	errorMessage(t, body)
	status, body, _ = call(t, "GET", srv.URL+"/documents", nil)
	var docs []documentView
	if err := json.Unmarshal([]byte(body), &docs); err != nil || status != http.StatusOK || len(docs) != 2 || !docs[0].Purchased || !docs[1].Purchased {
		t.Fatalf("GET /documents: %d %s; want both documents, purchased", status, body)
	}
	if b, _ := a.balance(context.Background()); b != 9000 {
		t.Fatalf("balance = %d; want 9000", b)
	}
}

// syncBuffer is a bytes.Buffer safe for a process to write while the test
// reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

var servingAddr = regexp.MustCompile(`msg=serving addr=(http://\S+)`)

// startServer starts "fieldnotes serve" on addr (a loopback address, port 0
// for a free one) and returns its base URL and a function that stops it with
// SIGTERM and checks that it shut down cleanly.
func startServer(t *testing.T, dir, db, addr string) (string, func()) {
	t.Helper()
	cmd := exec.Command(bin, "serve", db, "--addr", addr)
	cmd.Dir = dir
	var stderr syncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stopped := false
	stop := func() {
		t.Helper()
		if stopped {
			return
		}
		stopped = true
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if err := cmd.Wait(); err != nil {
			t.Fatalf("serve after SIGTERM: %v; want a clean exit\n%s", err, stderr.String())
		}
	}
	t.Cleanup(func() {
		if !stopped {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if m := servingAddr.FindStringSubmatch(stderr.String()); m != nil {
			return m[1], stop
		}
	}
	t.Fatalf("serve did not report its address:\n%s", stderr.String())
	return "", nil
}

// TestIdempotencyKeyAcrossRestart: the response to a purchase with an
// Idempotency-Key is stored with the payment, so a retry after the server
// restarted gets the same response and the wallet is debited once.
func TestIdempotencyKeyAcrossRestart(t *testing.T) {
	dir := t.TempDir()
	const db = "./serve.sqlite"
	mustRun(t, dir, "init", db)
	key := map[string]string{"Idempotency-Key": "3b0c8e1e-purchase-7"}

	url, stop := startServer(t, dir, db, "127.0.0.1:0")
	status, first, resp := call(t, "POST", url+"/documents/document-7/purchase", key)
	if status != http.StatusCreated || resp.Header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("first purchase: %d %s; want 201, not replayed", status, first)
	}
	stop()

	url, stop = startServer(t, dir, db, "127.0.0.1:0")
	defer stop()
	status, again, resp := call(t, "POST", url+"/documents/document-7/purchase", key)
	if status != http.StatusCreated || again != first || resp.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("retry after restart: %d %s (replayed %q); want 201 %s, replayed", status, again, resp.Header.Get("Idempotent-Replayed"), first)
	}
	if status, body, _ := call(t, "GET", url+"/wallet", nil); status != http.StatusOK || strings.TrimSpace(body) != `{"balance_cents":9500}` {
		t.Fatalf("wallet: %d %s; want one debit, 9500", status, body)
	}
	if js := listJobs(t, dir, db); len(js) != 1 {
		t.Fatalf("jobs = %+v; want one receipt job", js)
	}
}

// TestListenAddrRefused: serve refuses an --addr whose host is not loopback
// as a usage error, before it opens the database or listens. The database
// does not exist, so a serve without the check fails on that instead, and
// nothing ever listens beyond loopback.
func TestListenAddrRefused(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing.sqlite")
	for _, addr := range []string{
		"0.0.0.0:4318", ":4318", "[::]:4318", "192.0.2.1:4318", "[2001:db8::1]:4318",
		"example.com:4318", "localhost.example.com:4318", "127.0.0.1",
	} {
		_, err := runInProcess(t, "serve", missing, "--addr", addr)
		var ue *usageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), "--addr") {
			t.Errorf("serve --addr %s: %v; want a usage error naming --addr", addr, err)
		}
	}

	out, errOut, err := fieldnotes(t, t.TempDir(), "serve", "missing.sqlite", "--addr", "0.0.0.0:4318")
	if code := exitCode(t, err); code != 2 || out != "" || strings.Count(errOut, "\n") != 1 || !strings.Contains(errOut, "127.0.0.1:PORT") {
		t.Fatalf("serve --addr 0.0.0.0:4318: exit %d, stdout %q, stderr %q; want exit 2 and one line saying to use 127.0.0.1:PORT", code, out, errOut)
	}
}

// TestListenAddrLoopback: every loopback form is accepted, and serve answers
// on localhost and, where the machine has it, on IPv6 loopback.
func TestListenAddrLoopback(t *testing.T) {
	for _, addr := range []string{
		"127.0.0.1:0", "127.8.9.10:4318", "[::1]:0", "localhost:0", "LocalHost:4318", "[::ffff:127.0.0.1]:0",
	} {
		if err := checkListenAddr(addr); err != nil {
			t.Errorf("checkListenAddr(%q) = %v; want nil", addr, err)
		}
	}

	addrs := []string{"localhost:0"}
	if ln, err := net.Listen("tcp", "[::1]:0"); err == nil {
		ln.Close()
		addrs = append(addrs, "[::1]:0")
	} else {
		t.Logf("no IPv6 loopback (%v): [::1] not served", err)
	}
	dir := t.TempDir()
	const db = "./loopback.sqlite"
	mustRun(t, dir, "init", db)
	for _, addr := range addrs {
		url, stop := startServer(t, dir, db, addr)
		if status, body, _ := call(t, "GET", url+"/wallet", nil); status != http.StatusOK {
			t.Fatalf("serve --addr %s: GET %s/wallet: %d %s; want 200", addr, url, status, body)
		}
		stop()
	}
}
