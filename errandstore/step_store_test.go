package errandstore

import (
	"errors"
	"testing"

	"github.com/errandhq/errand/errandtype"
)

// TestCheckSignal: a finished job is refused a signal as a state error, a
// job holding MaxJobSignals as bad input, any other is not.
func TestCheckSignal(t *testing.T) {
	var ie *errandtype.InputError
	for _, c := range []struct {
		state errandtype.JobState
		held  int
		want  func(error) bool
	}{
		{errandtype.StateQueued, 0, func(err error) bool { return err == nil }},
		{errandtype.StateRunning, MaxJobSignals - 1, func(err error) bool { return err == nil }},
		{errandtype.StateRetrying, MaxJobSignals, func(err error) bool { return errors.As(err, &ie) }},
		{errandtype.StateSucceeded, 0, func(err error) bool { return errors.Is(err, errandtype.ErrWrongState) }},
		{errandtype.StateDead, 0, func(err error) bool { return errors.Is(err, errandtype.ErrWrongState) }},
		{errandtype.StateCancelled, 0, func(err error) bool { return errors.Is(err, errandtype.ErrWrongState) }},
	} {
		if err := CheckSignal("a", c.state, c.held); !c.want(err) {
			t.Errorf("CheckSignal(%s, %d) = %v", c.state, c.held, err)
		}
	}
}
