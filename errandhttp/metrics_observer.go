package errandhttp

import (
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandtype"
)

// RunTimeBuckets are the upper bounds, in seconds, of the run-time
// histogram: from 5ms, for jobs that write a row, to 30 minutes, for
// reports.
var RunTimeBuckets = []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800}

// MetricsObserver counts a client's jobs for /metrics. It is an
// [errand.AbsorbObserver]: give it to the client's Config.Observer and to
// MetricsOptions.Observer. Each event costs a few atomic additions.
type MetricsObserver struct {
	enqueued *prometheus.CounterVec
	absorbed *prometheus.CounterVec
	started  *prometheus.CounterVec
	finished *prometheus.CounterVec
	failures *prometheus.CounterVec
	runTime  *prometheus.HistogramVec

	// byKind holds, per queueKind, the series an attempt touches, so that
	// an attempt costs one map lookup instead of one per series. It holds
	// the first DefaultTopN pairs this observer sees (nNamed) and
	// otherPair, whose series count the pairs after them.
	byKind sync.Map
	nNamed atomic.Int64
}

type queueKind struct{ queue, kind string }

// otherPair labels the pairs past the first DefaultTopN.
var otherPair = queueKind{OtherLabel, OtherLabel}

// kindSeries are the series of one queue and kind. Those of attempts are
// made at its first attempt, so that a process that only enqueues a kind
// shows no attempts of it.
type kindSeries struct {
	key      queueKind // the labels: the job's, or otherPair
	enqueued prometheus.Counter
	absorbed prometheus.Counter
	attempts func() *attemptSeries
}

type attemptSeries struct {
	started  prometheus.Counter
	runTime  prometheus.Observer
	finished map[errand.Result]prometheus.Counter
}

// outcomes are the results an attempt ends with; each gets its series at
// the first event of a queue and kind, so that rates over them start
// from zero.
var outcomes = []errand.Result{errand.ResultSucceeded, errand.ResultRetrying, errand.ResultDead,
	errand.ResultSnoozed, errand.ResultInterrupted, errand.ResultCancelled, errand.ResultLeaseLost}

// series returns job's series: its queue and kind's own while fewer than
// DefaultTopN pairs have theirs, otherPair's after that.
func (m *MetricsObserver) series(job *errandtype.Job) *kindSeries {
	key := queueKind{job.Queue, job.Kind}
	if s, ok := m.byKind.Load(key); ok {
		return s.(*kindSeries)
	}
	named := key.queue != OtherLabel && key.kind != OtherLabel && m.nNamed.Load() < DefaultTopN
	if named && m.nNamed.Add(1) > DefaultTopN {
		m.nNamed.Add(-1)
		named = false
	}
	if !named {
		key = otherPair
		if s, ok := m.byKind.Load(key); ok {
			return s.(*kindSeries)
		}
	}
	s := &kindSeries{
		key:      key,
		enqueued: m.enqueued.WithLabelValues(key.queue, key.kind),
		absorbed: m.absorbed.WithLabelValues(key.queue, key.kind),
		attempts: sync.OnceValue(func() *attemptSeries {
			a := &attemptSeries{
				started:  m.started.WithLabelValues(key.queue, key.kind),
				runTime:  m.runTime.WithLabelValues(key.queue, key.kind),
				finished: make(map[errand.Result]prometheus.Counter, len(outcomes)),
			}
			for _, r := range outcomes {
				a.finished[r] = m.finished.WithLabelValues(key.queue, key.kind, string(r))
			}
			return a
		}),
	}
	actual, loaded := m.byKind.LoadOrStore(key, s)
	if loaded && named {
		m.nNamed.Add(-1) // another event named the pair first
	}
	return actual.(*kindSeries)
}

var _ errand.AbsorbObserver = (*MetricsObserver)(nil)

// NewMetricsObserver returns an observer with every counter at zero.
func NewMetricsObserver() *MetricsObserver {
	return &MetricsObserver{
		enqueued: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "errand_jobs_enqueued_total",
			Help: "Jobs this process enqueued (duplicates not counted).",
		}, []string{"queue", "kind"}),
		absorbed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "errand_jobs_absorbed_total",
			Help: "Enqueues of this process that a debounce key folded into a pending job instead of inserting one.",
		}, []string{"queue", "kind"}),
		started: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "errand_jobs_started_total",
			Help: "Attempts this process's workers claimed and started.",
		}, []string{"queue", "kind"}),
		finished: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "errand_jobs_finished_total",
			Help: "Attempts this process's workers ended, by outcome: succeeded, retrying, dead, snoozed, interrupted, cancelled, lease_lost.",
		}, []string{"queue", "kind", "outcome"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "errand_job_failures_total",
			Help: "Failed attempts by error class; outcome is retrying (a retry is scheduled) or dead.",
		}, []string{"queue", "kind", "class", "outcome"}),
		runTime: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "errand_job_run_seconds",
			Help:    "How long handlers ran, per attempt.",
			Buckets: RunTimeBuckets,
		}, []string{"queue", "kind"}),
	}
}

// JobsEnqueued implements errand.Observer.
func (m *MetricsObserver) JobsEnqueued(jobs []*errandtype.Job) {
	for _, j := range jobs {
		m.series(j).enqueued.Inc()
	}
}

// JobsAbsorbed implements errand.AbsorbObserver.
func (m *MetricsObserver) JobsAbsorbed(jobs []*errandtype.Job) {
	for _, j := range jobs {
		m.series(j).absorbed.Inc()
	}
}

// JobStarted implements errand.Observer.
func (m *MetricsObserver) JobStarted(job *errandtype.Job) {
	m.series(job).attempts().started.Inc()
}

// JobFinished implements errand.Observer.
func (m *MetricsObserver) JobFinished(job *errandtype.Job, res *errand.WorkResult) {
	s := m.series(job)
	a := s.attempts()
	if c := a.finished[res.Result]; c != nil {
		c.Inc()
	} else {
		m.finished.WithLabelValues(s.key.queue, s.key.kind, string(res.Result)).Inc()
	}
	if res.Class != "" && (res.Result == errand.ResultRetrying || res.Result == errand.ResultDead) {
		m.failures.WithLabelValues(s.key.queue, s.key.kind, res.Class, string(res.Result)).Inc()
	}
	a.runTime.Observe(res.Duration.Seconds())
}

// Describe implements prometheus.Collector.
func (m *MetricsObserver) Describe(ch chan<- *prometheus.Desc) {
	m.enqueued.Describe(ch)
	m.absorbed.Describe(ch)
	m.started.Describe(ch)
	m.finished.Describe(ch)
	m.failures.Describe(ch)
	m.runTime.Describe(ch)
}

// Collect implements prometheus.Collector.
func (m *MetricsObserver) Collect(ch chan<- prometheus.Metric) {
	m.enqueued.Collect(ch)
	m.absorbed.Collect(ch)
	m.started.Collect(ch)
	m.finished.Collect(ch)
	m.failures.Collect(ch)
	m.runTime.Collect(ch)
}
