package errandhttp

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
)

// Defaults of MetricsOptions.
const (
	// DefaultMetricsCacheFor is how long /metrics reuses the queue
	// statistics it read from the database.
	DefaultMetricsCacheFor = 5 * time.Second
	// DefaultMetricsTimeout bounds the database query of one scrape.
	DefaultMetricsTimeout = 5 * time.Second
)

// MetricsOptions configure [NewMetrics]. The zero value serves the
// database gauges only, on a registry of its own.
type MetricsOptions struct {
	// Observer, when set, adds its process-local counters (jobs enqueued,
	// started and finished, run time, failures by class): give the same
	// one to the client's Config.Observer. Nil serves the database gauges
	// alone, for a process that runs no workers.
	Observer *MetricsObserver
	// Registry is where the metrics are registered and what the handler
	// serves, so that an application can add its own metrics and serve
	// one page. Nil means a new registry, with the Go runtime and process
	// collectors. The global prometheus.DefaultRegisterer is never used.
	// A registry holds one NewMetrics: a second panics, as registering any
	// metric twice does.
	Registry *prometheus.Registry
	// CacheFor is how long the queue statistics read from the database are
	// reused between scrapes, so that frequent or concurrent scrapes cannot
	// load the database. Zero means DefaultMetricsCacheFor.
	CacheFor time.Duration
	// Timeout bounds the statistics query of one scrape. Zero means
	// DefaultMetricsTimeout.
	Timeout time.Duration
	// Clock times the cache. Nil means the system clock.
	Clock errandstore.Clock
	// TopN is how many queues, and queue and kind pairs, the gauges name;
	// the rest are summed into series labelled OtherLabel. Zero means
	// DefaultTopN.
	TopN int
}

// NewMetrics returns the handler of /metrics: Prometheus's text format,
// with the gauges read from c's database at scrape time and, when
// opts.Observer is set, the counters of this process's client:
//
//	errand_queue_jobs{queue,state}                    jobs per queue and state (running, dead, ...)
//	errand_queue_oldest_ready_age_seconds{queue}      how long the oldest claimable job has waited
//	errand_queue_unhandled_jobs{queue,kind}           waiting jobs of kinds no live worker handles
//	errand_queue_breaker_held_jobs{queue,kind,dependency}  waiting jobs an open breaker holds back
//	errand_store_up                                   1 when the last statistics query succeeded, else 0
//	errand_rate_limit_tokens{limit}                   a rate limit's tokens now: jobs that may start at once
//	errand_rate_limit_per_second{limit}               a rate limit's rate
//	errand_rate_limited_total{limit}                  claims held back for want of a token, by every process
//	errand_concurrency_limit{limit}                   a concurrency limit now: jobs of its kind that may run at once
//	errand_concurrency_running{limit}                 its kind's jobs running now under a live lease
//	errand_concurrency_limited_total{limit}           claims it left no room, by every process
//	errand_adaptive_limit_floor{limit}                an adaptive limit's floor (per second for a rate)
//	errand_adaptive_limit_ceiling{limit}              an adaptive limit's ceiling (per second for a rate)
//	errand_adaptive_limit_held_seconds{limit}         how long a provider's reset time still holds it
//	errand_adaptive_limit_decreases_total{limit}      times its rate went down
//	errand_adaptive_limit_last_move{limit,reason}     when its rate last moved (Unix seconds), and why
//	errand_retry_budget_tokens{kind}                  a retry budget's tokens now: retries that may start
//	errand_retry_budget_exhausted{kind}               1 while the kind's retries wait for the budget, else 0
//	errand_retry_budget_held_back_total{kind}         claims that left the kind's retries out
//	errand_breaker_state{dependency}                  circuit breaker: 0 closed, 1 half-open, 2 open
//	errand_breaker_failures{dependency}               failures in the breaker's current run
//	errand_breaker_trips_total{dependency}            times the breaker opened, cluster-wide
//	errand_workflows{state}                           workflows by state: running, compensating, succeeded, failed
//	errand_workflow_stalled_seconds{state}            longest an open workflow in the state has gone unchanged
//	errand_jobs_enqueued_total{queue,kind}            jobs this process enqueued
//	errand_jobs_absorbed_total{queue,kind}            enqueues of this process a debounce key folded into a pending job
//	errand_jobs_started_total{queue,kind}             attempts this process started
//	errand_jobs_finished_total{queue,kind,outcome}    attempts ended: succeeded, retrying, dead, snoozed, interrupted, cancelled, lease_lost
//	errand_job_failures_total{queue,kind,class,outcome}  failed attempts by class; outcome retrying or dead
//	errand_job_run_seconds{queue,kind}                handler run time (histogram)
//
// The running jobs are errand_queue_jobs{state="running"}, the dead-letter
// size errand_queue_jobs{state="dead"}, and lease losses
// errand_jobs_finished_total{outcome="lease_lost"}. The gauges count every
// process's jobs; the counters only this process's, so sum them over the
// processes that run workers.
//
// errand_workflows counts the workflows of every state exactly, by one
// grouped count (finished workflows stay until retention deletes them with
// their last job). errand_workflow_stalled_seconds is reported for the open
// states, from the newest MaxListLimit workflows of each. A store without
// workflows reports neither workflow gauge.
//
// The queue gauges name the TopN deepest queues (jobs not succeeded or
// cancelled) and sum the others into queue="(other)"; the unhandled-jobs
// gauge names the TopN largest pairs of queue and kind. The observer's
// counters name the first DefaultTopN pairs of queue and kind this process
// sees, and count later ones as queue="(other)", kind="(other)". So the
// page stays small however many queues and kinds an application makes.
//
// The handler does not authenticate: mount it behind the server's
// authentication, or on a loopback address.
func NewMetrics[TTx any](c *errand.Client[TTx], opts *MetricsOptions) http.Handler {
	o := MetricsOptions{}
	if opts != nil {
		o = *opts
	}
	if o.CacheFor <= 0 {
		o.CacheFor = DefaultMetricsCacheFor
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultMetricsTimeout
	}
	if o.Clock == nil {
		o.Clock = systemClock{}
	}
	if o.TopN <= 0 {
		o.TopN = DefaultTopN
	}
	reg := o.Registry
	if reg == nil {
		reg = prometheus.NewRegistry()
		reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	reg.MustRegister(&queueCollector{topN: o.TopN, cache: &statsCache{
		read:    c.Stats,
		clock:   o.Clock,
		maxAge:  o.CacheFor,
		timeout: o.Timeout,
	}})
	reg.MustRegister(&limitCollector{cache: &readCache[[]*errandtype.LimiterRecord]{
		read:    c.Limits,
		clock:   o.Clock,
		maxAge:  o.CacheFor,
		timeout: o.Timeout,
	}})
	reg.MustRegister(&breakerCollector{cache: &readCache[[]*errandtype.BreakerRecord]{
		read:    c.Breakers,
		clock:   o.Clock,
		maxAge:  o.CacheFor,
		timeout: o.Timeout,
	}})
	if c.SupportsWorkflows() {
		reg.MustRegister(&workflowCollector{cache: &readCache[[]workflowGauge]{
			read:    func(ctx context.Context) ([]workflowGauge, error) { return readWorkflowGauges(ctx, c, o.Clock) },
			clock:   o.Clock,
			maxAge:  o.CacheFor,
			timeout: o.Timeout,
		}})
	}
	if o.Observer != nil {
		reg.MustRegister(o.Observer)
	}
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
}

// Descriptions of the gauges read from the database.
var (
	queueJobsDesc = prometheus.NewDesc("errand_queue_jobs",
		"Jobs in the queue, by state, read from the database.", []string{"queue", "state"}, nil)
	oldestReadyDesc = prometheus.NewDesc("errand_queue_oldest_ready_age_seconds",
		"How long the queue's oldest claimable job has been available, or 0 when none is.", []string{"queue"}, nil)
	unhandledDesc = prometheus.NewDesc("errand_queue_unhandled_jobs",
		"Waiting jobs of a kind that no live worker handles in the queue.", []string{"queue", "kind"}, nil)
	breakerHeldDesc = prometheus.NewDesc("errand_queue_breaker_held_jobs",
		"Waiting jobs of a kind whose dependency's circuit breaker is open or half-open; not in the oldest ready age.",
		[]string{"queue", "kind", "dependency"}, nil)
	queuePausedDesc = prometheus.NewDesc("errand_queue_paused",
		"1 while the queue is paused, cluster-wide; 0 otherwise.", []string{"queue"}, nil)
	pausedJobsDesc = prometheus.NewDesc("errand_queue_paused_jobs",
		"Waiting jobs of a paused queue or kind: counted as queued or retrying, but not claimed until resumed; not in the oldest ready age.",
		[]string{"queue", "kind"}, nil)
	storeUpDesc = prometheus.NewDesc("errand_store_up",
		"1 when the last queue statistics query succeeded, 0 when it failed.", nil, nil)
)

// queueCollector reports the queue statistics as gauges at scrape time.
type queueCollector struct {
	cache *statsCache
	topN  int
}

func (q *queueCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- queueJobsDesc
	ch <- oldestReadyDesc
	ch <- unhandledDesc
	ch <- breakerHeldDesc
	ch <- queuePausedDesc
	ch <- pausedJobsDesc
	ch <- storeUpDesc
}

func (q *queueCollector) Collect(ch chan<- prometheus.Metric) {
	stats, _, err := q.cache.get(context.Background())
	if err != nil {
		ch <- prometheus.MustNewConstMetric(storeUpDesc, prometheus.GaugeValue, 0)
		return
	}
	ch <- prometheus.MustNewConstMetric(storeUpDesc, prometheus.GaugeValue, 1)
	var unhandled, held, paused []queueKindCount
	heldBy := map[[2]string]string{} // queue and kind -> dependency
	for _, s := range stats {
		for _, k := range s.UnhandledKinds {
			unhandled = append(unhandled, queueKindCount{s.Queue, k.Kind, k.Waiting})
		}
		for _, k := range s.PausedKinds {
			paused = append(paused, queueKindCount{s.Queue, k.Kind, k.Waiting})
		}
		if s.Paused != nil {
			for kind, n := range s.WaitingByKind {
				paused = append(paused, queueKindCount{s.Queue, kind, n})
			}
		}
		for _, k := range s.BreakerHeldKinds {
			held = append(held, queueKindCount{s.Queue, k.Kind, k.Waiting})
			heldBy[[2]string{s.Queue, k.Kind}] = k.Dependency
		}
	}
	for _, k := range foldKinds(held, q.topN) {
		dep, ok := heldBy[[2]string{k.queue, k.kind}]
		if !ok {
			dep = OtherLabel
		}
		ch <- prometheus.MustNewConstMetric(breakerHeldDesc, prometheus.GaugeValue, float64(k.n), k.queue, k.kind, dep)
	}
	for _, s := range foldQueues(stats, q.topN) {
		for state, n := range s.Counts {
			ch <- prometheus.MustNewConstMetric(queueJobsDesc, prometheus.GaugeValue, float64(n), s.Queue, string(state))
		}
		ch <- prometheus.MustNewConstMetric(oldestReadyDesc, prometheus.GaugeValue, s.OldestReadyAgeSeconds, s.Queue)
		isPaused := 0.0
		if s.Paused != nil {
			isPaused = 1
		}
		ch <- prometheus.MustNewConstMetric(queuePausedDesc, prometheus.GaugeValue, isPaused, s.Queue)
	}
	for _, k := range foldKinds(paused, q.topN) {
		ch <- prometheus.MustNewConstMetric(pausedJobsDesc, prometheus.GaugeValue, float64(k.n), k.queue, k.kind)
	}
	for _, k := range foldKinds(unhandled, q.topN) {
		ch <- prometheus.MustNewConstMetric(unhandledDesc, prometheus.GaugeValue, float64(k.n), k.queue, k.kind)
	}
}

// Descriptions of the rate limit and retry budget gauges, read from the
// database (see errand.Client.Limits).
var (
	rateTokensDesc = prometheus.NewDesc("errand_rate_limit_tokens",
		"Tokens a cluster-wide rate limit holds now: jobs of its queue or kind that may start at once.", []string{"limit"}, nil)
	ratePerSecondDesc = prometheus.NewDesc("errand_rate_limit_per_second",
		"Starts per second a cluster-wide rate limit allows.", []string{"limit"}, nil)
	rateLimitedDesc = prometheus.NewDesc("errand_rate_limited_total",
		"Claims that a cluster-wide rate limit held back for want of a token, by every process.", []string{"limit"}, nil)
	adaptiveFloorDesc = prometheus.NewDesc("errand_adaptive_limit_floor",
		"Starts per second an adaptive rate limit never goes below.", []string{"limit"}, nil)
	adaptiveCeilingDesc = prometheus.NewDesc("errand_adaptive_limit_ceiling",
		"Starts per second an adaptive rate limit never goes above.", []string{"limit"}, nil)
	adaptiveHeldDesc = prometheus.NewDesc("errand_adaptive_limit_held_seconds",
		"Seconds a provider's reset time still holds an adaptive rate limit's claims back.", []string{"limit"}, nil)
	adaptiveDecreasesDesc = prometheus.NewDesc("errand_adaptive_limit_decreases_total",
		"Times an adaptive rate limit's rate went down, cluster-wide.", []string{"limit"}, nil)
	adaptiveMoveDesc = prometheus.NewDesc("errand_adaptive_limit_last_move",
		"When an adaptive rate limit last moved, in Unix seconds; reason is the first word of why (probing, growing, throttled, slow).", []string{"limit", "reason"}, nil)
	budgetTokensDesc = prometheus.NewDesc("errand_retry_budget_tokens",
		"Tokens a kind's retry budget holds now: retries that may start.", []string{"kind"}, nil)
	budgetExhaustedDesc = prometheus.NewDesc("errand_retry_budget_exhausted",
		"1 while a kind's retries wait for its retry budget, else 0.", []string{"kind"}, nil)
	budgetHeldDesc = prometheus.NewDesc("errand_retry_budget_held_back_total",
		"Claims that left a kind's retries out because its retry budget was spent, by every process.", []string{"kind"}, nil)
)

// limitCollector reports the rate limits and retry budgets at scrape time.
// A failed read reports nothing: errand_store_up says whether the
// database answers.
type limitCollector struct {
	cache *readCache[[]*errandtype.LimiterRecord]
}

func (l *limitCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{rateTokensDesc, ratePerSecondDesc, rateLimitedDesc, budgetTokensDesc, budgetExhaustedDesc, budgetHeldDesc,
		concLimitDesc, concRunningDesc, concLimitedDesc,
		adaptiveFloorDesc, adaptiveCeilingDesc, adaptiveHeldDesc, adaptiveDecreasesDesc, adaptiveMoveDesc} {
		ch <- d
	}
}

func (l *limitCollector) Collect(ch chan<- prometheus.Metric) {
	rs, _, err := l.cache.get(context.Background())
	if err != nil {
		return
	}
	for _, r := range rs {
		if kind, ok := strings.CutPrefix(r.Name, "retry:"); ok && r.Spec.Mode == errandtype.LimiterModeRetryBudget {
			exhausted := 0.0
			if r.Tokens <= 0 {
				exhausted = 1
			}
			ch <- prometheus.MustNewConstMetric(budgetTokensDesc, prometheus.GaugeValue, r.Tokens, kind)
			ch <- prometheus.MustNewConstMetric(budgetExhaustedDesc, prometheus.GaugeValue, exhausted, kind)
			ch <- prometheus.MustNewConstMetric(budgetHeldDesc, prometheus.CounterValue, float64(r.Denied), kind)
			continue
		}
		if r.Spec.Mode == errandtype.LimiterModeConcurrency {
			collectConcurrency(ch, r)
		} else {
			ch <- prometheus.MustNewConstMetric(rateTokensDesc, prometheus.GaugeValue, r.Tokens, r.Name)
			ch <- prometheus.MustNewConstMetric(ratePerSecondDesc, prometheus.GaugeValue, r.Spec.Rate, r.Name)
			ch <- prometheus.MustNewConstMetric(rateLimitedDesc, prometheus.CounterValue, float64(r.Denied), r.Name)
		}
		if a := r.Adaptive; a != nil {
			ch <- prometheus.MustNewConstMetric(adaptiveFloorDesc, prometheus.GaugeValue, r.Spec.Floor, r.Name)
			ch <- prometheus.MustNewConstMetric(adaptiveCeilingDesc, prometheus.GaugeValue, r.Spec.Ceiling, r.Name)
			ch <- prometheus.MustNewConstMetric(adaptiveHeldDesc, prometheus.GaugeValue, max(a.HeldUntil.Sub(l.cache.clock.Now()).Seconds(), 0), r.Name)
			ch <- prometheus.MustNewConstMetric(adaptiveDecreasesDesc, prometheus.CounterValue, float64(a.Decreases), r.Name)
			if !a.MovedAt.IsZero() {
				reason, _, _ := strings.Cut(a.Reason, ":")
				ch <- prometheus.MustNewConstMetric(adaptiveMoveDesc, prometheus.GaugeValue, float64(a.MovedAt.UnixMilli())/1e3, r.Name, reason)
			}
		}
	}
}

// Descriptions of the circuit breakers' metrics, read from the database.
var (
	breakerStateDesc = prometheus.NewDesc("errand_breaker_state",
		"State of the dependency's circuit breaker: 0 closed, 1 half-open, 2 open.", []string{"dependency"}, nil)
	breakerFailuresDesc = prometheus.NewDesc("errand_breaker_failures",
		"Failures in the current run of the dependency's circuit breaker (reset by a success).", []string{"dependency"}, nil)
	breakerTripsDesc = prometheus.NewDesc("errand_breaker_trips_total",
		"Times the dependency's circuit breaker opened, in every process.", []string{"dependency"}, nil)
)

// breakerCollector reports every circuit breaker at scrape time. A failed
// read reports none (errand_store_up says whether the database answers).
type breakerCollector struct {
	cache *readCache[[]*errandtype.BreakerRecord]
}

func (b *breakerCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- breakerStateDesc
	ch <- breakerFailuresDesc
	ch <- breakerTripsDesc
}

func (b *breakerCollector) Collect(ch chan<- prometheus.Metric) {
	bs, _, err := b.cache.get(context.Background())
	if err != nil {
		return
	}
	for _, r := range bs {
		ch <- prometheus.MustNewConstMetric(breakerStateDesc, prometheus.GaugeValue, float64(r.State.Gauge()), r.Dependency)
		ch <- prometheus.MustNewConstMetric(breakerFailuresDesc, prometheus.GaugeValue, float64(r.Failures), r.Dependency)
		ch <- prometheus.MustNewConstMetric(breakerTripsDesc, prometheus.CounterValue, float64(r.Trips), r.Dependency)
	}
}

// Descriptions of the workflow gauges, read from the database.
var (
	workflowsDesc = prometheus.NewDesc("errand_workflows",
		"Workflows by state (running, compensating, succeeded, failed), read from the database.", []string{"state"}, nil)
	workflowStalledDesc = prometheus.NewDesc("errand_workflow_stalled_seconds",
		"Longest time an open workflow in the state has gone without changing state or enqueueing a job, or 0 when none is open.", []string{"state"}, nil)
)

// workflowGauge is what the workflow gauges report of one state: stalled
// only for an open state.
type workflowGauge struct {
	state   errandtype.WorkflowState
	count   int
	open    bool
	stalled time.Duration
}

// readWorkflowGauges counts the workflows of every state, and reads the
// open workflows of each open state that has any, at most MaxListLimit
// each, for how long they have stalled.
func readWorkflowGauges[TTx any](ctx context.Context, c *errand.Client[TTx], clock errandstore.Clock) ([]workflowGauge, error) {
	counts, err := c.WorkflowCounts(ctx)
	if err != nil {
		return nil, err
	}
	now := clock.Now()
	var out []workflowGauge
	for _, st := range errandtype.WorkflowStates {
		g := workflowGauge{state: st, count: counts[st], open: st.Open()}
		if g.open && g.count > 0 {
			ws, err := c.Workflows(ctx, &errandstore.WorkflowListParams{States: []errandtype.WorkflowState{st}, Limit: MaxListLimit})
			if err != nil {
				return nil, err
			}
			for _, w := range ws {
				g.stalled = max(g.stalled, now.Sub(w.UpdatedAt))
			}
		}
		out = append(out, g)
	}
	return out, nil
}

// workflowCollector reports the workflows at scrape time. A failed
// read reports none (errand_store_up says whether the database answers).
type workflowCollector struct {
	cache *readCache[[]workflowGauge]
}

func (w *workflowCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- workflowsDesc
	ch <- workflowStalledDesc
}

func (w *workflowCollector) Collect(ch chan<- prometheus.Metric) {
	gs, _, err := w.cache.get(context.Background())
	if err != nil {
		return
	}
	for _, g := range gs {
		ch <- prometheus.MustNewConstMetric(workflowsDesc, prometheus.GaugeValue, float64(g.count), string(g.state))
		if g.open {
			ch <- prometheus.MustNewConstMetric(workflowStalledDesc, prometheus.GaugeValue, max(g.stalled, 0).Seconds(), string(g.state))
		}
	}
}

// Descriptions of the concurrency limit gauges.
var (
	concLimitDesc = prometheus.NewDesc("errand_concurrency_limit",
		"Jobs of a kind a cluster-wide concurrency limit lets run at once now (an adaptive one's, unrounded).", []string{"limit"}, nil)
	concRunningDesc = prometheus.NewDesc("errand_concurrency_running",
		"Jobs of a concurrency-limited kind running now under a live lease, cluster-wide.", []string{"limit"}, nil)
	concLimitedDesc = prometheus.NewDesc("errand_concurrency_limited_total",
		"Claims a cluster-wide concurrency limit left no room, by every process.", []string{"limit"}, nil)
)

// collectConcurrency reports concurrency limit r.
func collectConcurrency(ch chan<- prometheus.Metric, r *errandtype.LimiterRecord) {
	ch <- prometheus.MustNewConstMetric(concLimitDesc, prometheus.GaugeValue, r.Spec.Rate, r.Name)
	if r.Running != nil {
		ch <- prometheus.MustNewConstMetric(concRunningDesc, prometheus.GaugeValue, float64(*r.Running), r.Name)
	}
	ch <- prometheus.MustNewConstMetric(concLimitedDesc, prometheus.CounterValue, float64(r.Denied), r.Name)
}
