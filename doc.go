// Package errand is a durable background-job system. An application enqueues
// a job in the same database transaction as the business change that makes it
// necessary; workers claim it under a lease, run it, and record the outcome
// only while they still own it. Failures are classified, retried on a
// jittered, bounded schedule, and dead-lettered with their history for an
// operator to inspect and replay deliberately.
//
// errand runs embedded on SQLite (package [github.com/errandhq/errand/sqlite])
// with no setup, and on PostgreSQL (package
// [github.com/errandhq/errand/postgres]) when workers spread over many
// hosts. Every backend implements [Store], split by capability as
// database/sql/driver is, and passes the conformance suite in package
// [github.com/errandhq/errand/storetest]; a third-party store can run it on
// itself.
//
// # Jobs, args and handlers
//
// A job's args are a type that names its kind ([JobArgs]), so a kind and its
// args cannot disagree. [Handle] registers a handler for an args type in a
// [Kinds] set; the worker decodes each job's args into it, upgrading older
// versions ([VersionedArgs], [ArgsUpgrader]) and dead-lettering newer ones.
// [Client.Enqueue] takes the args value; [RawArgs] carries JSON with its kind
// named at run time, for producers that relay jobs they do not define.
//
// A [Client] is typed by its store's transaction type: *sql.Tx on SQLite,
// pgx.Tx (or *sql.Tx through a database/sql view) on PostgreSQL, so
// [Client.EnqueueTx] and [Once] accept only a transaction the store can join.
// [Client.InTx] runs a function in a transaction, commits, and wakes the
// workers of the jobs it enqueued. [Client.Subscribe] delivers each outcome
// this client records.
//
// # Guarantees
//
//  1. Enqueue is atomic with the application's transaction. A job enqueued
//     with [Client.EnqueueTx] exists if and only if that transaction commits.
//  2. At-least-once attempts, not exactly-once execution. A handler may run
//     again after a crash between its effect and the acknowledgment. Every
//     job has a stable identity (its id, unchanged across retries and
//     replays) for effects to be keyed on, and an effect ledger ([Once]
//     for effects in the same database, [RemoteEffect] for remote
//     ones) so that the effect happens once.
//  3. Fenced ownership. Each claim writes a fresh lease token. Heartbeats,
//     acknowledgments, failures, snoozes and progress writes succeed only for
//     a running job whose token matches and whose lease has not expired. A
//     write that finds otherwise changes nothing and reports [ErrLeaseLost];
//     it is never retried as an overwrite. The token is in [Job.LeaseToken]
//     so a downstream resource can fence stale writers too.
//  4. Finite, scheduled retries. Attempts are counted when a job is claimed,
//     so a job that kills its worker still uses up attempts and cannot
//     crash-loop. The next run time is stored in the job; nothing sleeps
//     inside a transaction.
//  5. Nothing is dropped silently. Exhausted, permanently failed, expired and
//     orphaned final-attempt jobs become dead with their payload and every
//     attempt's error, class, stack and time. [Client.Replay] is explicit,
//     audited, keeps the job's id, and applies only to dead or cancelled jobs.
//  6. One time authority. Lease and schedule decisions use the store's clock:
//     the database's on PostgreSQL, the machine's on SQLite. Tests inject it,
//     and give the client the same one ([Config].Clock), so that the
//     workers' timers move with it.
//
// # States
//
//	queued ──claim (attempt+1)──> running ──ack──> succeeded
//	   ^                            │ ├─ retryable error, attempts left ──> retrying ──due──> (claimable)
//	   │                            │ ├─ permanent error / attempts exhausted / past deadline ──> dead
//	   │                            │ ├─ snooze, or given back on drain (attempt not counted) ──> queued
//	   │                            │ ├─ lease expired ──> retrying (claimable at once); on the final attempt: dead
//	   │                            │ └─ cancel requested ──(worker ends the attempt, or the lease expires)──> cancelled
//	   └──── replay (attempt=0, replays+1) ──── dead, cancelled
//	queued / retrying ──cancel──> cancelled
//
// A queued job whose available_at is in the future is a scheduled job. A
// retrying job is a failed job waiting out its backoff. succeeded, dead and
// cancelled are terminal; only an explicit replay changes them. Expired
// leases are swept inside a claim transaction at most once a second per
// store handle ([ClaimSweepInterval]), and between claims by the leader (see
// Workers); a job past its deadline is never claimed, swept yet or not.
//
// # Failures
//
// A handler's error decides what happens next. A plain error is retryable
// with class "error". [Permanent] dead-letters at once; [RetryAfter] honours
// a provider's hint; [WithClass] names the class ("receipt_unavailable");
// [Snooze] reschedules without using an attempt. A panic is recovered with
// its stack (class "panic"), an attempt past its kind's timeout fails with
// class "timeout", a job past its deadline dies with class "expired", and
// an attempt an operator cancelled ends with class "cancelled".
// Retries wait with equal jitter (see [RetryPolicy]) and stop after
// max_attempts, default [DefaultMaxAttempts].
//
// # Resumable jobs
//
// A handler that works through something large in steps checkpoints after
// each with [SetProgress] (fenced by its lease, like every write about a
// running job). The checkpoint stays on the job, and every later attempt
// (after a failure, a crash, a timeout, a lost lease, a drain, a replay)
// receives it in Job.Progress: [Checkpoint] decodes it, and the handler
// starts from there. Commit each step's effects before its checkpoint, so
// that a crash redoes at most the step it was in: a job over a million rows
// in chunks of a thousand redoes at most a thousand rows. A replay keeps the
// checkpoint, unless it corrects the args or restarts ([ReplayOpts]).
// Operators see the checkpoint in the job's record, the API and the
// dashboard.
//
// # Cancelling a running job
//
// [Client.Cancel] of a running job records a cancel request; the job stays
// running until its worker ends the attempt. The worker learns of it at
// once when the store is a [CancelListener] (PostgreSQL's NOTIFY; on SQLite
// the commit itself), and at the latest at its next lease renewal: it
// cancels the handler's context with cause [ErrJobCancelled], and the
// attempt ends cancelled, fenced like every outcome. A handler that ignores
// the cancellation is abandoned at its kind's timeout and the job ends
// cancelled anyway. A job whose worker died with a cancel pending is
// cancelled by the sweep of its lease, not retried; a failure, snooze or
// drain recorded while a cancel is pending ends the job cancelled too. A
// handler that finishes its work regardless (returns nil) succeeds.
//
// # Identity, uniqueness and order
//
// A job's id may be the caller's (a payment id): enqueueing it again returns
// the existing job. A unique key ([UniqueOpts]) does the same while its job
// is in the key's scope of states ([UniqueAlways] by default, or
// [UniqueUntilFinished], [UniqueUntilSucceeded]) and, optionally, time
// window: the database enforces it, so concurrent enqueues make one job and
// a job frees its key the moment it leaves its scope. Jobs with the same
// [EnqueueOpts].OrderingKey run one at a time in the order they were
// enqueued; a cancelled one stops holding the rest back, and so does a dead
// one unless it holds its key until replayed or cancelled
// ([OrderingHoldOnDead]). Jobs with a [EnqueueOpts].FairnessKey (a tenant)
// share their queue fairly: workers take the keys in turn, so one key's
// burst does not delay another key's jobs (see [FairClaimer]).
//
// # Workers
//
// A [Worker] ([Client.NewWorker]) runs jobs for days: [Worker.Start] begins,
// [Worker.Stop] drains. Each queue in [WorkerConfig].Queues has its own
// slots, so a backlog in one cannot starve another; with
// [WorkerConfig].MaxWorkers the queues also share a total capacity by
// [WorkerConfig].QueueWeights when all are busy, and a worker claims only
// as many jobs as it has free slots (a busy queue keeps up to two claims in
// flight, each for slots it reserves). A slot is a running handler's: on a
// store that writes in parallel ([ParallelWriter], PostgreSQL), a job that
// succeeded gives its slot back when its outcome is handed over to be
// written, at most one such outcome per slot. While a handler runs, its
// lease is renewed every third of [WorkerConfig].Lease; a renewal that
// finds the lease lost cancels the handler and writes nothing. Outcomes are
// recorded in batches, each fenced by its own token. The worker records
// itself in a registry ([Client.Workers]), with its queues and the kinds it
// has handlers for, and heartbeats there; [Client.Stats] names the waiting
// kinds that no live worker handles, such as a misspelt one. Stop stops
// claiming at once, shows the worker draining in the registry, lets running
// jobs finish until its context ends, then gives the rest back without
// counting their attempt; it fails only for a job it could not give back.
//
// An idle queue waits for a wake-up, its poll interval, or the moment its
// next scheduled or retrying job comes due, whichever comes first: it asks
// the store when that is (on the store's clock), so delayed jobs and retries
// start on time, not up to a poll late. An enqueue wakes the workers of its
// process at once ([Client.InTx] wakes them after its commit, or call
// [Client.Wake] after committing a transaction of your own); when the store
// is a [Notifier], it also wakes workers in other processes, announced after
// the commit, coalesced, and after the claim of an idle worker of the
// queue in this process (10 ms at most), so that the announcement does not
// slow that claim. A worker that retries or snoozes a job, or
// finishes one with an ordering key, wakes its queue to ask again. Polling
// stays the floor: a lost announcement delays a job by one poll at most. A
// client whose store is a Notifier should be closed with [Client.Close].
//
// One worker of the cluster leads ([Worker.Leading], [Client.Leader]): it
// holds a lease of [WorkerConfig].LeaderTTL on the store's clock and sweeps
// expired leases every SweepInterval, so a dead worker's jobs are recovered
// even in a queue nobody claims from, and prunes the registry. A leader that
// cannot renew stops leading before its lease ends; a draining one resigns.
// With [WorkerConfig].Retention it also deletes old finished jobs.
//
// # Recurring jobs
//
// A [Schedule] ([NewSchedule], [ParseScheduleFlag]) enqueues a job on every
// tick of a cron spec, a descriptor or @every, in UTC or a named time zone.
// A Worker given schedules ([WorkerConfig].Schedules) runs them. Each tick
// enqueues exactly one job however many workers run the schedule: the next
// fire time lives in the store ([ScheduleStore]) and moves forward by
// compare-and-set in the transaction that inserts the tick's job, whose
// unique key names the tick ([ScheduleUniqueKey]). Ticks missed while no
// worker ran are skipped or caught up once ([MissedPolicy]).
// [Client.Schedules] lists every schedule's next fire, last fire and last
// job; [Client.DeleteSchedule] deletes one, audited. A fixed-hour spec runs
// once a day across daylight saving changes; an every-hour spec follows
// elapsed time (see docs/schedules.md).
//
// # Batches, workflows and on-dead hooks
//
// [Client.EnqueueBatch] enqueues jobs as a batch whose callback job is
// enqueued exactly once, when every member has finished, with the counts
// ([BatchResult]); its id is fixed ([BatchCallbackJobID]) and it is
// inserted by a compare-and-set on the batch's completion.
// [Client.EnqueueWorkflow] enqueues a workflow: a graph of steps, each an
// ordinary job enqueued once the steps it depends on have succeeded, that
// reads their outputs ([SetOutput], [StepOutput]). A step that fails for
// good stops the workflow and runs the compensations of the steps that
// succeeded, latest first, each a retried job. Replaying the failed step
// resumes it only until a compensation has been enqueued; after that, its
// steps are not replayed and [Client.RerunWorkflow] runs it again as a new
// workflow. Its jobs' ids are fixed ([WorkflowStepJobID],
// [WorkflowCompensationJobID]) and the workflow's row records each job it
// enqueued, so none is enqueued twice; [Client.Workflow] shows every
// step's state. [KindOpts].OnDead enqueues a job each time a job of the
// kind is dead-lettered, by any path, under a fixed id per death
// ([DeadHookJobID]). For all three, detection right after an outcome is
// backed by a periodic pass that catches the paths no handler sees
// (sweeps, cancels, a crash), so they are at-least-once to notice and
// once to enqueue.
//
// # Rate limits and retry budgets
//
// A [RateLimit] caps the starts of a queue's or a kind's jobs per interval
// across the cluster; a [RetryBudget] caps a kind's retries to a fraction
// of its first attempts. Both are token buckets held in the store
// ([LimiterStore]), so every process draws on the same tokens. A Worker
// given them ([WorkerConfig].RateLimits and RetryBudgets) takes tokens
// before each claim and claims no job it has no token for: a job over a
// limit waits, queued, with no attempt used. [Client.Limits] shows every
// bucket's tokens.
//
// # Circuit breakers
//
// A kind that names the dependency its jobs call ([KindOpts].Dependency)
// gets a circuit breaker for it, shared with every kind naming the same one
// and kept in the store ([BreakerStore]) for the whole cluster. After
// [BreakerPolicy].Threshold failures in a row within Window, workers stop
// claiming the dependency's jobs, which wait without using attempts; after
// Cooldown, on the store's clock, up to Probes jobs test it, and a success
// closes the breaker. [DependencyDown] blames a dependency from any
// handler; [Client.Breakers] and [Client.ResetBreaker] show and close them.
// A worker whose kinds name no dependency claims exactly as without them.
//
// # Operating
//
// Operators act through the client, and every action lands in the audit
// ([Client.Audit]) with who, what, which job, why and when:
// [Client.Replay] (with corrected args, the fix-and-replay case, keeping the
// old and new args), [Client.ReplayMany] (dead jobs by kind, queue, error
// class and time of death, at a bounded rate), [Client.Cancel] (a reason
// required) and [Client.Prune] (retention: succeeded and cancelled jobs
// after one age, dead jobs after a longer one, never an unfinished job).
// [Client.Insights] reads the figures a dashboard shows per queue and kind:
// depth by bucket, oldest ready age, throughput, failure rates by class,
// retries, dead letters and their growth, p50/p99 run and wait times.
package errand
