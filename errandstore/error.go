package errandstore

import (
	"errors"
	"regexp"

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
)

var classPattern = regexp.MustCompile(`^[a-z][a-z0-9_]{0,63}$`)

// ValidClass reports whether class is a short snake_case word.
func ValidClass(class string) bool { return classPattern.MatchString(class) }
