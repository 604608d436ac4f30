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
	"github.com/errandhq/errand/errandstore"
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
	noVacuum := fs.Bool("novacuum", false, "postgres.Options.NoVacuum: the leader does not vacuum errand_jobs")
	fs.Parse(os.Args[1:])
	if fs.NArg() < 1 {
		return fmt.Errorf("want fill, keep, enqueue, work or rounds")
	}
	mode := fs.Arg(0)
	sub := flag.NewFlagSet(mode, flag.ExitOnError)
	n := sub.Int("n", 20000, "jobs")
	chunk := sub.Int("chunk", 100000, "fill: jobs enqueued before each work round")
	rounds := sub.Int("rounds", 10, "rounds: how many")
	sub.Parse(fs.Args()[1:])

	ctx := context.Background()
	store, err := postgres.Open(ctx, *url, &postgres.Options{Schema: *schema, NoVacuum: *noVacuum})
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
	case "keep":
		// What a leader's upkeep does to the table (see postgres.Store.TableKeep).
		start := time.Now()
		r, err := store.TableKeep(ctx, &errandstore.TableKeepParams{})
		if err != nil {
			return err
		}
		fmt.Printf("keep: %+v in %s\n", r, time.Since(start).Round(time.Millisecond))
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
	case "rounds":
		// One worker that keeps running, as a deployment's does, and rounds
		// of n jobs enqueued and worked; each round's rate counts from its
		// first enqueue to its last job done.
		events, cancel := client.Subscribe(errand.ResultSucceeded)
		defer cancel()
		w, err := client.NewWorker(&errand.WorkerConfig{Queues: map[string]int{"default": *concurrency}})
		if err != nil {
			return err
		}
		if err := w.Start(ctx); err != nil {
			return err
		}
		defer w.Stop(context.Background())
		for r := range *rounds {
			start, dropped := time.Now(), client.DroppedEvents()
			if err := enqueue(ctx, client, *n); err != nil {
				return err
			}
			if err := await(events, client, *n, dropped); err != nil {
				return err
			}
			d := time.Since(start)
			var dead, vacuums, autovacuums int64
			err := store.Pool().QueryRow(ctx, `SELECT n_dead_tup, vacuum_count, autovacuum_count FROM pg_stat_user_tables
				WHERE relid = $1::regclass`, *schema+".errand_jobs").Scan(&dead, &vacuums, &autovacuums)
			if err != nil {
				return err
			}
			fmt.Printf("round %d: %d jobs in %s: %.0f jobs/s; dead rows %d, vacuums %d, autovacuums %d\n",
				r+1, *n, d.Round(time.Millisecond), float64(*n)/d.Seconds(), dead, vacuums, autovacuums)
		}
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
	if err := await(events, c, n, c.DroppedEvents()); err != nil {
		return 0, err
	}
	return time.Since(start), nil
}

// await waits for n succeeded events, counting those dropped since the
// client had dropped dropped.
func await(events <-chan errand.Event, c *errand.Client[pgx.Tx], n int, dropped int64) error {
	seen := 0
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	timeout := time.After(30 * time.Minute)
	for seen+int(c.DroppedEvents()-dropped) < n {
		select {
		case <-events:
			seen++
		case <-tick.C:
		case <-timeout:
			return fmt.Errorf("%d of %d jobs done after 30m", seen, n)
		}
	}
	return nil
}
