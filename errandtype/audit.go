package errandtype

import (
	"encoding/json"
	"slices"
	"time"
)

// AuditAction names what an operator did, in an [AuditRecord].
type AuditAction string

const (
	// AuditReplay: one job replayed as it was.
	AuditReplay AuditAction = "replay"
	// AuditReplayArgs: one job replayed with corrected args; the record's
	// details keep the old and the new args (see
	// [github.com/errandhq/errand/errandstore.ReplayArgsDetails]).
	AuditReplayArgs AuditAction = "replay_args"
	// AuditBulkReplay: one job replayed by a bulk replay; the record's
	// details name the bulk run and its filter (see
	// [github.com/errandhq/errand/errandstore.BulkReplayDetails]).
	AuditBulkReplay AuditAction = "bulk_replay"
	// AuditCancel: one job cancelled.
	AuditCancel AuditAction = "cancel"
	// AuditPrune: finished jobs deleted by retention; one record per
	// deleting transaction, without a job id, its details counting what
	// went (see [github.com/errandhq/errand/errandstore.PruneDetails]).
	AuditPrune AuditAction = "prune"
	// AuditBreakerReset: an operator closed a dependency's circuit breaker;
	// no job id, its details naming the dependency and what the breaker was
	// (see [github.com/errandhq/errand/errandstore.BreakerResetDetails]).
	AuditBreakerReset AuditAction = "breaker_reset"
	// AuditScheduleDelete: a schedule deleted; a record without a job id, its
	// details the schedule as it was (see
	// [github.com/errandhq/errand/errandstore.ScheduleDeleteDetails]).
	AuditScheduleDelete AuditAction = "schedule_delete"
	// AuditPause and AuditResume: an operator paused or resumed the claims
	// of a queue or a kind; no job id, the details naming it (see
	// [github.com/errandhq/errand/errandstore.PauseDetails]).
	AuditPause  AuditAction = "pause"
	AuditResume AuditAction = "resume"
)

// AuditActions lists every action, in the order of their constants.
var AuditActions = []AuditAction{AuditReplay, AuditReplayArgs, AuditBulkReplay, AuditCancel, AuditPrune, AuditBreakerReset, AuditScheduleDelete, AuditPause, AuditResume}

// Valid reports whether a is one of AuditActions.
func (a AuditAction) Valid() bool { return slices.Contains(AuditActions, a) }

// AuditRecord is one entry of the audit: who did what to which job, why
// and when. The audit is append-only; retention never deletes it.
type AuditRecord struct {
	// ID orders the audit: a later record has a greater id.
	ID     int64       `json:"id"`
	Action AuditAction `json:"action"`
	// JobID is the job acted on, nil for an action on many (a prune).
	JobID *string `json:"job_id"`
	// Operator and Reason say who acted and why.
	Operator string    `json:"operator"`
	Reason   string    `json:"reason"`
	At       time.Time `json:"at"`
	// PriorState is the job's state before the action; empty for a prune.
	PriorState JobState `json:"prior_state,omitempty"`
	// Replay is the job's replay number after a replay, else 0.
	Replay int `json:"replay"`
	// Details is a JSON object with what the action's kind records (old and
	// new args, a bulk replay's filter, a prune's counts), or nil.
	Details json.RawMessage `json:"details"`
}

// MarshalJSON writes a prune's prior state, which it has none of, as null.
func (r AuditRecord) MarshalJSON() ([]byte, error) {
	type plain AuditRecord
	var prior *JobState
	if r.PriorState != "" {
		prior = &r.PriorState
	}
	return json.Marshal(struct {
		plain
		PriorState *JobState `json:"prior_state"`
	}{plain(r), prior})
}
