package errand

import (
	"time"

	"github.com/errandhq/errand/errandtype"
)

// Observer is told, synchronously, about the jobs one client enqueues and
// the attempts its workers start and finish: what process-local metrics
// (errandhttp's /metrics) count. Set it in [Config.Observer]; nil observes
// nothing and costs nothing.
//
// Methods are called from the goroutines doing the work, concurrently, on
// the claim and outcome paths: they must be safe for concurrent use, return
// at once and never block (count, do not write to a database). They must
// not modify the jobs they are given.
type Observer interface {
	// JobsEnqueued reports jobs this client inserted: after the insert's
	// own transaction committed (Enqueue, EnqueueMany), after the commit
	// of an [Client.InTx] transaction (EnqueueTx inside InTx), or at the
	// insert for EnqueueTx in a transaction the caller commits itself,
	// whose jobs are counted even if it then rolls back. Duplicates are
	// not reported.
	JobsEnqueued(jobs []*errandtype.Job)
	// JobStarted reports an attempt that is starting: the job was claimed
	// (its Attempt counted) and its handler is about to run.
	JobStarted(job *errandtype.Job)
	// JobFinished reports what became of an attempt, recorded or not (a
	// lost lease): the same result [Client.Subscribe] delivers. job is the
	// job as it was claimed.
	JobFinished(job *errandtype.Job, res *WorkResult)
}

// AbsorbObserver is an [Observer] that is also told of the enqueues a
// debounce key folded into a pending job ([EnqueueResult.Absorbed]), which
// JobsEnqueued leaves out as duplicates. The client finds it in
// Config.Observer when it is built.
type AbsorbObserver interface {
	Observer
	// JobsAbsorbed reports, once per folded enqueue, the pending job it
	// was folded into, when JobsEnqueued reports the enqueues it inserts.
	JobsAbsorbed(jobs []*errandtype.Job)
}

// asAbsorbObserver is o as an AbsorbObserver, or nil.
func asAbsorbObserver(o Observer) AbsorbObserver {
	a, _ := o.(AbsorbObserver)
	return a
}

// The result of an attempt, as subscribers, observers and WorkOne see it.

// WorkResult reports what one claimed job did.
type WorkResult struct {
	// Result is what became of the attempt.
	Result Result `json:"result"`
	// JobID is the claimed job, or null when idle.
	JobID *string `json:"job_id"`
	// Attempt is the claimed attempt, or 0 when idle.
	Attempt int `json:"attempt"`
	// Kind is the job's kind.
	Kind string `json:"kind,omitempty"`
	// Class is the failure class when the attempt failed.
	Class string `json:"class,omitempty"`
	// Error is the failure message when the attempt failed.
	Error string `json:"error,omitempty"`
	// AvailableAt is when a retried or snoozed job runs next.
	AvailableAt *time.Time `json:"available_at,omitempty"`
	// Duration is how long the handler ran.
	Duration time.Duration `json:"-"`
}

// Result is what became of one claim: the state its outcome moved the job
// to, or why nothing was recorded.
type Result string

const (
	// ResultIdle: there was nothing to claim.
	ResultIdle Result = "idle"
	// ResultSucceeded: the handler returned nil; the job succeeded.
	ResultSucceeded Result = "succeeded"
	// ResultRetrying: the attempt failed and the job waits out its backoff.
	ResultRetrying Result = "retrying"
	// ResultDead: the attempt failed for good; the job is dead.
	ResultDead Result = "dead"
	// ResultSnoozed: the handler snoozed; the job is queued again, the
	// attempt not counted.
	ResultSnoozed Result = "snoozed"
	// ResultLeaseLost: the worker lost the job's lease; nothing was
	// recorded, and the job is another worker's now.
	ResultLeaseLost Result = "lease_lost"
	// ResultInterrupted: a stopping worker gave the job back, queued and
	// available at once, the attempt not counted.
	ResultInterrupted Result = "interrupted"
	// ResultCancelled: an operator cancelled the job while it ran; the
	// attempt ended and the job is cancelled.
	ResultCancelled Result = "cancelled"
)

// Event reports one attempt this client recorded, or whose lease it lost:
// what [Client.Subscribe] delivers.
type Event struct {
	// WorkResult is what became of the attempt.
	WorkResult
	// Job is the job as its attempt was claimed: its state then was
	// running; Result says what it is now.
	Job *errandtype.Job
}
