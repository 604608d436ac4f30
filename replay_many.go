package errand

import (
	"context"
	"fmt"
	"time"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
	"github.com/errandhq/errand/internal/clock"
	"github.com/errandhq/errand/internal/ids"
)

// Bulk replay of dead jobs: an operator who fixed what killed them replays
// the jobs a filter selects, in batches, at a rate the systems they call can
// take.

// Bounds of a bulk replay.
const (
	// MaxReplayMany is the most jobs one bulk replay replays.
	MaxReplayMany = 1000
	// DefaultReplayMany is how many it replays when no limit is given.
	DefaultReplayMany = 100
	// MinReplayRate is the slowest bulk replay rate, in jobs per second:
	// one an hour. A slower one would pace a call over weeks.
	MinReplayRate = 1.0 / 3600
)

// ReplayManyOpts select dead jobs to replay and say how fast.
type ReplayManyOpts struct {
	// Filter selects the dead jobs; the zero filter selects every one.
	Filter errandstore.DeadFilter
	// Limit is the most jobs to replay: zero means DefaultReplayMany; more
	// than MaxReplayMany is an *InputError.
	Limit int
	// Rate, when positive, is the most jobs replayed per second, so that a
	// recovering downstream service is not flooded. Zero means as fast as
	// batches of ReplayBatch go.
	Rate float64
	// Operator and Reason are required: each replayed job's audit record
	// keeps them.
	Operator string
	Reason   string
	// DryRun lists the jobs that would be replayed and changes nothing.
	DryRun bool
}

// ReplayManyResult is what a bulk replay did.
type ReplayManyResult struct {
	// Bulk identifies the run in the audit (details.bulk of each record).
	Bulk   string `json:"bulk"`
	DryRun bool   `json:"dry_run"`
	// Jobs are the jobs replayed, in seq order, as the replay left them
	// (with DryRun: the jobs that would be, unchanged).
	Jobs []*errandtype.Job `json:"jobs"`
	// Held are the ids of dead jobs the filter selects that the replay
	// left out, in seq order, at most ReplayBatch of them: steps of
	// workflows that have enqueued a compensation or were rerun, which
	// are rerun rather than replayed (see Client.RerunWorkflow).
	Held []string `json:"held"`
}

// ReplayMany replays the dead jobs that opts.Filter selects, oldest (by
// seq) first, at most opts.Limit of them, in transactions of up to
// ReplayBatch jobs, no faster than opts.Rate. Each job keeps its id and
// history, as with [Client.Replay], and gets its own audit record (action
// bulk_replay) naming the run and its filter. Each job is visited once per
// call. The workflows of the replayed jobs are advanced, as after
// [Client.Replay]. The dead steps that Client.Replay refuses, of workflows
// that have enqueued a compensation or were rerun, are left out (and not
// listed by DryRun) and named in Held: rerun such a workflow once it has
// failed. When ctx ends between batches, the
// result holds the jobs replayed so far, with ctx's error.
func (c *Client[TTx]) ReplayMany(ctx context.Context, opts *ReplayManyOpts) (*ReplayManyResult, error) {
	if opts == nil {
		opts = &ReplayManyOpts{}
	}
	limit, err := checkReplayMany(opts)
	if err != nil {
		return nil, err
	}
	res := &ReplayManyResult{Bulk: ids.NewJobID(), DryRun: opts.DryRun, Jobs: []*errandtype.Job{}, Held: []string{}}
	if err := c.replayBatches(ctx, opts, limit, res); err != nil {
		return res, fmt.Errorf("replay dead jobs: %w", err)
	}
	// What the filter selects and the replay left out, so that the
	// operator is told rather than left to wonder.
	held, err := c.store.JobReplayMany(ctx, &errandstore.JobReplayManyParams{Filter: opts.Filter, Limit: errandstore.ReplayBatch, DryRun: true, Held: true})
	if err != nil {
		return res, fmt.Errorf("list the steps left out: %w", err)
	}
	for _, j := range held {
		res.Held = append(res.Held, j.ID)
	}
	return res, nil
}

// checkReplayMany checks opts and returns the most jobs to replay.
func checkReplayMany(opts *ReplayManyOpts) (int, error) {
	limit := opts.Limit
	switch {
	case limit == 0:
		limit = DefaultReplayMany
	case limit < 0 || limit > MaxReplayMany:
		return 0, &errandtype.InputError{Field: "limit", Message: fmt.Sprintf("%d is out of range; replay 1 to %d jobs per call", limit, MaxReplayMany)}
	}
	if opts.Rate < 0 || opts.Rate != opts.Rate || (opts.Rate > 0 && opts.Rate < MinReplayRate) {
		return 0, &errandtype.InputError{Field: "rate", Message: fmt.Sprintf("%g jobs per second is out of range; give at least %g (one an hour), or 0 for no limit", opts.Rate, MinReplayRate)}
	}
	if !opts.DryRun {
		if err := errandstore.CheckOperatorAction(opts.Operator, opts.Reason, "replaying the jobs"); err != nil {
			return 0, err
		}
	}
	return limit, opts.Filter.Validate()
}

// replayBatches replays up to limit jobs in batches, adding them to res,
// no faster than opts.Rate.
func (c *Client[TTx]) replayBatches(ctx context.Context, opts *ReplayManyOpts, limit int, res *ReplayManyResult) error {
	batch := errandstore.ReplayBatch
	if opts.Rate > 0 {
		batch = max(1, min(batch, int(opts.Rate))) // about one batch a second
	}
	start := c.clock.Now()
	var after int64
	for len(res.Jobs) < limit {
		p := &errandstore.JobReplayManyParams{
			Filter: opts.Filter, AfterSeq: after, Limit: min(batch, limit-len(res.Jobs)),
			Operator: opts.Operator, Reason: opts.Reason, Bulk: res.Bulk, DryRun: opts.DryRun,
		}
		js, err := c.store.JobReplayMany(ctx, p)
		if err != nil {
			return err
		}
		res.Jobs = append(res.Jobs, js...)
		if !opts.DryRun {
			c.advanceWorkflowsOf(ctx, js)
		}
		if len(js) < p.Limit {
			return nil
		}
		after = js[len(js)-1].Seq
		if opts.Rate > 0 && !opts.DryRun && len(res.Jobs) < limit {
			due := start.Add(time.Duration(float64(len(res.Jobs)) / opts.Rate * float64(time.Second)))
			if err := clock.SleepCtx(ctx, c.clock, due.Sub(c.clock.Now())); err != nil {
				return err
			}
		}
	}
	return nil
}
