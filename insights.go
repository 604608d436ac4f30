package errand

import (
	"context"
	"fmt"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
)

// Insights are the figures an operator watches, per queue and kind: what
// waits and why, how fast jobs finish, how often and why they fail, how much
// is retried and dead-lettered, and how long jobs run and wait. Stores read
// them from existing columns with queries bounded by time windows (the last
// minute, five minutes, hour and day of finished_at, through an index on
// (state, finished_at)); nothing extra is written when a job is enqueued,
// claimed or acknowledged. A store returns the raw counts and samples as
// [InsightsData]; [AssembleInsights], shared by every store, turns them into
// rates and percentiles.

// AssembleInsights turns a store's raw figures into Insights. Stores and
// the Client call it, so that every store computes rates and percentiles
// alike.
func AssembleInsights(d *errandtype.InsightsData) *Insights { return errandstore.AssembleInsights(d) }

// InsightsOpts tune [Client.Insights].
type InsightsOpts struct {
	// SampleLimit bounds how many of the last hour's succeeded jobs the
	// run and wait time percentiles are computed from: zero means
	// DefaultInsightsSample; at most MaxInsightsSample.
	SampleLimit int
}

// Insights returns the operator's figures for every queue and kind with
// jobs: depth by bucket, oldest ready age, throughput, failure rates by
// class, retries, dead letters and their growth, and run and wait time
// percentiles. The dashboard, the JSON API, /metrics and errand stats read
// it.
func (c *Client[TTx]) Insights(ctx context.Context, opts *InsightsOpts) (*Insights, error) {
	if opts == nil {
		opts = &InsightsOpts{}
	}
	if opts.SampleLimit < 0 || opts.SampleLimit > errandstore.MaxInsightsSample {
		return nil, &errandtype.InputError{Field: "sample_limit", Message: fmt.Sprintf("%d is out of range; use 1 to %d (or 0 for %d)", opts.SampleLimit, errandstore.MaxInsightsSample, errandstore.DefaultInsightsSample)}
	}
	d, err := c.store.JobInsights(ctx, &errandstore.JobInsightsParams{SampleLimit: opts.SampleLimit})
	if err != nil {
		return nil, fmt.Errorf("insights: %w", err)
	}
	h, err := c.breakerHolds(ctx)
	if err != nil {
		return nil, fmt.Errorf("insights: %w", err)
	}
	ps, err := c.Pauses(ctx)
	if err != nil {
		return nil, fmt.Errorf("insights: %w", err)
	}
	ins := AssembleInsights(d)
	h.holdInsights(ins)
	pauseInsights(ins, ps)
	return ins, nil
}
