// Command flows compares durable three-step flows on PostgreSQL: errand's
// durable handlers (errand.Step) against DBOS Transact's workflows
// (dbos.RunAsStep), on fresh schemas of one database, interleaved.
//
//	cd bench && go run ./cmd/flows -reps 3
//
// Each repetition measures, for each system: the throughput of -flows
// flows started at once (errand: enqueued, then worked by a Worker of
// concurrency -concurrency; DBOS: started directly with RunWorkflow, as
// many at once), and the time from start to result of -samples flows run
// one at a time (p50, p99). Every step is a no-op: what is measured is the
// durable execution around it.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dbos-inc/dbos-transact-golang/dbos"
	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandtype"
	"github.com/errandhq/errand/postgres"
	"github.com/jackc/pgx/v5"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "flows:", err)
		os.Exit(1)
	}
}

type options struct {
	url                  string
	flows, samples, reps int
	concurrency          int
}

func run(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("flows", flag.ContinueOnError)
	o := options{}
	fs.StringVar(&o.url, "postgres", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable", "the PostgreSQL database; each measure works in a fresh schema and drops it")
	fs.IntVar(&o.flows, "flows", 2000, "flows per throughput measure")
	fs.IntVar(&o.samples, "samples", 200, "flows per latency measure, one at a time")
	fs.IntVar(&o.reps, "reps", 3, "repetitions, each system in turn")
	fs.IntVar(&o.concurrency, "concurrency", 100, "errand's worker concurrency")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if o.flows < 1 || o.samples < 1 || o.reps < 1 || o.concurrency < 1 {
		return fmt.Errorf("-flows, -samples, -reps and -concurrency must be at least 1")
	}
	ctx := context.Background()
	fmt.Fprintf(out, "three-step flows on PostgreSQL: %d per throughput measure, %d one at a time, %d repetitions\n", o.flows, o.samples, o.reps)
	fmt.Fprintf(out, "%-4s %-7s %12s %9s %9s\n", "rep", "system", "flows/s", "p50 ms", "p99 ms")
	for rep := 1; rep <= o.reps; rep++ {
		for _, sys := range []struct {
			name string
			fn   func(context.Context, *options, string) (float64, []time.Duration, error)
		}{{"errand", errandFlows}, {"dbos", dbosFlows}} {
			schema, drop, err := freshSchema(ctx, o.url, sys.name)
			if err != nil {
				return err
			}
			perSec, lat, err := sys.fn(ctx, &o, schema)
			drop()
			if err != nil {
				return fmt.Errorf("%s: %w", sys.name, err)
			}
			slices.Sort(lat)
			fmt.Fprintf(out, "%-4d %-7s %12.0f %9.2f %9.2f\n", rep, sys.name, perSec, ms(lat[len(lat)/2]), ms(lat[len(lat)*99/100]))
		}
	}
	return nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1e3 }

var schemaSeq atomic.Int64

// freshSchema names a schema that does not exist yet; drop removes it and
// everything in it.
func freshSchema(ctx context.Context, url, prefix string) (string, func(), error) {
	name := fmt.Sprintf("flows_%s_%d_%d", prefix, os.Getpid(), schemaSeq.Add(1))
	return name, func() {
		conn, err := pgx.Connect(context.Background(), url)
		if err != nil {
			return
		}
		defer conn.Close(context.Background())
		conn.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+name+" CASCADE")
	}, nil
}

// flowArgs start an errand flow.
type flowArgs struct{}

func (flowArgs) Kind() string { return "flow" }

// errandFlows measures errand: flows enqueued at once and worked, then one
// at a time.
func errandFlows(ctx context.Context, o *options, schema string) (float64, []time.Duration, error) {
	store, err := postgres.Open(ctx, o.url, &postgres.Options{Schema: schema, MaxConns: 10})
	if err != nil {
		return 0, nil, err
	}
	defer store.Close()
	done := make(chan time.Duration, o.flows+o.samples)
	kinds := errand.NewKinds()
	errand.Handle(kinds, func(ctx context.Context, job *errandtype.Job, _ flowArgs) error {
		for i := range 3 {
			if _, err := errand.Step(ctx, fmt.Sprintf("step%d", i), func(context.Context) (int, error) { return i, nil }); err != nil {
				return err
			}
		}
		done <- time.Since(job.CreatedAt)
		return nil
	}, nil)
	c, err := errand.NewClient(store, &errand.Config{Kinds: kinds})
	if err != nil {
		return 0, nil, err
	}
	w, err := c.NewWorker(&errand.WorkerConfig{Queues: map[string]int{errand.DefaultQueue: o.concurrency}})
	if err != nil {
		return 0, nil, err
	}
	ps := make([]errand.EnqueueParams, o.flows)
	for i := range ps {
		ps[i] = errand.EnqueueParams{Args: flowArgs{}}
	}
	start := time.Now()
	for i := 0; i < len(ps); i += 1000 {
		if _, err := c.EnqueueMany(ctx, ps[i:min(i+1000, len(ps))]); err != nil {
			return 0, nil, err
		}
	}
	if err := w.Start(ctx); err != nil {
		return 0, nil, err
	}
	defer w.Stop(context.Background())
	for range o.flows {
		<-done
	}
	perSec := float64(o.flows) / time.Since(start).Seconds()
	time.Sleep(200 * time.Millisecond) // idle before the latency samples
	lat := make([]time.Duration, 0, o.samples)
	for range o.samples {
		t := time.Now()
		if _, err := c.Enqueue(ctx, flowArgs{}, nil); err != nil {
			return 0, nil, err
		}
		<-done
		lat = append(lat, time.Since(t))
	}
	return perSec, lat, nil
}

// dbosFlows measures DBOS Transact v1.9.0 at its defaults: workflows started
// directly, all at once, then one at a time.
func dbosFlows(ctx context.Context, o *options, schema string) (float64, []time.Duration, error) {
	dctx, err := dbos.NewContext(ctx, dbos.Config{AppName: "flows", DatabaseURL: o.url, DatabaseSchema: schema,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return 0, nil, err
	}
	flow := func(ctx dbos.Context, _ string) (int, error) {
		sum := 0
		for i := range 3 {
			v, err := dbos.RunAsStep(ctx, func(context.Context) (int, error) { return i, nil }, dbos.WithStepName(fmt.Sprintf("step%d", i)))
			if err != nil {
				return 0, err
			}
			sum += v
		}
		return sum, nil
	}
	dbos.RegisterWorkflow(dctx, flow)
	if err := dbos.Launch(dctx); err != nil {
		return 0, nil, err
	}
	defer dbos.Shutdown(dctx, 10*time.Second)
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, o.flows)
	for range o.flows {
		wg.Go(func() {
			h, err := dbos.RunWorkflow(dctx, flow, "")
			if err == nil {
				_, err = h.GetResult()
			}
			if err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return 0, nil, err
	}
	perSec := float64(o.flows) / time.Since(start).Seconds()
	lat := make([]time.Duration, 0, o.samples)
	for range o.samples {
		t := time.Now()
		h, err := dbos.RunWorkflow(dctx, flow, "")
		if err != nil {
			return 0, nil, err
		}
		if _, err := h.GetResult(); err != nil {
			return 0, nil, err
		}
		lat = append(lat, time.Since(t))
	}
	return perSec, lat, nil
}
