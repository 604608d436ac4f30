package errandstore

import (
	"context"
	"encoding/json"
	"time"

	"github.com/errandhq/errand/errandtype"
)

// Store is what every store implements: every capability but the caller's
// transactions, which [TxStore] adds with the store's transaction type.
type Store interface {
	JobStore
	EffectStore
	WorkerRegistry
	LeaderElector
	Migrator
	OperatorStore

	// Close releases the store's resources. It does not close a database
	// handle the caller passed in.
	Close() error
}

// TxStore is a Store that joins its caller's transactions, of type TTx:
// *sql.Tx for errand/sqlite, pgx.Tx for errand/postgres (and *sql.Tx for
// its database/sql view). The type is checked when the program compiles: a
// [github.com/errandhq/errand.Client] of a TxStore[TTx] takes only a TTx.
type TxStore[TTx any] interface {
	Store

	// JobInsertManyTx inserts jobs as JobInsertMany does, but inside tx,
	// the caller's transaction, so that they commit or roll back with the
	// caller's own writes.
	JobInsertManyTx(ctx context.Context, tx TTx, params *JobInsertManyParams) ([]JobInsertResult, error)

	// EffectRecordTx records, inside tx, that the effect identified by
	// Key is being performed. It returns false when the key was already
	// recorded (the effect happened; skip it). When LeaseToken is not empty
	// the write is fenced like any other job write: it fails with
	// ErrLeaseLost unless job JobID is running under that token with a live
	// lease. The entry it writes is completed.
	EffectRecordTx(ctx context.Context, tx TTx, params *EffectRecordParams) (bool, error)

	// InTx begins a transaction on the store's own database, runs fn with
	// it and commits; it rolls back when fn returns an error or panics,
	// and returns fn's error (or re-panics).
	InTx(ctx context.Context, fn func(ctx context.Context, tx TTx) error) error
}

// NextDueClaimer is an optional capability of a JobStore: a claim that also
// answers JobNextDue, in the claim's own round trip. An idle
// [github.com/errandhq/errand.Worker] asks when its queue's next job comes
// due before each claim; with it, the question costs no round trip of its
// own, and a job enqueued into an idle queue starts one round trip sooner.
// errand/postgres implements it.
type NextDueClaimer interface {
	// JobClaimManyNextDue claims as JobClaimMany does and answers
	// JobNextDue for next, asked before the claim (after any sweep the
	// claim makes), so that a job that comes due between the two is either
	// claimed or not earlier than the answer. On an error nothing is
	// claimed.
	JobClaimManyNextDue(ctx context.Context, params *JobClaimParams, next *JobNextDueParams) ([]*errandtype.Job, JobNextDueResult, error)
}

// InsertClaimer is an optional capability of a JobStore: an insert that
// also claims the job it writes, in the insert's own transaction, for a
// worker of the inserting process with a slot free (an eager start, see
// [github.com/errandhq/errand.EnqueueOpts].Eager). The job starts without
// a claim of its own: a commit and the claim's round trips fewer, and no
// wake-up to wait for. errand/sqlite and errand/postgres implement it.
type InsertClaimer interface {
	// JobInsertClaim inserts p.Job as JobInsertMany inserts a batch of
	// one and, in the same transaction, claims it under p.Claim if the
	// insert wrote it and JobClaimMany's rule lets a claim take it now
	// (waiting, available, within its deadline, of a kind the claim
	// names, its ordering key free), whatever other jobs wait. claimed
	// reports that it did: the result's Job is then running, its attempt
	// counted, under a lease of its own. A duplicate is never claimed.
	JobInsertClaim(ctx context.Context, p *JobInsertClaimParams) (r JobInsertResult, claimed bool, err error)
}

// ManyJobGetter is an optional capability of a JobStore: the jobs of many ids
// read at once, where [JobStore.JobGet] would take a round trip for each (a
// remote worker's batch of failures reads every job it fails).
// errand/postgres implements it; without it, each job is read by JobGet.
type ManyJobGetter interface {
	// JobGetMany returns the jobs of ids, each as JobGet returns it, in no
	// particular order; an id of no job is left out.
	JobGetMany(ctx context.Context, ids []string) ([]*errandtype.Job, error)
}

// ParallelWriter is an optional capability of a Store: it reports whether the
// store runs write transactions side by side, as PostgreSQL does, rather than
// one at a time, as SQLite's one writer does. A
// [github.com/errandhq/errand.Worker] on a store that writes in parallel
// frees a successful job's slot as soon as its outcome is handed over to be
// written, and wakes its claim loop as the batch's write starts, so that one
// claim for every slot the batch's jobs freed runs beside the write; at most
// one such outcome per slot waits with its slot freed, so a queue of n slots
// runs at most n handlers and holds at most 2n jobs. On a store that writes
// one at a time the claims would queue behind the very writes they were meant
// to overlap, so there a slot frees once its job's outcome is written.
// errand/postgres implements it.
type ParallelWriter interface {
	WritesInParallel() bool
}

// FairClaimer is the optional capability of fair claims: sharing a queue
// round-robin among fairness keys (see
// [github.com/errandhq/errand.EnqueueOpts].FairnessKey), so that one key's
// burst does not delay another key's jobs behind it. A
// [github.com/errandhq/errand.Worker] uses it for a queue whose jobs carry
// fairness keys; a store without it claims every queue in plain claim order.
type FairClaimer interface {
	// JobClaimFair claims as JobClaimMany does, from the one queue of
	// Queues, but picks across fairness keys in turn, by the fair-claim
	// rule (see [FairPickSQL]): priority first, then each job's rank
	// within its key (the key's first claimable job, its second, ...),
	// then the key served longest ago by a fair claim of the queue, then
	// available_at and seq. Jobs without a key are one group of their own.
	// It records the keys it served as the queue's latest turn. The
	// ordering-key rule applies as in JobClaimMany. The result is sorted
	// by [SortFairClaimOrder]. A store reads only the first Limit
	// claimable jobs of each key, never a key's whole backlog.
	JobClaimFair(ctx context.Context, params *JobClaimParams) ([]*errandtype.Job, error)

	// FairnessKeysWaiting returns, for each queue with waiting jobs that
	// carry a fairness key, the keys with the most waiting jobs (at most
	// Limit per queue; zero means 10), most first, then by key; queues in
	// name order. Waiting is a state of [WaitingStates], scheduled or
	// not. Operators read it to see who fills a queue.
	FairnessKeysWaiting(ctx context.Context, params *FairnessKeysParams) ([]errandtype.FairnessKeyCount, error)
}

// FairnessKeysParams asks for the busiest fairness keys.
type FairnessKeysParams struct {
	// Queue, when set, restricts the answer to one queue.
	Queue string
	// Limit is the most keys per queue; zero means 10.
	Limit int
}

// JobStore keeps the jobs: insert, read, claim, renew, record, replay,
// cancel, sweep.
type JobStore interface {
	// Now returns the store's current time. Callers use it to display ages
	// and to reason about schedules; decisions are still made by the store.
	Now(ctx context.Context) (time.Time, error)

	// JobInsertMany inserts jobs in one transaction of its own. A job whose
	// ID matches an existing job, or whose UniqueKey is held by one (see
	// [UniqueHeldSQL]; within the job's unique window, computed with
	// [UniqueWindowStart] on the store's clock), is not inserted: its result
	// holds the existing job with Duplicate set. Either every new job is
	// committed or none is. Results are in the order of Jobs.
	JobInsertMany(ctx context.Context, params *JobInsertManyParams) ([]JobInsertResult, error)

	// JobGet returns one job, or ErrNotFound. It fills HeldBy: for a
	// waiting job with an ordering key that a claim would skip, the id of
	// the first job of that key, in seq order, that is running, or waits
	// with a lower seq (see [HeldBySQL]); nil otherwise. A job has a
	// HeldBy exactly when the ordering condition of JobClaimMany excludes
	// it.
	JobGet(ctx context.Context, params *JobGetParams) (*errandtype.Job, error)

	// JobList returns jobs matching the filters in ascending Seq order,
	// starting after AfterSeq, at most Limit of them, with HeldBy filled as
	// JobGet fills it.
	JobList(ctx context.Context, params *JobListParams) ([]*errandtype.Job, error)

	// JobClaimMany claims up to Limit available jobs in one transaction.
	// First, when its store handle has not swept for [ClaimSweepInterval]
	// (as [ClaimSweeps] decides), it sweeps, as JobSweep does. Then it picks
	// claimable jobs (a state of [WaitingStates], available_at <= now, no
	// deadline or a deadline after now, in one of Queues and, when Kinds is
	// set, of one of Kinds) ordered by priority, available_at and seq, and for each writes state running, attempt+1, a fresh lease
	// token, lease_until = now+Lease, lease_owner and attempted_at. Two
	// concurrent claims never return the same job. A job with an ordering
	// key is claimable only as the ordering-key rule allows (see
	// [OrderingFreeSQL]). The result is in claim order ([SortClaimOrder]).
	// An empty result is not an error.
	JobClaimMany(ctx context.Context, params *JobClaimParams) ([]*errandtype.Job, error)

	// JobNextDue reports how long, on the store's clock, until the earliest
	// waiting job in one of Queues (and, when Kinds is set, of one of
	// Kinds) that is not yet available becomes available: a scheduled job,
	// a retry waiting out its backoff, a snoozed job. Found is false when
	// no such job waits, or Queues is empty. Jobs available already are
	// none of its business, claimable or held back by an ordering key. An
	// idle worker sleeps until then instead of a whole poll. The answer is
	// a duration, not a time, so that a worker whose clock is off still
	// wakes when the job is due on the store's clock.
	JobNextDue(ctx context.Context, params *JobNextDueParams) (JobNextDueResult, error)

	// JobHeartbeatMany extends the leases of running jobs to now+Lease, each
	// fenced by its token. The result has one entry per lease, in order: the
	// new lease_until and whether a cancel was requested, or ErrLeaseLost
	// with nothing written for that job (an unknown job included).
	JobHeartbeatMany(ctx context.Context, params *JobHeartbeatParams) ([]HeartbeatResult, error)

	// JobSetProgress records a handler's checkpoint, fenced by the token.
	// The checkpoint stays on the job, so the next attempt can resume from
	// it. Progress that is not valid JSON is an *InputError.
	JobSetProgress(ctx context.Context, params *JobSetProgressParams) error

	// JobRecordOutcomes applies the outcomes of finished attempts in one
	// transaction, each fenced by its own token. The result has one entry per
	// outcome, in order: the job's new state (and with Follow its kind,
	// batch and workflow: see [OutcomeResult]), or ErrLeaseLost with
	// nothing written for that job.
	// The store applies the outcome it is given (see
	// [OutcomeKind.State] and the methods beside it); the caller has already
	// applied the retry policy. An outcome that lacks what its kind needs
	// (an Error for the kinds that append one) or of an unknown kind is an
	// *InputError, and nothing in the batch is written.
	JobRecordOutcomes(ctx context.Context, params *JobRecordOutcomesParams) ([]OutcomeResult, error)

	// JobReplay starts a new delivery cycle for a job in one of
	// [ReplayableStates]: state queued, attempt 0, available now, replays+1,
	// lease cleared, error history kept, finished_at and any cancel request
	// cleared, progress kept unless ClearProgress; a job with a
	// maximum age gets a new deadline, now+MaxAge, the start-by is
	// cleared and an aged priority goes back to the enqueued one. When Args is set the job's
	// args become Args. In the same transaction it appends an [errandtype.AuditRecord]:
	// action [errandtype.AuditReplay] (or [errandtype.AuditReplayArgs], with details from
	// [ReplayArgsDetails] keeping the old and new args), the operator,
	// reason, prior state, the new replay number and the time. Any other
	// state is the *StateError of [CheckReplay] and nothing is written. A
	// job whose replay would take back a unique key another job holds
	// ([ReplayTakesKey]) is refused with a *UniqueConflictError and nothing
	// is written. A workflow's step ([ReplayHeldByWorkflow]) is checked
	// against its workflow's row read in the same transaction, locked
	// against a concurrent advance ([CheckReplayInWorkflow]).
	JobReplay(ctx context.Context, params *JobReplayParams) (*errandtype.Job, error)

	// JobReplayAudit returns the replays of one job from the audit (actions
	// [errandtype.AuditReplay], [errandtype.AuditReplayArgs] and [errandtype.AuditBulkReplay]), oldest first.
	// A job never replayed, or unknown, has an empty audit.
	JobReplayAudit(ctx context.Context, params *JobReplayAuditParams) ([]errandtype.ReplayRecord, error)

	// JobCancel moves a waiting job, or a dead job that holds its ordering
	// key, to cancelled, with finished_at now, and appends an [errandtype.AuditCancel]
	// record with the operator, reason and prior state in the same
	// transaction. A job in one of [CancelRequestStates] (running) instead
	// gets cancel_requested_at now and stays running, audited alike; its
	// worker learns of it from its next heartbeat (see [HeartbeatResult])
	// or, sooner, from a [CancelListener]. Asking again while a request is
	// pending changes nothing, is not audited again, and returns the job.
	// Any other state is the *StateError of [CheckCancelJob] and nothing is
	// written.
	JobCancel(ctx context.Context, params *JobCancelParams) (*errandtype.Job, error)

	// JobSweep applies the rules that time alone triggers: a running job
	// whose lease expired becomes retrying (available now) with a
	// lease_expired entry in its history, or dead on its final attempt, or,
	// when a cancel was requested, cancelled with a cancelled entry
	// ([CancelledBySweepMessage]) and counted in Cancelled; a
	// waiting job past its deadline becomes dead with class expired, or
	// with class start_by ([StartByMessage]) when that deadline is the
	// start-by of a job never claimed (see [FirstDeadline]). Each
	// new history entry carries the job's attempt (0 for a job never
	// claimed). Leases are swept before deadlines, so a job whose worker
	// died past the job's deadline gets both entries and dies. Claims sweep
	// first, at most once per [ClaimSweepInterval] for each store handle; a
	// leader also calls it between claims. A job past its deadline is never
	// claimed, swept yet or not, and an expired lease waits for the next
	// sweep.
	JobSweep(ctx context.Context, params *JobSweepParams) (SweepResult, error)

	// QueueStats summarises every queue that holds jobs, ordered by name,
	// with a non-nil Counts (every state) and WaitingByKind: a store
	// counts jobs per queue, state and kind and passes the counts to
	// [AssembleQueueStats].
	QueueStats(ctx context.Context, params *QueueStatsParams) ([]errandtype.QueueStats, error)
}

// OperatorStore is what operators' tools read and do beyond single jobs:
// the audit of their actions, bulk replays, retention.
type OperatorStore interface {
	// AuditList returns audit records matching the filters, newest first
	// (id descending), at most [AuditLimit](Limit) of them. Every record
	// has non-nil Details when its action records any.
	AuditList(ctx context.Context, params *AuditListParams) ([]errandtype.AuditRecord, error)

	// JobReplayMany replays, in one transaction, the dead jobs that match
	// Filter and have a seq after AfterSeq, in seq order, at most Limit of
	// them, each as JobReplay replays one, each audited as
	// [errandtype.AuditBulkReplay] with the details of [BulkReplayDetails].
	// It returns the replayed jobs in seq order. It leaves out a dead step
	// (id [WorkflowStepJobID]) of a workflow in state compensating, as
	// [github.com/errandhq/errand.Client.Replay] refuses one. With DryRun it
	// writes nothing and returns the jobs it would replay, unchanged. Params
	// that fail Validate are an *InputError and nothing is written.
	JobReplayMany(ctx context.Context, params *JobReplayManyParams) ([]*errandtype.Job, error)

	// JobPrune deletes, in one transaction, up to Limit finished jobs:
	// first succeeded and cancelled jobs whose finished_at is at least
	// SucceededAge before now (when SucceededAge > 0), oldest first, then
	// dead jobs that died at least DeadAge before now (when DeadAge > 0);
	// a kind in Kinds goes at its own ages instead, group by group as
	// [PruneGroups] lists them. It never deletes a job in any other state, nor a job of an open
	// workflow (running or compensating) or of an open batch, nor one of a
	// failed workflow whose failed step's job it keeps, but that job: those
	// read their finished jobs to go on. In the same transaction it
	// deletes up to Limit completed batches with no member and no callback
	// job left, and up to Limit finished (succeeded or failed) workflows
	// with no job left, each finished before [PruneBatchCutoff], oldest
	// first, reading errand_jobs by index only. When it deletes any, it
	// appends one [errandtype.AuditPrune] record (no job id, details from
	// [PruneDetails]) in the same transaction. Audit records and effect
	// ledger entries are kept. With DryRun it counts every job it would
	// delete, without Limit, and the batches and workflows whose every job
	// it would delete, and writes nothing. Params that fail Validate
	// are an *InputError and nothing is written.
	JobPrune(ctx context.Context, params *JobPruneParams) (PruneResult, error)

	// JobInsights reads the raw figures of [errandtype.InsightsData] on the store's
	// clock, each query bounded by a time window or by the unfinished and
	// dead jobs, with at most [InsightsSample](SampleLimit) samples.
	JobInsights(ctx context.Context, params *JobInsightsParams) (*errandtype.InsightsData, error)
}

// EffectStore is the effect ledger's try-begin / complete / release
// protocol for remote effects. (Effects in the store's own database are
// recorded inside the caller's transaction: see [TxStore.EffectRecordTx].)
type EffectStore interface {
	// EffectBegin opens, or takes over, the ledger entry for a remote effect.
	// It is fenced by the job's lease token, then answers as [BeginEffect]
	// decides. A takeover keeps the entry's created_at.
	EffectBegin(ctx context.Context, params *EffectParams) (*Effect, error)

	// EffectComplete marks a begun effect done, fenced by the job's lease and
	// the entry's token: ErrLeaseLost, with nothing written, unless the entry
	// is in progress under this live lease.
	EffectComplete(ctx context.Context, params *EffectParams) (*Effect, error)

	// EffectRelease marks a begun effect failed, with Message, so a later
	// delivery may try it again; fenced like EffectComplete.
	EffectRelease(ctx context.Context, params *EffectReleaseParams) (*Effect, error)

	// EffectGet returns a ledger entry, or ErrNotFound.
	EffectGet(ctx context.Context, params *EffectGetParams) (*Effect, error)
}

// WorkerRegistry records the workers, for operators: no lease or claim
// decision reads it. A record's status is [WorkerStatusAt] on the store's
// clock.
type WorkerRegistry interface {
	// WorkerRegister records a starting worker: host, pid, queues, kinds and
	// declared heartbeat interval, with started_at and heartbeat_at now. A
	// registration is a fresh start: when a row with the ID exists it is
	// replaced, counters zeroed, last_completed_at, draining_at and
	// stopped_at cleared.
	// An empty ID or a heartbeat interval that is not positive is an
	// *InputError and nothing is written. The record has status alive.
	WorkerRegister(ctx context.Context, params *WorkerRegisterParams) (*errandtype.WorkerRecord, error)

	// WorkerHeartbeat records that worker ID is alive: heartbeat_at now and
	// the counters in Stats (see [WorkerStats] for last_completed_at, the
	// clock skew and draining_at). A worker that is not registered, or that
	// stopped, is ErrNotFound and nothing is written: the worker registers
	// again. Negative counts or LastCompletedAgo are an *InputError.
	WorkerHeartbeat(ctx context.Context, params *WorkerHeartbeatParams) (*errandtype.WorkerRecord, error)

	// WorkerStop marks worker ID stopped, with stopped_at now and
	// jobs_running 0 (a worker stops after its jobs are recorded). Stopping
	// again keeps the first stopped_at. An unknown id is ErrNotFound.
	WorkerStop(ctx context.Context, params *WorkerStopParams) error

	// WorkerList returns every registered worker, newest first (started_at
	// descending, then id), each with its status computed from the store's
	// clock by [WorkerStatusAt]. A negative StaleAfter is an *InputError.
	WorkerList(ctx context.Context, params *WorkerListParams) ([]*errandtype.WorkerRecord, error)

	// WorkerPrune deletes the workers that are stopped or gone (by their
	// own staleness window) and whose last sign of life (stopped_at, or
	// heartbeat_at for a gone worker) is at least OlderThan before now, and
	// returns how many it deleted. An alive or draining worker is never
	// pruned. A negative OlderThan is an *InputError.
	WorkerPrune(ctx context.Context, params *WorkerPruneParams) (int, error)
}

// LeaderElector keeps leadership leases in the store, on its clock.
// Leadership decides what must run once per cluster: sweeps between
// claims, registry cleanup, later retention and cron.
type LeaderElector interface {
	// LeaderElect makes Holder the leader of Name until now+TTL, on the
	// store's clock, when nobody leads or the current lease has expired or
	// Holder already leads (a renewal). It reports whether Holder leads
	// after the call and the lease's end.
	LeaderElect(ctx context.Context, params *LeaderElectParams) (*errandtype.Leader, error)

	// LeaderResign ends Holder's lease on Name at once, so another process
	// may lead without waiting for it to expire. Resigning a lease one does
	// not hold changes nothing and is not an error.
	LeaderResign(ctx context.Context, params *LeaderResignParams) error

	// LeaderGet returns the current leader of Name, or ErrNotFound when no
	// lease is live.
	LeaderGet(ctx context.Context, params *LeaderGetParams) (*errandtype.Leader, error)
}

// Migrator applies and reports the store's schema. Stores migrate when
// they open unless told not to; Migrate is for deployments that migrate
// separately.
type Migrator interface {
	// Migrate applies the store's pending migrations: numbered,
	// forward-only, each applied once however many processes migrate at
	// once. A schema that a newer errand migrated is refused before
	// anything is applied.
	Migrate(ctx context.Context) error

	// SchemaVersion returns the newest applied migration.
	SchemaVersion(ctx context.Context) (int, error)
}

// Notifier is an optional capability of a Store: waking workers in other
// processes when jobs are enqueued, so they need not wait for their next
// poll. Polling remains the floor; a notification is a hint, never the only
// way a job is found.
type Notifier interface {
	// NotifyQueues announces new jobs in queues to listening workers in
	// every process. Callers send it after the enqueue transaction commits,
	// never inside it (a lone insert may announce its own job instead: see
	// JobInsertManyParams.Announce); a store may coalesce notifications
	// sent close together.
	NotifyQueues(ctx context.Context, queues []string) error

	// ListenQueues delivers the name of each queue with new jobs until ctx
	// ends, then closes the channel. A dropped connection is re-established
	// by the store; after reconnecting it delivers the empty name "", which
	// means "look at every queue now", so nothing enqueued while it was
	// disconnected waits for the next poll.
	ListenQueues(ctx context.Context) (<-chan string, error)
}

// CancelListener is an optional capability of a Store: telling workers in
// every process, within a fraction of a second, that an operator asked to
// cancel a running job, so that they need not wait for their next lease
// renewal. The renewal's answer ([HeartbeatResult.CancelRequested]) is the
// floor and the authority; a notification is a hint that makes a worker
// renew at once.
type CancelListener interface {
	// ListenCancels delivers the id of each job whose cancel is requested
	// (JobCancel of a running job) after the request commits, until ctx
	// ends, then closes the channel. An id may be delivered more than once.
	// After a reconnect, or a failed check, it delivers the empty id "",
	// which means "check every job you hold now".
	ListenCancels(ctx context.Context) (<-chan string, error)
}

// ScheduleStore is an optional capability of a Store: the durable state of
// recurring jobs (see [github.com/errandhq/errand.Schedule]), found by type
// assertion. errand/sqlite and errand/postgres implement it. A Worker with
// schedules needs it; a Worker without schedules never touches it, so the
// claim path pays nothing for it.
type ScheduleStore interface {
	// ScheduleUpsert registers a schedule. A new name is inserted with
	// NextFireAt. An existing name takes Kind, Queue and Missed; when its
	// stored Spec differs from Spec it also takes Spec and NextFireAt (a
	// changed spec starts afresh), and otherwise keeps its next_fire_at,
	// last_fire_at and last_job_id, so that a restart neither skips nor
	// repeats a tick. Bad parameters are an *InputError and nothing is
	// written.
	ScheduleUpsert(ctx context.Context, params *ScheduleUpsertParams) (*errandtype.ScheduleRecord, error)

	// ScheduleAdvance moves a schedule's next_fire_at from From to To, in one
	// transaction with the insert of Job when Job is not nil: a
	// compare-and-set, so that of any number of processes that read the same
	// next_fire_at exactly one advances it and inserts the tick's job. When
	// next_fire_at is not From (another process advanced it) nothing is
	// written and Advanced is false. With a Job, last_fire_at becomes Tick
	// and last_job_id the job's id; a Job whose unique key is taken is not
	// inserted (the result says Duplicate) and last_job_id names the job that
	// holds the key. An unknown name is ErrNotFound; To not after From, or a
	// Job that fails [JobInsertParams.Validate], is an *InputError.
	ScheduleAdvance(ctx context.Context, params *ScheduleAdvanceParams) (*ScheduleAdvanceResult, error)

	// ScheduleList returns every schedule, ordered by name.
	ScheduleList(ctx context.Context, params *ScheduleListParams) ([]*errandtype.ScheduleRecord, error)

	// ScheduleDelete deletes a schedule and, in the same transaction,
	// appends an [errandtype.AuditScheduleDelete] record (no job id; details from
	// [ScheduleDeleteDetails]) with the operator and reason. Jobs the
	// schedule enqueued stay. An unknown name is ErrNotFound and nothing
	// is written. A process still running the schedule registers it again.
	ScheduleDelete(ctx context.Context, params *ScheduleDeleteParams) (*errandtype.ScheduleRecord, error)
}

// BatchStore is an optional capability of a Store: batches of jobs whose
// callback job is enqueued once every member is finished (see
// [github.com/errandhq/errand.Client.EnqueueBatch]), found by type assertion.
// errand/sqlite and errand/postgres implement it. Nothing on the claim path
// reads batches: a member carries its batch id, and only finishing a member
// looks further.
type BatchStore interface {
	// BatchInsert inserts a batch and its jobs in one transaction of its
	// own. When a batch with the ID exists nothing is inserted and the
	// result holds that batch with Duplicate set. A job whose id or unique
	// key is taken is an *InputError and nothing is inserted: a batch's
	// members are its own. Inserted jobs have BatchID set.
	BatchInsert(ctx context.Context, params *BatchInsertParams) (*BatchInsertResult, error)

	// BatchGet returns a batch with the current counts of its members, or
	// ErrNotFound.
	BatchGet(ctx context.Context, params *BatchGetParams) (*Batch, error)

	// BatchList returns batches, newest first (created_at, then id,
	// descending), each with the current counts of its members as
	// BatchGet returns it.
	BatchList(ctx context.Context, params *BatchListParams) ([]*Batch, error)

	// BatchComplete completes the batches among IDs (every open batch when
	// IDs is empty, at most Limit) that are open and have no unfinished
	// member: in one transaction per batch it sets completed_at now and
	// the final counts, and inserts the callback job of
	// [Batch.CallbackJob] under the duplicate-id rule. Completing is a
	// compare-and-set on completed_at, so that of any number of concurrent
	// calls exactly one completes a batch. It returns the batches it
	// completed; a batch that another call completed, or that has an
	// unfinished member, is not among them. A batch whose completion fails
	// is left open and named in the error; the others are completed all
	// the same, and returned with the error.
	BatchComplete(ctx context.Context, params *BatchCompleteParams) ([]*Batch, error)
}

// BatchTxStore is a BatchStore that inserts batches in its caller's
// transactions, of type TTx, as [TxStore] inserts jobs.
type BatchTxStore[TTx any] interface {
	BatchStore

	// BatchInsertTx inserts a batch as BatchInsert does, but inside tx.
	// After an error the caller rolls tx back.
	BatchInsertTx(ctx context.Context, tx TTx, params *BatchInsertParams) (*BatchInsertResult, error)
}

// DeadHookStore is an optional capability of a Store: finding the dead jobs
// whose on-dead job (see [github.com/errandhq/errand.KindOpts].OnDead) was
// never enqueued, for the paths to dead that no handler sees (a lease swept
// on the final attempt, a deadline passed) and for a worker that crashed
// between a job's death and its hook. errand/sqlite and errand/postgres
// implement it.
type DeadHookStore interface {
	// JobListDeadUnhooked returns dead jobs of one of Kinds whose finished_at
	// is at or after Since and for which no job with the id
	// [github.com/errandhq/errand.DeadHookJobID](id, replays) exists, oldest
	// finished_at first (then seq), at most Limit of them.
	JobListDeadUnhooked(ctx context.Context, params *JobListDeadUnhookedParams) ([]*errandtype.Job, error)
}

// DeadHookCursorStore is an optional capability of a [DeadHookStore]: the
// durable cursors of the look for dead jobs without their hook job, one per
// hooked kind, so that a worker starting after any downtime looks from
// where the cluster last finished looking, and never further back.
// errand/sqlite and errand/postgres implement it.
type DeadHookCursorStore interface {
	// DeadHookCursors returns the cursor of each of Kinds that has one:
	// every job of the kind that died (finished_at, on the store's clock)
	// before it has its hook job. A kind never looked at has none.
	DeadHookCursors(ctx context.Context, params *DeadHookCursorsParams) (map[string]time.Time, error)
	// DeadHookCursorAdvance moves the cursors of Kinds forward to To,
	// creating those missing; a cursor already past To stays.
	DeadHookCursorAdvance(ctx context.Context, params *DeadHookCursorAdvanceParams) error
}

// FairTurnPruner is an optional capability of a [FairClaimer]: deleting
// the turns of fairness keys that no job waits for and that no fair claim
// served for IdleFor, so that the turns kept grow with the keys in use,
// not with every key ever served. A key whose turn is deleted counts, when
// its jobs come back, as served longest ago, which it was. errand/sqlite
// and errand/postgres implement it.
type FairTurnPruner interface {
	// FairTurnPrune deletes those turns and returns how many it deleted.
	FairTurnPrune(ctx context.Context, params *FairTurnPruneParams) (int, error)
}

// TableKeeper is an optional capability of a Store: upkeep of its jobs
// table that the database may not do in time by itself. errand/postgres
// implements it: every claimed and every finished job leaves dead entries
// at the head of the claim and lease indexes, which only a vacuum removes,
// and each claim reads them until one does. The leader calls TableKeep
// every few seconds; the store decides whether there is anything to do.
type TableKeeper interface {
	TableKeep(ctx context.Context, params *TableKeepParams) (TableKeepResult, error)
}

// TableKeepParams is the input of [TableKeeper.TableKeep].
type TableKeepParams struct{}

// TableKeepResult says what a [TableKeeper.TableKeep] did.
type TableKeepResult struct {
	// Done is true when the store did upkeep (a vacuum), false when it
	// found none due.
	Done bool
	// Dead is the number of dead rows the database counted in the jobs
	// table before, Live the live ones.
	Dead, Live int64
	// Took is how long the upkeep took, when done.
	Took time.Duration
	// Note says why nothing was done when that is worth an operator's
	// attention (the role does not own the table, say); empty otherwise.
	// It stays the same while the reason does, so that a leader can say it
	// once.
	Note string
}

// LimiterStore is an optional capability of a Store: the token buckets of
// cluster-wide rate limits and retry budgets (see
// [github.com/errandhq/errand.RateLimit] and
// [github.com/errandhq/errand.RetryBudget]), one row per bucket name, on the
// store's clock, found by type assertion. errand/sqlite and errand/postgres
// implement it. A Worker configured with limits needs it; a Worker without
// limits never touches it, so the claim path pays nothing for it. The
// arithmetic of a bucket is [errandtype.LimiterSpec]'s, the same for every
// store: a store locks the bucket's row, applies it, and writes the result,
// in one transaction.
type LimiterStore interface {
	// LimiterTake takes up to Want tokens from each bucket of Takes, in one
	// transaction: a bucket missing is created full ([errandtype.LimiterSpec.Full]),
	// an existing one takes the Spec given (the last writer's spec wins),
	// then [errandtype.LimiterSpec.Take] decides the grant as of now on the store's
	// clock. A take that grants nothing of a positive Want adds one to the
	// bucket's Denied count. The result has one grant per take, in order.
	// Bad parameters are an *InputError and nothing is written.
	LimiterTake(ctx context.Context, params *LimiterTakeParams) ([]LimiterGrant, error)

	// LimiterGive adds tokens to buckets, in one transaction, as
	// [errandtype.LimiterSpec.Give] adds them: unused grants given back, a retry
	// budget's deposits. A bucket that does not exist is left alone. Bad
	// parameters are an *InputError and nothing is written.
	LimiterGive(ctx context.Context, params *LimiterGiveParams) error

	// LimiterList returns every bucket, ordered by name, with its tokens
	// as of now on the store's clock ([errandtype.LimiterSpec.Level]). It writes
	// nothing.
	LimiterList(ctx context.Context, params *LimiterListParams) ([]*errandtype.LimiterRecord, error)

	// LimiterAdjust applies a worker's signal to an adaptive rate limit's
	// bucket in one transaction, as [AdjustLimiter] does, on the store's
	// clock, and returns the bucket after, and whether the signal moved
	// it; no bucket (and no write) when it does not exist or is not
	// adaptive. Bad parameters are an *InputError and nothing is written.
	LimiterAdjust(ctx context.Context, params *LimiterAdjustParams) (*LimiterAdjustResult, error)
}

// LeaderResignParams names the lease to end.
type LeaderResignParams struct {
	Name   string
	Holder string
}

// LeaderGetParams names a leadership.
type LeaderGetParams struct {
	Name string
}

// LeaderElectParams describes an election attempt.
type LeaderElectParams struct {
	// Name of the leadership, e.g. "errand".
	Name string
	// Holder identifies the candidate (a worker id).
	Holder string
	// TTL is how long the lease lasts unless renewed.
	TTL time.Duration
}

// Clock tells the time. Stores take one so that tests can move time; the
// store's clock is the only time authority for leases and schedules.
type Clock interface {
	Now() time.Time
}

// JobInsertParams describes one job to insert. The Client fills the defaults;
// a store validates what it depends on.
type JobInsertParams struct {
	ID          string
	Queue       string
	Kind        string
	Args        json.RawMessage
	ArgsVersion int
	Priority    int
	MaxAttempts int
	// BackoffBase and BackoffMax, when non-zero, override the retry policy.
	BackoffBase time.Duration
	BackoffMax  time.Duration
	// RunAt, when not zero, is when the job becomes available; otherwise it
	// is available Delay after the store's now.
	RunAt time.Time
	Delay time.Duration
	// MaxAge, when non-zero, sets the deadline to created_at + MaxAge.
	MaxAge time.Duration
	// StartBy, when not zero, is the time by which the job must have
	// started: until its first claim its deadline is the earlier of StartBy
	// and created_at + MaxAge (see [FirstDeadline]).
	StartBy   time.Time
	UniqueKey string
	// UniqueScope is the set of states in which the job holds UniqueKey
	// (zero: [errandtype.UniqueAlways]); UniqueWindow, when non-zero, the length of
	// its unique window. Both are ignored without a UniqueKey.
	UniqueScope  errandtype.UniqueScope
	UniqueWindow time.Duration
	OrderingKey  string
	// OrderingHold makes the job hold its ordering key while dead
	// ([github.com/errandhq/errand.OrderingHoldOnDead]).
	OrderingHold bool
	// FairnessKey, when set, is the job's group for fair claims (see
	// [FairClaimer]): a tenant, an account, a customer.
	FairnessKey string
	Tags        []string
	// Debounce, when set, folds this enqueue into the pending job of its
	// key and kind: see [InsertKeyed].
	Debounce *JobDebounce
	// Metadata is a JSON object kept with the job (see [CheckMetadata]),
	// or nil.
	Metadata json.RawMessage

	// checked is set by the Client on the params it built and validated,
	// so that Validate, when the store calls it, does not check them again.
	Checked bool
	// argsChecked is set by the Client on args it checked as Validate
	// would, and wrote in plain form (see plainJSON), as it made them.
	ArgsChecked bool
	// callerID: the caller gave the id; firstWins: and said FirstWins.
	// maxAttemptsGiven, holdGiven: the caller set MaxAttempts and
	// OrderingOnDead, rather than leaving them to the defaults. See
	// idconflict.go.
	CallerID, FirstWins, MaxAttemptsGiven, HoldGiven bool
}

// JobInsertManyParams are the jobs of one insert.
type JobInsertManyParams struct {
	Jobs []*JobInsertParams
	// Announce asks a store that is a [Notifier] to announce the queue of
	// a job it inserts inside the insert's own commit, as NotifyQueues
	// would after it, and to set that result's Announced. Only
	// JobInsertMany reads it; a store may ignore it.
	Announce bool
}

// JobInsertResult is the outcome of inserting one job.
type JobInsertResult struct {
	Job *errandtype.Job
	// Duplicate reports that a job with the same ID existed, or one held
	// the UniqueKey (in its scope and window), and Job is that job,
	// unchanged; or that the job's Debounce key folded it into Job (see
	// Absorbed).
	Duplicate bool
	// Absorbed reports that Job is the pending job of the enqueue's
	// debounce key, which absorbed it (and, last-wins, took its args).
	Absorbed bool
	// Announced reports that the insert announced the new job's queue in
	// its own commit (JobInsertManyParams.Announce): the caller need not
	// send NotifyQueues for it.
	Announced bool
}

// JobGetParams names a job.
type JobGetParams struct {
	ID string
}

// JobCancelParams names the job to cancel, and who cancels it and why, for
// the audit.
type JobCancelParams struct {
	ID       string
	Operator string
	Reason   string
}

// JobReplayAuditParams names the job whose audit to read.
type JobReplayAuditParams struct {
	JobID string
}

// JobSweepParams asks for a sweep. It has no fields yet.
type JobSweepParams struct{}

// QueueStatsParams asks for queue statistics. It has no fields yet.
type QueueStatsParams struct{}

// JobSetProgressParams describe a handler's checkpoint.
type JobSetProgressParams struct {
	ID         string
	LeaseToken string
	// Progress is the checkpoint, raw JSON.
	Progress json.RawMessage
}

// JobRecordOutcomesParams are the outcomes to record in one transaction.
type JobRecordOutcomesParams struct {
	Outcomes []*JobOutcome
	// Follow asks for each result's Kind, BatchID, WorkflowID, Output and
	// LastError: what the follow-ups of a remote worker's outcome need, and
	// what a wait for the job's result in the writing process is handed. A
	// Worker, which holds the jobs it records outcomes of, asks only while
	// such a wait is open.
	Follow bool
}

// JobListParams filters JobList. Zero fields do not filter.
type JobListParams struct {
	States   []errandtype.JobState
	Queue    string
	Kind     string
	AfterSeq int64
	// Limit bounds the result; zero means 100.
	Limit int
	// ArgsHas and OutputHas, when set, keep jobs whose args, or output,
	// hold the filter's fields (see [ContainmentLeaves]); Tags keeps jobs
	// that have every one of the tags. See [JobListParams.Validate].
	ArgsHas, OutputHas json.RawMessage
	Tags               []string
	// Class keeps jobs whose last error has this class ("start_by" lists
	// the jobs that did not start by their start-by time). Absorbed keeps
	// jobs that folded in at least one later enqueue of their debounce
	// key; Aged those whose waiting priority aging has lowered. See
	// [JobListParams.FlowWhere].
	Class    string
	Absorbed bool
	Aged     bool
}

// JobClaimParams describes a claim.
type JobClaimParams struct {
	// Queues to claim from; at least one.
	Queues []string
	// Kinds, when not empty, restricts the claim to these kinds: a worker
	// never claims a job it has no handler for.
	Kinds []string
	// Limit is the most jobs to claim; at least one.
	Limit int
	// Lease is how long the claim holds before it must be renewed.
	Lease time.Duration
	// Owner names the claiming worker, recorded as lease_owner.
	Owner string
	// SkipRetryKinds, when not empty, leaves out of the claim the waiting
	// jobs of these kinds that were attempted before (attempt > 0): the
	// retries of a kind whose retry budget is spent (see
	// [github.com/errandhq/errand.RetryBudget]). Empty, the claim is the one
	// without it.
	SkipRetryKinds []string
}

// JobInsertClaimParams is a job to insert and the claim to start it under
// (see [InsertClaimer]).
type JobInsertClaimParams struct {
	Job *JobInsertParams
	// Claim names the job's queue alone, a limit of 1 and no
	// SkipRetryKinds (a new job has no retries).
	Claim JobClaimParams
}

// JobNextDueParams asks when the next job comes due.
type JobNextDueParams struct {
	// Queues to look in.
	Queues []string
	// Kinds, when not empty, restricts the question to these kinds, as it
	// restricts a claim.
	Kinds []string
}

// JobNextDueResult is when the next job comes due.
type JobNextDueResult struct {
	// Wait is how long until it comes due, on the store's clock.
	Wait time.Duration
	// Found is false when no job waits to come due; Wait is then 0.
	Found bool
}

// JobLease names a running job and the token of its claim.
type JobLease struct {
	ID         string
	LeaseToken string
}

// JobHeartbeatParams renews leases.
type JobHeartbeatParams struct {
	Leases []JobLease
	Lease  time.Duration
}

// HeartbeatResult is the outcome of renewing one lease.
type HeartbeatResult struct {
	LeaseUntil time.Time
	// CancelRequested reports that an operator asked to cancel the job
	// (Job.CancelRequestedAt is set): the worker should cancel the
	// handler's context and end the attempt as cancelled. Read in the
	// renewal's own statement.
	CancelRequested bool
	// Err is nil or ErrLeaseLost.
	Err error
}

// OutcomeKind is what a finished attempt did.
type OutcomeKind string

const (
	// OutcomeSucceeded: state succeeded, lease cleared, finished_at now.
	OutcomeSucceeded OutcomeKind = "succeeded"
	// OutcomeRetry: state retrying, available_at now+Delay, Error appended.
	OutcomeRetry OutcomeKind = "retry"
	// OutcomeDead: state dead, finished_at now, Error appended.
	OutcomeDead OutcomeKind = "dead"
	// OutcomeSnooze: state queued, available_at now+Delay, attempt-1 (the
	// attempt is not counted), nothing appended.
	OutcomeSnooze OutcomeKind = "snooze"
	// OutcomeInterrupted: state queued, available_at now+Delay, attempt-1,
	// Error appended. Used when a worker gives a job back: on a drain
	// (class interrupted, no delay), or when it cannot open the job's
	// sealed args.
	OutcomeInterrupted OutcomeKind = "interrupted"
	// OutcomeCancelled: state cancelled, finished_at now, Error (class
	// cancelled) appended. Used when an operator's cancel request reached
	// the running attempt.
	OutcomeCancelled OutcomeKind = "cancelled"
)

// JobOutcome is the result of one attempt, to be recorded while the worker
// still owns the job.
type JobOutcome struct {
	JobLease
	Kind  OutcomeKind
	Delay time.Duration
	// Error is appended to the history (Retry, Dead, Interrupted). The store
	// sets its At and Replay fields.
	Error *errandtype.AttemptError
	// Delete, with Kind OutcomeSucceeded, deletes the job in the write
	// that records its success, instead of keeping it as succeeded (a
	// kind's DeleteOnSuccess); fenced like every outcome, and reported as
	// state succeeded. Set it only where [DeletableOnSuccess] holds.
	Delete bool
}

// DeletableOnSuccess reports whether a job may be deleted as it succeeds
// rather than kept: nothing reads it afterwards. A member of a batch or a
// workflow is counted and read when its group moves on, and a job whose
// unique key holds while it is succeeded must keep holding it.
func DeletableOnSuccess(j *errandtype.Job) bool {
	return j.BatchID == nil && j.WorkflowID == nil &&
		(j.UniqueKey == nil || j.UniqueScope == nil || !j.UniqueScope.Holds(errandtype.StateSucceeded))
}

// OutcomeResult is what recording one outcome did.
type OutcomeResult struct {
	// State is the job's new state when Err is nil.
	State errandtype.JobState
	// AvailableAt is when a retried or snoozed job runs next.
	AvailableAt time.Time
	// Kind, BatchID and WorkflowID are the job's, when Err is nil and the
	// params asked for them (Follow): what the follow-ups of an outcome (a
	// batch's completion, a workflow's advance) need, without reading the
	// job again. A store that leaves Kind empty does not report them, and
	// the caller reads the job.
	Kind                string
	BatchID, WorkflowID *string
	// AttemptedAt is when the attempt started, with Follow: how long a
	// remote worker's attempt took, for the adaptive limits that follow
	// its kind's latency.
	AttemptedAt time.Time
	// Output and LastError are the job's output and last error as the
	// write left them, with Follow: what a read of the job right after the
	// commit would find (for a job the write deleted, what it held).
	Output    json.RawMessage
	LastError *errandtype.LastError
	// Err is nil or ErrLeaseLost.
	Err error
}

// JobReplayParams describes an operator replay.
type JobReplayParams struct {
	ID       string
	Operator string
	Reason   string
	// Args, when not nil, replaces the job's args (the fix-and-replay
	// case). The Client has validated it as it validates an enqueue.
	Args json.RawMessage
	// ClearProgress clears the job's checkpoint, so that the replay starts
	// from the beginning. The Client sets it when Args is set: a checkpoint
	// taken over the old args says nothing about the corrected ones.
	ClearProgress bool
	// ArgsVersion, when positive, replaces the job's args_version with
	// Args: the version Args were checked as, so that a worker does not
	// upgrade corrected args from the job's old version. Zero keeps it.
	ArgsVersion int
	// FromStep, when not nil, forks the job from that step of its durable
	// handler: the steps before it are kept, it and those after it are
	// deleted, so the replay runs them again. The audit's details say so.
	// It cannot be given with ClearProgress, which deletes every step.
	FromStep *int
}

// ReplayDetails is the audit's details of a replay of p, or nil.
func (p *JobReplayParams) ReplayDetails() json.RawMessage {
	if p.FromStep == nil {
		return nil
	}
	b, _ := json.Marshal(map[string]int{"from_step": *p.FromStep})
	return b
}

// AuditAction is the action of the replay's audit record: corrected args
// are a replay of their own kind, whose record keeps them.
func (p *JobReplayParams) AuditAction() errandtype.AuditAction {
	if p.Args != nil {
		return errandtype.AuditReplayArgs
	}
	return errandtype.AuditReplay
}

// SweepResult counts what a sweep changed.
type SweepResult struct {
	// Retried counts running jobs whose lease expired with attempts left.
	Retried int
	// Dead counts jobs dead-lettered: expired final attempts and jobs past
	// their deadline.
	Dead int
	// Cancelled counts running jobs whose lease expired with a cancel
	// request pending.
	Cancelled int
}

// EffectParams names a ledger entry and the lease that touches it.
type EffectParams struct {
	Key        string
	JobID      string
	LeaseToken string
}

// EffectReleaseParams name a begun entry to release after a failure.
type EffectReleaseParams struct {
	EffectParams
	// Message says why the effect failed.
	Message string
}

// EffectGetParams name a ledger entry.
type EffectGetParams struct {
	Key string
}

// EffectRecordParams name the effect a transaction performs and the lease
// it runs under. An empty LeaseToken records without fencing, for an effect
// outside any job.
type EffectRecordParams struct {
	Key        string
	JobID      string
	LeaseToken string
}

// Effect is one ledger entry.
type Effect struct {
	Key        string                 `json:"key"`
	JobID      string                 `json:"job_id"`
	State      errandtype.EffectState `json:"state"`
	LeaseToken string                 `json:"lease_token"`
	Message    string                 `json:"message"`
	CreatedAt  time.Time              `json:"created_at"`
	UpdatedAt  time.Time              `json:"updated_at"`
	// Status is set by EffectBegin.
	Status errandtype.EffectStatus `json:"status,omitempty"`
}
