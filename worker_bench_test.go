package errand_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
	"github.com/errandhq/errand/internal/cputime"
	"github.com/errandhq/errand/postgres"
	"github.com/errandhq/errand/postgres/pgtest"
	"github.com/errandhq/errand/sqlite"
)

// BenchmarkWorkerDrain measures a Worker working through b.N queued no-op
// jobs on SQLite (synchronous=FULL, the default), with outcomes batched and,
// for comparison, written one per transaction as before batching, and
// batched deleting the jobs (KindOpts.DeleteOnSuccess). ns/op is
// per job. Run with a fixed count so that every variant drains the same
// backlog:
//
//	go test -run '^$' -bench WorkerDrain -benchtime 3000x -count 3 .
func BenchmarkWorkerDrain(b *testing.B) {
	for _, concurrency := range []int{10, 100} {
		for _, outcomes := range []string{"single", "batched", "deleting"} {
			b.Run(fmt.Sprintf("concurrency=%d/outcomes=%s", concurrency, outcomes), func(b *testing.B) {
				s, err := sqlite.Open(context.Background(), filepath.Join(b.TempDir(), "bench.db"), nil)
				if err != nil {
					b.Fatal(err)
				}
				defer s.Close()
				benchWorkerDrain(b, s, concurrency, outcomes != "single", &errand.KindOpts{DeleteOnSuccess: outcomes == "deleting"})
			})
		}
	}
}

// BenchmarkWorkerDrainPostgres is BenchmarkWorkerDrain on a fresh schema of
// the database ERRAND_TEST_POSTGRES_URL names, with a pool of 4 and
// outcomes batched, at the concurrencies bench/ compares, keeping the
// succeeded jobs and deleting them (KindOpts.DeleteOnSuccess):
//
//	go test -run '^$' -bench WorkerDrainPostgres -benchtime 20000x -benchmem -count 6 .
func BenchmarkWorkerDrainPostgres(b *testing.B) {
	for _, deleting := range []bool{false, true} {
		for _, concurrency := range []int{10, 100, 1000, 2000} {
			b.Run(fmt.Sprintf("deleting=%t/concurrency=%d", deleting, concurrency), func(b *testing.B) {
				url := pgtest.URL(b)
				s, err := postgres.Open(context.Background(), url, &postgres.Options{Schema: pgtest.Schema(b, url), MaxConns: 4})
				if err != nil {
					b.Fatal(err)
				}
				defer s.Close()
				benchWorkerDrain(b, s, concurrency, true, &errand.KindOpts{DeleteOnSuccess: deleting})
			})
		}
	}
}

// benchWorkerDrain drains b.N no-op jobs of a kind with opts.
func benchWorkerDrain[TX any](b *testing.B, s errandstore.TxStore[TX], concurrency int, batched bool, opts *errand.KindOpts) {
	ctx := context.Background()
	kinds := errand.NewKinds()
	kinds.HandleRaw("noop", errand.HandlerFunc(func(context.Context, *errandtype.Job) error { return nil }), opts)
	c, err := errand.NewClient(s, &errand.Config{Kinds: kinds})
	if err != nil {
		b.Fatal(err)
	}
	for left := b.N; left > 0; {
		n := min(left, 1000)
		ps := make([]errand.EnqueueParams, n)
		for i := range ps {
			ps[i] = errand.EnqueueParams{Args: errand.RawArgs{KindName: "noop"}}
		}
		if _, err := c.EnqueueMany(ctx, ps); err != nil {
			b.Fatal(err)
		}
		left -= n
	}
	w, err := c.NewWorker(&errand.WorkerConfig{Queues: map[string]int{errand.DefaultQueue: concurrency}})
	if err != nil {
		b.Fatal(err)
	}
	if !batched {
		errand.UnbatchOutcomes(w)
	}

	b.ReportAllocs()
	cpu0, cpuOK := cputime.Process()
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
	cpu1, ok := cputime.Process()

	if err := w.Stop(ctx); err != nil {
		b.Fatal(err)
	}
	st := w.Stats()
	if st.JobsCompleted != int64(b.N) || st.LeasesLost != 0 {
		b.Fatalf("stats %+v, want %d jobs completed and no lease lost", st, b.N)
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "jobs/s")
	b.ReportMetric(float64(st.JobsCompleted)/float64(st.OutcomeWrites), "jobs/write")
	b.ReportMetric(float64(st.JobsCompleted)/float64(st.Claims-st.IdleClaims), "jobs/claim")
	if cpuOK && ok {
		// The process's CPU per job: on PostgreSQL the worker's alone,
		// the server being another process; on SQLite the store's too.
		b.ReportMetric(float64((cpu1-cpu0).Nanoseconds())/1000/float64(b.N), "cpu-µs/job")
	}
}
