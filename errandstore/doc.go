// Package errandstore is errand's storage contract, split by capability as database/sql/driver splits
// a driver's: [JobStore] (jobs), [EffectStore] (the effect ledger),
// [WorkerRegistry], [LeaderElector], [OperatorStore] (the audit, bulk
// replay, retention, insights) and [Migrator], each an interface of its own; [Store] embeds those every store must have, and [TxStore] adds
// the caller's transactions, typed by the store's own transaction type.
// Optional capabilities, such as [Notifier], [ScheduleStore] and
// [LimiterStore], are found by type assertion.
// errand/sqlite (the embedded default) and errand/postgres implement it;
// the package errand/storetest holds the conformance suite that every
// implementation must pass unchanged.
//
// Every method takes a context and a pointer to its parameters and returns
// its result and an error. Where a parameter type has a Validate method,
// the store calls it before writing anything. Decisions that are the same
// for every store (which states wait, hold an ordering key or may be
// replayed; what an outcome does; the effect ledger's try-begin table; the
// JSON columns of a record; queue statistics) live in this package, and a
// store calls them: see store_rules.go, record_codec.go and queue_stats.go.
// The records a store returns and the errors it reports are declared in
// errandtype, which applications share.
//
// Time: every lease, schedule and expiry decision uses the store's own clock
// (the process clock on SQLite, the database's now() on PostgreSQL), never the
// caller's. Durations in parameters are relative to that clock. A store takes
// an injected [Clock] through its options so tests can control time.
//
// Fencing: every write about a running job names the job and the lease token
// its claim wrote, and succeeds only while the job is running with that token
// and lease_until is after now. When that condition fails the store changes
// nothing and reports [errandtype.ErrLeaseLost]; it never retries the write as an
// overwrite.
//
// Errors: a missing job is [errandtype.ErrNotFound]; a transition the job's state does
// not allow is a [*errandtype.StateError]; bad parameters are [*errandtype.InputError]. Other errors
// are the backend's own, wrapped.
//
// Records: stores keep times at microsecond precision, truncating, in every
// field alike (the error history's times equal the columns'). A job a store
// returns has non-nil Errors and Tags, so that they marshal as [] when empty.
// Ending a lease (an outcome, a sweep, a replay) clears lease_token and
// lease_until; lease_owner keeps the last worker, for operators.
package errandstore
