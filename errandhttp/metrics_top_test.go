package errandhttp_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandhttp"
	"github.com/errandhq/errand/errandtype"
)

// TestMetricsTopQueues: the queue gauges name the TopN deepest queues and
// sum the others into queue="(other)", a real queue of that name among
// them; the unhandled-jobs gauge keeps the TopN largest pairs.
func TestMetricsTopQueues(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) { testMetricsTopQueues(t, sqliteEnv(t)) })
	t.Run("postgres", func(t *testing.T) { testMetricsTopQueues(t, postgresEnv(t)) })
}

func testMetricsTopQueues[TTx any](t *testing.T, e *testEnv[TTx]) {
	c := e.client(t, nil)
	h := errandhttp.NewMetrics(c, &errandhttp.MetricsOptions{Clock: e.clock, TopN: 2})
	for queue, n := range map[string]int{"a": 3, "b": 2, "c": 1, errandhttp.OtherLabel: 1} {
		for range n {
			enqueue(t, c, "ok", &errand.EnqueueOpts{Queue: queue})
		}
		e.clock.Advance(time.Second)
	}
	enqueue(t, c, "idle", &errand.EnqueueOpts{Queue: "d", Delay: time.Hour})
	e.clock.Advance(10 * time.Second)

	fams := scrape(t, h)
	wantSeries(t, fams, "errand_queue_jobs", "queue=a,state=queued", 3)
	wantSeries(t, fams, "errand_queue_jobs", "queue=b,state=queued", 2)
	wantSeries(t, fams, "errand_queue_jobs", "queue=(other),state=queued", 3)
	for _, q := range []string{"c", "d"} {
		if _, ok := seriesValue(fams, "errand_queue_jobs", "queue="+q+",state=queued"); ok {
			t.Errorf("queue %s past the top 2 has series of its own", q)
		}
	}
	if n := len(fams["errand_queue_oldest_ready_age_seconds"].GetMetric()); n != 3 {
		t.Errorf("%d oldest-ready series, want 3: a, b and (other)", n)
	}
	// Queues were enqueued a second apart in map order: (other)'s oldest is
	// the oldest of c and (other), at least 11s.
	if v, _ := seriesValue(fams, "errand_queue_oldest_ready_age_seconds", "queue=(other)"); v < 11 {
		t.Errorf("(other)'s oldest ready age %v, want the largest of its queues'", v)
	}
	wantSeries(t, fams, "errand_queue_unhandled_jobs", "queue=a,kind=ok", 3)
	wantSeries(t, fams, "errand_queue_unhandled_jobs", "queue=b,kind=ok", 2)
	wantSeries(t, fams, "errand_queue_unhandled_jobs", "queue=(other),kind=(other)", 3)
	if n := len(fams["errand_queue_unhandled_jobs"].GetMetric()); n != 3 {
		t.Errorf("%d unhandled-jobs series, want 3", n)
	}
}

// TestMetricsObserverBoundsPairs: the counters name the first DefaultTopN
// pairs of queue and kind and count later ones as (other).
func TestMetricsObserverBoundsPairs(t *testing.T) {
	obs := errandhttp.NewMetricsObserver()
	const extra = 5
	for i := range errandhttp.DefaultTopN + extra {
		j := &errandtype.Job{Queue: "q", Kind: "kind" + strconv.Itoa(i)}
		obs.JobsEnqueued([]*errandtype.Job{j})
		obs.JobsAbsorbed([]*errandtype.Job{j})
		obs.JobStarted(j)
		obs.JobFinished(j, &errand.WorkResult{Result: errand.ResultDead, Class: "boom"})
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(obs)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range mfs {
		named, other := 0, 0.0
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["outcome"] != "" && labels["outcome"] != "dead" {
				continue
			}
			if labels["kind"] == errandhttp.OtherLabel {
				other += m.GetCounter().GetValue() + float64(m.GetHistogram().GetSampleCount())
			} else {
				named++
			}
		}
		if named != errandhttp.DefaultTopN || other != extra {
			t.Errorf("%s: %d named series and %v counted as other; want %d and %d", f.GetName(), named, other, errandhttp.DefaultTopN, extra)
		}
	}
}
