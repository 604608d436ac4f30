package postgres_test

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/postgres"
	"github.com/errandhq/errand/postgres/pgtest"
)

// insertArgs are the args of the enqueue benchmarks: a small typed payload,
// encoded by the client as an application's args are.
type insertArgs struct {
	EnqueuedAt int64 `json:"enqueued_at"`
}

func (insertArgs) Kind() string { return "noop" }

// BenchmarkInsertMany measures a client's bulk enqueue: per operation, one
// Client.EnqueueMany of 1,000 new jobs, so that the client's own work per
// job (args encoding, validation, ids) is inside with the store's insert.
// jobs/s is the figure to compare; cpu-ns/job, this process's CPU time
// per job (the client's only, not the server's), is steadier on a shared
// machine:
//
//	ERRAND_TEST_POSTGRES_URL=... go test -run '^$' -bench InsertMany -count 6 ./postgres/
func BenchmarkInsertMany(b *testing.B) {
	const batch = 1000
	ctx := context.Background()
	url := pgtest.URL(b)
	s, err := postgres.Open(ctx, url, &postgres.Options{Schema: pgtest.Schema(b, url), MaxConns: 4})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	c, err := errand.NewClient(s, &errand.Config{})
	if err != nil {
		b.Fatal(err)
	}
	ps := make([]errand.EnqueueParams, batch)
	cpu0 := cpuTime()
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
	b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/float64(b.N*batch), "cpu-ns/job")
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
