package postgres_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandtype"
	"github.com/errandhq/errand/postgres"
	"github.com/errandhq/errand/postgres/pgtest"
)

// BenchmarkWake measures the cross-process wake-up: how long an idle Worker
// on one store takes to start a job enqueued through another store (its own
// pool, as another process would have), from the enqueue's commit (Enqueue
// returning) to the handler starting. The worker polls hourly, so only the
// NOTIFY can wake it. Enqueues are one at a time, 20ms apart, past the
// client's 10ms coalescing window; ns/op includes that pause, so read the
// median and p99 metrics instead. Run with a fixed count:
//
//	ERRAND_TEST_POSTGRES_URL=postgres://postgres@127.0.0.1:5432/test?sslmode=disable \
//		go test -run '^$' -bench Wake -benchtime 200x -count 3 ./postgres/
func BenchmarkWake(b *testing.B) {
	url := pgtest.URL(b)
	ctx := context.Background()
	schema := pgtest.Schema(b, url)
	workerStore, producerStore := benchOpen(b, url, schema), benchOpen(b, url, schema)
	defer workerStore.Close()
	defer producerStore.Close()

	started := make(chan time.Time, 1)
	worker, err := errand.NewClient(workerStore, &errand.Config{Kinds: kindsOf([]testKind{{
		Name: "ping",
		Handler: errand.HandlerFunc(func(context.Context, *errandtype.Job) error {
			started <- time.Now()
			return nil
		}),
	}})})
	if err != nil {
		b.Fatal(err)
	}
	defer worker.Close()
	// Ten slots, so a running job never keeps the queue from waiting for
	// the next wake-up.
	w, err := worker.NewWorker(&errand.WorkerConfig{Queues: map[string]int{errand.DefaultQueue: 10}, PollInterval: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	if err := w.Start(ctx); err != nil {
		b.Fatal(err)
	}
	defer w.Stop(ctx)
	for w.Stats().IdleClaims == 0 {
		time.Sleep(time.Millisecond)
	}
	producer, err := errand.NewClient(producerStore, &errand.Config{})
	if err != nil {
		b.Fatal(err)
	}
	defer producer.Close()

	var latencies []time.Duration
	for b.Loop() {
		if _, err := producer.Enqueue(ctx, errand.RawArgs{KindName: "ping"}, nil); err != nil {
			b.Fatal(err)
		}
		committed := time.Now()
		select {
		case at := <-started:
			latencies = append(latencies, at.Sub(committed))
		case <-time.After(10 * time.Second):
			b.Fatal("job not started 10s after its enqueue: no wake-up reached the worker")
		}
		time.Sleep(20 * time.Millisecond)
	}
	b.StopTimer()
	slices.Sort(latencies)
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	b.ReportMetric(ms(latencies[len(latencies)/2]), "median-ms")
	b.ReportMetric(ms(latencies[len(latencies)*99/100]), "p99-ms")
}

func benchOpen(b *testing.B, url, schema string) *postgres.Store {
	b.Helper()
	s, err := postgres.Open(context.Background(), url, &postgres.Options{Schema: schema, MaxConns: 4})
	if err != nil {
		b.Fatalf("open schema %s: %v", schema, err)
	}
	return s
}
