package errand

import (
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
)

// The job record, its states and the errors an application checks are
// declared in errandtype, which stores share; these names keep them one
// import away.

// Job is a job's whole record: see [errandtype.Job].
type Job = errandtype.Job

// JobState is where a job is in its life: see [errandtype.JobState].
type JobState = errandtype.JobState

// The job states; see the package documentation for the state machine.
const (
	StateQueued    = errandtype.StateQueued
	StateRunning   = errandtype.StateRunning
	StateRetrying  = errandtype.StateRetrying
	StateSucceeded = errandtype.StateSucceeded
	StateDead      = errandtype.StateDead
	StateCancelled = errandtype.StateCancelled
)

// ParseJobState returns the state named s, or an error listing the valid
// names.
func ParseJobState(s string) (JobState, error) { return errandtype.ParseJobState(s) }

// Errors a store reports, through the Client as through the store.
var (
	ErrNotFound         = errandtype.ErrNotFound
	ErrLeaseLost        = errandtype.ErrLeaseLost
	ErrWrongState       = errandtype.ErrWrongState
	ErrInvalid          = errandtype.ErrInvalid
	ErrNoSchema         = errandtype.ErrNoSchema
	ErrStoreUnavailable = errandtype.ErrStoreUnavailable
	ErrUniqueConflict   = errandtype.ErrUniqueConflict
	// ErrWorkflowCompensated: see [errandstore.WorkflowCompensatedError].
	ErrWorkflowCompensated = errandstore.ErrWorkflowCompensated
)

// Typed errors an application may unwrap with errors.As.
type (
	StateError               = errandtype.StateError
	InputError               = errandtype.InputError
	UniqueConflictError      = errandtype.UniqueConflictError
	WorkflowCompensatedError = errandstore.WorkflowCompensatedError
)

// The operator's figures, per queue and kind ([Client.Insights]): see
// [errandtype.Insights].
type (
	Insights      = errandtype.Insights
	KindInsights  = errandtype.KindInsights
	Throughput    = errandtype.Throughput
	ClassFailures = errandtype.ClassFailures
	Percentiles   = errandtype.Percentiles
)

// The depth buckets of [KindInsights]: see [errandtype.DepthBucket].
const (
	BucketReady     = errandtype.BucketReady
	BucketScheduled = errandtype.BucketScheduled
	BucketRetrying  = errandtype.BucketRetrying
	BucketHeld      = errandtype.BucketHeld
	BucketRunning   = errandtype.BucketRunning
	BucketDead      = errandtype.BucketDead
)

// UniqueScope is the set of states in which a unique job holds its key
// (UniqueOpts.Scope).
type UniqueScope = errandtype.UniqueScope

// The unique scopes; see [errandtype.UniqueScope].
const (
	UniqueUntilFinished  = errandtype.UniqueUntilFinished
	UniqueUntilSucceeded = errandtype.UniqueUntilSucceeded
	UniqueAlways         = errandtype.UniqueAlways
)

// BreakerPolicy says when a dependency's circuit breaker opens and how it
// closes again (WorkerConfig.Breakers): see [errandtype.BreakerPolicy].
type BreakerPolicy = errandtype.BreakerPolicy

// MissedPolicy says what a schedule does with ticks missed while no leader
// ran (ScheduleOpts.Missed).
type MissedPolicy = errandtype.MissedPolicy

// The missed-tick policies.
const (
	MissedSkip    = errandtype.MissedSkip
	MissedCatchUp = errandtype.MissedCatchUp
)

// EffectStatus tells a RemoteEffect's function what it found: see
// [errandtype.EffectStatus].
type EffectStatus = errandtype.EffectStatus

// The effect statuses a RemoteEffect's function is told.
const (
	EffectBegun     = errandtype.EffectBegun
	EffectRetaken   = errandtype.EffectRetaken
	EffectAbandoned = errandtype.EffectAbandoned
)

// RateLimit caps how many jobs of a queue, a kind or a dependency start per
// interval across the whole cluster: see [errandtype.RateLimit].
type RateLimit = errandtype.RateLimit

// RetryBudget caps the retries of a kind to a fraction of its first
// attempts: see [errandtype.RetryBudget].
type RetryBudget = errandtype.RetryBudget

// Defaults of RetryBudget.
const (
	DefaultRetryBudgetWindow = errandtype.DefaultRetryBudgetWindow
	DefaultRetryBudgetMin    = errandtype.DefaultRetryBudgetMin
)

// ConcurrencyLimit caps how many jobs of a kind run at once across the
// whole cluster: see [errandtype.ConcurrencyLimit].
type ConcurrencyLimit = errandtype.ConcurrencyLimit

// ParseConcurrencyLimit reads a concurrency limit written on a command
// line, as errand work --concurrency-limit takes it: see
// [errandtype.ParseConcurrencyLimit].
func ParseConcurrencyLimit(s string) (ConcurrencyLimit, error) {
	return errandtype.ParseConcurrencyLimit(s)
}

// ParseRateLimit reads a rate limit written on a command line, as errand
// work --rate-limit takes it: see [errandtype.ParseRateLimit].
func ParseRateLimit(s string) (RateLimit, error) { return errandtype.ParseRateLimit(s) }

// ParseRetryBudget reads a retry budget written on a command line, as
// errand work --retry-budget takes it: see [errandtype.ParseRetryBudget].
func ParseRetryBudget(s string) (RetryBudget, error) { return errandtype.ParseRetryBudget(s) }
