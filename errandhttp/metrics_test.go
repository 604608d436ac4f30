package errandhttp_test

import (
	"context"
	"testing"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandhttp"
	"github.com/errandhq/errand/errandtype"
)

// The gauges are read from the database: jobs per queue and state, the
// oldest ready age, the dead-letter size, the unhandled kinds; a scrape
// within CacheFor of the last reuses its reading.
func TestMetricsQueueGauges(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) { testMetricsQueueGauges(t, sqliteEnv(t)) })
	t.Run("postgres", func(t *testing.T) { testMetricsQueueGauges(t, postgresEnv(t)) })
}

func testMetricsQueueGauges[TTx any](t *testing.T, e *testEnv[TTx]) {
	c := e.client(t, nil)
	h := errandhttp.NewMetrics(c, &errandhttp.MetricsOptions{Clock: e.clock, CacheFor: 5 * time.Second})
	enqueue(t, c, "ok", nil)
	enqueue(t, c, "ok", nil)
	enqueue(t, c, "fail", &errand.EnqueueOpts{Queue: "mail"})
	enqueue(t, c, "idle", &errand.EnqueueOpts{Queue: "mail", Delay: time.Hour})
	workOne(t, c, "mail", errand.ResultDead)
	e.clock.Advance(90 * time.Second)

	fams := scrape(t, h)
	wantSeries(t, fams, "errand_store_up", "", 1)
	wantSeries(t, fams, "errand_queue_jobs", "queue=default,state=queued", 2)
	wantSeries(t, fams, "errand_queue_jobs", "queue=default,state=dead", 0)
	wantSeries(t, fams, "errand_queue_jobs", "queue=mail,state=dead", 1)
	wantSeries(t, fams, "errand_queue_jobs", "queue=mail,state=queued", 1)
	wantSeries(t, fams, "errand_queue_jobs", "queue=mail,state=running", 0)
	wantSeries(t, fams, "errand_queue_oldest_ready_age_seconds", "queue=default", 90)
	wantSeries(t, fams, "errand_queue_oldest_ready_age_seconds", "queue=mail", 0) // scheduled: not ready
	// No worker is registered: every waiting kind is unhandled.
	wantSeries(t, fams, "errand_queue_unhandled_jobs", "queue=default,kind=ok", 2)
	wantSeries(t, fams, "errand_queue_unhandled_jobs", "queue=mail,kind=idle", 1)

	// Within CacheFor the database is not asked again.
	enqueue(t, c, "ok", nil)
	e.clock.Advance(time.Second)
	wantSeries(t, scrape(t, h), "errand_queue_jobs", "queue=default,state=queued", 2)
	e.clock.Advance(5 * time.Second)
	fams = scrape(t, h)
	wantSeries(t, fams, "errand_queue_jobs", "queue=default,state=queued", 3)
	wantSeries(t, fams, "errand_queue_oldest_ready_age_seconds", "queue=default", 96)

	wantSeries(t, fams, "errand_queue_paused", "queue=mail", 0)

	// What a pause holds back: every waiting job of a paused queue, the
	// waiting jobs of a paused kind elsewhere.
	ctx := context.Background()
	if _, _, err := c.Pause(ctx, errand.PauseTarget{Queue: "mail"}, "alice", "outage"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Pause(ctx, errand.PauseTarget{Kind: "ok"}, "alice", "bad deploy"); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(5 * time.Second)
	fams = scrape(t, h)
	wantSeries(t, fams, "errand_queue_paused", "queue=mail", 1)
	wantSeries(t, fams, "errand_queue_paused", "queue=default", 0)
	wantSeries(t, fams, "errand_queue_paused_jobs", "queue=mail,kind=idle", 1)
	wantSeries(t, fams, "errand_queue_paused_jobs", "queue=default,kind=ok", 3)

	// A database that does not answer: errand_store_up 0, no stale gauges.
	if err := e.store.Close(); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(5 * time.Second)
	fams = scrape(t, h)
	wantSeries(t, fams, "errand_store_up", "", 0)
	if _, ok := fams["errand_queue_jobs"]; ok {
		t.Error("errand_queue_jobs served while the database is closed")
	}
}

// The workflow gauges count the workflows of every state and say how long
// the open one unchanged the longest has waited, read from the database.
func TestMetricsWorkflowGauges(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) { testMetricsWorkflowGauges(t, sqliteEnv(t)) })
	t.Run("postgres", func(t *testing.T) { testMetricsWorkflowGauges(t, postgresEnv(t)) })
}

func testMetricsWorkflowGauges[TTx any](t *testing.T, e *testEnv[TTx]) {
	ctx := t.Context()
	c := e.client(t, nil)
	h := errandhttp.NewMetrics(c, &errandhttp.MetricsOptions{Clock: e.clock, CacheFor: 5 * time.Second})
	fams := scrape(t, h)
	for _, st := range []string{"running", "compensating", "succeeded", "failed"} {
		wantSeries(t, fams, "errand_workflows", "state="+st, 0)
	}
	for _, st := range []string{"running", "compensating"} {
		wantSeries(t, fams, "errand_workflow_stalled_seconds", "state="+st, 0)
	}
	for _, st := range []string{"succeeded", "failed"} {
		if _, ok := seriesValue(fams, "errand_workflow_stalled_seconds", "state="+st); ok {
			t.Errorf("errand_workflow_stalled_seconds{state=%s} served for a finished state", st)
		}
	}

	// w1's second step dies, so it compensates its first; w2 waits on a
	// kind nobody runs.
	if _, err := c.EnqueueWorkflow(ctx, []errand.WorkflowStep{
		{Name: "a", Args: errand.RawArgs{KindName: "ok"}, Compensate: errand.RawArgs{KindName: "ok"}},
		{Name: "b", Args: errand.RawArgs{KindName: "fail"}, DependsOn: []string{"a"}},
	}, &errand.WorkflowOpts{ID: "w1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.EnqueueWorkflow(ctx, []errand.WorkflowStep{
		{Name: "a", Args: errand.RawArgs{KindName: "idle"}, Opts: &errand.EnqueueOpts{Queue: "idle"}},
	}, &errand.WorkflowOpts{ID: "w2"}); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(10 * time.Second)
	workOne(t, c, errand.DefaultQueue, errand.ResultSucceeded)
	e.clock.Advance(10 * time.Second)
	workOne(t, c, errand.DefaultQueue, errand.ResultDead)
	if w, err := c.Workflow(ctx, "w1"); err != nil || w.State != errandtype.WorkflowCompensating {
		t.Fatalf("w1 = %+v (%v); want it compensating", w, err)
	}
	e.clock.Advance(30 * time.Second)
	fams = scrape(t, h)
	wantSeries(t, fams, "errand_workflows", "state=running", 1)
	wantSeries(t, fams, "errand_workflows", "state=compensating", 1)
	wantSeries(t, fams, "errand_workflow_stalled_seconds", "state=running", 50)
	wantSeries(t, fams, "errand_workflow_stalled_seconds", "state=compensating", 30)

	// The compensation runs: w1 is failed.
	workOne(t, c, errand.DefaultQueue, errand.ResultSucceeded)
	e.clock.Advance(5 * time.Second)
	fams = scrape(t, h)
	wantSeries(t, fams, "errand_workflows", "state=running", 1)
	wantSeries(t, fams, "errand_workflows", "state=compensating", 0)
	wantSeries(t, fams, "errand_workflows", "state=failed", 1)
	wantSeries(t, fams, "errand_workflows", "state=succeeded", 0)
	wantSeries(t, fams, "errand_workflow_stalled_seconds", "state=compensating", 0)
}
