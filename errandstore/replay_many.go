package errandstore

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/errandhq/errand/errandtype"
)

const (
	// ReplayBatch is the most jobs replayed in one transaction.
	ReplayBatch = 100
)

// DeadFilter selects dead jobs. Zero fields do not filter.
type DeadFilter struct {
	Kind  string `json:"kind,omitempty"`
	Queue string `json:"queue,omitempty"`
	// Class is the class of the job's last error (what killed it).
	Class string `json:"class,omitempty"`
	// DiedSince and DiedUntil keep jobs that died (finished_at) in
	// [DiedSince, DiedUntil).
	DiedSince time.Time `json:"died_since,omitzero"`
	DiedUntil time.Time `json:"died_until,omitzero"`
}

// validate checks the filter's names and time range.
func (f *DeadFilter) Validate() error {
	for _, n := range []struct{ field, v string }{{"kind", f.Kind}, {"queue", f.Queue}, {"class", f.Class}} {
		if n.v != "" {
			if err := CheckName(n.field, n.v); err != nil {
				return err
			}
		}
	}
	if !f.DiedSince.IsZero() && !f.DiedUntil.IsZero() && !f.DiedUntil.After(f.DiedSince) {
		return &errandtype.InputError{Field: "until", Message: "is not after since; give a time range that is not empty"}
	}
	for _, t := range []struct {
		field string
		v     time.Time
	}{{"since", f.DiedSince}, {"until", f.DiedUntil}} {
		if err := checkTime(t.field, t.v); err != nil {
			return err
		}
	}
	return nil
}

// JobReplayManyParams describe one batch of a bulk replay.
type JobReplayManyParams struct {
	Filter DeadFilter
	// AfterSeq starts after the job with this seq, so that a bulk replay
	// visits each job once even when a replayed job dies again meanwhile.
	AfterSeq int64
	// Limit is the most jobs to replay: 1 to ReplayBatch.
	Limit    int
	Operator string
	Reason   string
	// Bulk identifies the bulk replay this batch belongs to, in the audit.
	Bulk   string
	DryRun bool
	// Held selects, instead, the dead steps a replay leaves out: those of
	// workflows that have enqueued a compensation or were rerun (see
	// [CheckReplayInWorkflow]). Only with DryRun.
	Held bool
}

// Validate reports bad params as an *InputError.
func (p *JobReplayManyParams) Validate() error {
	if p.Held && !p.DryRun {
		return &errandtype.InputError{Field: "held", Message: "lists the steps a replay leaves out, and replays nothing; set DryRun too"}
	}
	if p.Limit < 1 || p.Limit > ReplayBatch {
		return &errandtype.InputError{Field: "limit", Message: fmt.Sprintf("%d is out of range; replay 1 to %d jobs per batch", p.Limit, ReplayBatch)}
	}
	if p.AfterSeq < 0 {
		return &errandtype.InputError{Field: "after_seq", Message: "must not be negative"}
	}
	if !p.DryRun {
		if err := CheckOperatorAction(p.Operator, p.Reason, "replaying the jobs"); err != nil {
			return err
		}
		if err := CheckIdentifier("bulk", p.Bulk, MaxIDBytes); err != nil {
			return err
		}
	} else if err := checkPreviewAudit(p.Operator, p.Reason); err != nil {
		return err
	}
	return p.Filter.Validate()
}

// BulkReplayDetails is the details of an [errandtype.AuditBulkReplay] record: the
// bulk replay's id and filter.
func BulkReplayDetails(bulk string, f DeadFilter) json.RawMessage {
	return mustJSON(struct {
		Bulk   string     `json:"bulk"`
		Filter DeadFilter `json:"filter"`
	}{bulk, utcFilter(f)})
}

func utcFilter(f DeadFilter) DeadFilter {
	if !f.DiedSince.IsZero() {
		f.DiedSince = f.DiedSince.UTC()
	}
	if !f.DiedUntil.IsZero() {
		f.DiedUntil = f.DiedUntil.UTC()
	}
	return f
}

// ReplayPicked replays each of ids, jobs a bulk replay selected, with
// replay, and appends the jobs to out. A job its replay finds in a state
// that refuses it is skipped: a step whose workflow began compensating
// after the select, where the select could race with the workflow.
func ReplayPicked(out []*errandtype.Job, ids []string, replay func(id string) (*errandtype.Job, error)) ([]*errandtype.Job, error) {
	for _, id := range ids {
		j, err := replay(id)
		if errors.Is(err, errandtype.ErrWrongState) {
			continue
		}
		if err != nil {
			return out, fmt.Errorf("job %s: %w", id, err)
		}
		out = append(out, j)
	}
	return out, nil
}
