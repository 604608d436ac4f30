package errandtype

import (
	"slices"
	"testing"
)

// TestEveryStateHasItsOwnUniqueBit: each state of JobStates has a bit of
// a UniqueScope, no two share one, and the bit order names no other
// state. A state added to JobStates without its place in uniqueBitOrder
// fails here.
func TestEveryStateHasItsOwnUniqueBit(t *testing.T) {
	if len(uniqueBitOrder) != len(JobStates) {
		t.Errorf("uniqueBitOrder has %d states, JobStates %d: give each state its bit, appended", len(uniqueBitOrder), len(JobStates))
	}
	var seen UniqueScope
	for _, st := range JobStates {
		bit := UniqueBit(st)
		if bit == uniqueInvalid {
			t.Errorf("state %s has no unique bit: append it to uniqueBitOrder", st)
			continue
		}
		if seen&bit != 0 {
			t.Errorf("state %s shares its unique bit %d with another state", st, bit)
		}
		seen |= bit
	}
	for _, st := range uniqueBitOrder {
		if !slices.Contains(JobStates, st) {
			t.Errorf("uniqueBitOrder names %s, which JobStates does not", st)
		}
	}
	if seen&uniqueInvalid != 0 {
		t.Errorf("the states' bits reach the invalid-scope bit: a scope has room for seven states")
	}
}

// TestStoredUniqueBitsNeverChange pins the bits of the states that unique
// jobs already store (migration 8's index and unique_states column): a
// reordered uniqueBitOrder would read every stored scope wrong.
func TestStoredUniqueBitsNeverChange(t *testing.T) {
	stored := map[JobState]UniqueScope{
		StateQueued: 1, StateRunning: 2, StateRetrying: 4, StateSucceeded: 8, StateDead: 16, StateCancelled: 32,
	}
	for st, bit := range stored {
		if got := UniqueBit(st); got != bit {
			t.Errorf("UniqueBit(%s) = %d, stored as %d: append new states, never reorder", st, got, bit)
		}
	}
}

// TestNamedScopesFollowTheStates: UniqueAlways holds every state,
// UniqueUntilFinished exactly the unfinished ones, UniqueUntilSucceeded
// those and dead. A new unfinished state must join the named scopes (and
// its migration widen the scopes stored), or a job would free its key by
// moving into it.
func TestNamedScopesFollowTheStates(t *testing.T) {
	var all, unfinished UniqueScope
	for _, st := range JobStates {
		all |= UniqueBit(st)
		if !st.Terminal() {
			unfinished |= UniqueBit(st)
		}
	}
	if UniqueAlways != all {
		t.Errorf("UniqueAlways = %d (%s), want every state's bit: %d", UniqueAlways, UniqueAlways.States(), all)
	}
	if UniqueUntilFinished != unfinished {
		t.Errorf("UniqueUntilFinished = %d (%s), want the unfinished states' bits: %d", UniqueUntilFinished, UniqueUntilFinished.States(), unfinished)
	}
	if want := unfinished | UniqueBit(StateDead); UniqueUntilSucceeded != want {
		t.Errorf("UniqueUntilSucceeded = %d, want the unfinished states and dead: %d", UniqueUntilSucceeded, want)
	}
}
