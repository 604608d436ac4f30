package notifier

import (
	"testing"
	"time"
)

// TestNotifyEchoes: a worker takes as many notifications of a queue for
// echoes as its client sent, only within echoWindow of the last one sent,
// and forgets echoes still owed after it.
func TestNotifyEchoes(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	var e Echoes
	seen := e.Snapshot()
	if e.Echo("a", seen, t0) {
		t.Fatal("a notification before any was sent taken for an echo")
	}
	e.Add([]string{"a"}, 2, t0)
	for i, want := range []bool{true, true, false} {
		if got := e.Echo("a", seen, t0.Add(time.Millisecond)); got != want {
			t.Fatalf("notification %d of a: echo %v, want %v", i+1, got, want)
		}
	}
	if e.Echo("b", seen, t0) {
		t.Fatal("a notification of b taken for an echo of a")
	}
	e.Add([]string{"a"}, 1, t0)
	if e.Echo("a", seen, t0.Add(echoWindow+time.Millisecond)) {
		t.Fatal("a notification past the window taken for an echo")
	}
	if e.Echo("a", seen, t0.Add(time.Millisecond)) {
		t.Fatal("the echo forgotten past the window was skipped later")
	}
	e.Add([]string{"a"}, 1, t0)
	e.Add([]string{"a"}, -1, t0) // the send failed: no echo comes
	if e.Echo("a", seen, t0) {
		t.Fatal("a notification taken for the echo of a failed send")
	}
}
