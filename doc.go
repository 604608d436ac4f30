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
// hosts. Both implement the storage contract of package
// [github.com/errandhq/errand/errandstore] and pass the conformance suite in
// [github.com/errandhq/errand/storetest].
//
// # Guarantees
//
//  1. Enqueue is atomic with the application's transaction: a job enqueued
//     with [Client.EnqueueTx] exists if and only if that transaction commits.
//  2. At-least-once attempts, not exactly-once execution. Every job keeps its
//     id across retries and replays for effects to be keyed on, and the effect
//     ledger ([Once], [RemoteEffect]) makes an effect happen once.
//  3. Fenced ownership. Each claim writes a fresh lease token; heartbeats,
//     outcomes and progress writes succeed only for the token's owner while
//     its lease lasts, and otherwise change nothing and report [ErrLeaseLost].
//  4. Finite, scheduled retries. Attempts are counted at the claim, so a job
//     that kills its worker cannot crash-loop; nothing sleeps in a transaction.
//  5. Nothing is dropped silently. A job that cannot succeed becomes dead with
//     its payload and every attempt's error; [Client.Replay] is explicit and
//     audited.
//  6. One time authority: lease and schedule decisions use the store's clock.
//
// The docs/ folder of the repository has a page for each guarantee and
// feature; docs/guarantees.md states the guarantees in full, with the tests
// that hold them.
//
// # Where to start
//
// Args name their kind ([JobArgs]); [Handle] registers a handler for them in
// a [Kinds] set. [NewClient] makes a [Client] typed by its store's
// transaction; [Client.Enqueue], [Client.EnqueueTx] and [Client.InTx] enqueue.
// [Client.NewWorker] makes a [Worker]: [Worker.Start] runs it, [Worker.Stop]
// drains it. A handler's error decides what happens next: [Permanent],
// [RetryAfter], [WithClass], [Snooze] (docs/retries.md).
//
// Beyond that, each feature is a small part of the API:
//   - handlers that take many jobs in one call: [HandleMany], [HandleManyRaw]
//     (docs/many-jobs.md);
//   - resumable jobs: [SetProgress], [Checkpoint] (docs/checkpoints.md);
//   - cancelling: [Client.Cancel] (docs/cancellation.md);
//   - identity, uniqueness and order: [UniqueOpts], [EnqueueOpts].OrderingKey
//     and FairnessKey (docs/unique-jobs.md, docs/ordering.md);
//   - recurring jobs: [NewSchedule], [WorkerConfig].Schedules
//     (docs/schedules.md);
//   - batches, workflows and on-dead hooks: [Client.EnqueueBatch],
//     [Client.EnqueueWorkflow], [KindOpts].OnDead (docs/batches.md,
//     docs/workflows.md, docs/on-dead-hooks.md);
//   - flow control: [RateLimit], [RetryBudget], [BreakerPolicy],
//     [WorkerConfig].QueueWeights (docs/rate-limits.md,
//     docs/circuit-breakers.md, docs/weights-and-fairness.md);
//   - encryption at rest: [Config].Codec, [AESGCM] (docs/encryption.md);
//   - operating: [Client.Replay], [Client.ReplayMany], [Client.Prune],
//     [Client.Audit], [Client.Insights] (docs/replay.md, docs/retention.md).
package errand
