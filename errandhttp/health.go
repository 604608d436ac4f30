package errandhttp

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
	"github.com/errandhq/errand/internal/english"
)

// Defaults of ReadyOptions.
const (
	// DefaultReadyTimeout bounds the database query of one readiness
	// check.
	DefaultReadyTimeout = 2 * time.Second
	// DefaultReadyCacheFor is how long a readiness check's query result
	// is reused.
	DefaultReadyCacheFor = time.Second
)

// NewHealthz returns the handler of /healthz: 200 and {"status": "ok"}
// whenever the process serves HTTP. It reads nothing, so that a slow or
// unreachable database does not get a live process restarted; /readyz
// ([NewReadyz]) reports the database.
func NewHealthz() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeHealth(w, http.StatusOK, &readyReport{Status: "ok", Reasons: []readyReason{}})
	})
}

// ReadyOptions configure [NewReadyz]. The zero value checks only that the
// database answers.
type ReadyOptions struct {
	// MaxOldestReadyAge, when positive, makes the service degraded while
	// any queue's oldest claimable job has waited longer: workers are not
	// keeping up, or none is running.
	MaxOldestReadyAge time.Duration
	// MaxDeadGrowth, when its Jobs are positive, makes the service
	// degraded while more than Jobs jobs of one queue died within Per.
	MaxDeadGrowth DeadGrowth
	// Timeout bounds the database query. Zero means DefaultReadyTimeout.
	Timeout time.Duration
	// CacheFor is how long the query's result is reused, so that frequent
	// probes cannot load the database. Zero means DefaultReadyCacheFor.
	CacheFor time.Duration
	// Clock times the cache and the dead-letter growth. Nil means the
	// system clock.
	Clock errandstore.Clock
}

// DeadGrowth is a rate of jobs dying: Jobs per Per.
type DeadGrowth struct {
	Jobs int
	Per  time.Duration
}

// String writes g as ParseDeadGrowth reads it: "100/1h0m0s".
func (g DeadGrowth) String() string {
	if g.Jobs <= 0 {
		return ""
	}
	return strconv.Itoa(g.Jobs) + "/" + g.Per.String()
}

// ParseDeadGrowth reads a dead-letter growth threshold written N/PERIOD:
// "100/h", "5/m", "1000/d", or with a Go duration, "20/30m".
func ParseDeadGrowth(s string) (DeadGrowth, error) {
	n, per, ok := strings.Cut(strings.TrimSpace(s), "/")
	jobs, err := strconv.Atoi(n)
	if !ok || err != nil || jobs < 1 {
		return DeadGrowth{}, fmt.Errorf("dead-letter growth %q: write N/PERIOD with N at least 1, e.g. 100/h or 20/30m", s)
	}
	units := map[string]time.Duration{"s": time.Second, "m": time.Minute, "h": time.Hour, "d": 24 * time.Hour}
	d, unit := units[per]
	if !unit {
		d, err = time.ParseDuration(per)
		if err != nil || d < time.Second {
			return DeadGrowth{}, fmt.Errorf("dead-letter growth %q: the period must be s, m, h, d or a Go duration of at least 1s, e.g. 100/h or 20/30m", s)
		}
	}
	return DeadGrowth{Jobs: jobs, Per: d}, nil
}

// NewReadyz returns the handler of /readyz. It answers 200 and
// {"status": "ready", "reasons": []} when the database answers a
// statistics query within the timeout and no threshold is crossed; 503
// with "status" "unavailable" when the database does not answer, or
// "degraded" when a threshold is crossed, and "reasons" naming each
// problem: [{"check": "database"|"oldest_ready_age"|"dead_growth",
// "queue": ..., "message": ...}].
//
// Dead-letter growth over a Per of exactly an hour or a day is read from
// [errand.Client.Insights]: the jobs of the queue that died (finished dead)
// within the last hour or day and are dead still, counted by the database,
// so it is right from the first probe. Over any other Per it is the rise of
// a queue's dead count between the checks' samples, taken at most every
// Per/60, over the last Per: the handler keeps those samples, so it reports
// growth once it has run for a while, and a replay or prune that removes
// dead jobs meanwhile hides as many new ones.
func NewReadyz[TTx any](c *errand.Client[TTx], opts *ReadyOptions) http.Handler {
	o := ReadyOptions{}
	if opts != nil {
		o = *opts
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultReadyTimeout
	}
	if o.CacheFor <= 0 {
		o.CacheFor = DefaultReadyCacheFor
	}
	if o.Clock == nil {
		o.Clock = systemClock{}
	}
	var died *readCache[map[string]int]
	if per := o.MaxDeadGrowth.Per; o.MaxDeadGrowth.Jobs > 0 && (per == time.Hour || per == 24*time.Hour) {
		died = &readCache[map[string]int]{
			read: func(ctx context.Context) (map[string]int, error) {
				// One sample is the least a store reads for the
				// percentiles, which readiness does not use.
				ins, err := c.Insights(ctx, &errand.InsightsOpts{SampleLimit: 1})
				if err != nil {
					return nil, err
				}
				return diedWithin(ins, per), nil
			},
			clock: o.Clock, maxAge: o.CacheFor, timeout: o.Timeout,
		}
	}
	return &readyz{
		died: died,
		opts: o,
		cache: &statsCache{
			// The Client's statistics, so that jobs an open breaker holds
			// back are not in the oldest ready age.
			read:    c.Stats,
			clock:   o.Clock,
			maxAge:  o.CacheFor,
			timeout: o.Timeout,
		},
		growth: &deadGrowth{per: o.MaxDeadGrowth.Per},
	}
}

type readyz struct {
	opts   ReadyOptions
	cache  *statsCache
	growth *deadGrowth
	// died, when not nil, counts per queue the jobs that died within
	// MaxDeadGrowth.Per, from the insights; growth samples otherwise.
	died *readCache[map[string]int]
}

// diedWithin sums, per queue, the insights' jobs that died within per (an
// hour or a day).
func diedWithin(ins *errand.Insights, per time.Duration) map[string]int {
	m := map[string]int{}
	for _, k := range ins.Kinds {
		n := k.DeadLastHour
		if per == 24*time.Hour {
			n = k.DeadLastDay
		}
		if n > 0 {
			m[k.Queue] += n
		}
	}
	return m
}

type readyReport struct {
	Status  string        `json:"status"`
	Reasons []readyReason `json:"reasons"`
}

type readyReason struct {
	Check   string `json:"check"`
	Queue   string `json:"queue,omitempty"`
	Message string `json:"message"`
}

func (h *readyz) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	stats, at, err := h.cache.get(r.Context())
	if err != nil {
		writeHealth(w, http.StatusServiceUnavailable, &readyReport{Status: "unavailable", Reasons: []readyReason{{
			Check: "database", Message: "queue statistics query failed: " + err.Error(),
		}}})
		return
	}
	reasons := []readyReason{}
	if limit := h.opts.MaxOldestReadyAge; limit > 0 {
		for _, s := range stats {
			age := time.Duration(s.OldestReadyAgeSeconds * float64(time.Second))
			if age > limit {
				reasons = append(reasons, readyReason{Check: "oldest_ready_age", Queue: s.Queue,
					Message: fmt.Sprintf("queue %s: the oldest ready job has waited %s, over %s", s.Queue, age.Round(time.Second), limit)})
			}
		}
	}
	if g := h.opts.MaxDeadGrowth; g.Jobs > 0 && g.Per > 0 {
		var grown map[string]int
		if h.died != nil {
			grown, _, err = h.died.get(r.Context())
			if err != nil {
				writeHealth(w, http.StatusServiceUnavailable, &readyReport{Status: "unavailable", Reasons: []readyReason{{
					Check: "database", Message: "dead-letter growth query failed: " + err.Error(),
				}}})
				return
			}
		} else {
			grown = h.growth.observe(at, stats)
		}
		for _, q := range sortedKeys(grown) {
			if n := grown[q]; n > g.Jobs {
				reasons = append(reasons, readyReason{Check: "dead_growth", Queue: q,
					Message: fmt.Sprintf("queue %s: %s died within %s, over %d", q, english.Count(n, "job"), g.Per, g.Jobs)})
			}
		}
	}
	if len(reasons) > 0 {
		writeHealth(w, http.StatusServiceUnavailable, &readyReport{Status: "degraded", Reasons: reasons})
		return
	}
	writeHealth(w, http.StatusOK, &readyReport{Status: "ready", Reasons: reasons})
}

func writeHealth(w http.ResponseWriter, code int, rep *readyReport) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	b, _ := json.Marshal(rep) // plain strings: cannot fail
	w.Write(append(b, '\n'))
}

// deadGrowth keeps samples of every queue's dead count to tell how many
// jobs died over the last per.
type deadGrowth struct {
	per     time.Duration
	mu      sync.Mutex
	samples []deadSample // oldest first, at most per/60 apart
}

type deadSample struct {
	at   time.Time
	dead map[string]int
}

// observe adds the statistics read at at and returns, per queue, how much
// its dead count rose since the oldest sample within per.
func (g *deadGrowth) observe(at time.Time, stats []errandtype.QueueStats) map[string]int {
	g.mu.Lock()
	defer g.mu.Unlock()
	dead := make(map[string]int, len(stats))
	for _, s := range stats {
		dead[s.Queue] = s.Dead
	}
	cutoff := at.Add(-g.per)
	i := 0
	for i < len(g.samples) && g.samples[i].at.Before(cutoff) {
		i++
	}
	g.samples = g.samples[i:]
	grown := map[string]int{}
	if len(g.samples) > 0 {
		base := g.samples[0].dead
		for q, n := range dead {
			if n > base[q] {
				grown[q] = n - base[q]
			}
		}
	}
	if n := len(g.samples); n == 0 || at.Sub(g.samples[n-1].at) >= g.per/60 {
		g.samples = append(g.samples, deadSample{at: at, dead: dead})
	}
	return grown
}

func sortedKeys(m map[string]int) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
