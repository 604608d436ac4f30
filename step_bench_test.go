package errand_test

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
	"github.com/errandhq/errand/postgres"
	"github.com/errandhq/errand/postgres/pgtest"
)

// BenchmarkStep measures one step of a durable handler, per store: a step
// run and recorded ("record"), the same step returned from the record by a
// later attempt ("recorded"), and the plain function call it wraps
// ("plain"). Each job runs 100 steps; p50-µs/step is the median of every
// step timed alone.
//
//	go test -run '^$' -bench 'Step$' -benchtime 2000x .
func BenchmarkStep(b *testing.B) {
	stores := map[string]func(b *testing.B) errandstore.TxStore[*sql.Tx]{
		"sqlite": func(b *testing.B) errandstore.TxStore[*sql.Tx] { return openStore(b, nil) },
		"postgres": func(b *testing.B) errandstore.TxStore[*sql.Tx] {
			url := pgtest.URL(b)
			s, err := postgres.Open(context.Background(), url, &postgres.Options{Schema: pgtest.Schema(b, url), MaxConns: 4})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { s.Close() })
			return s.SQL(nil)
		},
	}
	for _, name := range []string{"sqlite", "postgres"} {
		for _, mode := range []string{"record", "recorded", "plain"} {
			b.Run(name+"/"+mode, func(b *testing.B) { benchStep(b, stores[name](b), mode) })
		}
	}
}

const stepsPerJob = 100

func benchStep(b *testing.B, st errandstore.TxStore[*sql.Tx], mode string) {
	ctx := context.Background()
	var timing, firstPass atomic.Bool
	var took []time.Duration
	c := handlerClient(b, st, func(ctx context.Context, j *errandtype.Job) error {
		for i := range stepsPerJob {
			start := time.Now()
			if mode == "plain" {
				_, _ = func(context.Context) (int, error) { return i, nil }(ctx)
			} else if _, err := errand.Step(ctx, fmt.Sprintf("s%d", i), func(context.Context) (int, error) { return i, nil }); err != nil {
				return err
			}
			if timing.Load() {
				took = append(took, time.Since(start))
			}
		}
		if firstPass.Load() {
			return errand.Snooze(time.Millisecond) // again soon, from the record
		}
		return nil
	})
	jobs := max(b.N/stepsPerJob, 1)
	for range jobs {
		enqueue(b, c, "task", nil)
	}
	run := func() {
		if _, err := c.WorkOne(ctx, nil); err != nil {
			b.Fatal(err)
		}
	}
	if mode == "recorded" {
		firstPass.Store(true)
		for range jobs {
			run() // the steps are recorded; the jobs come back
		}
		firstPass.Store(false)
		time.Sleep(5 * time.Millisecond)
	}
	b.ResetTimer()
	timing.Store(true)
	for range jobs {
		run()
	}
	b.StopTimer()
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2].Nanoseconds())/1e3, "p50-µs/step")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(jobs*stepsPerJob)/1e3, "µs/step")
	b.ReportMetric(0, "ns/op")
}
