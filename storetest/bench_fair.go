package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/errandhq/errand/errandstore"
)

// BenchmarkClaimFair measures a fair claim ([errandstore.FairClaimer]) of
// limit=n jobs from a queue where one key has a backlog of 10,000 jobs and
// ten other keys one job each, kept at that size: the claimed jobs are
// acknowledged and as many new jobs of the same keys inserted with the
// timer stopped. A fair claim reads each key's first n jobs only, so its
// cost must not grow with the backlog:
//
//	go test -run '^$' -bench ClaimFair ./sqlite/ ./postgres/
func BenchmarkClaimFair[S errandstore.Store](b *testing.B, open func(testing.TB) S) {
	for _, n := range []int{1, 10} {
		b.Run(fmt.Sprintf("limit=%d", n), func(b *testing.B) {
			s := open(b)
			f, ok := any(s).(errandstore.FairClaimer)
			if !ok {
				b.Skip("the store is not an errandstore.FairClaimer")
			}
			ctx := context.Background()
			seq := 0
			fairJobs := func(key string, count int) []*errandstore.JobInsertParams {
				js := benchJobs("work", &seq, count)
				for _, j := range js {
					j.FairnessKey = key
				}
				return js
			}
			for range 10 {
				if _, err := s.JobInsertMany(ctx, &errandstore.JobInsertManyParams{Jobs: fairJobs("hot", 1000)}); err != nil {
					b.Fatal(err)
				}
			}
			for i := range 10 {
				if _, err := s.JobInsertMany(ctx, &errandstore.JobInsertManyParams{Jobs: fairJobs(fmt.Sprintf("t%d", i), 1)}); err != nil {
					b.Fatal(err)
				}
			}
			var elapsed time.Duration
			for b.Loop() {
				start := time.Now()
				jobs, err := f.JobClaimFair(ctx, &errandstore.JobClaimParams{
					Queues: []string{"work"}, Limit: n, Lease: time.Minute, Owner: "bench",
				})
				elapsed += time.Since(start)
				if err != nil {
					b.Fatal(err)
				}
				if len(jobs) != n {
					b.Fatalf("claimed %d jobs, want %d", len(jobs), n)
				}
				b.StopTimer()
				outcomes := make([]*errandstore.JobOutcome, n)
				var again []*errandstore.JobInsertParams
				for i, j := range jobs {
					outcomes[i] = &errandstore.JobOutcome{
						JobLease: errandstore.JobLease{ID: j.ID, LeaseToken: *j.LeaseToken},
						Kind:     errandstore.OutcomeSucceeded,
					}
					again = append(again, fairJobs(*j.FairnessKey, 1)...)
				}
				if _, err := s.JobRecordOutcomes(ctx, &errandstore.JobRecordOutcomesParams{Outcomes: outcomes}); err != nil {
					b.Fatal(err)
				}
				if _, err := s.JobInsertMany(ctx, &errandstore.JobInsertManyParams{Jobs: again}); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			b.ReportMetric(float64(elapsed.Microseconds())/float64(b.N)/1000, "ms/claim")
		})
	}
}
