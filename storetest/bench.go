package storetest

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/internal/cputime"
)

// The hot-path benchmarks below time one step of a job's life each, the
// same way on every store: a client's single enqueue, a worker's claim, and
// the acknowledgment of what it claimed, with whatever the step needs done
// first outside the timer. Each reports jobs/s beside ns/op, so benchstat
// compares both. A store's test file calls them with a function that opens
// a fresh, empty store:
//
//	func BenchmarkClaimOnly(b *testing.B) { storetest.BenchmarkClaimOnly(b, openBench) }

// BenchmarkEnqueueOne enqueues one job per operation through the client,
// as an application does: each is its own transaction.
func BenchmarkEnqueueOne[TTx any](b *testing.B, open func(testing.TB) errandstore.TxStore[TTx]) {
	ctx := context.Background()
	c, err := errand.NewClient(open(b), &errand.Config{Kinds: errand.NewKinds()})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	args := errand.RawArgs{KindName: "noop", JSON: []byte(`{}`)}
	start := time.Now()
	for b.Loop() {
		if _, err := c.Enqueue(ctx, args, nil); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "jobs/s")
}

// BenchmarkClaimOnly claims jobs=n queued jobs in one JobClaimMany per
// operation; the jobs are inserted, and acknowledged afterwards, with the
// timer stopped.
func BenchmarkClaimOnly[S errandstore.Store](b *testing.B, open func(testing.TB) S) {
	for _, n := range []int{1, 100} {
		b.Run(fmt.Sprintf("jobs=%d", n), func(b *testing.B) {
			benchStep(b, open(b), n, true)
		})
	}
}

// BenchmarkAckOnly records jobs=n outcomes (succeeded) in one
// JobRecordOutcomes per operation; the jobs are inserted and claimed with
// the timer stopped.
func BenchmarkAckOnly[S errandstore.Store](b *testing.B, open func(testing.TB) S) {
	for _, n := range []int{1, 100} {
		b.Run(fmt.Sprintf("jobs=%d", n), func(b *testing.B) {
			benchStep(b, open(b), n, false)
		})
	}
}

// BenchmarkInsertClaim inserts one job claiming it at once per operation,
// as an eager enqueue does (errandstore.InsertClaimer), each acknowledged
// afterwards with the timer stopped so that the table holds no more than a
// few running jobs.
func BenchmarkInsertClaim[S errandstore.Store](b *testing.B, open func(testing.TB) S) {
	ctx := context.Background()
	s := open(b)
	ic, ok := any(s).(errandstore.InsertClaimer)
	if !ok {
		b.Skip("the store is not an InsertClaimer")
	}
	seq := 0
	var elapsed time.Duration
	for b.Loop() {
		p := benchJobs("eager", &seq, 1)[0]
		start := time.Now()
		r, claimed, err := ic.JobInsertClaim(ctx, &errandstore.JobInsertClaimParams{Job: p, Claim: errandstore.JobClaimParams{
			Queues: []string{"eager"}, Limit: 1, Lease: time.Minute, Owner: "bench"}})
		if err != nil || !claimed {
			b.Fatalf("JobInsertClaim: claimed %v, err %v", claimed, err)
		}
		elapsed += time.Since(start)
		b.StopTimer()
		rs, err := s.JobRecordOutcomes(ctx, &errandstore.JobRecordOutcomesParams{Outcomes: []*errandstore.JobOutcome{{
			JobLease: errandstore.JobLease{ID: r.Job.ID, LeaseToken: *r.Job.LeaseToken}, Kind: errandstore.OutcomeSucceeded}}})
		if err != nil || rs[0].Err != nil {
			b.Fatalf("JobRecordOutcomes: %v, %v", err, rs)
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "jobs/s")
}

// benchStep inserts, claims and acknowledges n jobs per operation and times
// only the claim (timeClaim) or only the acknowledgment.
func benchStep(b *testing.B, s errandstore.Store, n int, timeClaim bool) {
	ctx := context.Background()
	seq := 0
	var elapsed time.Duration
	for b.Loop() {
		b.StopTimer()
		if _, err := s.JobInsertMany(ctx, &errandstore.JobInsertManyParams{Jobs: benchJobs("work", &seq, n)}); err != nil {
			b.Fatal(err)
		}
		if timeClaim {
			b.StartTimer()
		}
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
		if timeClaim {
			elapsed += time.Since(start)
			b.StopTimer()
		}
		outcomes := make([]*errandstore.JobOutcome, n)
		for i, j := range jobs {
			outcomes[i] = &errandstore.JobOutcome{
				JobLease: errandstore.JobLease{ID: j.ID, LeaseToken: *j.LeaseToken},
				Kind:     errandstore.OutcomeSucceeded,
			}
		}
		if !timeClaim {
			b.StartTimer()
		}
		start = time.Now()
		rs, err := s.JobRecordOutcomes(ctx, &errandstore.JobRecordOutcomesParams{Outcomes: outcomes})
		if err != nil {
			b.Fatal(err)
		}
		if !timeClaim {
			elapsed += time.Since(start)
		}
		for _, r := range rs {
			if r.Err != nil {
				b.Fatal(r.Err)
			}
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(b.N*n)/elapsed.Seconds(), "jobs/s")
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

// insertArgs are the args of BenchmarkInsertMany: a small typed payload,
// encoded by the client as an application's args are.
type insertArgs struct {
	EnqueuedAt int64 `json:"enqueued_at"`
}

func (insertArgs) Kind() string { return "noop" }

// BenchmarkInsertMany measures a client's bulk enqueue: per operation, one
// Client.EnqueueMany of 1,000 new jobs, so that the client's own work per
// job (args encoding, validation, ids) is inside with the store's insert.
// jobs/s is the figure to compare; cpu-ns/job, this process's CPU time per
// job (the client's only, not a database server's), is steadier on a
// shared machine. It is reported where the platform tells a process its
// CPU time.
func BenchmarkInsertMany[TTx any](b *testing.B, open func(testing.TB) errandstore.TxStore[TTx]) {
	const batch = 1000
	ctx := context.Background()
	c, err := errand.NewClient(open(b), &errand.Config{})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	ps := make([]errand.EnqueueParams, batch)
	cpu0, cpuOK := cputime.Process()
	start := time.Now()
	for b.Loop() {
		for i := range ps {
			ps[i] = errand.EnqueueParams{Args: insertArgs{EnqueuedAt: int64(i)}}
		}
		if _, err := c.EnqueueMany(ctx, ps); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*batch)/time.Since(start).Seconds(), "jobs/s")
	if cpu1, ok := cputime.Process(); ok && cpuOK {
		b.ReportMetric(float64((cpu1-cpu0).Nanoseconds())/float64(b.N*batch), "cpu-ns/job")
	}
}
