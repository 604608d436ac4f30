package postgres_test

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandtype"
	"github.com/errandhq/errand/postgres"
	"github.com/errandhq/errand/postgres/pgtest"
)

// BenchmarkWake measures the cross-process wake-up: how long an idle Worker
// on one store takes to start a job enqueued through another store (its own
// pool, as another process would have), from the enqueue's commit (Enqueue
// returning) to the handler starting, from the enqueue's call
// (enqueue-median-ms, enqueue-p99-ms), and the call itself (call-median-ms). The worker polls hourly, so only the
// NOTIFY can wake it. Enqueues are one at a time, gap apart: a steady
// trickle at gap=2ms and 5ms (about 300 and 150 a second with their
// starts), a quiet one at 20ms. ns/op includes the gap, so read the median
// and p99 metrics instead. Run with a fixed count:
//
//	ERRAND_TEST_POSTGRES_URL=postgres://postgres@127.0.0.1:5432/test?sslmode=disable \
//		go test -run '^$' -bench Wake -benchtime 200x -count 3 ./postgres/
func BenchmarkWake(b *testing.B) {
	for _, gap := range []time.Duration{2 * time.Millisecond, 5 * time.Millisecond, 20 * time.Millisecond} {
		b.Run("gap="+gap.String(), func(b *testing.B) { benchWake(b, gap) })
	}
}

func benchWake(b *testing.B, gap time.Duration) {
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

	var latencies, totals, calls []time.Duration
	for b.Loop() {
		enqueued := time.Now()
		if _, err := producer.Enqueue(ctx, errand.RawArgs{KindName: "ping"}, nil); err != nil {
			b.Fatal(err)
		}
		committed := time.Now()
		select {
		case at := <-started:
			latencies = append(latencies, at.Sub(committed))
			totals = append(totals, at.Sub(enqueued))
			calls = append(calls, committed.Sub(enqueued))
		case <-time.After(10 * time.Second):
			b.Fatal("job not started 10s after its enqueue: no wake-up reached the worker")
		}
		time.Sleep(gap)
	}
	b.StopTimer()
	slices.Sort(latencies)
	slices.Sort(totals)
	slices.Sort(calls)
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	b.ReportMetric(ms(latencies[len(latencies)/2]), "median-ms")
	b.ReportMetric(ms(latencies[len(latencies)*99/100]), "p99-ms")
	b.ReportMetric(ms(totals[len(totals)/2]), "enqueue-median-ms")
	b.ReportMetric(ms(totals[len(totals)*99/100]), "enqueue-p99-ms")
	b.ReportMetric(ms(calls[len(calls)/2]), "call-median-ms")
}

func benchOpen(b *testing.B, url, schema string) *postgres.Store {
	b.Helper()
	s, err := postgres.Open(context.Background(), url, &postgres.Options{Schema: schema, MaxConns: 4})
	if err != nil {
		b.Fatalf("open schema %s: %v", schema, err)
	}
	return s
}

// BenchmarkEnqueueAnnounced measures what announcing new jobs costs a flood
// of single enqueues: 4 clients, each on a store of its own as a process
// would have, enqueue one job per call from 8 goroutines each, and every
// enqueue wakes the workers of other processes (see Client.Wake). ns/op is
// per job; xacts/job counts the transaction ids the server handed out, one
// for each enqueue and one for each announcement sent.
//
//	go test -run '^$' -bench EnqueueAnnounced -benchtime 20000x -count 3 ./postgres/
func BenchmarkEnqueueAnnounced(b *testing.B) {
	url := pgtest.URL(b)
	ctx := context.Background()
	schema := pgtest.Schema(b, url)
	const clients, each = 4, 8
	var cs []*errand.Client[pgx.Tx]
	for range clients {
		s := benchOpen(b, url, schema)
		defer s.Close()
		c, err := errand.NewClient(s, &errand.Config{})
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		cs = append(cs, c)
	}
	xacts := func() int64 { // the next transaction id, without taking one
		var n int64
		if err := cs[0].Store().(*postgres.Store).Pool().QueryRow(ctx,
			`SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint`).Scan(&n); err != nil {
			b.Fatal(err)
		}
		return n
	}
	var next atomic.Int64
	var failed atomic.Value
	before := xacts()
	b.ResetTimer()
	var wg sync.WaitGroup
	for i := range clients * each {
		c := cs[i%clients]
		wg.Go(func() {
			for next.Add(1) <= int64(b.N) {
				if _, err := c.Enqueue(ctx, errand.RawArgs{KindName: "ping"}, nil); err != nil {
					failed.Store(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err, _ := failed.Load().(error); err != nil {
		b.Fatal(err)
	}
	for _, c := range cs {
		c.Close() // sends what is pending
	}
	b.StopTimer()
	b.ReportMetric(float64(xacts()-before)/float64(b.N), "xacts/job")
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "jobs/s")
}
