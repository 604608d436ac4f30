package errandtype

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// JobState is where a job is in its life. See the package documentation for
// the state machine.
type JobState string

const (
	// StateQueued jobs wait for a worker. A queued job whose AvailableAt is in
	// the future is a scheduled job.
	StateQueued JobState = "queued"
	// StateRunning jobs are held by a worker under a lease.
	StateRunning JobState = "running"
	// StateRetrying jobs failed and wait out their backoff; they become
	// claimable again at AvailableAt.
	StateRetrying JobState = "retrying"
	// StateSucceeded is terminal: the handler returned nil and the worker
	// acknowledged the job while it still owned it.
	StateSucceeded JobState = "succeeded"
	// StateDead is terminal: the job failed permanently, used up its attempts,
	// passed its deadline, or its worker died on the final attempt. Only a
	// replay brings it back.
	StateDead JobState = "dead"
	// StateCancelled is terminal: an operator or the application cancelled the
	// job. A waiting job (queued or retrying) is cancelled at once; a running
	// job gets a cancel request (Job.CancelRequestedAt) and becomes cancelled
	// when its attempt ends. Only a replay brings it back.
	StateCancelled JobState = "cancelled"
)

// JobStates lists every state in the order the operator tools show them.
var JobStates = []JobState{StateQueued, StateRunning, StateRetrying, StateSucceeded, StateDead, StateCancelled}

// uniqueBitOrder gives each state its bit of a [UniqueScope]: bit i stands
// for the i-th state. The bits are stored with every unique job and named
// in the unique index, so a new state is appended, never inserted. A scope
// is a byte whose top bit marks an invalid one: room for seven states.
var uniqueBitOrder = [...]JobState{StateQueued, StateRunning, StateRetrying, StateSucceeded, StateDead, StateCancelled}

// Valid reports whether s is one of the known states.
func (s JobState) Valid() bool {
	for _, v := range JobStates {
		if s == v {
			return true
		}
	}
	return false
}

// Terminal reports whether s is final: succeeded, dead or cancelled. No
// worker or sweep moves a job out of a terminal state; a dead or cancelled
// job changes only by an explicit replay, and a succeeded job never does.
func (s JobState) Terminal() bool {
	return s == StateSucceeded || s == StateDead || s == StateCancelled
}

// Waiting reports whether a job in state s waits for a worker: claimable
// once available, cancellable.
func (s JobState) Waiting() bool { return s == StateQueued || s == StateRetrying }

// ParseJobState returns the state named s, or an error listing the valid
// names.
func ParseJobState(s string) (JobState, error) {
	st := JobState(s)
	if !st.Valid() {
		return "", fmt.Errorf("unknown state %q: use one of %s", s, StateNames())
	}
	return st, nil
}

// StateNames lists every state's name, comma-separated, for messages and
// usage text.
func StateNames() string {
	names := make([]string, len(JobStates))
	for i, s := range JobStates {
		names[i] = string(s)
	}
	return strings.Join(names, ", ")
}

// Job is the durable record of one unit of work. Its ID is stable across
// retries and replays, so effects can be keyed on it.
type Job struct {
	// ID identifies the job for its whole life. The caller may choose it (a
	// payment id, say); otherwise it is a time-ordered UUIDv7.
	ID string `json:"id"`
	// Queue the job runs in.
	Queue string `json:"queue"`
	// Kind names the handler that runs the job.
	Kind string `json:"kind"`
	// Args is the job's argument document, raw JSON.
	Args json.RawMessage `json:"args"`
	// ArgsVersion is the schema version of Args.
	ArgsVersion int `json:"args_version"`
	// Priority orders claims within a queue: lower runs first.
	Priority int `json:"priority"`
	// State is where the job is in its life.
	State JobState `json:"state"`
	// Attempt counts the claims in the current delivery cycle. It is
	// incremented when a worker claims the job, so a job that kills its
	// worker still uses an attempt.
	Attempt int `json:"attempt"`
	// MaxAttempts bounds Attempt; the failure of attempt MaxAttempts is final.
	MaxAttempts int `json:"max_attempts"`
	// BackoffBase and BackoffMax override the retry policy for this job when
	// non-zero.
	BackoffBase Duration `json:"backoff_base"`
	BackoffMax  Duration `json:"backoff_max"`
	// AvailableAt is when the job may next be claimed.
	AvailableAt time.Time `json:"available_at"`
	// Deadline, when set, is the moment past which the job is no longer worth
	// running: it dies with class "expired" instead. Until the job first
	// starts it is the earlier of StartBy and the maximum age's deadline.
	Deadline *time.Time `json:"deadline"`
	// BasePriority is the priority the job was enqueued with once priority
	// aging has lowered Priority, the one claims order by; nil while it
	// never aged.
	BasePriority *int `json:"base_priority"`
	// StartBy, when set, is the time by which the job must have started: a
	// job not started by then never starts and dies with class "start_by".
	// It bounds the first start only; a replay clears it.
	StartBy *time.Time `json:"start_by"`
	// LeaseToken is the fencing token of the current claim. Writes about a
	// running job must present it.
	LeaseToken *string `json:"lease_token"`
	// LeaseUntil is when the current claim expires unless renewed.
	LeaseUntil *time.Time `json:"lease_until"`
	// LeaseOwner names the worker that holds the lease.
	LeaseOwner *string `json:"lease_owner"`
	// UniqueKey, when set, is the key the job holds while its state is in
	// UniqueScope (and its enqueue fell in UniqueWindowStart's window):
	// enqueueing another job with the key meanwhile returns this one.
	UniqueKey *string `json:"unique_key"`
	// UniqueScope is the set of states in which the job holds UniqueKey;
	// nil without a key. See [github.com/errandhq/errand.UniqueOpts].
	UniqueScope *UniqueScope `json:"unique_scope"`
	// UniqueWindowStart is the start of the unique window the job was
	// enqueued in; nil for a key without a window.
	UniqueWindowStart *time.Time `json:"unique_window_start"`
	// DebounceKey, when set, is the key the job was enqueued with for
	// debounce or throttle: later enqueues of the key and kind fold into
	// it while it is pending (see [github.com/errandhq/errand.DebounceOpts]).
	DebounceKey *string `json:"debounce_key"`
	// Absorbed counts the enqueues of DebounceKey folded into this job.
	// Like HeldBy it is read for operators (Get, List) and by the
	// enqueue that folds; jobs returned by other calls leave it 0.
	Absorbed int `json:"absorbed"`
	// OrderingKey groups jobs that must run one at a time in sequence order.
	OrderingKey *string `json:"ordering_key"`
	// OrderingHold reports that the job holds its ordering key while dead,
	// until it is replayed or cancelled
	// ([github.com/errandhq/errand.OrderingHoldOnDead]).
	OrderingHold bool `json:"ordering_hold"`
	// FairnessKey is the job's group for fair claims: a queue whose jobs
	// carry keys is shared among them in turn (see
	// [github.com/errandhq/errand.EnqueueOpts]).
	FairnessKey *string `json:"fairness_key"`
	// HeldBy names the job that holds this one back, for a queued or retrying
	// job that may not run yet because of its ordering key: the first job of
	// its key, in enqueue order, that is running or is waiting ahead of it.
	// Nil for every other job. It is computed when a job is read for
	// operators ([github.com/errandhq/errand.Client.Get],
	// [github.com/errandhq/errand.Client.List]); jobs returned by other calls
	// leave it nil.
	HeldBy *string `json:"held_by"`
	// HeldByBreaker names the dependency whose circuit breaker, open or
	// half-open, holds this queued or retrying job back (see
	// [github.com/errandhq/errand.BreakerHolds]); nil for every other job.
	// [github.com/errandhq/errand.Client.Get] and
	// [github.com/errandhq/errand.Client.List] compute it; jobs returned by
	// other calls leave it nil.
	HeldByBreaker *string `json:"held_by_breaker"`
	// Progress is the handler's last recorded checkpoint, raw JSON.
	Progress json.RawMessage `json:"progress"`
	// CreatedAt is when the job was enqueued.
	CreatedAt time.Time `json:"created_at"`
	// AttemptedAt is when the job was last claimed.
	AttemptedAt *time.Time `json:"attempted_at"`
	// FinishedAt is when the job reached a terminal state.
	FinishedAt *time.Time `json:"finished_at"`
	// LastError is the most recent failure, or nil.
	LastError *LastError `json:"last_error"`
	// Errors is the whole failure history, across replays.
	Errors []AttemptError `json:"errors"`
	// Replays counts operator replays.
	Replays int `json:"replays"`
	// Tags are free-form labels for operators.
	Tags []string `json:"tags"`
	// Metadata is the JSON object given at enqueue for the job's
	// producers and consumers rather than its handler (a trace context, a
	// Faktory job's custom fields), or nil.
	Metadata json.RawMessage `json:"metadata"`
	// BatchID names the batch the job is a member of (see
	// [github.com/errandhq/errand.Client.EnqueueBatch]), or nil.
	BatchID *string `json:"batch_id"`
	// WorkflowID names the workflow the job is a step or a compensation of
	// (see [github.com/errandhq/errand.Client.EnqueueWorkflow]), or nil.
	WorkflowID *string `json:"workflow_id"`
	// Output is what the handler recorded with
	// [github.com/errandhq/errand.SetOutput], raw JSON, or nil.
	Output json.RawMessage `json:"output"`
	// Seq is the insertion order, used for FIFO within a priority.
	Seq int64 `json:"seq"`
	// CancelRequestedAt is when an operator asked to cancel the job while it
	// ran, or nil. The job stays running until its worker ends the attempt,
	// cancelled. The request stays on a finished job, for operators (a job
	// may have succeeded before the request reached it); a replay clears it.
	// Who asked and why are in the audit ([AuditCancel]).
	CancelRequestedAt *time.Time `json:"cancel_requested_at"`
}

// LastError is the summary of a job's most recent failure.
type LastError struct {
	Class   string    `json:"class"`
	Message string    `json:"message"`
	At      time.Time `json:"at"`
}

// AttemptError is one entry in a job's failure history.
type AttemptError struct {
	// Attempt is the attempt that failed (0 for entries that are not
	// attempts, such as an expiry before the first claim).
	Attempt int `json:"attempt"`
	// Replay is the job's replay count when the failure happened.
	Replay int `json:"replay"`
	// At is when the failure was recorded, on the store's clock.
	At time.Time `json:"at"`
	// Class is a short snake_case word: error, permanent, timeout, panic,
	// lease_expired, expired, interrupted, or one the handler named.
	Class string `json:"class"`
	// Message is the error text.
	Message string `json:"message"`
	// Stack is the goroutine stack of a recovered panic.
	Stack string `json:"stack,omitempty"`
}

// MarshalJSON writes an error without a stack with "stack": null.
func (e AttemptError) MarshalJSON() ([]byte, error) {
	type plain AttemptError
	var stack *string
	if e.Stack != "" {
		stack = &e.Stack
	}
	return json.Marshal(struct {
		plain
		Stack *string `json:"stack"`
	}{plain(e), stack})
}

// Envelope is the versioned form of a claimed job that crosses process and
// language boundaries: what an external worker receives.
type Envelope struct {
	ID          string          `json:"id"`
	Kind        string          `json:"kind"`
	ArgsVersion int             `json:"args_version"`
	Args        json.RawMessage `json:"args"`
	Attempt     int             `json:"attempt"`
	MaxAttempts int             `json:"max_attempts"`
	LeaseToken  string          `json:"lease_token"`
	LeaseUntil  time.Time       `json:"lease_until"`
	Deadline    *time.Time      `json:"deadline"`
	// Metadata is the job's metadata (see Job.Metadata), where a worker
	// finds the trace context to continue, under W3C Trace Context's
	// header names traceparent and tracestate.
	Metadata json.RawMessage `json:"metadata"`
}

// Envelope returns the job's envelope. It is meaningful for a claimed job.
func (j *Job) Envelope() Envelope {
	e := Envelope{
		ID:          j.ID,
		Kind:        j.Kind,
		ArgsVersion: j.ArgsVersion,
		Args:        j.Args,
		Attempt:     j.Attempt,
		MaxAttempts: j.MaxAttempts,
		Deadline:    j.Deadline,
		Metadata:    j.Metadata,
	}
	if j.LeaseToken != nil {
		e.LeaseToken = *j.LeaseToken
	}
	if j.LeaseUntil != nil {
		e.LeaseUntil = *j.LeaseUntil
	}
	return e
}

// Duration is a time.Duration that reads and writes JSON in Go syntax
// ("250ms", "1h"), and as null when zero.
type Duration time.Duration

// MarshalJSON implements json.Marshaler.
func (d Duration) MarshalJSON() ([]byte, error) {
	if d == 0 {
		return []byte("null"), nil
	}
	return json.Marshal(time.Duration(d).String())
}

// UnmarshalJSON implements json.Unmarshaler.
func (d *Duration) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*d = 0
		return nil
	}
	v, err := UnmarshalJSONString[Duration](b, time.ParseDuration)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// CancelPending reports whether an operator asked to cancel the job while it
// runs and the attempt has not ended yet.
func (j *Job) CancelPending() bool {
	return j.State == StateRunning && j.CancelRequestedAt != nil
}

// The classes of a waiting job that dies at its Deadline.
const (
	// ClassExpired ends a job past its maximum age.
	ClassExpired = "expired"
	// ClassStartBy ends a job not started by its start-by time.
	ClassStartBy = "start_by"
)

// DeadlineClass is the class a waiting job dies with at its Deadline:
// [ClassStartBy] while the deadline is the start-by of a job never
// started, [ClassExpired] otherwise.
func (j *Job) DeadlineClass() string {
	if j.StartBy != nil && j.Deadline != nil && j.AttemptedAt == nil && j.StartBy.Equal(*j.Deadline) {
		return ClassStartBy
	}
	return ClassExpired
}

// EnqueuedPriority is the priority the job was enqueued with, before any
// aging.
func (j *Job) EnqueuedPriority() int {
	if j.BasePriority != nil {
		return *j.BasePriority
	}
	return j.Priority
}
