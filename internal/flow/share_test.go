package flow

import (
	"context"
	"testing"
	"time"
)

// shareRace hands one slot of s back and forth between queues that all
// wait for it, rounds times, and returns which queue got it each round. The
// slot is held when it starts, by holder.
func shareRace(t *testing.T, s *Share, queues []string, holder string, rounds int) []string {
	t.Helper()
	won := make(chan string, len(queues))
	waiting := map[string]bool{}
	var got []string
	for range rounds {
		for _, q := range queues {
			if !waiting[q] {
				waiting[q] = true
				go func() {
					if s.Acquire(t.Context(), q, 1) == 1 {
						won <- q
					}
				}()
			}
		}
		deadline := time.Now().Add(10 * time.Second)
		for s.Waiting() < len(queues) {
			if time.Now().After(deadline) {
				t.Fatalf("%d queues wait, want %d", s.Waiting(), len(queues))
			}
			time.Sleep(time.Millisecond)
		}
		s.Release(holder)
		q := <-won
		holder = q
		waiting[q] = false
		got = append(got, q)
	}
	return got
}

func count(qs []string, q string) int {
	n := 0
	for _, x := range qs {
		if x == q {
			n++
		}
	}
	return n
}

// TestCapacityShareRejoin: a queue back from idle gets no credit for the
// time it wanted nothing: it shares with the busy queue at once instead of
// taking every slot until its pass catches up.
func TestCapacityShareRejoin(t *testing.T) {
	s := NewShare(1, map[string]int{"a": 1, "b": 1}, nil)
	ctx := context.Background()
	for range 20 { // b works alone while a is idle
		if s.Acquire(ctx, "b", 1) != 1 {
			t.Fatal("no slot")
		}
		s.Release("b")
	}
	s.Rest("a", 0)
	if s.Acquire(ctx, "b", 1) != 1 { // b holds the slot
		t.Fatal("no slot")
	}
	got := shareRace(t, s, []string{"a", "b"}, "b", 10)
	if a := count(got, "a"); a < 4 || a > 6 {
		t.Fatalf("after b worked alone, a got %d of 10 slots (%v), want about half", a, got)
	}
}

// TestCapacityShareWeights: slots go by weight, one at a time, to the queue
// furthest behind its share.
func TestCapacityShareWeights(t *testing.T) {
	s := NewShare(1, map[string]int{"a": 3, "b": 1}, nil)
	if s.Acquire(context.Background(), "a", 1) != 1 {
		t.Fatal("no slot")
	}
	got := shareRace(t, s, []string{"a", "b"}, "a", 40)
	if a, b := count(got, "a"), count(got, "b"); a != 30 || b != 10 {
		t.Fatalf("a got %d and b %d of 40 slots (%v), want 30 and 10", a, b, got)
	}
}

// TestCapacityShareGiveBack: slots a claim did not use go back with the
// pass they cost, so a queue with little work is not charged for slots it
// could not use.
func TestCapacityShareGiveBack(t *testing.T) {
	s := NewShare(4, map[string]int{"a": 1, "b": 1}, nil)
	ctx := context.Background()
	if n := s.Acquire(ctx, "a", 4); n != 4 {
		t.Fatalf("a was granted %d of 4 free slots", n)
	}
	s.Rest("a", 3) // its claim took one job
	if a := s.queues["a"]; a.pass != 1 || a.held != 1 || s.free != 3 {
		t.Fatalf("after giving 3 back: pass %v, held %d, free %d; want 1, 1, 3", a.pass, a.held, s.free)
	}
	if n := s.Acquire(ctx, "b", 3); n != 3 {
		t.Fatalf("b was granted %d of 3 free slots", n)
	}
}

// TestCapacityShareClaimingQueueKeepsItsTurn: a queue whose loop is busy
// claiming when its jobs end is still granted the slots its weight earns;
// they wait for its next acquire, instead of all going to the queue that
// happened to wait.
func TestCapacityShareClaimingQueueKeepsItsTurn(t *testing.T) {
	s := NewShare(4, map[string]int{"a": 3, "b": 1}, map[string]int{"a": 4, "b": 4})
	ctx := t.Context()
	if n := s.Acquire(ctx, "a", 4); n != 4 { // a runs four jobs
		t.Fatalf("a was granted %d of 4 free slots", n)
	}
	won := make(chan int, 1)
	go func() { won <- s.Acquire(ctx, "b", 4) }()
	deadline := time.Now().Add(10 * time.Second)
	for s.Waiting() < 1 {
		if time.Now().After(deadline) {
			t.Fatal("b does not wait for a slot")
		}
		time.Sleep(time.Millisecond)
	}
	// a's four jobs end while its loop claims. b rejoined at the pass of
	// a's last grant, 1; a stands at 4/3. b gets one slot (pass 2), a the
	// next three (5/3, 2 and, on the tie, by weight, 7/3).
	for range 4 {
		s.Release("a")
	}
	if n := <-won; n != 1 {
		t.Fatalf("b was granted %d slots, want 1", n)
	}
	if a := s.queues["a"]; a.pending != 3 {
		t.Fatalf("a has %d slots kept for it, want 3", a.pending)
	}
	if n := s.Acquire(ctx, "a", 4); n != 3 { // at once: no wait
		t.Fatalf("a's next acquire took %d slots, want 3", n)
	}
	// A queue whose claim comes up short gives back what was kept for it.
	s.Rest("b", 0)
	s.Release("a")
	if a := s.queues["a"]; a.pending != 1 {
		t.Fatalf("a has %d slots kept for it, want 1", a.pending)
	}
	s.Rest("a", 0)
	if a := s.queues["a"]; a.pending != 0 || s.free != 1 {
		t.Fatalf("after a rests: %d pending, %d free; want 0, 1", a.pending, s.free)
	}
}
