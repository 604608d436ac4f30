package errand

import (
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
)

// Names that moved out of the root package when the records went to
// errandtype and the storage contract to errandstore. Each is kept for one
// release.
type (
	// Deprecated: use errandtype.AuditAction.
	AuditAction = errandtype.AuditAction
	// Deprecated: use errandtype.AuditRecord.
	AuditRecord = errandtype.AuditRecord
	// Deprecated: use errandstore.Batch.
	Batch = errandstore.Batch
	// Deprecated: use errandstore.BatchInsertResult.
	BatchInsertResult = errandstore.BatchInsertResult
	// Deprecated: use errandstore.BatchListParams.
	BatchListParams = errandstore.BatchListParams
	// Deprecated: use errandtype.BatchState.
	BatchState = errandtype.BatchState
	// Deprecated: use errandtype.BreakerRecord.
	BreakerRecord = errandtype.BreakerRecord
	// Deprecated: use errandstore.DeadFilter.
	DeadFilter = errandstore.DeadFilter
	// Deprecated: use errandtype.EffectState.
	EffectState = errandtype.EffectState
	// Deprecated: use errandtype.FairnessKeyCount.
	FairnessKeyCount = errandtype.FairnessKeyCount
	// Deprecated: use errandtype.InsightsData.
	InsightsData = errandtype.InsightsData
	// Deprecated: use errandtype.LimiterRecord.
	LimiterRecord = errandtype.LimiterRecord
	// Deprecated: use errandtype.LimiterSpec.
	LimiterSpec = errandtype.LimiterSpec
	// Deprecated: use errandtype.ListCursor.
	ListCursor = errandtype.ListCursor
	// Deprecated: use errandstore.PruneResult.
	PruneResult = errandstore.PruneResult
	// Deprecated: use errandtype.QueueStats.
	QueueStats = errandtype.QueueStats
	// Deprecated: use errandtype.ReplayRecord.
	ReplayRecord = errandtype.ReplayRecord
	// Deprecated: use errandtype.ScheduleRecord.
	ScheduleRecord = errandtype.ScheduleRecord
	// Deprecated: use errandtype.WorkerRecord.
	WorkerRecord = errandtype.WorkerRecord
	// Deprecated: use errandtype.Workflow.
	Workflow = errandtype.Workflow
	// Deprecated: use errandstore.WorkflowListParams.
	WorkflowListParams = errandstore.WorkflowListParams
	// Deprecated: use errandtype.WorkflowState.
	WorkflowState = errandtype.WorkflowState
	// Deprecated: use errandstore.Store.
	Store = errandstore.Store
)

// Deprecated: use errandstore.TxStore.
type TxStore[TTx any] = errandstore.TxStore[TTx]
