package errand_test

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
	"github.com/errandhq/errand/postgres"
	"github.com/errandhq/errand/postgres/pgtest"
)

// BenchmarkThreeStepFlow measures durable flows of three steps, each a
// no-op recorded with errand.Step, run by a Worker of concurrency 100, per
// store: "backlog" works b.N flows enqueued at once (flows/s); "one" enqueues
// one flow at a time to an idle worker and times it from the enqueue to the
// end of its handler (p50 and p99).
//
//	go test -run '^$' -bench ThreeStepFlow -benchtime 2000x .
func BenchmarkThreeStepFlow(b *testing.B) {
	for _, name := range []string{"sqlite", "postgres"} {
		b.Run(name, func(b *testing.B) {
			var st errandstore.TxStore[*sql.Tx]
			if name == "sqlite" {
				st = openStore(b, nil)
			} else {
				url := pgtest.URL(b)
				s, err := postgres.Open(context.Background(), url, &postgres.Options{Schema: pgtest.Schema(b, url), MaxConns: 10})
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { s.Close() })
				st = s.SQL(nil)
			}
			b.Run("backlog", func(b *testing.B) { benchFlows(b, st, false) })
			b.Run("one", func(b *testing.B) { benchFlows(b, st, true) })
		})
	}
}

func benchFlows(b *testing.B, st errandstore.TxStore[*sql.Tx], one bool) {
	ctx := context.Background()
	var mu sync.Mutex
	var took []time.Duration
	done := make(chan struct{}, b.N)
	c := handlerClient(b, st, func(ctx context.Context, j *errandtype.Job) error {
		for i := range 3 {
			if _, err := errand.Step(ctx, fmt.Sprintf("step%d", i), func(context.Context) (int, error) { return i, nil }); err != nil {
				return err
			}
		}
		mu.Lock()
		took = append(took, time.Since(j.CreatedAt))
		mu.Unlock()
		done <- struct{}{}
		return nil
	})
	w, err := c.NewWorker(&errand.WorkerConfig{Queues: map[string]int{errand.DefaultQueue: 100}})
	if err != nil {
		b.Fatal(err)
	}
	if one {
		if err := w.Start(ctx); err != nil {
			b.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond) // the worker settles, idle
		b.ResetTimer()
		for range b.N {
			if _, err := c.Enqueue(ctx, errand.RawArgs{KindName: "task"}, nil); err != nil {
				b.Fatal(err)
			}
			<-done
		}
	} else {
		ps := make([]errand.EnqueueParams, b.N)
		for i := range ps {
			ps[i] = errand.EnqueueParams{Args: errand.RawArgs{KindName: "task"}}
		}
		b.ResetTimer()
		for i := 0; i < len(ps); i += 1000 {
			if _, err := c.EnqueueMany(ctx, ps[i:min(i+1000, len(ps))]); err != nil {
				b.Fatal(err)
			}
		}
		if err := w.Start(ctx); err != nil {
			b.Fatal(err)
		}
		for range b.N {
			<-done
		}
	}
	b.StopTimer()
	if err := w.Stop(ctx); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "flows/s")
	if one {
		slices.Sort(took)
		b.ReportMetric(float64(took[len(took)/2].Microseconds())/1e3, "p50-ms")
		b.ReportMetric(float64(took[len(took)*99/100].Microseconds())/1e3, "p99-ms")
	}
	b.ReportMetric(0, "ns/op")
}
