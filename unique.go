package errand

import (
	"time"

	"github.com/errandhq/errand/errandtype"
)

// UniqueOpts makes a job unique by key: while a job of the key is in one of
// the states of Scope (and, with a Window, was enqueued in the same window),
// enqueueing another job with the key inserts nothing and returns the job
// that holds it, with [EnqueueResult.Duplicate] set.
//
// The database enforces it: a unique index covers exactly the rows that
// hold their key, so two concurrent enqueues cannot both insert, and a job
// frees its key the moment it leaves its scope, whatever moves it there (an
// outcome, a sweep, a cancel, a retention prune).
type UniqueOpts struct {
	// Key is the unique key, shown to operators as the job's unique_key.
	Key string
	// Scope is the set of states in which the job holds Key. The zero value
	// is [UniqueAlways]: the job holds its key in every state, for as long
	// as it exists.
	Scope errandtype.UniqueScope
	// Window, when non-zero, limits the key to one job per window: the
	// store's clock at enqueue, truncated to a multiple of Window since the
	// Unix epoch, becomes part of the key. Window: time.Hour enqueues at
	// most one job of the key per clock hour (within Scope); a job of the
	// previous hour no longer counts. A millisecond to ten years
	// ([MinUniqueWindow], [MaxUniqueWindow]).
	Window time.Duration
}

// UniqueScopeOf returns the scope holding exactly states. Validate reports
// an unknown state or a scope that lacks the unfinished states.
func UniqueScopeOf(states ...errandtype.JobState) errandtype.UniqueScope {
	var s errandtype.UniqueScope
	for _, st := range states {
		s |= errandtype.UniqueBit(st)
	}
	return s
}
