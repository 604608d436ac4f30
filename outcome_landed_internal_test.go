package errand

import (
	"testing"
	"time"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
)

// outcomeLanded recognises an outcome as the attempt recorded it, and
// nothing else that ends an attempt: a sweep of the expired lease, another
// attempt, a replay.
func TestOutcomeLanded(t *testing.T) {
	at := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	claimed := &errandtype.Job{ID: "j", Attempt: 2, State: errandtype.StateRunning}
	fail := func(class, msg string) *errandtype.AttemptError {
		return &errandtype.AttemptError{Attempt: 2, Class: class, Message: msg}
	}
	entry := func(attempt, replay int, class, msg string) []errandtype.AttemptError {
		return []errandtype.AttemptError{{Attempt: 1, Class: "error", Message: "first"}, {Attempt: attempt, Replay: replay, At: at, Class: class, Message: msg}}
	}
	retry := &errandstore.JobOutcome{Kind: errandstore.OutcomeRetry, Error: fail("error", "upstream 503")}
	for _, tc := range []struct {
		name string
		job  errandtype.Job
		o    *errandstore.JobOutcome
		want bool
	}{
		{"success recorded", errandtype.Job{Attempt: 2, State: errandtype.StateSucceeded}, &errandstore.JobOutcome{Kind: errandstore.OutcomeSucceeded}, true},
		{"success, job still running", errandtype.Job{Attempt: 2, State: errandtype.StateRunning}, &errandstore.JobOutcome{Kind: errandstore.OutcomeSucceeded}, false},
		{"success, job claimed again", errandtype.Job{Attempt: 3, State: errandtype.StateSucceeded}, &errandstore.JobOutcome{Kind: errandstore.OutcomeSucceeded}, false},
		{"success, lease swept", errandtype.Job{Attempt: 2, State: errandtype.StateRetrying, Errors: entry(2, 0, "lease_expired", "lease expired")}, &errandstore.JobOutcome{Kind: errandstore.OutcomeSucceeded}, false},
		{"retry recorded", errandtype.Job{Attempt: 2, State: errandtype.StateRetrying, Errors: entry(2, 0, "error", "upstream 503")}, retry, true},
		{"retry, lease swept", errandtype.Job{Attempt: 2, State: errandtype.StateRetrying, Errors: entry(2, 0, "lease_expired", "lease expired")}, retry, false},
		{"retry, another message", errandtype.Job{Attempt: 2, State: errandtype.StateRetrying, Errors: entry(2, 0, "error", "upstream 502")}, retry, false},
		{"retry, an earlier replay's entry", errandtype.Job{Attempt: 2, Replays: 1, State: errandtype.StateRetrying, Errors: entry(2, 0, "error", "upstream 503")}, retry, false},
		{"retry, no history", errandtype.Job{Attempt: 2, State: errandtype.StateRetrying}, retry, false},
		{"retry overridden by a cancel request", errandtype.Job{Attempt: 2, State: errandtype.StateCancelled, CancelRequestedAt: &at, Errors: entry(2, 0, "error", "upstream 503")}, retry, true},
		{"retry, job cancelled by no request", errandtype.Job{Attempt: 2, State: errandtype.StateCancelled, Errors: entry(2, 0, "error", "upstream 503")}, retry, false},
		{"dead recorded", errandtype.Job{Attempt: 2, State: errandtype.StateDead, Errors: entry(2, 0, "permanent", "bad card")}, &errandstore.JobOutcome{Kind: errandstore.OutcomeDead, Error: fail("permanent", "bad card")}, true},
		{"dead, lease swept on the last attempt", errandtype.Job{Attempt: 2, State: errandtype.StateDead, Errors: entry(2, 0, "lease_expired", "lease expired")}, &errandstore.JobOutcome{Kind: errandstore.OutcomeDead, Error: fail("permanent", "bad card")}, false},
		{"snooze recorded", errandtype.Job{Attempt: 1, State: errandtype.StateQueued}, &errandstore.JobOutcome{Kind: errandstore.OutcomeSnooze}, true},
		{"snooze, job claimed again", errandtype.Job{Attempt: 2, State: errandtype.StateRunning}, &errandstore.JobOutcome{Kind: errandstore.OutcomeSnooze}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := outcomeLanded(&tc.job, claimed, tc.o); got != tc.want {
				t.Fatalf("outcomeLanded = %v, want %v", got, tc.want)
			}
		})
	}
}
