package errandhttp

import (
	"bufio"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"html/template"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/errandhq/errand/errandstore"
)

// Role is what a token may do.
type Role string

const (
	// RoleRead may read: list jobs, inspect them, read statistics.
	RoleRead Role = "read"
	// RoleOperator may also change things: enqueue, claim and record
	// outcomes, replay and cancel.
	RoleOperator Role = "operator"
)

// Token is one credential: a secret, the role it grants, and the name
// recorded as the operator in the audit of what its holder does.
type Token struct {
	// Name identifies the holder ("alice", "billing-worker"): the operator
	// of a replay, the default lease owner of a claim.
	Name string
	// Secret is what the client sends: Authorization: Bearer SECRET, or
	// the errand_token cookie that /login sets.
	Secret string
	// Role is RoleRead or RoleOperator.
	Role Role
}

// MinSecretBytes is the shortest secret a token may have.
const MinSecretBytes = 16

// CheckSecret refuses a secret that is short, holds a space or control
// character, or is trivially predictable: fewer than 6 distinct
// characters, a repeated pattern ("abcabc..."), or mostly runs of equal or
// consecutive characters ("0123456789ab..."). It catches the careless, not
// every weak secret: generate secrets, e.g. openssl rand -hex 32.
func CheckSecret(secret string) error {
	const advice = "generate one, e.g. openssl rand -hex 32"
	switch {
	case len(secret) < MinSecretBytes:
		return fmt.Errorf("secret is %d bytes; use at least %d random bytes: %s", len(secret), MinSecretBytes, advice)
	case strings.ContainsFunc(secret, func(r rune) bool { return r <= ' ' || r == 0x7f }):
		return fmt.Errorf("secret contains a space or control character; use letters and digits: %s", advice)
	case predictable(secret):
		return fmt.Errorf("secret is too predictable (repeated or consecutive characters); %s", advice)
	}
	return nil
}

// predictable reports whether s is one of the patterns CheckSecret names.
func predictable(s string) bool {
	distinct := map[byte]bool{}
	for i := range len(s) {
		distinct[s[i]] = true
	}
	if len(distinct) < 6 {
		return true
	}
	for p := 1; p <= len(s)/2; p++ {
		if s[p:] == s[:len(s)-p] {
			return true
		}
	}
	runs := 0
	for i := 1; i < len(s); i++ {
		if d := int(s[i]) - int(s[i-1]); d >= -1 && d <= 1 {
			runs++
		}
	}
	return runs*4 >= (len(s)-1)*3
}

// CookieName is the cookie that /login sets for browsers.
const CookieName = "errand_token"

// AnonymousOperator is the operator recorded for requests to a server
// configured without tokens (loopback only; see [Auth]).
const AnonymousOperator = "local"

// PublicCaller is the operator [Identity] names for a request that
// [Auth.WrapPublic] let in without a token.
const PublicCaller = "anonymous"

// AuthOptions configure [NewAuth].
type AuthOptions struct {
	// Tokens are the accepted credentials. None means every request is
	// let in as an operator named AnonymousOperator: only for a server
	// bound to a loopback address, which errand serve enforces.
	Tokens []Token
	// MaxBodyBytes caps every request body; a larger one is answered 413.
	// Zero means DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// TrustedOrigins are origins (scheme://host[:port]) other than the
	// server's own whose browsers may send state-changing requests, e.g. a
	// reverse proxy's public name when it rewrites Host.
	TrustedOrigins []string
	// TrustProxy believes X-Forwarded-Proto (a cookie set over https is
	// marked Secure) and X-Forwarded-For (the client address whose failed
	// sign-ins are throttled). Set it only behind a proxy that sets both:
	// otherwise any client may claim them.
	TrustProxy bool
	// Clock times sessions and sign-in throttling. Nil means the system
	// clock.
	Clock errandstore.Clock
}

// DefaultMaxBodyBytes caps request bodies: a job's args may be 1 MiB, and
// the request around them a little more.
const DefaultMaxBodyBytes = 2 << 20

// Auth is the middleware in front of every errand HTTP handler: security
// headers on every response, the request body cap, authentication by
// bearer token or cookie, the two roles, protection against cross-site
// requests, and the /login and /logout pages for browsers. Build it with
// [NewAuth] and wrap handlers with [Auth.Wrap].
type Auth struct {
	tokens     []hashedToken
	maxBody    int64
	cop        *http.CrossOriginProtection
	trustProxy bool
	sessions   *sessions
	throttle   *loginThrottle
}

type hashedToken struct {
	name string
	role Role
	sum  [sha256.Size]byte
}

// NewAuth checks the tokens and returns the middleware. Two tokens with
// one secret, a secret shorter than MinSecretBytes or too predictable
// (see [CheckSecret]), a name that is empty or not printable, or an
// unknown role is an error saying what to fix.
func NewAuth(opts *AuthOptions) (*Auth, error) {
	if opts == nil {
		opts = &AuthOptions{}
	}
	var clock errandstore.Clock = systemClock{}
	if opts.Clock != nil {
		clock = opts.Clock
	}
	a := &Auth{maxBody: opts.MaxBodyBytes, cop: http.NewCrossOriginProtection(), trustProxy: opts.TrustProxy,
		sessions: &sessions{byID: map[[sha256.Size]byte]session{}, clock: clock.Now},
		throttle: &loginThrottle{byAddr: map[string]*loginTries{}, clock: clock.Now}}
	if a.maxBody == 0 {
		a.maxBody = DefaultMaxBodyBytes
	}
	if a.maxBody < 0 {
		return nil, errors.New("max body bytes is negative; give a positive cap or 0 for the default")
	}
	seen := map[[sha256.Size]byte]string{}
	for i, t := range opts.Tokens {
		switch {
		case t.Role != RoleRead && t.Role != RoleOperator:
			return nil, fmt.Errorf("token %d: role %q is unknown; use %q or %q", i+1, t.Role, RoleRead, RoleOperator)
		case !validName(t.Name):
			return nil, fmt.Errorf("token %d: name %q must be 1 to 64 printable characters without spaces", i+1, t.Name)
		}
		if err := CheckSecret(t.Secret); err != nil {
			return nil, fmt.Errorf("token %q: %w", t.Name, err)
		}
		sum := sha256.Sum256([]byte(t.Secret))
		if other, dup := seen[sum]; dup {
			return nil, fmt.Errorf("tokens %q and %q have the same secret; give each its own", other, t.Name)
		}
		seen[sum] = t.Name
		a.tokens = append(a.tokens, hashedToken{name: t.Name, role: t.Role, sum: sum})
	}
	for _, o := range opts.TrustedOrigins {
		if err := a.cop.AddTrustedOrigin(o); err != nil {
			return nil, fmt.Errorf("trusted origin %q: %w", o, err)
		}
	}
	return a, nil
}

func validName(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, r := range s {
		if unicode.IsSpace(r) || !unicode.IsPrint(r) {
			return false
		}
	}
	return true
}

// Open reports whether the middleware lets requests in without a token.
func (a *Auth) Open() bool { return len(a.tokens) == 0 }

// lookup finds the index of the token whose secret is secret. It compares
// the secret's hash with every token's in constant time and without
// stopping at a match, so neither timing nor length tells a guesser how
// close it came.
func (a *Auth) lookup(secret string) (int, bool) {
	sum := sha256.Sum256([]byte(secret))
	found, ok := 0, 0
	for i, t := range a.tokens {
		eq := subtle.ConstantTimeCompare(sum[:], t.sum[:])
		found = subtle.ConstantTimeSelect(eq, i, found)
		ok |= eq
	}
	return found, ok == 1
}

// callerOf is the caller a token makes.
func (a *Auth) callerOf(i int) caller {
	t := a.tokens[i]
	return caller{name: t.name, canWrite: t.role == RoleOperator}
}

// caller is who made a request.
type caller struct {
	name     string
	canWrite bool
}

type callerKey struct{}

// Identity returns who made r and whether they may change things: the
// token's name and role, as the middleware found them. It has the shape
// of the dashboard's Identity option. Outside the middleware it returns
// AnonymousOperator and true, as for a server without tokens.
func Identity(r *http.Request) (operator string, canWrite bool) {
	if c, ok := r.Context().Value(callerKey{}).(caller); ok {
		return c.name, c.canWrite
	}
	return AnonymousOperator, true
}

// safeMethod reports whether a request with method m changes nothing.
func safeMethod(m string) bool {
	return m == http.MethodGet || m == http.MethodHead || m == http.MethodOptions
}

// contentSecurityPolicy allows only the server's own scripts, styles and
// images, no framing, and forms that post back to it.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// setSecurityHeaders sets the headers every response carries.
func setSecurityHeaders(h http.Header) {
	h.Set("Content-Security-Policy", contentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
	h.Set("Cache-Control", "no-store")
}

// Wrap returns next behind the middleware:
//
//   - every response carries a strict Content-Security-Policy, nosniff,
//     no framing, no referrer and no caching;
//   - a request body past the cap fails to read (the API answers 413);
//   - /login and /logout are served here;
//   - a request without a valid token (Authorization: Bearer, or the
//     errand_token cookie) is answered 401, or, for a browser asking for a
//     page, redirected to /login;
//   - a state-changing request (not GET, HEAD or OPTIONS) must pass the
//     cross-origin check (Sec-Fetch-Site or Origin must be this server's,
//     as http.CrossOriginProtection decides) and needs the operator role,
//     else 403.
//
// The caller's identity travels in the request's context: see [Identity].
func (a *Auth) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !a.guard(w, r) {
			return
		}
		if a.Open() && !loopbackHost(r.Host) {
			// Without tokens only the local machine may call, and a page
			// whose name an attacker rebinds to 127.0.0.1 is not the local
			// machine: its requests name the attacker's host.
			writeError(w, http.StatusForbidden, "forbidden_host", fmt.Sprintf("host %q refused: a server without tokens answers only requests addressed to localhost or a loopback address; configure tokens to serve other names", r.Host))
			return
		}
		if !safeMethod(r.Method) {
			if err := a.cop.Check(r); err != nil {
				writeError(w, http.StatusForbidden, "cross_origin", "cross-origin request refused: send state-changing requests from this server's own pages or without a browser")
				return
			}
		}
		switch r.URL.Path {
		case "/login":
			a.serveLogin(w, r)
			return
		case "/logout":
			a.serveLogout(w, r)
			return
		}
		c, ok := a.authenticate(r)
		if !ok {
			if r.Method == http.MethodGet && !strings.HasPrefix(r.URL.Path, "/api/") && strings.Contains(r.Header.Get("Accept"), "text/html") {
				http.Redirect(w, r, "/login", http.StatusSeeOther)
				return
			}
			w.Header().Set("WWW-Authenticate", `Bearer realm="errand"`)
			writeError(w, http.StatusUnauthorized, "unauthorized", "missing or unknown token; send Authorization: Bearer TOKEN")
			return
		}
		if !safeMethod(r.Method) && !c.canWrite {
			writeError(w, http.StatusForbidden, "forbidden", "this token is read-only; use an operator token to change anything")
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), callerKey{}, c)))
	})
}

// guard sets the security headers and caps the body; a body declared
// past the cap is answered 413 and guard returns false.
func (a *Auth) guard(w http.ResponseWriter, r *http.Request) bool {
	setSecurityHeaders(w.Header())
	if r.ContentLength > a.maxBody {
		writeError(w, http.StatusRequestEntityTooLarge, "too_large", fmt.Sprintf("request body is %d bytes; the limit is %d", r.ContentLength, a.maxBody))
		return false
	}
	r.Body = http.MaxBytesReader(w, r.Body, a.maxBody)
	return true
}

// WrapPublic returns next with the security headers and the body cap of
// [Auth.Wrap], and no authentication: for what anyone may read, such as a
// liveness check. [Identity] tells next the caller is anonymous and may
// change nothing.
func (a *Auth) WrapPublic(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !a.guard(w, r) {
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), callerKey{}, caller{name: PublicCaller})))
	})
}

// authenticate finds the caller by bearer token, then by cookie.
func (a *Auth) authenticate(r *http.Request) (caller, bool) {
	if a.Open() {
		return caller{name: AnonymousOperator, canWrite: true}, true
	}
	secret := ""
	if h := r.Header.Get("Authorization"); h != "" {
		scheme, value, ok := strings.Cut(h, " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") {
			return caller{}, false
		}
		secret = strings.TrimSpace(value)
	} else if ck, err := r.Cookie(CookieName); err == nil {
		i, ok := a.sessions.token(ck.Value)
		if !ok {
			return caller{}, false
		}
		return a.callerOf(i), true
	}
	if secret == "" {
		return caller{}, false
	}
	i, ok := a.lookup(secret)
	if !ok {
		return caller{}, false
	}
	return a.callerOf(i), true
}

var loginPage = template.Must(template.New("login").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>errand: sign in</title></head>
<body>
<h1>errand</h1>
{{with .Alert}}<p role="alert">{{.}}</p>{{end}}
<form method="post" action="/login">
<label>Token <input type="password" name="token" autocomplete="current-password" required autofocus></label>
<button type="submit">Sign in</button>
</form>
</body></html>
`))

// serveLogin shows the sign-in form (GET) or checks the token it posts and
// sets the errand_token cookie: HttpOnly, SameSite=Strict, Secure over
// TLS. The cross-origin check has already run, so another site cannot sign
// a browser in with its own token. An address that failed too often is
// answered 429 without its token being checked.
func (a *Auth) serveLogin(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		loginForm(w, http.StatusOK, "")
	case http.MethodPost:
		addr := a.clientAddr(r)
		if wait := a.throttle.wait(addr); wait > 0 {
			secs := int(math.Ceil(wait.Seconds()))
			w.Header().Set("Retry-After", strconv.Itoa(secs))
			loginForm(w, http.StatusTooManyRequests, fmt.Sprintf("Too many failed sign-ins from your address; try again in %d seconds.", secs))
			return
		}
		i, ok := a.lookup(r.PostFormValue("token"))
		if !ok || a.Open() {
			a.throttle.fail(addr)
			loginForm(w, http.StatusUnauthorized, "That token is not valid.")
			return
		}
		http.SetCookie(w, &http.Cookie{Name: CookieName, Value: a.sessions.start(i), Path: "/", HttpOnly: true,
			SameSite: http.SameSiteStrictMode, Secure: a.secureRequest(r), MaxAge: int(sessionLifetime / time.Second)})
		http.Redirect(w, r, "/", http.StatusSeeOther)
	default:
		w.Header().Set("Allow", "GET, POST")
		writeError(w, http.StatusMethodNotAllowed, "method_not_allowed", "use GET or POST")
	}
}

func loginForm(w http.ResponseWriter, status int, alert string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_ = loginPage.Execute(w, struct{ Alert string }{alert})
}

// serveLogout ends the session, whose cookie is then worth nothing even if
// kept, and clears the cookie (POST only, so a link cannot sign anyone
// out).
func (a *Auth) serveLogout(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		writeError(w, http.StatusMethodNotAllowed, "method_not_allowed", "use POST")
		return
	}
	if ck, err := r.Cookie(CookieName); err == nil {
		a.sessions.end(ck.Value)
	}
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: "", Path: "/", HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: a.secureRequest(r), MaxAge: -1})
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}

// ReadTokenFile reads tokens from a file, one per line:
//
//	# role   name    secret
//	operator alice   3f9c0d...
//	read     grafana 77b2e1...
//
// Blank lines and lines starting with # are skipped. The file should be
// readable by its owner alone; a file others may read is refused.
func ReadTokenFile(path string) ([]Token, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("token file: %w", err)
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("token file %s is readable by others (mode %s); chmod 600 it", path, fi.Mode().Perm())
	}
	return parseTokens(f, path)
}

func parseTokens(r io.Reader, path string) ([]Token, error) {
	var ts []Token
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 3 {
			return nil, fmt.Errorf("token file %s line %d: write ROLE NAME SECRET, e.g. operator alice 3f9c0d...", path, n)
		}
		ts = append(ts, Token{Role: Role(f[0]), Name: f[1], Secret: f[2]})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("token file %s: %w", path, err)
	}
	return ts, nil
}

// loopbackHost reports whether the Host header names this machine's
// loopback interface: localhost or a loopback address, with any port.
func loopbackHost(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
