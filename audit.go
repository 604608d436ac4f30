package errand

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"
)

// AuditAction names what an operator did, in an [AuditRecord].
type AuditAction string

const (
	// AuditReplay: one job replayed as it was.
	AuditReplay AuditAction = "replay"
	// AuditReplayArgs: one job replayed with corrected args; the record's
	// details keep the old and the new args (see [ReplayArgsDetails]).
	AuditReplayArgs AuditAction = "replay_args"
	// AuditBulkReplay: one job replayed by a bulk replay; the record's
	// details name the bulk run and its filter (see [BulkReplayDetails]).
	AuditBulkReplay AuditAction = "bulk_replay"
	// AuditCancel: one job cancelled.
	AuditCancel AuditAction = "cancel"
	// AuditPrune: finished jobs deleted by retention; one record per
	// deleting transaction, without a job id, its details counting what
	// went (see [PruneDetails]).
	AuditPrune AuditAction = "prune"
	// AuditBreakerReset: an operator closed a dependency's circuit breaker;
	// no job id, its details naming the dependency and what the breaker was
	// (see [BreakerResetDetails]).
	AuditBreakerReset AuditAction = "breaker_reset"
	// AuditScheduleDelete: a schedule deleted; a record without a job id,
	// its details the schedule as it was (see [ScheduleDeleteDetails]).
	AuditScheduleDelete AuditAction = "schedule_delete"
)

// AuditActions lists every action, in the order of their constants.
var AuditActions = []AuditAction{AuditReplay, AuditReplayArgs, AuditBulkReplay, AuditCancel, AuditPrune, AuditBreakerReset, AuditScheduleDelete}

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

// AuditListParams filter and page the audit. Zero fields do not filter.
type AuditListParams struct {
	JobID  string
	Action AuditAction
	// Since and Until keep records with Since <= at < Until.
	Since time.Time
	Until time.Time
	// BeforeID pages: only records with a smaller id. Pass the last id of
	// a page to get the next one.
	BeforeID int64
	// Limit bounds the page: 0 means DefaultAuditLimit; more than
	// MaxAuditLimit is clamped to it.
	Limit int
}

// Validate checks the times of a listing: a store keeps none outside the
// years 1 to 9999, and PostgreSQL refuses to compare with one.
func (p *AuditListParams) Validate() error {
	if err := checkTime("since", p.Since); err != nil {
		return err
	}
	return checkTime("until", p.Until)
}

// Bounds of one page of the audit.
const (
	DefaultAuditLimit = 100
	MaxAuditLimit     = 1000
)

// AuditLimit is the page size a store uses for limit: DefaultAuditLimit
// for 0, clamped to 1..MaxAuditLimit.
func AuditLimit(limit int) int {
	switch {
	case limit <= 0:
		return DefaultAuditLimit
	case limit > MaxAuditLimit:
		return MaxAuditLimit
	}
	return limit
}

// ReplayArgsDetails is the details of an [AuditReplayArgs] record: the
// job's args before and after the replay.
func ReplayArgsDetails(oldArgs, newArgs json.RawMessage) json.RawMessage {
	return mustJSON(struct {
		OldArgs json.RawMessage `json:"old_args"`
		NewArgs json.RawMessage `json:"new_args"`
	}{compactJSON(oldArgs), compactJSON(newArgs)})
}

// compactJSON returns b without insignificant space, so that every store
// keeps a document inside another alike (PostgreSQL's jsonb would
// normalise it anyway).
func compactJSON(b json.RawMessage) json.RawMessage {
	var buf bytes.Buffer
	if json.Compact(&buf, b) != nil {
		return b
	}
	return buf.Bytes()
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("errand: encode audit details: %v", err))
	}
	return b
}

// AuditOpts filter and page [Client.Audit]. Zero fields do not filter.
type AuditOpts struct {
	// JobID keeps the records of one job.
	JobID string
	// Action keeps the records of one action.
	Action AuditAction
	// Since and Until keep records with Since <= at < Until.
	Since time.Time
	Until time.Time
	// BeforeID pages: pass the ID of the last record of a page to get the
	// next (older) one.
	BeforeID int64
	// Limit bounds the page: zero means DefaultAuditLimit; at most
	// MaxAuditLimit.
	Limit int
}

// Audit returns the audit, newest first: every replay, cancel, bulk replay
// and prune, with who did it, why and when. A limit past MaxAuditLimit or
// an unknown action is an *InputError.
func (c *Client[TTx]) Audit(ctx context.Context, opts *AuditOpts) ([]AuditRecord, error) {
	if opts == nil {
		opts = &AuditOpts{}
	}
	if opts.Action != "" && !opts.Action.Valid() {
		return nil, &InputError{Field: "action", Message: fmt.Sprintf("unknown action %q: use one of %s", opts.Action, auditActionNames())}
	}
	if opts.Limit < 0 || opts.Limit > MaxAuditLimit {
		return nil, &InputError{Field: "limit", Message: fmt.Sprintf("%d is out of range; use 1 to %d (or 0 for %d)", opts.Limit, MaxAuditLimit, DefaultAuditLimit)}
	}
	if opts.BeforeID < 0 {
		return nil, &InputError{Field: "before_id", Message: "must not be negative"}
	}
	if !opts.Since.IsZero() && !opts.Until.IsZero() && !opts.Until.After(opts.Since) {
		return nil, &InputError{Field: "until", Message: "is not after since; give a time range that is not empty"}
	}
	p := &AuditListParams{
		JobID: opts.JobID, Action: opts.Action, Since: opts.Since, Until: opts.Until,
		BeforeID: opts.BeforeID, Limit: opts.Limit,
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	rs, err := c.store.AuditList(ctx, p)
	if err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	return rs, nil
}

func auditActionNames() string {
	b := []byte{}
	for i, a := range AuditActions {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = append(b, a...)
	}
	return string(b)
}
