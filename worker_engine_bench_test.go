package errand_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
	"github.com/errandhq/errand/internal/cputime"
	"github.com/errandhq/errand/sqlite"
)

// BenchmarkWorkerEngine measures a Worker's own cost per job, with no
// database in the way: a store that hands out b.N no-op jobs from memory
// and records their outcomes at once, everything else going to a real
// SQLite store. cpu-µs/job is the process's CPU time per job, the figure
// to compare between versions: on two cores the worker's CPU is taken
// from the database's. (No pause stands in for a write's round trip: a
// sleep of 200 µs took 1.2 ms on this project's machines.)
//
//	go test -run '^$' -bench WorkerEngine -benchtime 100000x -benchmem -count 6 .
func BenchmarkWorkerEngine(b *testing.B) {
	for _, concurrency := range []int{10, 100, 1000} {
		b.Run(fmt.Sprintf("concurrency=%d", concurrency), func(b *testing.B) {
			ctx := context.Background()
			st, err := sqlite.Open(ctx, filepath.Join(b.TempDir(), "engine.db"), nil)
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			s := &memoryJobs{TxStore: st, left: b.N}
			c, err := errand.NewClient(errandstore.TxStore[*sql.Tx](s), &errand.Config{Kinds: kindsOf([]testKind{{
				Name:    "noop",
				Handler: errand.HandlerFunc(func(context.Context, *errandtype.Job) error { return nil }),
			}})})
			if err != nil {
				b.Fatal(err)
			}
			w, err := c.NewWorker(&errand.WorkerConfig{Queues: map[string]int{errand.DefaultQueue: concurrency}})
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			cpu0, cpuOK := cputime.Process()
			b.ResetTimer()
			if err := w.Start(ctx); err != nil {
				b.Fatal(err)
			}
			for w.Stats().JobsCompleted < int64(b.N) {
				time.Sleep(time.Millisecond)
			}
			b.StopTimer()
			cpu1, ok := cputime.Process()
			if err := w.Stop(ctx); err != nil {
				b.Fatal(err)
			}
			stats := w.Stats()
			if stats.JobsCompleted != int64(b.N) || stats.LeasesLost != 0 {
				b.Fatalf("stats %+v, want %d jobs completed and no lease lost", stats, b.N)
			}
			b.ReportMetric(float64(stats.JobsCompleted)/float64(stats.OutcomeWrites), "jobs/write")
			b.ReportMetric(float64(stats.JobsCompleted)/float64(stats.Claims-stats.IdleClaims), "jobs/claim")
			if cpuOK && ok {
				b.ReportMetric(float64((cpu1-cpu0).Nanoseconds())/1000/float64(b.N), "cpu-µs/job")
			}
		})
	}
}

// memoryJobs answers a worker's claims, outcomes and heartbeats from
// memory; every other call goes to the store underneath. Embedding the
// interface hides the store's optional capabilities (wake-ups, claims that
// ask when the next job is due), so the worker claims and polls plainly.
type memoryJobs struct {
	errandstore.TxStore[*sql.Tx]
	mu   sync.Mutex
	left int // jobs not claimed yet
	next int // the next job's number
}

func (s *memoryJobs) JobClaimMany(ctx context.Context, p *errandstore.JobClaimParams) ([]*errandtype.Job, error) {
	s.mu.Lock()
	n := min(p.Limit, s.left)
	s.left -= n
	first := s.next
	s.next += n
	s.mu.Unlock()
	now := time.Now()
	until := now.Add(p.Lease)
	jobs := make([]*errandtype.Job, n)
	for i := range jobs {
		token, owner := "token-"+strconv.Itoa(first+i), p.Owner
		jobs[i] = &errandtype.Job{ID: "job-" + strconv.Itoa(first+i), Queue: p.Queues[0], Kind: "noop",
			Args: json.RawMessage(`{}`), ArgsVersion: 1, State: errandtype.StateRunning, Attempt: 1, MaxAttempts: 25,
			AvailableAt: now, CreatedAt: now, AttemptedAt: &now, LeaseToken: &token, LeaseUntil: &until, LeaseOwner: &owner}
	}
	return jobs, nil
}

func (s *memoryJobs) JobRecordOutcomes(ctx context.Context, p *errandstore.JobRecordOutcomesParams) ([]errandstore.OutcomeResult, error) {
	rs := make([]errandstore.OutcomeResult, len(p.Outcomes))
	now := time.Now()
	for i := range rs {
		rs[i] = errandstore.OutcomeResult{State: errandtype.StateSucceeded, AvailableAt: now}
	}
	return rs, nil
}

func (s *memoryJobs) JobHeartbeatMany(ctx context.Context, p *errandstore.JobHeartbeatParams) ([]errandstore.HeartbeatResult, error) {
	rs := make([]errandstore.HeartbeatResult, len(p.Leases))
	until := time.Now().Add(p.Lease)
	for i := range rs {
		rs[i] = errandstore.HeartbeatResult{LeaseUntil: until}
	}
	return rs, nil
}

func (s *memoryJobs) JobNextDue(ctx context.Context, p *errandstore.JobNextDueParams) (errandstore.JobNextDueResult, error) {
	return errandstore.JobNextDueResult{}, nil
}
