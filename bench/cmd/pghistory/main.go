// Command pghistory builds and works a PostgreSQL errand queue beside a
// finished history, to measure what the history costs claims and
// acknowledgments. It drives errand itself (EnqueueMany, a worker), so the
// rows and the dead tuples they leave are errand's.
//
//	pghistory -url URL fill -n 1000000   # enqueue n jobs and work them to succeeded
//	pghistory -url URL work -n 20000     # enqueue n more, then time a worker on them
//	pghistory -url URL enqueue -n 20000  # enqueue n more, for bench/pghistory's scripts
//
// -noautovacuum turns autovacuum off on errand_jobs before anything is
// written (ALTER TABLE ... SET (autovacuum_enabled = off)), so the history
// stays unvacuumed. The SQL of the analysis is in bench/pghistory/.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandtype"
	"github.com/errandhq/errand/postgres"
	"github.com/jackc/pgx/v5"
)

type noopArgs struct{}

func (noopArgs) Kind() string { return "noop" }

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "pghistory:", err)
		os.Exit(1)
	}
}

func run() error {
	fs := flag.NewFlagSet("pghistory", flag.ExitOnError)
	url := fs.String("url", "", "PostgreSQL URL")
	schema := fs.String("schema", "errand", "errand's schema")
	noAV := fs.Bool("noautovacuum", false, "turn autovacuum off on errand_jobs")
	concurrency := fs.Int("concurrency", 1000, "the worker's slots on the default queue")
	fs.Parse(os.Args[1:])
	if fs.NArg() < 1 {
		return fmt.Errorf("want fill or work")
	}
	mode := fs.Arg(0)
	sub := flag.NewFlagSet(mode, flag.ExitOnError)
	n := sub.Int("n", 20000, "jobs")
	chunk := sub.Int("chunk", 100000, "fill: jobs enqueued before each work round")
	sub.Parse(fs.Args()[1:])

	ctx := context.Background()
	store, err := postgres.Open(ctx, *url, &postgres.Options{Schema: *schema})
	if err != nil {
		return err
	}
	defer store.Close()
	if *noAV {
		if _, err := store.Pool().Exec(ctx, `ALTER TABLE `+*schema+`.errand_jobs SET (autovacuum_enabled = off)`); err != nil {
			return err
		}
	}
	kinds := errand.NewKinds()
	errand.Handle(kinds, func(ctx context.Context, job *errandtype.Job, args noopArgs) error { return nil }, nil)
	client, err := errand.NewClient(store, &errand.Config{Kinds: kinds})
	if err != nil {
		return err
	}
	defer client.Close()

	switch mode {
	case "fill":
		for done := 0; done < *n; done += *chunk {
			m := min(*chunk, *n-done)
			if err := enqueue(ctx, client, m); err != nil {
				return err
			}
			d, err := work(ctx, client, m, *concurrency)
			if err != nil {
				return err
			}
			fmt.Printf("fill: %d..%d worked in %s (%.0f jobs/s)\n", done, done+m, d.Round(time.Millisecond), float64(m)/d.Seconds())
		}
	case "enqueue":
		if err := enqueue(ctx, client, *n); err != nil {
			return err
		}
	case "work":
		start := time.Now()
		if err := enqueue(ctx, client, *n); err != nil {
			return err
		}
		fmt.Printf("work: enqueued %d in %s\n", *n, time.Since(start).Round(time.Millisecond))
		d, err := work(ctx, client, *n, *concurrency)
		if err != nil {
			return err
		}
		fmt.Printf("work: %d jobs in %s: %.0f jobs/s\n", *n, d.Round(time.Millisecond), float64(*n)/d.Seconds())
	default:
		return fmt.Errorf("unknown mode %q", mode)
	}
	return nil
}

func enqueue(ctx context.Context, c *errand.Client[pgx.Tx], n int) error {
	const batch = 1000
	for done := 0; done < n; done += batch {
		params := make([]errand.EnqueueParams, min(batch, n-done))
		for i := range params {
			params[i] = errand.EnqueueParams{Args: noopArgs{}}
		}
		if _, err := c.EnqueueMany(ctx, params); err != nil {
			return err
		}
	}
	return nil
}

// work starts a worker and waits for n succeeded events, as bench/cmd/compare
// does.
func work(ctx context.Context, c *errand.Client[pgx.Tx], n, concurrency int) (time.Duration, error) {
	events, cancel := c.Subscribe(errand.ResultSucceeded)
	defer cancel()
	w, err := c.NewWorker(&errand.WorkerConfig{Queues: map[string]int{"default": concurrency}})
	if err != nil {
		return 0, err
	}
	start := time.Now()
	if err := w.Start(ctx); err != nil {
		return 0, err
	}
	defer w.Stop(context.Background())
	seen := 0
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	timeout := time.After(30 * time.Minute)
	for seen+int(c.DroppedEvents()) < n {
		select {
		case <-events:
			seen++
		case <-tick.C:
		case <-timeout:
			return 0, fmt.Errorf("%d of %d jobs done after 30m", seen, n)
		}
	}
	return time.Since(start), nil
}
