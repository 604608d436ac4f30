package errand

import (
	"errors"
	"fmt"
	"regexp"
	"time"
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
	// ErrUnsupportedTx reports a transaction type the store cannot join.
	ErrUnsupportedTx = errors.New("unsupported transaction type")
	// ErrEffectHeld reports that another delivery holds a remote effect
	// under a live lease.
	ErrEffectHeld = errors.New("effect held by another delivery")
	// ErrNoSchema reports that a store opened without migrating found no
	// errand schema where it was pointed: a database (or PostgreSQL schema)
	// in which errand's tables were never created. Opening it with
	// migrations, as errand migrate does, creates them.
	ErrNoSchema = errors.New("no errand schema")
	// ErrJobCancelled is the cause (see [context.Cause]) with which a
	// running handler's context is cancelled when an operator cancels its
	// job. A handler that sees it should stop and return; the attempt ends
	// cancelled whatever error it returns, unless it returns nil, which
	// records the job as succeeded: the work was done.
	ErrJobCancelled = errors.New("job cancelled by an operator")
	// ErrIDConflict reports an enqueue whose id names an existing job,
	// batch or workflow that differs from the one it would have made. The
	// concrete error is an *IDConflictError.
	ErrIDConflict = errors.New("id taken by a different job")
	// ErrWorkflowCompensated reports a replay of a workflow's step refused
	// because the workflow has begun undoing its steps, or was rerun. The
	// concrete error is a *WorkflowCompensatedError.
	ErrWorkflowCompensated = errors.New("workflow compensated")
	// ErrStoreUnavailable reports that the store could not reach its
	// database, or lost the connection while a statement was in flight
	// (which may then have taken effect). Try again shortly; a duplicate
	// id or unique key makes a repeated enqueue safe.
	ErrStoreUnavailable = errors.New("store unavailable")
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

// Failure classes errand itself assigns. Handlers may name others.
const (
	ClassError        = "error"
	ClassPermanent    = "permanent"
	ClassTimeout      = "timeout"
	ClassPanic        = "panic"
	ClassLeaseExpired = "lease_expired"
	ClassExpired      = "expired"
	ClassCancelled    = "cancelled"
	ClassInterrupted  = "interrupted"
	// ClassUnknownKind is recorded when a claimed job's kind has no handler.
	ClassUnknownKind = "unknown_kind"
	// ClassArgsTooLarge is recorded on a workflow's job that errand
	// enqueued dead, unrun, because its args with the outputs of the
	// steps before it would exceed the bound of a job's args.
	ClassArgsTooLarge = "args_too_large"
)

var classPattern = regexp.MustCompile(`^[a-z][a-z0-9_]{0,63}$`)

// ValidClass reports whether class is a short snake_case word.
func ValidClass(class string) bool { return classPattern.MatchString(class) }

// JobError is a classified handler failure. Build it with [Permanent],
// [RetryAfter], [WithClass] or [Snooze]; any other error a handler returns is
// retryable with class "error". Its fields are unexported so that one error
// cannot say two things at once (a snooze that is also permanent): read them
// with its methods.
type JobError struct {
	class      string
	permanent  bool
	retryAfter time.Duration
	snooze     time.Duration
	dependency string // named by DependencyDown
	err        error
}

// Class is the failure class recorded with the attempt.
func (e *JobError) Class() string { return e.class }

// IsPermanent reports whether the job is dead-lettered at once.
func (e *JobError) IsPermanent() bool { return e.permanent }

// RetryDelay is the delay that replaces the policy's backoff, or zero.
func (e *JobError) RetryDelay() time.Duration { return e.retryAfter }

// SnoozeDelay is how long a snoozed job waits, or zero when e is not a
// snooze.
func (e *JobError) SnoozeDelay() time.Duration { return e.snooze }

func (e *JobError) Error() string {
	switch {
	case e.snooze > 0:
		return fmt.Sprintf("snooze %s", e.snooze)
	case e.err == nil:
		return e.class
	}
	return e.err.Error()
}

func (e *JobError) Unwrap() error { return e.err }

// Permanent marks err as not worth retrying: the job is dead-lettered at
// once. A class given earlier with WithClass is kept; otherwise the class is
// "permanent". A snooze stays a snooze.
func Permanent(err error) error {
	je := classified(err)
	if je.snooze > 0 {
		return je
	}
	je.permanent = true
	je.retryAfter = 0
	if je.class == ClassError || je.class == "" {
		je.class = ClassPermanent
	}
	return je
}

// RetryAfter retries err after d instead of the policy's backoff, as when a
// provider says when to come back. The attempt counts; if it was the last,
// the job is dead-lettered. RetryAfter of a permanent error stays permanent.
// A d past MaxDelay is refused: the policy's backoff applies, and the
// failure's message says why.
func RetryAfter(d time.Duration, err error) error {
	je := classified(err)
	if je.permanent || je.snooze != 0 || d <= 0 {
		return je
	}
	if refused := checkDelay("retry_after", d); refused != nil {
		note := refused.Error() + "; retried on the retry policy's backoff instead"
		if je.err == nil {
			je.err = errors.New(note)
		} else {
			je.err = fmt.Errorf("%w (%s)", je.err, note)
		}
		return je
	}
	je.retryAfter = d
	return je
}

// WithClass names the failure class of err, a short snake_case word such as
// "receipt_unavailable". The failure stays retryable unless wrapped in
// Permanent. An invalid class is recorded as "error".
func WithClass(class string, err error) error {
	je := classified(err)
	if ValidClass(class) && je.snooze == 0 {
		je.class = class
	}
	return je
}

// Snooze puts the job back in the queue for d without using an attempt and
// without recording a failure. A d under a millisecond waits a millisecond.
func Snooze(d time.Duration) error {
	// Under a millisecond, as at zero: a snooze shorter than the stores'
	// microsecond would be kept as none at all.
	if d < time.Millisecond {
		d = time.Millisecond
	}
	return &JobError{class: "snooze", snooze: d}
}

// classified returns a copy of err when it is a *JobError, or a new
// *JobError wrapping err that inherits the classification of any *JobError
// inside it.
func classified(err error) *JobError {
	if je, ok := err.(*JobError); ok {
		c := *je
		return &c
	}
	c := &JobError{class: ClassError, err: err}
	var inner *JobError
	if errors.As(err, &inner) {
		c.class, c.permanent, c.retryAfter, c.snooze = inner.class, inner.permanent, inner.retryAfter, inner.snooze
		c.dependency = inner.dependency
	}
	return c
}

// wrapStoreError wraps err, a store's, with what the client was doing; an
// *InputError, which names the field to change, is returned as it is.
func wrapStoreError(doing string, err error) error {
	var ie *InputError
	if errors.As(err, &ie) {
		return err
	}
	return fmt.Errorf("%s: %w", doing, err)
}
