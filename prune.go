package errand

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// Retention: succeeded and cancelled jobs are deleted some time after they
// finish, dead jobs (the evidence of what went wrong) after a separate,
// longer time counted from when they died. A queued, scheduled, retrying or
// running job is never deleted, nor a finished job of an open workflow
// (which reads it to start a step, to succeed, or to compensate the step),
// of a failed workflow whose failed step's job is kept (a replay of that
// step resumes it), or of an open batch (which counts it when it
// completes). A completed batch and a finished workflow
// (succeeded or failed) go with the last of their jobs: in the transaction
// that deletes it, or a later one, never while an operator can still see or
// replay one of their jobs. Deletion goes in small transactions so that
// no lock is held long. The audit is kept: it is the record of what
// operators did, including the prunes themselves. Effect ledger entries are
// kept too: they are what makes an effect happen once, and a job id may be
// enqueued again after its job is pruned.

// Bounds of retention.
const (
	// MaxPruneBatch is the most jobs deleted in one transaction, and the
	// most batches and the most workflows.
	MaxPruneBatch = 1000
	// DefaultRetentionInterval is how often a worker's leader applies a
	// RetentionPolicy.
	DefaultRetentionInterval = time.Hour
	// RetentionOperator names the leader's prunes in the audit.
	RetentionOperator = "errand-retention"
)

// JobPruneParams describe one batch of retention.
type JobPruneParams struct {
	// SucceededAge: succeeded and cancelled jobs finished at least this
	// long ago go. Zero keeps them.
	SucceededAge time.Duration
	// DeadAge: dead jobs that died at least this long ago go. Zero keeps
	// them.
	DeadAge time.Duration
	// Limit is the most jobs to delete: 1 to MaxPruneBatch. It bounds the
	// batches and the workflows deleted in the same transaction alike.
	Limit    int
	Operator string
	Reason   string
	DryRun   bool
}

// Validate reports bad params as an *InputError.
func (p *JobPruneParams) Validate() error {
	if err := checkPruneAges(p.SucceededAge, p.DeadAge); err != nil {
		return err
	}
	if !p.DryRun && (p.Limit < 1 || p.Limit > MaxPruneBatch) {
		return &InputError{Field: "limit", Message: fmt.Sprintf("%d is out of range; delete 1 to %d jobs per batch", p.Limit, MaxPruneBatch)}
	}
	if !p.DryRun {
		return checkOperatorAction(p.Operator, p.Reason, "pruning jobs")
	}
	return checkPreviewAudit(p.Operator, p.Reason)
}

func checkPruneAges(succeeded, dead time.Duration) error {
	switch {
	case succeeded < 0:
		return &InputError{Field: "succeeded_age", Message: "must not be negative; give an age such as 168h, or 0 to keep succeeded and cancelled jobs"}
	case dead < 0:
		return &InputError{Field: "dead_age", Message: "must not be negative; give an age such as 720h, or 0 to keep dead jobs"}
	case succeeded == 0 && dead == 0:
		return &InputError{Field: "succeeded_age", Message: "is 0 and so is the age for dead jobs, which prunes nothing; give at least one age"}
	case dead > 0 && succeeded > 0 && dead < succeeded:
		return &InputError{Field: "dead_age", Message: fmt.Sprintf("%s is shorter than the age for succeeded jobs, %s; keep dead jobs, the evidence of failures, at least as long", dead, succeeded)}
	}
	return nil
}

// PruneGroup is one state a prune deletes from, and how old its jobs must
// be.
type PruneGroup struct {
	State JobState
	Age   time.Duration
}

// PruneGroups lists the states p prunes, in the order a store deletes
// from them: succeeded, cancelled, dead; states whose age is 0 are left
// out. A store deletes one state at a time, oldest first, so that an index
// on (state, finished_at) yields the rows in order.
func PruneGroups(p *JobPruneParams) []PruneGroup {
	var gs []PruneGroup
	if p.SucceededAge > 0 {
		gs = append(gs, PruneGroup{StateSucceeded, p.SucceededAge}, PruneGroup{StateCancelled, p.SucceededAge})
	}
	if p.DeadAge > 0 {
		gs = append(gs, PruneGroup{StateDead, p.DeadAge})
	}
	return gs
}

// PruneResult counts the jobs a prune deleted (or, dry, would delete), and
// the batches and workflows that went with their last jobs.
type PruneResult struct {
	Succeeded int `json:"succeeded"`
	Cancelled int `json:"cancelled"`
	Dead      int `json:"dead"`
	// Batches counts the completed batches deleted because none of their
	// jobs (members and callback) was left; Workflows the finished
	// workflows deleted because none of their jobs was left. A dry run
	// counts those whose every job this prune would delete.
	Batches   int  `json:"batches"`
	Workflows int  `json:"workflows"`
	DryRun    bool `json:"dry_run"`
}

// Total is the number of jobs.
func (r PruneResult) Total() int { return r.Succeeded + r.Cancelled + r.Dead }

// more reports whether a prune of limit per transaction that returned r
// may have left something to delete: a full batch of jobs, batches or
// workflows.
func (r PruneResult) more(limit int) bool {
	return r.Total() >= limit || r.Batches >= limit || r.Workflows >= limit
}

// PruneDetails is the details of an [AuditPrune] record: the ages applied
// and what one transaction deleted (batches and workflows only when some
// went).
func PruneDetails(p *JobPruneParams, r PruneResult) json.RawMessage {
	return mustJSON(struct {
		SucceededAge string `json:"succeeded_age"`
		DeadAge      string `json:"dead_age"`
		Succeeded    int    `json:"succeeded"`
		Cancelled    int    `json:"cancelled"`
		Dead         int    `json:"dead"`
		Batches      int    `json:"batches,omitempty"`
		Workflows    int    `json:"workflows,omitempty"`
	}{p.SucceededAge.String(), p.DeadAge.String(), r.Succeeded, r.Cancelled, r.Dead, r.Batches, r.Workflows})
}

// PruneBatchCutoff is the time before which a completed batch or finished
// workflow must have finished for a prune to delete it once its jobs are
// gone: the shorter of p's ages (those not 0) before now. A batch or
// workflow finishes no earlier than its jobs (a replayed job finishes later
// still), so one that finished since cannot have lost all its jobs to this
// prune; the bound keeps a store from looking at recent ones at all.
func PruneBatchCutoff(p *JobPruneParams, now time.Time) time.Time {
	age := p.DeadAge
	if p.SucceededAge > 0 && (age == 0 || p.SucceededAge < age) {
		age = p.SucceededAge
	}
	return now.Add(-age)
}

// PruneOpts say which finished jobs to delete.
type PruneOpts struct {
	// SucceededAge deletes succeeded and cancelled jobs that finished at
	// least this long ago. Zero keeps them.
	SucceededAge time.Duration
	// DeadAge deletes dead jobs that died at least this long ago: at least
	// SucceededAge, since they are the evidence of failures. Zero keeps
	// them.
	DeadAge time.Duration
	// BatchSize is the most jobs deleted per transaction: zero means
	// MaxPruneBatch, which is also the most.
	BatchSize int
	// Operator and Reason go to the audit. Defaults: RetentionOperator and
	// "retention".
	Operator string
	Reason   string
	// DryRun counts what would be deleted and deletes nothing.
	DryRun bool
}

// Prune deletes finished jobs older than opts' ages, in transactions of at
// most BatchSize jobs, until none is left, and returns how many of each
// state went. Completed batches and finished workflows none of whose jobs
// is left go too, at most BatchSize of each per transaction, and are
// counted in the result. Each transaction appends one audit record. When ctx ends
// between batches the result counts what went so far.
func (c *Client[TTx]) Prune(ctx context.Context, opts *PruneOpts) (PruneResult, error) {
	return c.prune(ctx, opts)
}

func (c *engine) prune(ctx context.Context, opts *PruneOpts) (PruneResult, error) {
	if opts == nil {
		opts = &PruneOpts{}
	}
	p := &JobPruneParams{
		SucceededAge: opts.SucceededAge, DeadAge: opts.DeadAge, Limit: opts.BatchSize,
		Operator: opts.Operator, Reason: opts.Reason, DryRun: opts.DryRun,
	}
	if p.Limit == 0 {
		p.Limit = MaxPruneBatch
	}
	if p.Operator == "" {
		p.Operator = RetentionOperator
	}
	if p.Reason == "" {
		p.Reason = "retention"
	}
	total := PruneResult{DryRun: opts.DryRun}
	if err := p.Validate(); err != nil {
		return total, err
	}
	for {
		r, err := c.store.JobPrune(ctx, p)
		if err != nil {
			return total, fmt.Errorf("prune: %w", err)
		}
		total.Succeeded += r.Succeeded
		total.Cancelled += r.Cancelled
		total.Dead += r.Dead
		total.Batches += r.Batches
		total.Workflows += r.Workflows
		if opts.DryRun || !r.more(p.Limit) {
			return total, nil
		}
		if err := ctx.Err(); err != nil {
			return total, fmt.Errorf("prune: %w", err)
		}
	}
}

// RetentionPolicy is the retention a Worker applies when it leads the
// cluster (see [WorkerConfig.Retention]).
type RetentionPolicy struct {
	// SucceededAge and DeadAge are as in PruneOpts. Both zero is an error.
	SucceededAge time.Duration
	DeadAge      time.Duration
	// Interval is how often the leader prunes. Default:
	// DefaultRetentionInterval.
	Interval time.Duration
	// BatchSize is as in PruneOpts.
	BatchSize int
}

// checkRetention applies a policy's defaults and validates it.
func checkRetention(p *RetentionPolicy) error {
	if p == nil {
		return nil
	}
	if p.Interval == 0 {
		p.Interval = DefaultRetentionInterval
	}
	if p.Interval < MinInterval {
		return &InputError{Field: "Retention.Interval", Message: fmt.Sprintf("%s is too short; give at least %s, e.g. 1h", p.Interval, MinInterval)}
	}
	if p.BatchSize < 0 || p.BatchSize > MaxPruneBatch {
		return &InputError{Field: "Retention.BatchSize", Message: fmt.Sprintf("%d is out of range; use 1 to %d (or 0 for %d)", p.BatchSize, MaxPruneBatch, MaxPruneBatch)}
	}
	if err := checkPruneAges(p.SucceededAge, p.DeadAge); err != nil {
		if ie, ok := err.(*InputError); ok {
			ie.Field = "Retention." + ie.Field
		}
		return err
	}
	return nil
}

// leaderRetention applies the worker's retention policy, when it has one
// and leads.
func (w *Worker) leaderRetention(ctx context.Context) {
	p := w.cfg.Retention
	if p == nil || !w.Leading() {
		return
	}
	r, err := w.c.prune(ctx, &PruneOpts{SucceededAge: p.SucceededAge, DeadAge: p.DeadAge, BatchSize: p.BatchSize,
		Operator: RetentionOperator, Reason: "retention policy of worker " + w.ID()})
	switch {
	case err != nil && ctx.Err() == nil:
		w.c.logger.Error("retention failed", "worker_id", w.ID(), "err", err)
	case r.Total() > 0 || r.Batches > 0 || r.Workflows > 0:
		w.c.logger.Info("pruned finished jobs", "worker_id", w.ID(), "succeeded", r.Succeeded,
			"cancelled", r.Cancelled, "dead", r.Dead, "batches", r.Batches, "workflows", r.Workflows)
	}
}
