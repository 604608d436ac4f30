package errandhttp_test

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandhttp"
	"github.com/errandhq/errand/errandtype"
	"github.com/errandhq/errand/sqlite"
)

// A real worker works real jobs, one of each outcome, and /metrics counts
// them: enqueued, started, finished by outcome, failures by class, lease
// losses, and the run time of a job that takes 3s on the fake clock.
func TestMetricsCounters(t *testing.T) {
	ctx := t.Context()
	e := sqliteEnv(t)
	st := e.store.(interface{ DB() *sql.DB })
	obs := errandhttp.NewMetricsObserver()
	kinds := errand.NewKinds()
	handle := func(kind string, f func(ctx context.Context, job *errandtype.Job) error) {
		kinds.HandleRaw(kind, errand.HandlerFunc(f), nil)
	}
	handle("ok", func(context.Context, *errandtype.Job) error { return nil })
	handle("digest", func(context.Context, *errandtype.Job) error { return nil })
	handle("fail", func(context.Context, *errandtype.Job) error { return errand.Permanent(errors.New("card declined")) })
	handle("flaky", func(context.Context, *errandtype.Job) error {
		return errand.RetryAfter(time.Hour, errand.WithClass("receipt_unavailable", errors.New("try later")))
	})
	handle("nap", func(context.Context, *errandtype.Job) error { return errand.Snooze(time.Hour) })
	handle("slow", func(context.Context, *errandtype.Job) error {
		e.clock.Advance(3 * time.Second)
		return nil
	})
	handle("stolen", func(ctx context.Context, job *errandtype.Job) error {
		// Another worker took the job over: the token this one holds is stale.
		_, err := st.DB().ExecContext(ctx, `UPDATE errand_jobs SET lease_token = 'taken' WHERE id = ?`, job.ID)
		return err
	})
	c, err := errand.NewClient(e.store, &errand.Config{Kinds: kinds, Clock: e.clock, Observer: obs})
	if err != nil {
		t.Fatal(err)
	}
	h := errandhttp.NewMetrics(c, &errandhttp.MetricsOptions{Observer: obs, Clock: e.clock})

	events, cancel := c.Subscribe()
	defer cancel()
	all := []string{"ok", "ok", "fail", "flaky", "nap", "slow", "stolen"}
	for _, kind := range all {
		enqueue(t, c, kind, nil)
	}
	enqueue(t, c, "ok", &errand.EnqueueOpts{Queue: "mail"}) // not worked: the worker runs default only
	enqueue(t, c, "ok", &errand.EnqueueOpts{ID: "twice"})
	all = append(all, "ok")
	enqueue(t, c, "ok", &errand.EnqueueOpts{ID: "twice"}) // a duplicate: not counted
	// A debounced digest absorbs two later enqueues, one in a transaction:
	// counted as absorbed when it commits, not as enqueued.
	digest := &errand.EnqueueOpts{Debounce: &errand.DebounceOpts{Key: "user:1", Window: time.Hour}}
	enqueue(t, c, "digest", digest)
	enqueue(t, c, "digest", digest)
	if err := c.InTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
		_, err := c.EnqueueTx(ctx, tx, errand.RawArgs{KindName: "digest"}, digest)
		return err
	}); err != nil {
		t.Fatal(err)
	}

	w, err := c.NewWorker(&errand.WorkerConfig{PollInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer w.Stop(context.Background())
	for range all {
		select {
		case <-events:
		case <-time.After(30 * time.Second):
			t.Fatalf("the worker did not finish all %d jobs", len(all))
		}
	}

	fams := scrape(t, h)
	wantSeries(t, fams, "errand_jobs_enqueued_total", "queue=default,kind=ok", 3)
	wantSeries(t, fams, "errand_jobs_enqueued_total", "queue=mail,kind=ok", 1)
	wantSeries(t, fams, "errand_jobs_enqueued_total", "queue=default,kind=stolen", 1)
	wantSeries(t, fams, "errand_jobs_enqueued_total", "queue=default,kind=digest", 1)
	wantSeries(t, fams, "errand_jobs_absorbed_total", "queue=default,kind=digest", 2)
	wantSeries(t, fams, "errand_jobs_absorbed_total", "queue=default,kind=ok", 0)
	wantSeries(t, fams, "errand_jobs_started_total", "queue=default,kind=ok", 3)
	wantSeries(t, fams, "errand_jobs_started_total", "queue=default,kind=fail", 1)
	if _, ok := seriesValue(fams, "errand_jobs_started_total", "queue=mail,kind=ok"); ok {
		t.Error("errand_jobs_started_total counts a job of a queue the worker does not run")
	}
	for _, c := range []struct{ kind, outcome string }{
		{"ok", "succeeded"}, {"fail", "dead"}, {"flaky", "retrying"}, {"nap", "snoozed"},
		{"slow", "succeeded"}, {"stolen", "lease_lost"},
	} {
		want := 1.0
		if c.kind == "ok" {
			want = 3
		}
		wantSeries(t, fams, "errand_jobs_finished_total", "queue=default,kind="+c.kind+",outcome="+c.outcome, want)
	}
	wantSeries(t, fams, "errand_job_failures_total", "queue=default,kind=fail,class=permanent,outcome=dead", 1)
	wantSeries(t, fams, "errand_job_failures_total", "queue=default,kind=flaky,class=receipt_unavailable,outcome=retrying", 1)
	if n := len(fams["errand_job_failures_total"].GetMetric()); n != 2 {
		t.Errorf("errand_job_failures_total has %d series, want 2 (no failure counted for a success, snooze or lease loss)", n)
	}
	wantSeries(t, fams, "errand_job_run_seconds", "queue=default,kind=ok", 3)
	slow := histogram(t, fams, "errand_job_run_seconds", "slow")
	if slow.GetSampleCount() != 1 || slow.GetSampleSum() != 3 {
		t.Errorf("run time of slow: %d samples summing %vs, want 1 of 3s", slow.GetSampleCount(), slow.GetSampleSum())
	}
	for _, b := range slow.GetBucket() {
		want := uint64(0)
		if b.GetUpperBound() >= 3 {
			want = 1
		}
		if b.GetCumulativeCount() != want {
			t.Errorf("run time of slow: bucket le=%v holds %d, want %d", b.GetUpperBound(), b.GetCumulativeCount(), want)
		}
	}
}

// histogram returns the run-time histogram of one kind of queue default.
func histogram(t *testing.T, fams map[string]*dto.MetricFamily, name, kind string) *dto.Histogram {
	t.Helper()
	for _, m := range fams[name].GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		if labels["queue"] == "default" && labels["kind"] == kind {
			return m.GetHistogram()
		}
	}
	t.Fatalf("%s has no series of kind %s", name, kind)
	return nil
}

// BenchmarkMetricsObserver measures what the observer adds to one attempt:
// its start and its finish.
func BenchmarkMetricsObserver(b *testing.B) {
	obs := errandhttp.NewMetricsObserver()
	job := &errandtype.Job{Queue: "default", Kind: "send_receipt"}
	res := &errand.WorkResult{Result: errand.ResultSucceeded, Duration: 3 * time.Millisecond}
	b.ReportAllocs()
	for b.Loop() {
		obs.JobStarted(job)
		obs.JobFinished(job, res)
	}
}

// BenchmarkWorkerDrainObserved drains b.N queued no-op jobs with a Worker
// on SQLite, without an observer and with a MetricsObserver, to show what
// the counters cost a worker. ns/op is per job:
//
//	go test -run '^$' -bench WorkerDrainObserved -benchtime 3000x -count 3 ./errandhttp
func BenchmarkWorkerDrainObserved(b *testing.B) {
	for _, observed := range []bool{false, true} {
		name := "observer=none"
		if observed {
			name = "observer=metrics"
		}
		b.Run(name, func(b *testing.B) {
			ctx := context.Background()
			st, err := sqlite.Open(ctx, filepath.Join(b.TempDir(), "bench.db"), nil)
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			kinds := errand.NewKinds()
			kinds.HandleRaw("noop", errand.HandlerFunc(func(context.Context, *errandtype.Job) error { return nil }), nil)
			cfg := &errand.Config{Kinds: kinds}
			if observed {
				cfg.Observer = errandhttp.NewMetricsObserver()
			}
			c, err := errand.NewClient(st, cfg)
			if err != nil {
				b.Fatal(err)
			}
			for left := b.N; left > 0; {
				ps := make([]errand.EnqueueParams, min(left, 1000))
				for i := range ps {
					ps[i] = errand.EnqueueParams{Args: errand.RawArgs{KindName: "noop"}}
				}
				if _, err := c.EnqueueMany(ctx, ps); err != nil {
					b.Fatal(err)
				}
				left -= len(ps)
			}
			w, err := c.NewWorker(&errand.WorkerConfig{Queues: map[string]int{errand.DefaultQueue: 100}})
			if err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			start := time.Now()
			if err := w.Start(ctx); err != nil {
				b.Fatal(err)
			}
			for w.Stats().JobsCompleted < int64(b.N) {
				time.Sleep(100 * time.Microsecond)
			}
			elapsed := time.Since(start)
			b.StopTimer()
			if err := w.Stop(ctx); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "jobs/s")
		})
	}
}
