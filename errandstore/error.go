package errandstore

import (
	"errors"
	"regexp"
	"time"

	"github.com/errandhq/errand/errandtype"
)

var (
	// ErrWorkflowCompensated reports a replay of a workflow's step refused
	// because the workflow has begun undoing its steps, or was rerun. The
	// concrete error is a *WorkflowCompensatedError.
	ErrWorkflowCompensated = errors.New("workflow compensated")
)

const (
	ClassLeaseExpired = "lease_expired"
	ClassExpired      = errandtype.ClassExpired
	// ClassStartBy ends a job that had not started by its start-by time,
	// distinct from ClassExpired, the maximum age of the whole job.
	ClassStartBy   = errandtype.ClassStartBy
	ClassCancelled = "cancelled"
	// ClassArgsTooLarge is recorded on a workflow's job that errand
	// enqueued dead, unrun, because its args with the outputs of the
	// steps before it would exceed the bound of a job's args.
	ClassArgsTooLarge = "args_too_large"
	// ClassUnreadable is recorded on a job given back, its attempt
	// uncounted, because the worker that claimed it could not read its
	// row: a value written by a newer errand, or changed by hand. It
	// waits UnreadableRetryDelay for a worker that can.
	ClassUnreadable = "unreadable"
)

// UnreadableRetryDelay is how long a job given back with ClassUnreadable
// waits before it is claimable again, so that a row no worker can read
// costs a claim a minute rather than every claim of its queue.
const UnreadableRetryDelay = time.Minute

var classPattern = regexp.MustCompile(`^[a-z][a-z0-9_]{0,63}$`)

// ValidClass reports whether class is a short snake_case word.
func ValidClass(class string) bool { return classPattern.MatchString(class) }
