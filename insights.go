package errand

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"time"

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

const (
	// BucketReady: waiting, available now, claimable.
	BucketReady errandtype.DepthBucket = "ready"
	// BucketScheduled: queued, available later (scheduled or snoozed).
	BucketScheduled errandtype.DepthBucket = "scheduled"
	// BucketRetrying: retrying, waiting out its backoff.
	BucketRetrying errandtype.DepthBucket = "retrying"
	// BucketHeld: available, but held back by its ordering key (see
	// [Job.HeldBy]).
	BucketHeld errandtype.DepthBucket = "held"
	// BucketRunning: running under a lease.
	BucketRunning errandtype.DepthBucket = "running"
	// BucketDead: dead letters.
	BucketDead errandtype.DepthBucket = "dead"
)

// Insights are the figures of every queue and kind that has jobs.
type Insights struct {
	At time.Time `json:"at"`
	// Kinds are ordered by queue, then kind.
	Kinds []KindInsights `json:"kinds"`
}

// KindInsights are the figures of one kind in one queue.
type KindInsights struct {
	Queue string `json:"queue"`
	Kind  string `json:"kind"`
	// Depth by bucket (see [DepthBucket]).
	Ready     int `json:"ready"`
	Scheduled int `json:"scheduled"`
	Retrying  int `json:"retrying"`
	Held      int `json:"held"`
	Running   int `json:"running"`
	// HeldByBreaker counts the waiting, available jobs that the open or
	// half-open circuit breaker of Breaker, the kind's dependency, holds
	// back (see [BreakerHolds]): they are not in Ready nor in
	// OldestReadyAgeSeconds. Breaker is nil when no breaker holds the
	// kind. [Client.Insights] fills them.
	HeldByBreaker int     `json:"held_by_breaker"`
	Breaker       *string `json:"breaker"`
	// OldestReadyAgeSeconds is how long the oldest ready job has been
	// available; 0 when none is ready.
	OldestReadyAgeSeconds float64 `json:"oldest_ready_age_seconds"`
	// Throughput is jobs finished by workers (succeeded or dead) per
	// minute, averaged over the last minute, 5 minutes and hour.
	Throughput Throughput `json:"throughput_per_minute"`
	// SucceededLastHour counts jobs that succeeded in the last hour.
	SucceededLastHour int `json:"succeeded_last_hour"`
	// FailedLastHour counts failed attempts in the last hour (see
	// InsightsData.Failures), FailureRate is FailedLastHour over
	// FailedLastHour + SucceededLastHour (0 when both are 0), and
	// FailuresByClass splits them, most frequent first.
	FailedLastHour  int             `json:"failed_last_hour"`
	FailureRate     float64         `json:"failure_rate"`
	FailuresByClass []ClassFailures `json:"failures_by_class"`
	// RetriesLastHour counts the failed attempts of the last hour that
	// errand scheduled to run again (every failure that did not
	// dead-letter its job): the retry load, not only the jobs retrying now.
	RetriesLastHour int `json:"retries_last_hour"`
	// Dead is the dead-letter size; DeadLastHour and DeadLastDay count the
	// jobs that died in the last hour and day, its growth.
	Dead         int `json:"dead"`
	DeadLastHour int `json:"dead_last_hour"`
	DeadLastDay  int `json:"dead_last_day"`
	// RunTime and WaitTime are percentiles over the last hour's succeeded
	// jobs (see [TimingSample]).
	RunTime  Percentiles `json:"run_time"`
	WaitTime Percentiles `json:"wait_time"`
}

// Throughput is a rate per minute over three windows.
type Throughput struct {
	Last1m float64 `json:"last_1m"`
	Last5m float64 `json:"last_5m"`
	Last1h float64 `json:"last_1h"`
}

// ClassFailures counts one class's failures.
type ClassFailures struct {
	Class    string  `json:"class"`
	Failures int     `json:"failures"`
	Rate     float64 `json:"rate"`
}

// Percentiles of durations, nearest rank, in seconds; zero without
// samples.
type Percentiles struct {
	Samples    int     `json:"samples"`
	P50Seconds float64 `json:"p50_seconds"`
	P99Seconds float64 `json:"p99_seconds"`
}

// MarshalJSON writes the percentiles of no samples as null: there are none,
// which 0 would hide.
func (p Percentiles) MarshalJSON() ([]byte, error) {
	type wire struct {
		Samples    int      `json:"samples"`
		P50Seconds *float64 `json:"p50_seconds"`
		P99Seconds *float64 `json:"p99_seconds"`
	}
	w := wire{Samples: p.Samples}
	if p.Samples > 0 {
		w.P50Seconds, w.P99Seconds = &p.P50Seconds, &p.P99Seconds
	}
	return json.Marshal(w)
}

// AssembleInsights turns a store's raw figures into Insights. Stores and
// the Client call it, so that every store computes rates and percentiles
// alike.
func AssembleInsights(d *errandtype.InsightsData) *Insights {
	a := &insightsAssembly{byKey: map[insightsKey]*KindInsights{}, finished: map[insightsKey]*[3]int{},
		runs: map[insightsKey][]time.Duration{}, waits: map[insightsKey][]time.Duration{}}
	a.addDepth(d)
	a.addFinished(d)
	for _, c := range d.Failures {
		ki := a.get(c.Queue, c.Kind)
		ki.FailedLastHour += c.Failures
		ki.RetriesLastHour += c.Retried
		ki.FailuresByClass = append(ki.FailuresByClass, ClassFailures{Class: c.Class, Failures: c.Failures})
	}
	for _, s := range d.Samples {
		k := insightsKey{s.Queue, s.Kind}
		a.get(s.Queue, s.Kind)
		a.runs[k] = append(a.runs[k], s.Run)
		a.waits[k] = append(a.waits[k], s.Wait)
	}
	out := &Insights{At: d.Now.UTC(), Kinds: make([]KindInsights, 0, len(a.byKey))}
	for k, ki := range a.byKey {
		a.rates(k, ki)
		out.Kinds = append(out.Kinds, *ki)
	}
	slices.SortFunc(out.Kinds, func(a, b KindInsights) int {
		return cmp.Or(cmp.Compare(a.Queue, b.Queue), cmp.Compare(a.Kind, b.Kind))
	})
	return out
}

type insightsKey struct{ queue, kind string }

// insightsAssembly gathers a store's figures by queue and kind.
type insightsAssembly struct {
	byKey    map[insightsKey]*KindInsights
	finished map[insightsKey]*[3]int // by worker outcome: last 1m, 5m, 1h
	runs     map[insightsKey][]time.Duration
	waits    map[insightsKey][]time.Duration
}

func (a *insightsAssembly) get(queue, kind string) *KindInsights {
	k := insightsKey{queue, kind}
	if a.byKey[k] == nil {
		a.byKey[k] = &KindInsights{Queue: queue, Kind: kind, FailuresByClass: []ClassFailures{}}
	}
	return a.byKey[k]
}

// addDepth counts the jobs waiting and running, by bucket.
func (a *insightsAssembly) addDepth(d *errandtype.InsightsData) {
	for _, c := range d.Depth {
		ki := a.get(c.Queue, c.Kind)
		switch c.Bucket {
		case BucketReady:
			ki.Ready += c.Jobs
			if c.Jobs > 0 && !c.OldestAvailableAt.IsZero() {
				ki.OldestReadyAgeSeconds = max(ki.OldestReadyAgeSeconds, d.Now.Sub(c.OldestAvailableAt).Seconds())
			}
		case BucketScheduled:
			ki.Scheduled += c.Jobs
		case BucketRetrying:
			ki.Retrying += c.Jobs
		case BucketHeld:
			ki.Held += c.Jobs
		case BucketRunning:
			ki.Running += c.Jobs
		case BucketDead:
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
func (a *insightsAssembly) rates(k insightsKey, ki *KindInsights) {
	if f := a.finished[k]; f != nil {
		ki.Throughput = Throughput{Last1m: float64(f[0]), Last5m: float64(f[1]) / 5, Last1h: float64(f[2]) / 60}
	}
	if n := ki.FailedLastHour + ki.SucceededLastHour; n > 0 {
		ki.FailureRate = float64(ki.FailedLastHour) / float64(n)
		for i := range ki.FailuresByClass {
			ki.FailuresByClass[i].Rate = float64(ki.FailuresByClass[i].Failures) / float64(n)
		}
	}
	slices.SortFunc(ki.FailuresByClass, func(a, b ClassFailures) int {
		return cmp.Or(cmp.Compare(b.Failures, a.Failures), cmp.Compare(a.Class, b.Class))
	})
	ki.RunTime = percentiles(a.runs[k])
	ki.WaitTime = percentiles(a.waits[k])
}

// percentiles returns the nearest-rank p50 and p99 of ds.
func percentiles(ds []time.Duration) Percentiles {
	if len(ds) == 0 {
		return Percentiles{}
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	rank := func(p float64) time.Duration {
		i := int(math.Ceil(p*float64(len(s)))) - 1
		return s[max(0, min(i, len(s)-1))]
	}
	return Percentiles{Samples: len(s), P50Seconds: rank(0.50).Seconds(), P99Seconds: rank(0.99).Seconds()}
}

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
	ins := AssembleInsights(d)
	h.holdInsights(ins)
	return ins, nil
}
