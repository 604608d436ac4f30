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
//	   │                            │ └─ lease expired ──> retrying (claimable at once); on the final attempt: dead
//	   └──── replay (attempt=0, replays+1) ──── dead, cancelled
//	queued / retrying ──cancel──> cancelled
//
// A queued job whose available_at is in the future is a scheduled job. A
// retrying job is a failed job waiting out its backoff. succeeded, dead and
// cancelled are terminal; only an explicit replay changes them. Expired
// leases are swept inside every claim transaction, and between claims by the
// leader (see Workers).
//
// # Failures
//
// A handler's error decides what happens next. A plain error is retryable
// with class "error". [Permanent] dead-letters at once; [RetryAfter] honours
// a provider's hint; [WithClass] names the class ("receipt_unavailable");
// [Snooze] reschedules without using an attempt. A panic is recovered with
// its stack (class "panic"), an attempt past its kind's timeout fails with
// class "timeout", and a job past its deadline dies with class "expired".
// Retries wait with equal jitter (see [RetryPolicy]) and stop after
// max_attempts, default [DefaultMaxAttempts].
//
// # Identity, uniqueness and order
//
// A job's id may be the caller's (a payment id): enqueueing it again returns
// the existing job, as does a second job with the same
// [EnqueueOpts].UniqueKey. Jobs with the same [EnqueueOpts].OrderingKey run
// one at a time in the order they were enqueued; a dead or cancelled one
// stops holding the rest back.
//
// # Workers
//
// A [Worker] ([Client.NewWorker]) runs jobs for days: [Worker.Start] begins,
// [Worker.Stop] drains. Each queue in [WorkerConfig].Queues has its own
// slots, so a backlog in one cannot starve another, and a worker claims only
// as many jobs as it has free slots. While a handler runs, its lease is
// renewed every third of [WorkerConfig].Lease; a renewal that finds the
// lease lost cancels the handler and writes nothing. Outcomes are recorded
// in batches, each fenced by its own token. The worker records itself in a
// registry ([Client.Workers]), with its queues and the kinds it has handlers
// for, and heartbeats there; [Client.Stats] names the waiting kinds that no
// live worker handles, such as a misspelt one. Stop stops claiming at
// once, shows the worker draining in the registry, lets running jobs finish
// until its context ends, then gives the rest back without counting their
// attempt.
//
// An idle queue waits for a wake-up, its poll interval, or the moment its
// next scheduled or retrying job comes due, whichever comes first: it asks
// the store when that is (on the store's clock), so delayed jobs and retries
// start on time, not up to a poll late. An enqueue wakes the workers of its
// process at once ([Client.InTx] wakes them after its commit, or call
// [Client.Wake] after committing a transaction of your own); when the store
// is a [Notifier], it also wakes workers in other processes, announced after
// the commit and coalesced. A worker that retries or snoozes a job, or
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
// elapsed time (see the README).
//
// # Batches and on-dead hooks
//
// [Client.EnqueueBatch] enqueues jobs as a batch whose callback job is
// enqueued exactly once, when every member has finished, with the counts
// ([BatchResult]); its id is fixed ([BatchCallbackJobID]) and it is
// inserted by a compare-and-set on the batch's completion. [KindOpts].OnDead
// enqueues a job each time a job of the kind is dead-lettered, by any path,
// under a fixed id per death ([DeadHookJobID]). For both, detection right
// after an outcome is backed by a periodic pass that catches the paths no
// handler sees (sweeps, cancels, a crash), so they are at-least-once to
// notice and once to enqueue.
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
