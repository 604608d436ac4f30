package errandhttp

import (
	"bufio"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"html/template"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode"
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

// CookieName is the cookie that /login sets for browsers.
const CookieName = "errand_token"

// AnonymousOperator is the operator recorded for requests to a server
// configured without tokens (loopback only; see [Auth]).
const AnonymousOperator = "local"

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
	tokens  []hashedToken
	maxBody int64
	cop     *http.CrossOriginProtection
	// sessionKey signs the /login cookie, which names a token and an
	// expiry rather than carrying the secret. It is new in every process,
	// so a restart ends every browser session.
	sessionKey [32]byte
	now        func() time.Time
}

// sessionLifetime is how long a /login cookie is good for.
const sessionLifetime = 12 * time.Hour

type hashedToken struct {
	name string
	role Role
	sum  [sha256.Size]byte
}

// NewAuth checks the tokens and returns the middleware. Two tokens with
// one secret, a secret shorter than MinSecretBytes, a name that is empty or
// not printable, or an unknown role is an error saying what to fix.
func NewAuth(opts *AuthOptions) (*Auth, error) {
	if opts == nil {
		opts = &AuthOptions{}
	}
	a := &Auth{maxBody: opts.MaxBodyBytes, cop: http.NewCrossOriginProtection(), now: time.Now}
	if _, err := rand.Read(a.sessionKey[:]); err != nil {
		return nil, fmt.Errorf("session key: %w", err)
	}
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
		case len(t.Secret) < MinSecretBytes:
			return nil, fmt.Errorf("token %q: secret is %d bytes; use at least %d random bytes, e.g. openssl rand -hex 32", t.Name, len(t.Secret), MinSecretBytes)
		case strings.ContainsFunc(t.Secret, func(r rune) bool { return r <= ' ' || r == 0x7f }):
			return nil, fmt.Errorf("token %q: secret contains a space or control character; use letters and digits", t.Name)
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

// lookup finds the token whose secret is secret. It compares the secret's
// hash with every token's in constant time and without stopping at a
// match, so neither timing nor length tells a guesser how close it came.
func (a *Auth) lookup(secret string) (hashedToken, bool) {
	sum := sha256.Sum256([]byte(secret))
	var found hashedToken
	ok := 0
	for _, t := range a.tokens {
		eq := subtle.ConstantTimeCompare(sum[:], t.sum[:])
		if eq == 1 {
			found = t
		}
		ok |= eq
	}
	return found, ok == 1
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
		setSecurityHeaders(w.Header())
		if r.ContentLength > a.maxBody {
			writeError(w, http.StatusRequestEntityTooLarge, "too_large", fmt.Sprintf("request body is %d bytes; the limit is %d", r.ContentLength, a.maxBody))
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, a.maxBody)
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
		return a.session(ck.Value)
	}
	if secret == "" {
		return caller{}, false
	}
	t, ok := a.lookup(secret)
	if !ok {
		return caller{}, false
	}
	return caller{name: t.name, canWrite: t.role == RoleOperator}, true
}

var loginPage = template.Must(template.New("login").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>errand: sign in</title></head>
<body>
<h1>errand</h1>
{{if .Failed}}<p role="alert">That token is not valid.</p>{{end}}
<form method="post" action="/login">
<label>Token <input type="password" name="token" autocomplete="current-password" required autofocus></label>
<button type="submit">Sign in</button>
</form>
</body></html>
`))

// serveLogin shows the sign-in form (GET) or checks the token it posts and
// sets the errand_token cookie: HttpOnly, SameSite=Strict, Secure over
// TLS. The cross-origin check has already run, so another site cannot sign
// a browser in with its own token.
func (a *Auth) serveLogin(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_ = loginPage.Execute(w, struct{ Failed bool }{})
	case http.MethodPost:
		secret := r.PostFormValue("token")
		t, ok := a.lookup(secret)
		if !ok || a.Open() {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			w.WriteHeader(http.StatusUnauthorized)
			_ = loginPage.Execute(w, struct{ Failed bool }{true})
			return
		}
		http.SetCookie(w, &http.Cookie{Name: CookieName, Value: a.newSession(t), Path: "/", HttpOnly: true,
			SameSite: http.SameSiteStrictMode, Secure: secureRequest(r), MaxAge: int(sessionLifetime / time.Second)})
		http.Redirect(w, r, "/", http.StatusSeeOther)
	default:
		w.Header().Set("Allow", "GET, POST")
		writeError(w, http.StatusMethodNotAllowed, "method_not_allowed", "use GET or POST")
	}
}

// serveLogout clears the cookie (POST only, so a link cannot sign anyone
// out).
func (a *Auth) serveLogout(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		writeError(w, http.StatusMethodNotAllowed, "method_not_allowed", "use POST")
		return
	}
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: "", Path: "/", HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: secureRequest(r), MaxAge: -1})
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

// newSession returns a /login cookie's value for token t: the token's
// position, an expiry, and an HMAC of both under the process's session key.
// The secret itself never goes into the cookie.
func (a *Auth) newSession(t hashedToken) string {
	for i := range a.tokens {
		if a.tokens[i].sum == t.sum {
			payload := strconv.Itoa(i) + "." + strconv.FormatInt(a.now().Add(sessionLifetime).Unix(), 10)
			return payload + "." + a.sign(payload)
		}
	}
	return ""
}

// session checks a /login cookie's value and returns its token's caller.
func (a *Auth) session(v string) (caller, bool) {
	payload, mac, ok := cutLast(v, ".")
	if !ok || !hmac.Equal([]byte(mac), []byte(a.sign(payload))) {
		return caller{}, false
	}
	idx, exp, ok := strings.Cut(payload, ".")
	if !ok {
		return caller{}, false
	}
	i, err1 := strconv.Atoi(idx)
	e, err2 := strconv.ParseInt(exp, 10, 64)
	if err1 != nil || err2 != nil || i < 0 || i >= len(a.tokens) || a.now().Unix() >= e {
		return caller{}, false
	}
	t := a.tokens[i]
	return caller{name: t.name, canWrite: t.role == RoleOperator}, true
}

func (a *Auth) sign(payload string) string {
	m := hmac.New(sha256.New, a.sessionKey[:])
	m.Write([]byte(payload))
	return hex.EncodeToString(m.Sum(nil))
}

func cutLast(s, sep string) (before, after string, found bool) {
	if i := strings.LastIndex(s, sep); i >= 0 {
		return s[:i], s[i+len(sep):], true
	}
	return s, "", false
}

// secureRequest reports whether the browser reached this server over TLS,
// directly or through a proxy that says so, so the cookie is marked Secure.
func secureRequest(r *http.Request) bool {
	return r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https")
}
