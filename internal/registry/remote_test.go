package registry

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// TestRemotesWriteOncePerInterval: a remote worker polling with claims is
// registered at its first claim, heartbeats at most once per interval, and
// registers again, with the union of what it claimed, when a claim names a
// queue, a kind or a lease its record lacks.
func TestRemotesWriteOncePerInterval(t *testing.T) {
	var r Remotes
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	every := 5 * time.Second
	c := &Claim{Owner: "node-1", Queue: "default", Kinds: []string{"email"}, Lease: time.Minute}
	type want struct{ register, write bool }
	step := func(name string, c *Claim, at time.Duration, w want) {
		t.Helper()
		p, register, write := r.note(c, t0.Add(at), every)
		if register != w.register || write != w.write {
			t.Fatalf("%s: register=%v write=%v; want %+v", name, register, write, w)
		}
		if write && (p == nil || p.ID != c.Owner || p.HeartbeatInterval != c.Lease) {
			t.Fatalf("%s: params %+v; want the worker's, its lease as its heartbeat interval", name, p)
		}
	}
	step("first claim", c, 0, want{true, true})
	step("claim within the interval", c, every-time.Millisecond, want{false, false})
	step("claim an interval later", c, every, want{false, true})
	sms := &Claim{Owner: "node-1", Queue: "default", Kinds: []string{"sms"}, Lease: time.Minute}
	step("claim of a new kind", sms, every+time.Millisecond, want{true, true})
	step("claim of a kind known", c, every+2*time.Millisecond, want{false, false})
	p, _, _ := r.note(&Claim{Owner: "node-1", Queue: "bulk", Kinds: []string{"email"}, Lease: time.Minute}, t0.Add(time.Hour), every)
	if !slices.Equal(p.Kinds, []string{"email", "sms"}) || len(p.Queues) != 2 {
		t.Fatalf("registration %+v; want every kind and queue claimed so far", p)
	}
}

// TestRemotesForgetPastMax: past maxRemoteWorkers the memory is cleared, so
// a worker seen before registers again at its next claim.
func TestRemotesForgetPastMax(t *testing.T) {
	var r Remotes
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	first := &Claim{Owner: "w0", Queue: "q", Kinds: []string{"k"}, Lease: time.Minute}
	r.note(first, now, time.Hour)
	for i := 1; i < maxRemoteWorkers; i++ {
		r.note(&Claim{Owner: fmt.Sprintf("w%d", i), Queue: "q", Kinds: []string{"k"}, Lease: time.Minute}, now, time.Hour)
	}
	if _, register, _ := r.note(first, now, time.Hour); !register {
		t.Fatalf("a worker remembered past %d others did not register again", maxRemoteWorkers)
	}
}
