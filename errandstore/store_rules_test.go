package errandstore

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/errandhq/errand/errandtype"
)

// TestCancelJob pins which statement a cancel runs in each case, and that
// only a write is audited.
func TestCancelJob(t *testing.T) {
	tests := []struct {
		name      string
		st        errandtype.JobState
		holds     bool
		pending   bool
		wantCall  string // "" when refused
		wantWrote bool
	}{
		{"queued cancelled at once", errandtype.StateQueued, false, false, "cancel", true},
		{"retrying cancelled at once", errandtype.StateRetrying, false, false, "cancel", true},
		{"running gets a request", errandtype.StateRunning, false, false, "request", true},
		{"running with a request pending left as it is", errandtype.StateRunning, false, true, "get", false},
		{"dead holding its key cancelled", errandtype.StateDead, true, false, "cancel", true},
		{"dead refused", errandtype.StateDead, false, false, "", false},
		{"succeeded refused", errandtype.StateSucceeded, false, false, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			called := ""
			call := func(name string) func() (*errandtype.Job, error) {
				return func() (*errandtype.Job, error) {
					called = name
					return &errandtype.Job{ID: "a"}, nil
				}
			}
			j, wrote, err := CancelJob("a", tt.st, tt.holds, tt.pending, call("get"), call("request"), call("cancel"))
			if tt.wantCall == "" {
				var se *errandtype.StateError
				if !errors.As(err, &se) || called != "" || j != nil {
					t.Fatalf("got job %v, call %q, err %v; want a *StateError and no call", j, called, err)
				}
				return
			}
			if err != nil || called != tt.wantCall || wrote != tt.wantWrote || j == nil {
				t.Fatalf("got call %q, wrote %v, err %v; want %q, %v", called, wrote, err, tt.wantCall, tt.wantWrote)
			}
		})
	}
	t.Run("failed write not audited", func(t *testing.T) {
		boom := errors.New("boom")
		fail := func() (*errandtype.Job, error) { return nil, boom }
		_, wrote, err := CancelJob("a", errandtype.StateQueued, false, false, fail, fail, fail)
		if !errors.Is(err, boom) || wrote {
			t.Fatalf("got wrote %v, err %v; want boom and no write", wrote, err)
		}
	})
}

// TestEveryStateHasItsRules fails for a state added to JobStates without
// its rules: each state is either unfinished or terminal, an operator can
// cancel or replay a job in it unless it succeeded, and the next-step rule
// tells a finished job's replay as these rules allow it.
func TestEveryStateHasItsRules(t *testing.T) {
	now := time.Date(2026, 11, 30, 14, 0, 0, 0, time.UTC)
	for _, st := range errandtype.JobStates {
		unfinished, terminal := slices.Contains(UnfinishedStates, st), slices.Contains(TerminalStates, st)
		if unfinished == terminal {
			t.Errorf("state %s: unfinished %v, terminal %v; want exactly one (JobState.Waiting, JobState.Terminal)", st, unfinished, terminal)
		}
		cancellable, replayable := slices.Contains(CancellableStates, st), slices.Contains(ReplayableStates, st)
		if !cancellable && !replayable && st != errandtype.StateSucceeded {
			t.Errorf("state %s can be neither cancelled nor replayed: a job in it could never leave it", st)
		}
		step := errandtype.NextOf(&errandtype.Job{State: st, AvailableAt: now}, now).Step
		if terminal && (step == errandtype.NextReplay) != replayable {
			t.Errorf("state %s: next step %s, but replayable %v", st, step, replayable)
		}
	}
}
