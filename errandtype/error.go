package errandtype

import (
	"errors"
	"fmt"
)

var (
	// ErrNotFound reports that no job (or ledger entry) has the given id.
	ErrNotFound = errors.New("not found")
	// ErrLeaseLost reports that a fenced write found the job no longer
	// running under the caller's lease: it expired, or another worker
	// claimed the job. Nothing was written.
	ErrLeaseLost = errors.New("lease lost")
	// ErrWrongState reports that a job's state does not allow the requested
	// transition. The concrete error is a *StateError.
	ErrWrongState = errors.New("wrong state")
	// ErrInvalid reports bad input. The concrete error is an *InputError.
	ErrInvalid = errors.New("invalid input")
	// ErrNoSchema reports that a store opened without migrating found no
	// errand schema where it was pointed: a database (or PostgreSQL schema)
	// in which errand's tables were never created. Opening it with
	// migrations, as errand migrate does, creates them.
	ErrNoSchema = errors.New("no errand schema")
	// ErrStoreUnavailable reports that the store could not reach its
	// database, or lost the connection while a statement was in flight
	// (which may then have taken effect). Try again shortly; a duplicate
	// id or unique key makes a repeated enqueue safe.
	ErrStoreUnavailable = errors.New("store unavailable")
	// ErrJobCancelled is the cause with which a running handler's context
	// is cancelled when an operator cancels its job.
	ErrJobCancelled = errors.New("job cancelled by an operator")
)

// StateError reports a transition that a job's current state forbids. Its
// message does not name the operation or the job, which callers' wraps do
// ("replay job X: job is queued; only dead or cancelled jobs can be
// replayed").
type StateError struct {
	Op    string
	ID    string
	State JobState
	// Allowed lists the states the operation accepts.
	Allowed []JobState
	// Reason, when set, says why a job in an allowed state is refused
	// all the same, and what to do instead: a dead step of a workflow
	// that is compensating is not replayed.
	Reason string
}

func (e *StateError) Error() string {
	if e.Reason != "" {
		return fmt.Sprintf("job is %s; %s", e.State, e.Reason)
	}
	return fmt.Sprintf("job is %s; only %s jobs can be %s",
		e.State, joinStates(e.Allowed, "or"), pastTense(e.Op))
}

// Is makes errors.Is(err, ErrWrongState) true.
func (e *StateError) Is(target error) bool { return target == ErrWrongState }

// joinStates lists states as prose: "a", "a or b", "a, b or c", with
// conj the last joint.
func joinStates(states []JobState, conj string) string {
	s := ""
	for i, st := range states {
		switch {
		case i == 0:
		case i == len(states)-1:
			s += " " + conj + " "
		default:
			s += ", "
		}
		s += string(st)
	}
	return s
}

func pastTense(op string) string {
	switch op {
	case "replay":
		return "replayed"
	case "cancel":
		return "cancelled"
	}
	return op + "ed"
}

// InputError reports a bad parameter and says what to change.
type InputError struct {
	Field   string
	Message string
}

func (e *InputError) Error() string { return e.Field + ": " + e.Message }

// Is makes errors.Is(err, ErrInvalid) true.
func (e *InputError) Is(target error) bool { return target == ErrInvalid }
