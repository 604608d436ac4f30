package errandtype

import (
	"time"
)

// FairnessKeyCount is how many jobs of one fairness key wait in a queue.
type FairnessKeyCount struct {
	Queue   string `json:"queue"`
	Key     string `json:"fairness_key"`
	Waiting int64  `json:"waiting"`
}

// Leader is the holder of a leadership lease.
type Leader struct {
	Name    string    `json:"name"`
	Holder  string    `json:"holder"`
	Until   time.Time `json:"until"`
	Elected time.Time `json:"elected_at"`
	// Leading reports, in LeaderElect's result, whether the caller holds it.
	Leading bool `json:"-"`
}

// ReplayRecord is one entry of the replay audit.
type ReplayRecord struct {
	ID         int64     `json:"id"`
	JobID      string    `json:"job_id"`
	Replay     int       `json:"replay"`
	PriorState JobState  `json:"prior_state"`
	Operator   string    `json:"operator"`
	Reason     string    `json:"reason"`
	At         time.Time `json:"at"`
}

// QueueStats summarises one queue.
type QueueStats struct {
	Queue  string           `json:"queue"`
	Counts map[JobState]int `json:"counts"`
	// WaitingByKind counts the queue's waiting jobs (queued or retrying,
	// due or not) per kind. Kinds with none are absent.
	WaitingByKind map[string]int `json:"waiting_by_kind"`
	// UnhandledKinds lists, by kind, the waiting jobs of kinds that no live
	// worker handles in this queue (see
	// [github.com/errandhq/errand.KindHandled]): jobs that will not run until
	// one does. [github.com/errandhq/errand.Client.Stats] fills it from the
	// worker registry; a store leaves it nil.
	UnhandledKinds []KindCount `json:"unhandled_kinds"`
	// OldestReadyAgeSeconds is how long the oldest claimable job has been
	// available, or 0 when none is. A job held back by its ordering key
	// (see Job.HeldBy) is not claimable: its wait is its key's, not the
	// workers'.
	OldestReadyAgeSeconds float64 `json:"oldest_ready_age_seconds"`
	// Dead is the dead-letter size (Counts[StateDead]).
	Dead int `json:"dead"`
	// BreakerHeldKinds lists, by kind, the waiting jobs of kinds whose
	// dependency's circuit breaker is open or half-open (see
	// [github.com/errandhq/errand.BreakerHolds]).
	// [github.com/errandhq/errand.Client.Stats] fills it, and leaves those
	// kinds out of OldestReadyAgeSeconds; a store leaves it nil.
	BreakerHeldKinds []BreakerHeldKind `json:"breaker_held_kinds"`
	// Paused is the queue's pause, or nil; PausedKinds lists, by kind, the
	// waiting jobs of paused kinds (see
	// [github.com/errandhq/errand.Client.Pause]).
	// [github.com/errandhq/errand.Client.Stats] fills both, and leaves
	// what is paused out of OldestReadyAgeSeconds; a store leaves them nil.
	Paused      *Pause      `json:"paused"`
	PausedKinds []KindCount `json:"paused_kinds"`
	// ReadyAgeByKind is OldestReadyAgeSeconds per kind, for
	// [github.com/errandhq/errand.Client.Stats] to leave out the kinds a
	// breaker holds back.
	// [github.com/errandhq/errand/errandstore.AssembleQueueStats] fills it; a
	// store that leaves it nil has its oldest ready age reported as it is.
	ReadyAgeByKind map[string]float64 `json:"-"`
}

// BreakerHeldKind is how many jobs of one kind an open circuit breaker of
// Dependency holds back.
type BreakerHeldKind struct {
	Kind       string `json:"kind"`
	Dependency string `json:"dependency"`
	Waiting    int    `json:"waiting"`
}

// KindCount is how many jobs of one kind wait.
type KindCount struct {
	Kind    string `json:"kind"`
	Waiting int    `json:"waiting"`
}

// EffectState is where a ledger entry for a remote effect is.
type EffectState string

// EffectStatus is what EffectBegin found.
type EffectStatus string

const (
	// EffectInProgress: a delivery began the effect and has not finished it.
	EffectInProgress EffectState = "in_progress"
	// EffectCompleted: the effect happened; later deliveries skip it.
	EffectCompleted EffectState = "completed"
	// EffectFailed: the effect was released after a failure; a later
	// delivery may begin it again.
	EffectFailed EffectState = "failed"
)

const (
	// EffectBegun: no delivery had begun this effect; this one owns it now.
	EffectBegun EffectStatus = "begun"
	// EffectRetaken: an earlier delivery released it after a failure; this
	// one owns it now.
	EffectRetaken EffectStatus = "retaken"
	// EffectAbandoned: an earlier delivery began it and lost its lease
	// without completing or releasing it. This delivery owns it now, but the
	// remote side may or may not have acted: check it (by the effect key)
	// before acting again.
	EffectAbandoned EffectStatus = "abandoned"
	// EffectAlreadyCompleted: the effect happened; skip it.
	EffectAlreadyCompleted EffectStatus = "completed"
	// EffectHeldElsewhere: another delivery holds it under a live lease.
	EffectHeldElsewhere EffectStatus = "in_progress"
)
