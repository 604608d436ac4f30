package errandhttp_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/errandhq/errand/errandhttp"
)

func TestEveryRequestNeedsAToken(t *testing.T) {
	clock := newTestClock()
	s := newServer(t, openSQLite(t, clock), clock, nil)
	enqueue := map[string]any{"kind": "task"}
	for _, tc := range []struct {
		name   string
		header map[string]string
	}{
		{"none", nil},
		{"unknown", map[string]string{"Authorization": "Bearer not-a-token-at-all-000"}},
		{"a prefix of a real one", map[string]string{"Authorization": "Bearer " + operatorSecret[:len(operatorSecret)-1]}},
		{"a real one extended", map[string]string{"Authorization": "Bearer " + operatorSecret + "x"}},
		{"basic scheme", map[string]string{"Authorization": "Basic " + operatorSecret}},
		{"unknown cookie", map[string]string{"Cookie": "errand_token=not-a-token-at-all-000"}},
	} {
		for _, q := range []req{
			{method: "GET", path: "/api/v1/jobs"},
			{method: "GET", path: "/api/v1/stats"},
			{method: "POST", path: "/api/v1/jobs", body: enqueue},
		} {
			q.header = tc.header
			r := s.do(t, q)
			want(t, tc.name+": "+q.method+" "+q.path, r, http.StatusUnauthorized, "unauthorized")
			if r.header.Get("WWW-Authenticate") == "" {
				t.Errorf("%s: no WWW-Authenticate", tc.name)
			}
		}
	}
	if n := s.jobCount(t); n != 0 {
		t.Fatalf("unauthenticated requests wrote %d jobs", n)
	}
	// A browser asking for a page is sent to the sign-in form.
	r := s.do(t, req{method: "GET", path: "/", header: map[string]string{"Accept": "text/html"}})
	if r.status != http.StatusSeeOther || r.header.Get("Location") != "/login" {
		t.Fatalf("browser without a token: %d %s", r.status, r.header.Get("Location"))
	}
}

func TestReadTokenCannotChangeAnything(t *testing.T) {
	clock := newTestClock()
	s := newServer(t, openSQLite(t, clock), clock, nil)
	want(t, "reader lists", s.do(t, req{method: "GET", path: "/api/v1/jobs", token: readerSecret}), http.StatusOK, "")
	for _, path := range []string{"/api/v1/jobs", "/api/v1/queues/default/claim", "/api/v1/jobs/x/ack", "/api/v1/jobs/x/cancel"} {
		r := s.do(t, req{method: "POST", path: path, token: readerSecret, body: map[string]any{"kind": "task", "kinds": []string{"task"}}})
		want(t, "reader posts "+path, r, http.StatusForbidden, "forbidden")
	}
	want(t, "operator enqueues", s.op(t, "POST", "/api/v1/jobs", map[string]any{"kind": "task"}), http.StatusCreated, "")
	if n := s.jobCount(t); n != 1 {
		t.Fatalf("%d jobs, want only the operator's", n)
	}
}

func TestCrossSiteRequestsAreRefused(t *testing.T) {
	clock := newTestClock()
	s := newServer(t, openSQLite(t, clock), clock, nil)
	login := s.do(t, req{method: "POST", path: "/login", body: "token=" + url.QueryEscape(operatorSecret),
		header: map[string]string{"Content-Type": "application/x-www-form-urlencoded"}})
	session := (&http.Response{Header: login.header}).Cookies()
	if len(session) != 1 {
		t.Fatalf("login: %d %v", login.status, login.header)
	}
	cookie := map[string]string{"Cookie": "errand_token=" + session[0].Value}
	for _, h := range []map[string]string{
		{"Sec-Fetch-Site": "cross-site"},
		{"Sec-Fetch-Site": "same-site"},
		{"Origin": "https://evil.example"},
	} {
		for k, v := range cookie {
			h[k] = v
		}
		r := s.do(t, req{method: "POST", path: "/api/v1/jobs", body: map[string]any{"kind": "task"}, header: h})
		want(t, "cross-site post", r, http.StatusForbidden, "cross_origin")
		// Even a bearer token does not make a browser's cross-site POST
		// acceptable.
		r = s.do(t, req{method: "POST", path: "/api/v1/jobs", token: operatorSecret, body: map[string]any{"kind": "task"}, header: h})
		want(t, "cross-site post with a bearer token", r, http.StatusForbidden, "cross_origin")
	}
	// A cross-site login could sign a browser in as the attacker.
	r := s.do(t, req{method: "POST", path: "/login", body: "token=" + operatorSecret,
		header: map[string]string{"Content-Type": "application/x-www-form-urlencoded", "Sec-Fetch-Site": "cross-site"}})
	want(t, "cross-site login", r, http.StatusForbidden, "cross_origin")
	if n := s.jobCount(t); n != 0 {
		t.Fatalf("cross-site requests wrote %d jobs", n)
	}
	// The server's own pages may post, and reading cross-site is allowed.
	same := map[string]string{"Sec-Fetch-Site": "same-origin", "Cookie": "errand_token=" + session[0].Value}
	want(t, "same-origin post", s.do(t, req{method: "POST", path: "/api/v1/jobs", body: map[string]any{"kind": "task"}, header: same}), http.StatusCreated, "")
	want(t, "cross-site get", s.do(t, req{method: "GET", path: "/api/v1/jobs", token: readerSecret, header: map[string]string{"Sec-Fetch-Site": "cross-site"}}), http.StatusOK, "")
}

func TestLoginSetsAStrictCookie(t *testing.T) {
	clock := newTestClock()
	s := newServer(t, openSQLite(t, clock), clock, nil)
	form := map[string]string{"Content-Type": "application/x-www-form-urlencoded"}

	page := s.do(t, req{method: "GET", path: "/login"})
	if page.status != http.StatusOK || !strings.Contains(string(page.body), `<form method="post" action="/login">`) {
		t.Fatalf("login page: %d %s", page.status, page.body)
	}
	bad := s.do(t, req{method: "POST", path: "/login", body: "token=wrong-token-0123456789", header: form})
	if bad.status != http.StatusUnauthorized || len(bad.header.Values("Set-Cookie")) != 0 {
		t.Fatalf("bad login: %d, cookies %v", bad.status, bad.header.Values("Set-Cookie"))
	}
	ok := s.do(t, req{method: "POST", path: "/login", body: "token=" + url.QueryEscape(readerSecret), header: form})
	if ok.status != http.StatusSeeOther || ok.header.Get("Location") != "/" {
		t.Fatalf("login: %d %s", ok.status, ok.body)
	}
	resp := http.Response{Header: ok.header}
	cookies := resp.Cookies()
	if len(cookies) != 1 {
		t.Fatalf("cookies %v", ok.header.Values("Set-Cookie"))
	}
	c := cookies[0]
	if c.Name != errandhttp.CookieName || strings.Contains(c.Value, readerSecret) || !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != "/" {
		t.Fatalf("cookie %+v: want a signed session, HttpOnly, SameSite=Strict, never the secret", c)
	}
	withCookie := map[string]string{"Cookie": c.Name + "=" + c.Value}
	want(t, "read by cookie", s.do(t, req{method: "GET", path: "/api/v1/jobs", header: withCookie}), http.StatusOK, "")
	// A cookie is good only as the server signed it: not the raw secret,
	// not another token's position under the same signature.
	for _, forged := range []string{readerSecret, strings.Replace(c.Value, "1.", "0.", 1), c.Value + "0", "0.99999999999.00"} {
		if forged == c.Value {
			continue
		}
		h := map[string]string{"Cookie": c.Name + "=" + forged}
		want(t, "forged cookie "+forged, s.do(t, req{method: "GET", path: "/api/v1/jobs", header: h}), http.StatusUnauthorized, "unauthorized")
	}
	want(t, "reader's cookie posts", s.do(t, req{method: "POST", path: "/api/v1/jobs", body: map[string]any{"kind": "task"}, header: withCookie}), http.StatusForbidden, "forbidden")

	out := s.do(t, req{method: "POST", path: "/logout", header: withCookie})
	if out.status != http.StatusSeeOther || !strings.Contains(out.header.Get("Set-Cookie"), "Max-Age=0") {
		t.Fatalf("logout: %d %v", out.status, out.header)
	}
	want(t, "logout by GET", s.do(t, req{method: "GET", path: "/logout"}), http.StatusMethodNotAllowed, "method_not_allowed")
}

func TestSecurityHeadersOnEveryResponse(t *testing.T) {
	clock := newTestClock()
	s := newServer(t, openSQLite(t, clock), clock, nil)
	for _, q := range []req{
		{method: "GET", path: "/api/v1/jobs", token: readerSecret},
		{method: "GET", path: "/api/v1/jobs"},
		{method: "GET", path: "/api/v1/jobs/none", token: readerSecret},
		{method: "GET", path: "/api/v1/nothing", token: readerSecret},
		{method: "GET", path: "/login"},
		{method: "POST", path: "/api/v1/jobs", token: operatorSecret, body: "{"},
	} {
		r := s.do(t, q)
		csp := r.header.Get("Content-Security-Policy")
		if !strings.Contains(csp, "default-src 'none'") || !strings.Contains(csp, "frame-ancestors 'none'") ||
			r.header.Get("X-Content-Type-Options") != "nosniff" || r.header.Get("X-Frame-Options") != "DENY" ||
			r.header.Get("Referrer-Policy") != "no-referrer" {
			t.Errorf("%s %s (%d): headers %v", q.method, q.path, r.status, r.header)
		}
	}
}

func TestBodyCap(t *testing.T) {
	clock := newTestClock()
	s := newServer(t, openSQLite(t, clock), clock, &errandhttp.Options{Auth: &errandhttp.AuthOptions{Tokens: testTokens, MaxBodyBytes: 1024}})
	big := `{"kind": "task", "args": {"x": "` + strings.Repeat("a", 2000) + `"}}`
	want(t, "declared length", s.op(t, "POST", "/api/v1/jobs", big), http.StatusRequestEntityTooLarge, "too_large")

	// A chunked body, whose length nobody declared, is cut while read.
	r, err := http.NewRequest("POST", s.URL+"/api/v1/jobs", struct{ *strings.Reader }{strings.NewReader(big)})
	if err != nil {
		t.Fatal(err)
	}
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Authorization", "Bearer "+operatorSecret)
	resp, err := http.DefaultClient.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge || r.ContentLength != -1 && r.ContentLength != 0 {
		t.Fatalf("chunked: %d (length %d)", resp.StatusCode, r.ContentLength)
	}
	if n := s.jobCount(t); n != 0 {
		t.Fatalf("oversized bodies wrote %d jobs", n)
	}
}

func TestIdentityReachesTheHandler(t *testing.T) {
	auth, err := errandhttp.NewAuth(&errandhttp.AuthOptions{Tokens: testTokens})
	if err != nil {
		t.Fatal(err)
	}
	var name string
	var canWrite bool
	h := auth.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name, canWrite = errandhttp.Identity(r)
	}))
	for _, tc := range []struct {
		secret   string
		name     string
		canWrite bool
	}{{operatorSecret, "alice", true}, {readerSecret, "grafana", false}} {
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set("Authorization", "Bearer "+tc.secret)
		h.ServeHTTP(httptest.NewRecorder(), r)
		if name != tc.name || canWrite != tc.canWrite {
			t.Errorf("identity %q %v, want %q %v", name, canWrite, tc.name, tc.canWrite)
		}
	}
	open, _ := errandhttp.NewAuth(nil)
	local := httptest.NewRequest("GET", "/", nil)
	local.Host = "127.0.0.1:8080"
	open.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name, canWrite = errandhttp.Identity(r)
	})).ServeHTTP(httptest.NewRecorder(), local)
	if name != errandhttp.AnonymousOperator || !canWrite {
		t.Errorf("without tokens: %q %v", name, canWrite)
	}
}

// TestOpenServerRefusesOtherHosts: a server without tokens answers only
// requests addressed to the loopback interface, so a page whose name an
// attacker rebinds to 127.0.0.1 can neither read nor write through it.
func TestOpenServerRefusesOtherHosts(t *testing.T) {
	open, err := errandhttp.NewAuth(nil)
	if err != nil {
		t.Fatal(err)
	}
	reached := false
	h := open.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { reached = true }))
	for _, tc := range []struct {
		host string
		want int
	}{
		{"127.0.0.1:8080", http.StatusOK},
		{"localhost:8080", http.StatusOK},
		{"LOCALHOST", http.StatusOK},
		{"[::1]:8080", http.StatusOK},
		{"127.0.0.2", http.StatusOK},
		{"rebind.attacker.example:8080", http.StatusForbidden},
		{"localhost.attacker.example", http.StatusForbidden},
		{"10.0.0.5:8080", http.StatusForbidden},
	} {
		for _, method := range []string{"GET", "POST"} {
			reached = false
			r := httptest.NewRequest(method, "/api/v1/jobs", strings.NewReader(`{}`))
			r.Host = tc.host
			r.Header.Set("Content-Type", "application/json")
			r.Header.Set("Sec-Fetch-Site", "same-origin")
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != tc.want || reached != (tc.want == http.StatusOK) {
				t.Errorf("%s with Host %q: %d (handler reached %v), want %d", method, tc.host, w.Code, reached, tc.want)
			}
		}
	}
}

func TestNewAuthRefusesBadTokens(t *testing.T) {
	for _, tc := range []struct {
		name   string
		tokens []errandhttp.Token
		want   string
	}{
		{"short", []errandhttp.Token{{Name: "a", Secret: "short", Role: errandhttp.RoleOperator}}, "at least 16"},
		{"role", []errandhttp.Token{{Name: "a", Secret: operatorSecret, Role: "admin"}}, "role"},
		{"name", []errandhttp.Token{{Name: "a b", Secret: operatorSecret, Role: errandhttp.RoleRead}}, "name"},
		{"space", []errandhttp.Token{{Name: "a", Secret: "0123456789 abcdefgh", Role: errandhttp.RoleRead}}, "space"},
		{"one character", []errandhttp.Token{{Name: "a", Secret: strings.Repeat("a", 16), Role: errandhttp.RoleRead}}, "too predictable"},
		{"few characters", []errandhttp.Token{{Name: "a", Secret: "abcdeabcdeabcdeaaaaa", Role: errandhttp.RoleRead}}, "too predictable"},
		{"repeated", []errandhttp.Token{{Name: "a", Secret: strings.Repeat("k3Q9xZ", 4), Role: errandhttp.RoleRead}}, "too predictable"},
		{"consecutive", []errandhttp.Token{{Name: "a", Secret: "0123456789abcdefghij", Role: errandhttp.RoleRead}}, "openssl rand -hex 32"},
		{"same secret", []errandhttp.Token{{Name: "a", Secret: operatorSecret, Role: errandhttp.RoleRead}, {Name: "b", Secret: operatorSecret, Role: errandhttp.RoleOperator}}, "same secret"},
	} {
		if _, err := errandhttp.NewAuth(&errandhttp.AuthOptions{Tokens: tc.tokens}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error about %q", tc.name, err, tc.want)
		}
	}
}

func TestReadTokenFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens")
	body := "# role name secret\n\noperator alice " + operatorSecret + "\nread grafana " + readerSecret + "\n"
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	ts, err := errandhttp.ReadTokenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(ts) != 2 || ts[0] != testTokens[0] || ts[1] != testTokens[1] {
		t.Fatalf("tokens %+v", ts)
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := errandhttp.ReadTokenFile(path); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("a world-readable file: %v", err)
	}
	os.Remove(path)
	if err := os.WriteFile(path, []byte("operator alice\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := errandhttp.ReadTokenFile(path); err == nil || !strings.Contains(err.Error(), "line 1") {
		t.Fatalf("a short line: %v", err)
	}
}

// TestNewMountsOtherHandlersBehindAuth plugs handlers in where the
// dashboard, /metrics and the health checks go: each is behind the
// middleware and sees the caller through Identity.
func TestNewMountsOtherHandlersBehindAuth(t *testing.T) {
	clock := newTestClock()
	named := func(name string) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			op, canWrite := errandhttp.Identity(r)
			fmt.Fprintf(w, "%s %s %s %v", name, r.URL.Path, op, canWrite)
		})
	}
	s := newServer(t, openSQLite(t, clock), clock, &errandhttp.Options{
		Auth:      &errandhttp.AuthOptions{Tokens: testTokens},
		Dashboard: named("dashboard"), Metrics: named("metrics"), Healthz: named("healthz"), Readyz: named("readyz"),
	})
	for path, body := range map[string]string{
		"/":           "dashboard / grafana false",
		"/jobs/x":     "dashboard /jobs/x grafana false",
		"/metrics":    "metrics /metrics grafana false",
		"/readyz":     "readyz /readyz grafana false",
		"/api/v1/nil": "",
	} {
		r := s.do(t, req{method: "GET", path: path, token: readerSecret})
		if body != "" && (r.status != http.StatusOK || string(r.body) != body) {
			t.Errorf("GET %s: %d %q, want %q", path, r.status, r.body, body)
		}
		if r := s.do(t, req{method: "GET", path: path}); r.status != http.StatusUnauthorized {
			t.Errorf("GET %s without a token: %d", path, r.status)
		}
	}
	// A liveness probe needs no credentials, and the check learns that its
	// caller is no operator.
	for _, token := range []string{"", readerSecret} {
		r := s.do(t, req{method: "GET", path: "/healthz", token: token})
		if want := "healthz /healthz anonymous false"; r.status != http.StatusOK || string(r.body) != want || r.header.Get("Content-Security-Policy") == "" {
			t.Errorf("GET /healthz with token %q: %d %q %v, want %q with the security headers", token, r.status, r.body, r.header, want)
		}
	}
	if r := s.do(t, req{method: "POST", path: "/", token: operatorSecret, header: map[string]string{"Origin": "https://evil.example"}}); r.status != http.StatusForbidden {
		t.Errorf("a cross-site post to the dashboard: %d", r.status)
	}
}

// login signs in with secret and returns the session cookie's value.
func login(t *testing.T, s *server, secret string, header map[string]string) (response, string) {
	t.Helper()
	h := map[string]string{"Content-Type": "application/x-www-form-urlencoded"}
	for k, v := range header {
		h[k] = v
	}
	r := s.do(t, req{method: "POST", path: "/login", body: "token=" + url.QueryEscape(secret), header: h})
	for _, c := range (&http.Response{Header: r.header}).Cookies() {
		if c.Name == errandhttp.CookieName {
			return r, c.Value
		}
	}
	return r, ""
}

// TestLogoutEndsTheSession: after /logout the old cookie value, kept by a
// browser or copied elsewhere, no longer signs anyone in.
func TestLogoutEndsTheSession(t *testing.T) {
	clock := newTestClock()
	s := newServer(t, openSQLite(t, clock), clock, &errandhttp.Options{Auth: &errandhttp.AuthOptions{Tokens: testTokens, Clock: clock}})
	_, session := login(t, s, readerSecret, nil)
	_, other := login(t, s, readerSecret, nil)
	withCookie := func(v string) map[string]string { return map[string]string{"Cookie": errandhttp.CookieName + "=" + v} }
	want(t, "read by cookie", s.do(t, req{method: "GET", path: "/api/v1/jobs", header: withCookie(session)}), http.StatusOK, "")
	out := s.do(t, req{method: "POST", path: "/logout", header: withCookie(session)})
	if out.status != http.StatusSeeOther || !strings.Contains(out.header.Get("Set-Cookie"), "Max-Age=0") {
		t.Fatalf("logout: %d %v", out.status, out.header)
	}
	want(t, "read by the ended session's cookie", s.do(t, req{method: "GET", path: "/api/v1/jobs", header: withCookie(session)}), http.StatusUnauthorized, "unauthorized")
	want(t, "read by another session's cookie", s.do(t, req{method: "GET", path: "/api/v1/jobs", header: withCookie(other)}), http.StatusOK, "")
	clock.Advance(12 * time.Hour)
	want(t, "read by an expired session's cookie", s.do(t, req{method: "GET", path: "/api/v1/jobs", header: withCookie(other)}), http.StatusUnauthorized, "unauthorized")
}

// TestLoginThrottlesFailures: after five failed sign-ins an address waits,
// even with the right token; another address does not; the wait ends.
func TestLoginThrottlesFailures(t *testing.T) {
	clock := newTestClock()
	s := newServer(t, openSQLite(t, clock), clock, &errandhttp.Options{Auth: &errandhttp.AuthOptions{Tokens: testTokens, Clock: clock, TrustProxy: true}})
	from := func(addr string) map[string]string {
		return map[string]string{"X-Forwarded-For": "198.51.100.9, " + addr}
	}
	for i := range 5 {
		if r, _ := login(t, s, "wrong-token-0123456789", from("203.0.113.7")); r.status != http.StatusUnauthorized {
			t.Fatalf("failure %d: %d, want 401", i+1, r.status)
		}
	}
	r, cookie := login(t, s, readerSecret, from("203.0.113.7"))
	if r.status != http.StatusTooManyRequests || cookie != "" || r.header.Get("Retry-After") != "12" {
		t.Fatalf("sign-in after five failures: %d, Retry-After %q, cookie %q; want 429, 12 and none", r.status, r.header.Get("Retry-After"), cookie)
	}
	if r, cookie := login(t, s, readerSecret, from("203.0.113.8")); r.status != http.StatusSeeOther || cookie == "" {
		t.Fatalf("sign-in from another address: %d", r.status)
	}
	clock.Advance(12 * time.Second)
	if r, cookie := login(t, s, readerSecret, from("203.0.113.7")); r.status != http.StatusSeeOther || cookie == "" {
		t.Fatalf("sign-in after the wait: %d", r.status)
	}
}

// TestCookieSecureFollowsTLS: the session cookie is Secure over TLS, and
// behind a proxy's X-Forwarded-Proto only when the proxy is trusted.
func TestCookieSecureFollowsTLS(t *testing.T) {
	clock := newTestClock()
	st := openSQLite(t, clock)
	proto := map[string]string{"X-Forwarded-Proto": "https"}
	for _, tc := range []struct {
		name   string
		trust  bool
		secure bool
	}{
		{"plain http claiming https", false, false},
		{"trusted proxy", true, true},
	} {
		s := newServer(t, st, clock, &errandhttp.Options{Auth: &errandhttp.AuthOptions{Tokens: testTokens, TrustProxy: tc.trust}})
		r, _ := login(t, s, readerSecret, proto)
		if got := strings.Contains(r.header.Get("Set-Cookie"), "Secure"); r.status != http.StatusSeeOther || got != tc.secure {
			t.Errorf("%s: %d, cookie %q; want Secure %v", tc.name, r.status, r.header.Get("Set-Cookie"), tc.secure)
		}
	}
	s := newServer(t, st, clock, nil)
	tlsSrv := httptest.NewTLSServer(s.Config.Handler)
	defer tlsSrv.Close()
	client := tlsSrv.Client()
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := client.PostForm(tlsSrv.URL+"/login", url.Values{"token": {readerSecret}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if sc := resp.Header.Get("Set-Cookie"); resp.StatusCode != http.StatusSeeOther || !strings.Contains(sc, "Secure") {
		t.Errorf("over TLS: %d, cookie %q; want Secure", resp.StatusCode, sc)
	}
}

// TestReadTokenSeesNoLeaseToken: a running job's lease token, which fences
// its worker's writes, is null to a read-only token in every job view, and
// shown to an operator.
func TestReadTokenSeesNoLeaseToken(t *testing.T) {
	clock := newTestClock()
	s := newServer(t, openSQLite(t, clock), clock, nil)
	want(t, "enqueue", s.op(t, "POST", "/api/v1/jobs", map[string]any{"kind": "task", "id": "j-1"}), http.StatusCreated, "")
	want(t, "claim", s.op(t, "POST", "/api/v1/queues/default/claim", map[string]any{"kinds": []string{"task"}}), http.StatusOK, "")
	lease := *s.job(t, "j-1").LeaseToken
	for _, path := range []string{"/api/v1/jobs/j-1", "/api/v1/jobs?state=running"} {
		for token, shown := range map[string]bool{operatorSecret: true, readerSecret: false} {
			r := s.do(t, req{method: "GET", path: path, token: token})
			if r.status != http.StatusOK || strings.Contains(string(r.body), lease) != shown || !strings.Contains(string(r.body), `"lease_token"`) {
				t.Errorf("GET %s as %s: %d %s; want the lease token shown: %v, the field present", path, token[:6], r.status, r.body, shown)
			}
		}
	}
}
