package errand

import (
	"errors"
	"fmt"
	"time"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
)

var (
	// ErrUnsupportedTx reports a transaction type the store cannot join.
	ErrUnsupportedTx = errors.New("unsupported transaction type")
	// ErrEffectHeld reports that another delivery holds a remote effect
	// under a live lease.
	ErrEffectHeld = errors.New("effect held by another delivery")
	// ErrJobCancelled is the cause (see [context.Cause]) with which a
	// running handler's context is cancelled when an operator cancels its
	// job. A handler that sees it should stop and return; the attempt ends
	// cancelled whatever error it returns, unless it returns nil, which
	// records the job as succeeded: the work was done.
	ErrJobCancelled = errandtype.ErrJobCancelled
	// ErrIDConflict reports an enqueue whose id names an existing job,
	// batch or workflow that differs from the one it would have made. The
	// concrete error is an *IDConflictError.
	ErrIDConflict = errors.New("id taken by a different job")
)

// Failure classes errand itself assigns. Handlers may name others.
const (
	ClassError       = "error"
	ClassPermanent   = "permanent"
	ClassTimeout     = "timeout"
	ClassPanic       = "panic"
	ClassInterrupted = "interrupted"
	// ClassUnknownKind is recorded when a claimed job's kind has no handler.
	ClassUnknownKind = "unknown_kind"
)

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
	if refused := errandstore.CheckDelay("retry_after", d); refused != nil {
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
	if errandstore.ValidClass(class) && je.snooze == 0 {
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
	var ie *errandtype.InputError
	if errors.As(err, &ie) {
		return err
	}
	return fmt.Errorf("%s: %w", doing, err)
}
