package errandstore

import (
	"cmp"
	"math"
	"slices"
	"time"

	"github.com/errandhq/errand/errandtype"
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

// AssembleInsights turns a store's raw figures into the operator's:
// rates, failure shares and percentiles, by queue and kind. Every store's
// figures go through it (see [github.com/errandhq/errand.AssembleInsights]),
// so that they compute them alike.
func AssembleInsights(d *errandtype.InsightsData) *errandtype.Insights {
	a := &insightsAssembly{byKey: map[insightsKey]*errandtype.KindInsights{}, finished: map[insightsKey]*[3]int{},
		runs: map[insightsKey][]time.Duration{}, waits: map[insightsKey][]time.Duration{}}
	a.addDepth(d)
	a.addFinished(d)
	for _, c := range d.Failures {
		ki := a.get(c.Queue, c.Kind)
		ki.FailedLastHour += c.Failures
		ki.RetriesLastHour += c.Retried
		ki.FailuresByClass = append(ki.FailuresByClass, errandtype.ClassFailures{Class: c.Class, Failures: c.Failures})
	}
	for _, s := range d.Samples {
		k := insightsKey{s.Queue, s.Kind}
		a.get(s.Queue, s.Kind)
		a.runs[k] = append(a.runs[k], s.Run)
		a.waits[k] = append(a.waits[k], s.Wait)
	}
	out := &errandtype.Insights{At: d.Now.UTC(), Kinds: make([]errandtype.KindInsights, 0, len(a.byKey))}
	for k, ki := range a.byKey {
		a.rates(k, ki)
		out.Kinds = append(out.Kinds, *ki)
	}
	slices.SortFunc(out.Kinds, func(a, b errandtype.KindInsights) int {
		return cmp.Or(cmp.Compare(a.Queue, b.Queue), cmp.Compare(a.Kind, b.Kind))
	})
	return out
}

type insightsKey struct{ queue, kind string }

// insightsAssembly gathers a store's figures by queue and kind.
type insightsAssembly struct {
	byKey    map[insightsKey]*errandtype.KindInsights
	finished map[insightsKey]*[3]int // by worker outcome: last 1m, 5m, 1h
	runs     map[insightsKey][]time.Duration
	waits    map[insightsKey][]time.Duration
}

func (a *insightsAssembly) get(queue, kind string) *errandtype.KindInsights {
	k := insightsKey{queue, kind}
	if a.byKey[k] == nil {
		a.byKey[k] = &errandtype.KindInsights{Queue: queue, Kind: kind, FailuresByClass: []errandtype.ClassFailures{}}
	}
	return a.byKey[k]
}

// addDepth counts the jobs waiting and running, by bucket.
func (a *insightsAssembly) addDepth(d *errandtype.InsightsData) {
	for _, c := range d.Depth {
		ki := a.get(c.Queue, c.Kind)
		switch c.Bucket {
		case errandtype.BucketReady:
			ki.Ready += c.Jobs
			if c.Jobs > 0 && !c.OldestAvailableAt.IsZero() {
				ki.OldestReadyAgeSeconds = max(ki.OldestReadyAgeSeconds, d.Now.Sub(c.OldestAvailableAt).Seconds())
			}
		case errandtype.BucketScheduled:
			ki.Scheduled += c.Jobs
		case errandtype.BucketRetrying:
			ki.Retrying += c.Jobs
		case errandtype.BucketHeld:
			ki.Held += c.Jobs
		case errandtype.BucketRunning:
			ki.Running += c.Jobs
		case errandtype.BucketDead:
			ki.Dead += c.Jobs
		}
	}
}

// addFinished counts the jobs that ended, by state and window.
func (a *insightsAssembly) addFinished(d *errandtype.InsightsData) {
	for _, c := range d.Finished {
		ki := a.get(c.Queue, c.Kind)
		switch c.State {
		case errandtype.StateSucceeded:
			ki.SucceededLastHour += c.Last1h
		case errandtype.StateDead:
			ki.DeadLastHour += c.Last1h
			ki.DeadLastDay += c.Last24h
		default:
			continue
		}
		k := insightsKey{c.Queue, c.Kind}
		if a.finished[k] == nil {
			a.finished[k] = &[3]int{}
		}
		a.finished[k][0] += c.Last1m
		a.finished[k][1] += c.Last5m
		a.finished[k][2] += c.Last1h
	}
}

// rates fills in ki's throughput, failure rates and percentiles.
func (a *insightsAssembly) rates(k insightsKey, ki *errandtype.KindInsights) {
	if f := a.finished[k]; f != nil {
		ki.Throughput = errandtype.Throughput{Last1m: float64(f[0]), Last5m: float64(f[1]) / 5, Last1h: float64(f[2]) / 60}
	}
	if n := ki.FailedLastHour + ki.SucceededLastHour; n > 0 {
		ki.FailureRate = float64(ki.FailedLastHour) / float64(n)
		for i := range ki.FailuresByClass {
			ki.FailuresByClass[i].Rate = float64(ki.FailuresByClass[i].Failures) / float64(n)
		}
	}
	slices.SortFunc(ki.FailuresByClass, func(a, b errandtype.ClassFailures) int {
		return cmp.Or(cmp.Compare(b.Failures, a.Failures), cmp.Compare(a.Class, b.Class))
	})
	ki.RunTime = percentiles(a.runs[k])
	ki.WaitTime = percentiles(a.waits[k])
}

// percentiles returns the nearest-rank p50 and p99 of ds.
func percentiles(ds []time.Duration) errandtype.Percentiles {
	if len(ds) == 0 {
		return errandtype.Percentiles{}
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	rank := func(p float64) time.Duration {
		i := int(math.Ceil(p*float64(len(s)))) - 1
		return s[max(0, min(i, len(s)-1))]
	}
	return errandtype.Percentiles{Samples: len(s), P50Seconds: rank(0.50).Seconds(), P99Seconds: rank(0.99).Seconds()}
}
