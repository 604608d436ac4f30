package errand

import (
	"testing"
	"time"
)

// outcomeLanded recognises an outcome as the attempt recorded it, and
// nothing else that ends an attempt: a sweep of the expired lease, another
// attempt, a replay.
func TestOutcomeLanded(t *testing.T) {
	at := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	claimed := &Job{ID: "j", Attempt: 2, State: StateRunning}
	fail := func(class, msg string) *AttemptError { return &AttemptError{Attempt: 2, Class: class, Message: msg} }
	entry := func(attempt, replay int, class, msg string) []AttemptError {
		return []AttemptError{{Attempt: 1, Class: "error", Message: "first"}, {Attempt: attempt, Replay: replay, At: at, Class: class, Message: msg}}
	}
	retry := &JobOutcome{Kind: OutcomeRetry, Error: fail("error", "upstream 503")}
	for _, tc := range []struct {
		name string
		job  Job
		o    *JobOutcome
		want bool
	}{
		{"success recorded", Job{Attempt: 2, State: StateSucceeded}, &JobOutcome{Kind: OutcomeSucceeded}, true},
		{"success, job still running", Job{Attempt: 2, State: StateRunning}, &JobOutcome{Kind: OutcomeSucceeded}, false},
		{"success, job claimed again", Job{Attempt: 3, State: StateSucceeded}, &JobOutcome{Kind: OutcomeSucceeded}, false},
		{"success, lease swept", Job{Attempt: 2, State: StateRetrying, Errors: entry(2, 0, "lease_expired", "lease expired")}, &JobOutcome{Kind: OutcomeSucceeded}, false},
		{"retry recorded", Job{Attempt: 2, State: StateRetrying, Errors: entry(2, 0, "error", "upstream 503")}, retry, true},
		{"retry, lease swept", Job{Attempt: 2, State: StateRetrying, Errors: entry(2, 0, "lease_expired", "lease expired")}, retry, false},
		{"retry, another message", Job{Attempt: 2, State: StateRetrying, Errors: entry(2, 0, "error", "upstream 502")}, retry, false},
		{"retry, an earlier replay's entry", Job{Attempt: 2, Replays: 1, State: StateRetrying, Errors: entry(2, 0, "error", "upstream 503")}, retry, false},
		{"retry, no history", Job{Attempt: 2, State: StateRetrying}, retry, false},
		{"retry overridden by a cancel request", Job{Attempt: 2, State: StateCancelled, CancelRequestedAt: &at, Errors: entry(2, 0, "error", "upstream 503")}, retry, true},
		{"retry, job cancelled by no request", Job{Attempt: 2, State: StateCancelled, Errors: entry(2, 0, "error", "upstream 503")}, retry, false},
		{"dead recorded", Job{Attempt: 2, State: StateDead, Errors: entry(2, 0, "permanent", "bad card")}, &JobOutcome{Kind: OutcomeDead, Error: fail("permanent", "bad card")}, true},
		{"dead, lease swept on the last attempt", Job{Attempt: 2, State: StateDead, Errors: entry(2, 0, "lease_expired", "lease expired")}, &JobOutcome{Kind: OutcomeDead, Error: fail("permanent", "bad card")}, false},
		{"snooze recorded", Job{Attempt: 1, State: StateQueued}, &JobOutcome{Kind: OutcomeSnooze}, true},
		{"snooze, job claimed again", Job{Attempt: 2, State: StateRunning}, &JobOutcome{Kind: OutcomeSnooze}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := outcomeLanded(&tc.job, claimed, tc.o); got != tc.want {
				t.Fatalf("outcomeLanded = %v, want %v", got, tc.want)
			}
		})
	}
}
