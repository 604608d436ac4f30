package errandtest_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/errandhq/errand/errandtest"
)

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

// received returns what ch holds now, without waiting.
func received(ch <-chan time.Time) (time.Time, bool) {
	select {
	case v := <-ch:
		return v, true
	default:
		return time.Time{}, false
	}
}

func TestTimerFiresWhenTheClockReachesIt(t *testing.T) {
	c := errandtest.NewClock(t0)
	tm := c.NewTimer(time.Second)
	if _, ok := received(tm.C()); ok {
		t.Fatal("timer fired before the clock moved")
	}
	c.Advance(999 * time.Millisecond)
	if _, ok := received(tm.C()); ok {
		t.Fatal("timer fired a millisecond early")
	}
	c.Advance(time.Millisecond)
	if v, ok := received(tm.C()); !ok || !v.Equal(t0.Add(time.Second)) {
		t.Fatalf("timer sent %v, %v; want %v", v, ok, t0.Add(time.Second))
	}
	c.Advance(time.Hour)
	if _, ok := received(tm.C()); ok {
		t.Fatal("a timer fired twice")
	}
	if tm.Stop() {
		t.Error("Stop of a fired timer reported it active")
	}
}

func TestTimerStopAndResetDiscardTheTick(t *testing.T) {
	c := errandtest.NewClock(t0)
	tm := c.NewTimer(time.Second)
	c.Advance(time.Second) // fired, not received
	if tm.Reset(time.Minute) {
		t.Error("Reset of a fired timer reported it active")
	}
	if _, ok := received(tm.C()); ok {
		t.Fatal("a tick from before Reset was received")
	}
	if !tm.Stop() {
		t.Error("Stop of an armed timer reported it inactive")
	}
	c.Advance(time.Hour)
	if _, ok := received(tm.C()); ok {
		t.Fatal("a stopped timer fired")
	}
	tm.Reset(0)
	if _, ok := received(tm.C()); !ok {
		t.Fatal("a timer reset to 0 did not fire at once")
	}
}

func TestTickerDropsTicksForASlowReceiver(t *testing.T) {
	c := errandtest.NewClock(t0)
	tk := c.NewTicker(time.Second)
	defer tk.Stop()
	c.Advance(3500 * time.Millisecond)
	if _, ok := received(tk.C()); !ok {
		t.Fatal("no tick after 3.5 periods")
	}
	if _, ok := received(tk.C()); ok {
		t.Fatal("more than one tick waiting: a ticker drops ticks")
	}
	// The next tick is on the ticker's own beat, at 4s.
	if err := c.BlockUntilAt(t.Context(), t0.Add(4*time.Second), 1); err != nil {
		t.Fatal(err)
	}
	tk.Reset(time.Minute)
	c.Advance(time.Hour)
	if _, ok := received(tk.C()); !ok {
		t.Fatal("no tick after Reset")
	}
	tk.Stop()
	c.Advance(time.Hour)
	if _, ok := received(tk.C()); ok {
		t.Fatal("a stopped ticker ticked")
	}
}

func TestAfterFuncRunsBeforeAdvanceReturns(t *testing.T) {
	c := errandtest.NewClock(t0)
	var order []string
	c.AfterFunc(2*time.Second, func() { order = append(order, "second") })
	c.AfterFunc(time.Second, func() { order = append(order, "first") })
	stopped := c.AfterFunc(time.Second, func() { order = append(order, "stopped") })
	if !stopped.Stop() {
		t.Fatal("Stop of an armed func reported it inactive")
	}
	c.Advance(time.Hour)
	if got := strings.Join(order, " "); got != "first second" {
		t.Fatalf("ran %q, want \"first second\"", got)
	}
	done := make(chan struct{})
	c.AfterFunc(0, func() { close(done) })
	<-done
}

func TestSetBackwardsFiresNothing(t *testing.T) {
	c := errandtest.NewClock(t0)
	tm := c.NewTimer(time.Minute)
	c.Set(t0.Add(-time.Hour))
	c.Advance(time.Hour + time.Minute - time.Nanosecond)
	if _, ok := received(tm.C()); ok {
		t.Fatal("timer fired before the clock reached its time")
	}
	c.Set(t0.Add(time.Minute))
	if _, ok := received(tm.C()); !ok {
		t.Fatal("timer did not fire at its time")
	}
}

func TestBlockUntilWaitsForTimersToBeArmed(t *testing.T) {
	c := errandtest.NewClock(t0)
	ended, cancel := context.WithCancel(t.Context())
	cancel()
	armed := make(chan error, 1)
	go func() { armed <- c.BlockUntilAt(t.Context(), t0.Add(time.Hour), 2) }()
	c.NewTimer(time.Hour)
	c.NewTimer(time.Minute)
	if err := c.BlockUntilAt(ended, t0.Add(time.Hour), 2); err == nil {
		t.Fatal("BlockUntilAt found two timers armed at an hour, with one")
	}
	c.AfterFunc(time.Hour, func() {}) // no goroutine waits for it
	if err := c.BlockUntilAt(ended, t0.Add(time.Hour), 2); err == nil {
		t.Fatal("BlockUntilAt counted a function of AfterFunc")
	}
	c.NewTicker(time.Hour)
	if err := <-armed; err != nil {
		t.Fatal(err)
	}
	if err := c.BlockUntil(t.Context(), 3); err != nil {
		t.Fatal(err)
	}
	err := c.BlockUntil(ended, 4)
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "armed") {
		t.Fatalf("BlockUntil with an ended context = %v; want context.Canceled, saying what is armed", err)
	}
	if got := c.Armed(); len(got) != 3 || !got[0].Equal(t0.Add(time.Minute)) {
		t.Fatalf("Armed() = %v, want three, earliest first", got)
	}
}
