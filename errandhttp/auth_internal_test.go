package errandhttp

import (
	"strconv"
	"testing"
	"time"
)

// TestLoginThrottleIsBounded: failures from more addresses than
// maxThrottled do not grow the map past it; the oldest is forgotten.
func TestLoginThrottleIsBounded(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	th := &loginThrottle{byAddr: map[string]*loginTries{}, clock: func() time.Time { return now }}
	for i := range maxThrottled + 10 {
		now = now.Add(time.Millisecond)
		th.fail("addr-" + strconv.Itoa(i))
	}
	if n := len(th.byAddr); n != maxThrottled {
		t.Fatalf("%d addresses remembered, want %d", n, maxThrottled)
	}
	if _, ok := th.byAddr["addr-0"]; ok {
		t.Errorf("the oldest address is still remembered")
	}
	if _, ok := th.byAddr["addr-"+strconv.Itoa(maxThrottled+9)]; !ok {
		t.Errorf("the newest address was forgotten")
	}
}

// TestSessionsAreBounded: more logins than maxSessions end the sessions
// that would expire first, not grow the map.
func TestSessionsAreBounded(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	s := &sessions{byID: map[[32]byte]session{}, clock: func() time.Time { return now }}
	first := s.start(0)
	for range maxSessions + 10 {
		now = now.Add(time.Millisecond)
		s.start(0)
	}
	if n := len(s.byID); n != maxSessions {
		t.Fatalf("%d sessions kept, want %d", n, maxSessions)
	}
	if _, ok := s.token(first); ok {
		t.Errorf("the session that expires first is still valid")
	}
}
