package errand

import (
	"context"
	"fmt"
	"time"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
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
	// DefaultRetentionInterval is how often a worker's leader applies a
	// RetentionPolicy.
	DefaultRetentionInterval = time.Hour
	// RetentionOperator names the leader's prunes in the audit.
	RetentionOperator = "errand-retention"
)

// PruneOpts say which finished jobs to delete.
type PruneOpts struct {
	// SucceededAge deletes succeeded and cancelled jobs that finished at
	// least this long ago. Zero keeps them.
	SucceededAge time.Duration
	// DeadAge deletes dead jobs that died at least this long ago: at least
	// SucceededAge, since they are the evidence of failures. Zero keeps
	// them.
	DeadAge time.Duration
	// Kinds gives kinds ages of their own, which replace SucceededAge or
	// DeadAge for that kind's jobs; the other kinds keep the defaults.
	// With Kinds, both defaults may be zero: only those kinds are pruned.
	Kinds map[string]KindRetention
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
func (c *Client[TTx]) Prune(ctx context.Context, opts *PruneOpts) (errandstore.PruneResult, error) {
	return c.prune(ctx, opts)
}

func (c *engine) prune(ctx context.Context, opts *PruneOpts) (errandstore.PruneResult, error) {
	if opts == nil {
		opts = &PruneOpts{}
	}
	p := &errandstore.JobPruneParams{
		SucceededAge: opts.SucceededAge, DeadAge: opts.DeadAge, Kinds: opts.Kinds, Limit: opts.BatchSize,
		Operator: opts.Operator, Reason: opts.Reason, DryRun: opts.DryRun,
	}
	if p.Limit == 0 {
		p.Limit = errandstore.MaxPruneBatch
	}
	if p.Operator == "" {
		p.Operator = RetentionOperator
	}
	if p.Reason == "" {
		p.Reason = "retention"
	}
	total := errandstore.PruneResult{DryRun: opts.DryRun}
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
		if opts.DryRun || !r.More(p.Limit) {
			return total, nil
		}
		if err := ctx.Err(); err != nil {
			return total, fmt.Errorf("prune: %w", err)
		}
	}
}

// KindRetention is one kind's retention: SucceededAge (succeeded and
// cancelled jobs) and DeadAge, each replacing the default age of those
// states for the kind's jobs when not zero, and leaving them to the default
// when zero. A kind may be kept longer or shorter than the default.
type KindRetention = errandstore.KindRetention

// RetentionPolicy is the retention a Worker applies when it leads the
// cluster (see [WorkerConfig.Retention]).
type RetentionPolicy struct {
	// SucceededAge, DeadAge and Kinds are as in PruneOpts. All zero is an
	// error.
	SucceededAge time.Duration
	DeadAge      time.Duration
	Kinds        map[string]KindRetention
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
	if p.Interval < errandstore.MinInterval {
		return &errandtype.InputError{Field: "Retention.Interval", Message: fmt.Sprintf("%s is too short; give at least %s, e.g. 1h", p.Interval, errandstore.MinInterval)}
	}
	if p.BatchSize < 0 || p.BatchSize > errandstore.MaxPruneBatch {
		return &errandtype.InputError{Field: "Retention.BatchSize", Message: fmt.Sprintf("%d is out of range; use 1 to %d (or 0 for %d)", p.BatchSize, errandstore.MaxPruneBatch, errandstore.MaxPruneBatch)}
	}
	if err := errandstore.CheckPrune(p.SucceededAge, p.DeadAge, p.Kinds); err != nil {
		if ie, ok := err.(*errandtype.InputError); ok {
			ie.Field = "Retention." + ie.Field
		}
		return err
	}
	return nil
}
