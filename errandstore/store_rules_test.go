package errandstore

import (
	"errors"
	"testing"

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
