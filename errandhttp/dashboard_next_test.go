package errandhttp

import (
	"testing"
	"time"

	"github.com/errandhq/errand/errandtest"
	"github.com/errandhq/errand/errandtype"
)

func TestNextStep(t *testing.T) {
	clk := errandtest.NewClock(time.Date(2026, 11, 30, 14, 0, 0, 0, time.UTC))
	now := clk.Now()
	later := clk.Advance(2*time.Minute + 7*time.Second) // 14:02:07
	clk.Set(now)
	str := func(s string) *string { return &s }
	tomorrow := now.Add(26 * time.Hour)
	earlier := now.Add(-5 * time.Minute)
	tests := []struct {
		name    string
		job     errandtype.Job
		handled bool
		want    string
	}{
		{
			name:    "scheduled",
			job:     errandtype.Job{State: errandtype.StateQueued, AvailableAt: later, MaxAttempts: 5},
			handled: true,
			want:    "runs at 14:02:07 UTC, attempt 1 of 5",
		},
		{
			name:    "scheduled another day",
			job:     errandtype.Job{State: errandtype.StateQueued, AvailableAt: tomorrow, MaxAttempts: 5},
			handled: true,
			want:    "runs at 2026-12-01 16:00:00 UTC, attempt 1 of 5",
		},
		{
			name:    "ready",
			job:     errandtype.Job{State: errandtype.StateQueued, AvailableAt: earlier, MaxAttempts: 3},
			handled: true,
			want:    "waiting for a worker since 13:55:00 UTC, attempt 1 of 3",
		},
		{
			name:    "held by its ordering key",
			job:     errandtype.Job{State: errandtype.StateQueued, AvailableAt: earlier, MaxAttempts: 3, HeldBy: str("first"), OrderingKey: str("acct-1")},
			handled: true,
			want:    "ready since 13:55:00 UTC but held back by job first of ordering key acct-1 (one job of a key runs at a time, in order); then attempt 1 of 3",
		},
		{
			name:    "retrying",
			job:     errandtype.Job{State: errandtype.StateRetrying, AvailableAt: later, Attempt: 2, MaxAttempts: 5},
			handled: true,
			want:    "retries at 14:02:07 UTC, attempt 3 of 5",
		},
		{
			name:    "retrying and due",
			job:     errandtype.Job{State: errandtype.StateRetrying, AvailableAt: earlier, Attempt: 1, MaxAttempts: 5},
			handled: true,
			want:    "retries as soon as a worker claims it (due since 13:55:00 UTC), attempt 2 of 5",
		},
		{
			name:    "waiting with no worker for the kind",
			job:     errandtype.Job{State: errandtype.StateQueued, Kind: "emial", Queue: "default", AvailableAt: earlier, MaxAttempts: 3},
			handled: false,
			want:    "waiting for a worker since 13:55:00 UTC, attempt 1 of 3; no live worker handles kind emial in queue default, so it waits until one does",
		},
		{
			name:    "running",
			job:     errandtype.Job{State: errandtype.StateRunning, Attempt: 2, MaxAttempts: 5, LeaseOwner: str("web-1:812"), LeaseUntil: &later},
			handled: false, // a running job says nothing about workers
			want:    "running under lease of web-1:812 until 14:02:07 UTC, attempt 2 of 5",
		},
		{
			name: "running with an expired lease",
			job:  errandtype.Job{State: errandtype.StateRunning, Attempt: 2, MaxAttempts: 5, LeaseOwner: str("web-1:812"), LeaseUntil: &earlier},
			want: "the lease of web-1:812 expired at 13:55:00 UTC; the next sweep retries it, attempt 3 of 5",
		},
		{
			name: "running with an expired lease on the final attempt",
			job:  errandtype.Job{State: errandtype.StateRunning, Attempt: 5, MaxAttempts: 5, LeaseOwner: str("web-1:812"), LeaseUntil: &earlier},
			want: "the lease of web-1:812 expired at 13:55:00 UTC on the final attempt; the next sweep makes it dead (class lease_expired)",
		},
		{
			name: "succeeded",
			job:  errandtype.Job{State: errandtype.StateSucceeded, FinishedAt: &earlier},
			want: "succeeded at 13:55:00 UTC; it will not run again",
		},
		{
			name: "dead",
			job:  errandtype.Job{State: errandtype.StateDead, Attempt: 5, MaxAttempts: 5, LastError: &errandtype.LastError{Class: "timeout"}},
			want: "dead after attempt 5 of 5 (class timeout): replay to run again",
		},
		{
			name: "cancelled",
			job:  errandtype.Job{State: errandtype.StateCancelled},
			want: "cancelled: replay to run again",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := nextStep(&tt.job, clk.Now(), tt.handled); got != tt.want {
				t.Errorf("nextStep:\n got %q\nwant %q", got, tt.want)
			}
		})
	}
}

func TestSince(t *testing.T) {
	now := time.Date(2026, 11, 30, 14, 0, 0, 0, time.UTC)
	tests := []struct {
		ago  time.Duration
		want string
	}{
		{0, "0s ago"},
		{400 * time.Millisecond, "0s ago"},
		{42 * time.Second, "42s ago"},
		{3*time.Minute + 7*time.Second, "3m07s ago"},
		{5*time.Hour + 4*time.Minute, "5h04m ago"},
		{47 * time.Hour, "47h00m ago"},
		{3*24*time.Hour + 5*time.Hour, "3d05h ago"},
		{-90 * time.Second, "in 1m30s"},
	}
	for _, tt := range tests {
		if got := since(now, now.Add(-tt.ago)); got != tt.want {
			t.Errorf("since(%s ago) = %q, want %q", tt.ago, got, tt.want)
		}
	}
	if got := ageSeconds(0); got != "-" {
		t.Errorf("ageSeconds(0) = %q, want -", got)
	}
	if got := ageSeconds(61.5); got != "1m01s" {
		t.Errorf("ageSeconds(61.5) = %q, want 1m01s", got)
	}
}

// TestEveryNextStepHasWords: the dashboard words every step of
// errandtype.NextOf.
func TestEveryNextStepHasWords(t *testing.T) {
	for _, step := range errandtype.NextSteps {
		if stepWords[step] == nil {
			t.Errorf("next step %s has no words on the dashboard: add it to stepWords", step)
		}
	}
}
