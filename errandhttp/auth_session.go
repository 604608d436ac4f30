package errandhttp

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// sessionLifetime is how long a /login cookie is good for.
const sessionLifetime = 12 * time.Hour

// maxSessions bounds the sessions kept at once; past it, the one that would
// expire first ends. Only a token holder can start one.
const maxSessions = 1024

// sessions are the browser sessions /login started, held in the process:
// the cookie carries a random session id, and the server keeps only its
// hash, so /logout ends a session for good, and a restart ends them all.
type sessions struct {
	mu    sync.Mutex
	byID  map[[sha256.Size]byte]session
	clock func() time.Time
}

type session struct {
	token   int // index in Auth.tokens
	expires time.Time
}

// start returns the cookie value of a new session of token i.
func (s *sessions) start(i int) string {
	var b [32]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read does not fail
	id := hex.EncodeToString(b[:])
	now := s.clock()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.byID) >= maxSessions {
		s.evict(now)
	}
	s.byID[sha256.Sum256([]byte(id))] = session{token: i, expires: now.Add(sessionLifetime)}
	return id
}

// evict drops the expired sessions, or else the one that expires first.
func (s *sessions) evict(now time.Time) {
	var first [sha256.Size]byte
	var firstAt time.Time
	for k, v := range s.byID {
		if !v.expires.After(now) {
			delete(s.byID, k)
		} else if firstAt.IsZero() || v.expires.Before(firstAt) {
			first, firstAt = k, v.expires
		}
	}
	if len(s.byID) >= maxSessions {
		delete(s.byID, first)
	}
}

// token returns the token index of the live session whose cookie value is
// id. The map is keyed by the id's hash, so a lookup's timing tells nothing
// about the ids it holds.
func (s *sessions) token(id string) (int, bool) {
	k := sha256.Sum256([]byte(id))
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.byID[k]
	if ok && !v.expires.After(s.clock()) {
		delete(s.byID, k)
		ok = false
	}
	return v.token, ok
}

// end forgets the session whose cookie value is id.
func (s *sessions) end(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.byID, sha256.Sum256([]byte(id)))
}

// Sign-in throttling: each client address may fail loginBurst times at
// once, and earns one more try every loginRefill.
const (
	loginBurst  = 5
	loginRefill = 12 * time.Second
	// maxThrottled bounds the addresses remembered; past it, the one
	// whose failures are oldest is forgotten.
	maxThrottled = 4096
)

// loginThrottle counts /login failures per client address.
type loginThrottle struct {
	mu     sync.Mutex
	byAddr map[string]*loginTries
	clock  func() time.Time
}

// loginTries is an address's bucket: tries left as of at.
type loginTries struct {
	left float64
	at   time.Time
}

func (l *loginTries) refill(now time.Time) {
	l.left = min(loginBurst, l.left+float64(now.Sub(l.at))/float64(loginRefill))
	l.at = now
}

// wait returns how long addr must wait before its next try; 0 lets it try.
func (t *loginThrottle) wait(addr string) time.Duration {
	now := t.clock()
	t.mu.Lock()
	defer t.mu.Unlock()
	l := t.byAddr[addr]
	if l == nil {
		return 0
	}
	l.refill(now)
	if l.left >= 1 {
		return 0
	}
	return time.Duration((1 - l.left) * float64(loginRefill))
}

// fail spends one of addr's tries.
func (t *loginThrottle) fail(addr string) {
	now := t.clock()
	t.mu.Lock()
	defer t.mu.Unlock()
	l := t.byAddr[addr]
	if l == nil {
		if len(t.byAddr) >= maxThrottled {
			t.forgetOldest()
		}
		l = &loginTries{left: loginBurst, at: now}
		t.byAddr[addr] = l
	}
	l.refill(now)
	l.left = max(0, l.left-1)
}

func (t *loginThrottle) forgetOldest() {
	var oldest string
	var at time.Time
	for a, l := range t.byAddr {
		if at.IsZero() || l.at.Before(at) {
			oldest, at = a, l.at
		}
	}
	delete(t.byAddr, oldest)
}

// clientAddr is the address a request came from: the connection's peer, or
// behind a trusted proxy the last address of X-Forwarded-For, which the
// proxy appended.
func (a *Auth) clientAddr(r *http.Request) string {
	if a.trustProxy {
		if xff := r.Header.Values("X-Forwarded-For"); len(xff) > 0 {
			hops := strings.Split(xff[len(xff)-1], ",")
			if last := strings.TrimSpace(hops[len(hops)-1]); last != "" {
				return last
			}
		}
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// secureRequest reports whether the browser reached this server over TLS,
// so the cookie is marked Secure: the connection's own TLS, or, behind a
// proxy the options trust, its X-Forwarded-Proto.
func (a *Auth) secureRequest(r *http.Request) bool {
	return r.TLS != nil || (a.trustProxy && strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https"))
}
