package errand

import "github.com/errandhq/errand/errandstore"

// capabilities are the optional interfaces of a client's store (see
// errandstore), each resolved once when the client is made: a field is nil
// when the store lacks that capability. Every use reads its field, so what a
// store can do is decided in one place, not by a type assertion at each use.
type capabilities struct {
	notifier        errandstore.Notifier
	cancels         errandstore.CancelListener
	nextDue         errandstore.NextDueClaimer
	insertClaim     errandstore.InsertClaimer
	getMany         errandstore.ManyJobGetter
	parallel        errandstore.ParallelWriter
	fair            errandstore.FairClaimer
	fairPruner      errandstore.FairTurnPruner
	tableKeeper     errandstore.TableKeeper
	limiter         errandstore.LimiterStore
	concurrency     errandstore.ConcurrencyClaimer
	breakers        errandstore.BreakerStore
	schedules       errandstore.ScheduleStore
	batches         errandstore.BatchStore
	deadHooks       errandstore.DeadHookStore
	deadHookCursors errandstore.DeadHookCursorStore
	workflows       errandstore.WorkflowStore
	steps           errandstore.StepStore
	pauses          errandstore.PauseStore
	ager            errandstore.PriorityAger
}

// resolveCapabilities finds the optional interfaces store implements.
func resolveCapabilities(store errandstore.Store) capabilities {
	var c capabilities
	c.notifier, _ = store.(errandstore.Notifier)
	c.cancels, _ = store.(errandstore.CancelListener)
	c.nextDue, _ = store.(errandstore.NextDueClaimer)
	c.insertClaim, _ = store.(errandstore.InsertClaimer)
	c.getMany, _ = store.(errandstore.ManyJobGetter)
	c.parallel, _ = store.(errandstore.ParallelWriter)
	c.fair, _ = store.(errandstore.FairClaimer)
	c.fairPruner, _ = store.(errandstore.FairTurnPruner)
	c.tableKeeper, _ = store.(errandstore.TableKeeper)
	c.ager, _ = store.(errandstore.PriorityAger)
	c.limiter, _ = store.(errandstore.LimiterStore)
	c.concurrency, _ = store.(errandstore.ConcurrencyClaimer)
	c.breakers, _ = store.(errandstore.BreakerStore)
	c.schedules, _ = store.(errandstore.ScheduleStore)
	c.batches, _ = store.(errandstore.BatchStore)
	c.deadHooks, _ = store.(errandstore.DeadHookStore)
	c.deadHookCursors, _ = store.(errandstore.DeadHookCursorStore)
	c.workflows, _ = store.(errandstore.WorkflowStore)
	c.steps, _ = store.(errandstore.StepStore)
	c.pauses, _ = store.(errandstore.PauseStore)
	return c
}

// txCapabilities are the optional capabilities that join the caller's
// transactions, of the client's transaction type, resolved with the others.
type txCapabilities[TTx any] struct {
	batches   errandstore.BatchTxStore[TTx]    // nil: no batches inside a caller's transaction
	workflows errandstore.WorkflowTxStore[TTx] // nil: no workflows inside a caller's transaction
}

func resolveTxCapabilities[TTx any](store errandstore.TxStore[TTx]) txCapabilities[TTx] {
	var c txCapabilities[TTx]
	c.batches, _ = store.(errandstore.BatchTxStore[TTx])
	c.workflows, _ = store.(errandstore.WorkflowTxStore[TTx])
	return c
}
