package errandstore

import (
	"time"
)

// Windows of the insights.
const (
	// InsightsWindow is the window of failures, retries, succeeded counts
	// and run and wait times: the last hour.
	InsightsWindow = time.Hour
	// DefaultInsightsSample is how many of the last hour's succeeded jobs,
	// newest first, the run and wait time percentiles are computed from.
	DefaultInsightsSample = 10000
	// MaxInsightsSample bounds InsightsParams.SampleLimit.
	MaxInsightsSample = 100000
)

// JobInsightsParams ask a store for the raw figures.
type JobInsightsParams struct {
	// SampleLimit bounds Samples: 0 means DefaultInsightsSample.
	SampleLimit int
}

// InsightsSample is the sample bound a store uses for limit.
func InsightsSample(limit int) int {
	if limit <= 0 {
		return DefaultInsightsSample
	}
	return min(limit, MaxInsightsSample)
}
