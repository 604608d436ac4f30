package sqlite_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/sqlite"
)

// The benchmarks below measure the store's hot path: enqueueing, and a
// worker's claim of a batch followed by the batch's outcomes. They use
// synchronous=NORMAL, so that the statements' CPU, not the disk's flush,
// decides the result; jobs/s is the figure to compare. Compare two versions
// by running them alternately in one session and summarising with
// benchstat:
//
//	go test -run '^$' -bench 'JobInsertMany|ClaimAndRecord' -count 6 ./sqlite/

// BenchmarkJobInsertMany inserts jobs=n new jobs per JobInsertMany.
func BenchmarkJobInsertMany(b *testing.B) {
	for _, n := range []int{1, 100} {
		b.Run(fmt.Sprintf("jobs=%d", n), func(b *testing.B) {
			ctx := context.Background()
			s := openBench(b)
			seq := 0
			start := time.Now()
			for b.Loop() {
				if _, err := s.JobInsertMany(ctx, &errandstore.JobInsertManyParams{Jobs: benchJobs("work", &seq, n)}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*n)/time.Since(start).Seconds(), "jobs/s")
		})
	}
}

// BenchmarkClaimAndRecord claims jobs=100 jobs in one JobClaimMany and
// records their 100 outcomes (succeeded) in one JobRecordOutcomes, per
// operation. The jobs are inserted with the timer stopped. backlog= jobs
// wait in another queue, with a deadline and not yet due, as a large queue
// does: a claim should not pay for them.
func BenchmarkClaimAndRecord(b *testing.B) {
	const n = 100
	for _, backlog := range []int{0, 20000} {
		b.Run(fmt.Sprintf("jobs=%d/backlog=%d", n, backlog), func(b *testing.B) {
			ctx := context.Background()
			s := openBench(b)
			seq := 0
			for left := backlog; left > 0; left -= 1000 {
				jobs := benchJobs("backlog", &seq, min(left, 1000))
				for _, j := range jobs {
					j.Delay, j.MaxAge = time.Hour, 2*time.Hour
				}
				if _, err := s.JobInsertMany(ctx, &errandstore.JobInsertManyParams{Jobs: jobs}); err != nil {
					b.Fatal(err)
				}
			}
			var elapsed time.Duration
			for b.Loop() {
				b.StopTimer()
				if _, err := s.JobInsertMany(ctx, &errandstore.JobInsertManyParams{Jobs: benchJobs("work", &seq, n)}); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				start := time.Now()
				jobs, err := s.JobClaimMany(ctx, &errandstore.JobClaimParams{
					Queues: []string{"work"}, Limit: n, Lease: time.Minute, Owner: "bench",
				})
				if err != nil {
					b.Fatal(err)
				}
				if len(jobs) != n {
					b.Fatalf("claimed %d jobs, want %d", len(jobs), n)
				}
				outcomes := make([]*errandstore.JobOutcome, n)
				for i, j := range jobs {
					outcomes[i] = &errandstore.JobOutcome{
						JobLease: errandstore.JobLease{ID: j.ID, LeaseToken: *j.LeaseToken},
						Kind:     errandstore.OutcomeSucceeded,
					}
				}
				rs, err := s.JobRecordOutcomes(ctx, &errandstore.JobRecordOutcomesParams{Outcomes: outcomes})
				if err != nil {
					b.Fatal(err)
				}
				for _, r := range rs {
					if r.Err != nil {
						b.Fatal(r.Err)
					}
				}
				elapsed += time.Since(start)
			}
			b.ReportMetric(float64(b.N*n)/elapsed.Seconds(), "jobs/s")
		})
	}
}

func openBench(b testing.TB) *sqlite.Store {
	b.Helper()
	s, err := sqlite.Open(context.Background(), filepath.Join(b.TempDir(), "bench.db"),
		&sqlite.Options{Synchronous: "NORMAL"})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

// benchJobs returns n new no-op jobs for queue, numbering their ids from
// *seq on.
func benchJobs(queue string, seq *int, n int) []*errandstore.JobInsertParams {
	jobs := make([]*errandstore.JobInsertParams, n)
	for i := range jobs {
		*seq++
		jobs[i] = &errandstore.JobInsertParams{
			ID: fmt.Sprintf("job-%08d", *seq), Queue: queue, Kind: "noop",
			Args: json.RawMessage(`{}`), ArgsVersion: 1, MaxAttempts: 25,
		}
	}
	return jobs
}
