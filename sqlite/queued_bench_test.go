package sqlite_test

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/errandhq/errand/errandstore"
)

// BenchmarkWorkQueued claims jobs=100 ready jobs and records their
// outcomes, per operation, from a queue that holds queued= ready jobs:
// the jobs claimed are replaced, with the timer stopped, so that every
// claim meets the same depth. A claim walks the claim index to its first
// jobs, so the rate should not depend on the depth (issue 10: within 1.2x
// between 20,000 and 80,000). Compare the two depths in one run:
//
//	go test -run '^$' -bench WorkQueued -benchtime 200x -count 6 ./sqlite/
func BenchmarkWorkQueued(b *testing.B) {
	const n = 100
	for _, queued := range []int{20000, 80000} {
		b.Run(fmt.Sprintf("jobs=%d/queued=%d", n, queued), func(b *testing.B) {
			ctx := context.Background()
			s := openBench(b)
			seq := 0
			for left := queued; left > 0; left -= 1000 {
				if _, err := s.JobInsertMany(ctx, &errandstore.JobInsertManyParams{Jobs: benchJobs("work", &seq, min(left, 1000))}); err != nil {
					b.Fatal(err)
				}
			}
			var elapsed time.Duration
			cpu := time.Duration(0)
			for b.Loop() {
				start, cpu0 := time.Now(), cpuTime()
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
				cpu += cpuTime() - cpu0
				b.StopTimer()
				if _, err := s.JobInsertMany(ctx, &errandstore.JobInsertManyParams{Jobs: benchJobs("work", &seq, n)}); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			b.ReportMetric(float64(b.N*n)/elapsed.Seconds(), "jobs/s")
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N*n), "cpu-ns/job")
		})
	}
}

// cpuTime is the CPU time this process has used, user and system: on a
// shared machine a steadier figure than elapsed time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
