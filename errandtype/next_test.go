package errandtype

import (
	"slices"
	"testing"
	"time"
)

// TestNextOf pins which step applies to a job, and the attempt it is
// about.
func TestNextOf(t *testing.T) {
	now := time.Date(2026, 11, 30, 14, 0, 0, 0, time.UTC)
	before, after := now.Add(-time.Minute), now.Add(time.Minute)
	first, owner := "first", "web-1"
	tests := []struct {
		name    string
		job     Job
		step    NextStep
		attempt int
	}{
		{"queued ahead", Job{State: StateQueued, AvailableAt: after}, NextScheduled, 1},
		{"retrying ahead, even if held", Job{State: StateRetrying, AvailableAt: after, Attempt: 2, HeldBy: &first}, NextScheduled, 3},
		{"due now", Job{State: StateQueued, AvailableAt: now}, NextDue, 1},
		{"due and held", Job{State: StateQueued, AvailableAt: before, HeldBy: &first}, NextHeld, 1},
		{"running, lease live", Job{State: StateRunning, Attempt: 2, MaxAttempts: 3, LeaseUntil: &after}, NextRunning, 2},
		{"running, lease unknown", Job{State: StateRunning, Attempt: 1, MaxAttempts: 3}, NextRunning, 1},
		{"lease ends now", Job{State: StateRunning, Attempt: 1, MaxAttempts: 3, LeaseUntil: &now}, NextSweepRetry, 2},
		{"lease expired on the final attempt", Job{State: StateRunning, Attempt: 3, MaxAttempts: 3, LeaseUntil: &before}, NextSweepDead, 3},
		{"cancel requested, lease live", Job{State: StateRunning, Attempt: 3, MaxAttempts: 3, LeaseUntil: &after, CancelRequestedAt: &before}, NextCancelling, 3},
		{"cancel requested, lease expired", Job{State: StateRunning, Attempt: 1, MaxAttempts: 3, LeaseUntil: &before, CancelRequestedAt: &before}, NextSweepCancel, 1},
		{"succeeded", Job{State: StateSucceeded, Attempt: 1}, NextNever, 1},
		{"dead", Job{State: StateDead, Attempt: 3}, NextReplay, 3},
		{"cancelled", Job{State: StateCancelled}, NextReplay, 0},
		{"unknown", Job{State: "paused"}, NextUnknown, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.job.LeaseOwner = &owner
			n := NextOf(&tt.job, now)
			if n.Step != tt.step || n.Attempt != tt.attempt || n.Owner != owner {
				t.Errorf("NextOf = %+v, want step %s, attempt %d, owner %s", n, tt.step, tt.attempt, owner)
			}
		})
	}
	if n := NextOf(&Job{State: StateRunning}, now); n.Owner != "an unnamed worker" {
		t.Errorf("owner of a lease without one = %q", n.Owner)
	}
}

// TestEveryStateHasANextStep: no state of JobStates is unknown to the
// next-step rule, and every step it answers is one of NextSteps.
func TestEveryStateHasANextStep(t *testing.T) {
	now := time.Date(2026, 11, 30, 14, 0, 0, 0, time.UTC)
	for _, st := range JobStates {
		step := NextOf(&Job{State: st, AvailableAt: now}, now).Step
		if step == NextUnknown || !slices.Contains(NextSteps, step) {
			t.Errorf("state %s: next step %q; give it its step in NextOf", st, step)
		}
	}
}
