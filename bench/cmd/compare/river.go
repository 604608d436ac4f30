package main

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"net/url"
	"path/filepath"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivermigrate"
	_ "modernc.org/sqlite" // River's documented SQLite driver
)

// noopWorker is River's worker for noopArgs.
type noopWorker struct {
	river.WorkerDefaults[noopArgs]
	started chan<- time.Duration
}

func (w *noopWorker) Work(ctx context.Context, job *river.Job[noopArgs]) error {
	if w.started != nil && job.Args.EnqueuedAt != 0 {
		w.started <- time.Since(time.Unix(0, job.Args.EnqueuedAt))
	}
	return nil
}

// riverConfig is River at the fastest settings the comparison uses, with
// maxWorkers jobs at once in its one queue.
func riverConfig(schema string, maxWorkers int, started chan<- time.Duration) *river.Config {
	workers := river.NewWorkers()
	river.AddWorker(workers, &noopWorker{started: started})
	return &river.Config{
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: maxWorkers}},
		FetchCooldown:     2 * time.Millisecond,
		FetchPollInterval: 20 * time.Millisecond,
		Workers:           workers,
		Schema:            schema,
		Logger:            slog.New(slog.DiscardHandler),
	}
}

// withRiver opens River on a fresh database of env, migrated, and calls fn
// with a client, closing everything afterwards.
func withRiver(ctx context.Context, env *env, started chan<- time.Duration, fn func(c riverClient) (result, error)) (result, error) {
	switch env.store {
	case "sqlite":
		dir, cleanup, err := env.freshDir()
		if err != nil {
			return result{}, err
		}
		defer cleanup()
		q := url.Values{}
		q.Add("_pragma", "journal_mode(WAL)")
		q.Add("_pragma", "synchronous(NORMAL)")
		q.Add("_pragma", "busy_timeout(10000)")
		q.Set("_txlock", "immediate")
		openDB := func() (*sql.DB, error) {
			db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "river.db")+"?"+q.Encode())
			if err == nil {
				db.SetMaxOpenConns(1) // one writer, as River's driver documentation advises
			}
			return db, err
		}
		db, err := openDB()
		if err != nil {
			return result{}, err
		}
		defer db.Close()
		var mode string
		if err := db.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil || mode != "wal" {
			return result{}, fmt.Errorf("river's sqlite database: journal_mode %q, want wal (%v)", mode, err)
		}
		driver := riversqlite.New(db)
		if err := riverMigrate(ctx, driver, ""); err != nil {
			return result{}, err
		}
		client, err := river.NewClient(driver, riverConfig("", env.concurrency(), started))
		if err != nil {
			return result{}, err
		}
		another := func(ctx context.Context) (riverdriver.Driver[sqlTx], func(), error) {
			db, err := openDB()
			if err != nil {
				return nil, nil, err
			}
			return riversqlite.New(db), func() { db.Close() }, nil
		}
		return fn(riverOps[sqlTx]{client, analyzeUnsupported, anotherRiver(riverConfig("", env.concurrency(), started), another)})
	default:
		schema, drop, err := env.freshSchema(ctx, "river")
		if err != nil {
			return result{}, err
		}
		defer drop()
		pool, err := env.pool(ctx)
		if err != nil {
			return result{}, err
		}
		defer pool.Close()
		driver := riverpgxv5.New(pool)
		if err := riverMigrate(ctx, driver, schema); err != nil {
			return result{}, err
		}
		client, err := river.NewClient(driver, riverConfig(schema, env.concurrency(), started))
		if err != nil {
			return result{}, err
		}
		another := func(ctx context.Context) (riverdriver.Driver[pgxTx], func(), error) {
			pool, err := env.pool(ctx)
			if err != nil {
				return nil, nil, err
			}
			return riverpgxv5.New(pool), pool.Close, nil
		}
		analyze := func(ctx context.Context) error { return analyzeSchema(ctx, pool, schema) }
		return fn(riverOps[pgxTx]{client, analyze, anotherRiver(riverConfig(schema, env.concurrency(), started), another)})
	}
}

// anotherRiver returns riverOps.another: an insert-only client of cfg (its
// queues left out) on a driver open opens, as another process would have.
func anotherRiver[TTx any](cfg *river.Config, open func(context.Context) (riverdriver.Driver[TTx], func(), error)) func(context.Context) (func(context.Context) error, func(), error) {
	return func(ctx context.Context) (func(context.Context) error, func(), error) {
		driver, closeDriver, err := open(ctx)
		if err != nil {
			return nil, nil, err
		}
		cfg.Queues = nil
		c, err := river.NewClient(driver, cfg)
		if err != nil {
			closeDriver()
			return nil, nil, err
		}
		return riverOps[TTx]{c: c}.insertOne, closeDriver, nil
	}
}

func riverMigrate[TTx any](ctx context.Context, driver riverdriver.Driver[TTx], schema string) error {
	m, err := rivermigrate.New(driver, &rivermigrate.Config{Schema: schema, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return err
	}
	_, err = m.Migrate(ctx, rivermigrate.DirectionUp, nil)
	return err
}

// riverClient hides the client's transaction type from the measures.
type riverClient interface {
	insertMany(ctx context.Context, n int) error
	insertManyFast(ctx context.Context, n int) error
	insertBatches(ctx context.Context, n, batch int, fast bool) error
	insertOne(ctx context.Context) error
	work(ctx context.Context, n int) (time.Duration, error)
	idleWorker(ctx context.Context) (stop func(), err error)
	analyze(ctx context.Context) error
	// another opens another client of the same database, on a pool or
	// handle of its own, and returns its insertOne and what closes it.
	another(ctx context.Context) (insertOne func(context.Context) error, close func(), err error)
}

type riverOps[TTx any] struct {
	c *river.Client[TTx]
	// analyzeTables analyzes the client's tables (PostgreSQL only).
	analyzeTables func(ctx context.Context) error
	anotherClient func(ctx context.Context) (func(context.Context) error, func(), error)
}

func (o riverOps[TTx]) another(ctx context.Context) (func(context.Context) error, func(), error) {
	return o.anotherClient(ctx)
}

// analyze has PostgreSQL take the statistics of River's tables.
func (o riverOps[TTx]) analyze(ctx context.Context) error { return o.analyzeTables(ctx) }

func riverParams(n int) []river.InsertManyParams {
	params := make([]river.InsertManyParams, n)
	for i := range params {
		params[i] = river.InsertManyParams{Args: noopArgs{}}
	}
	return params
}

// insertMany inserts n jobs with InsertMany, batchSize a call.
func (o riverOps[TTx]) insertMany(ctx context.Context, n int) error {
	return o.insertBatches(ctx, n, batchSize, false)
}

// insertManyFast inserts n jobs with InsertManyFast, batchSize a call.
func (o riverOps[TTx]) insertManyFast(ctx context.Context, n int) error {
	return o.insertBatches(ctx, n, batchSize, true)
}

// insertBatches inserts n jobs, batch a call, with InsertManyFast if fast
// or else InsertMany.
func (o riverOps[TTx]) insertBatches(ctx context.Context, n, batch int, fast bool) error {
	insert := func(p []river.InsertManyParams) error { _, err := o.c.InsertMany(ctx, p); return err }
	if fast {
		insert = func(p []river.InsertManyParams) error { _, err := o.c.InsertManyFast(ctx, p); return err }
	}
	for done := 0; done < n; done += batch {
		if err := insert(riverParams(min(batch, n-done))); err != nil {
			return err
		}
	}
	return nil
}

func (o riverOps[TTx]) insertOne(ctx context.Context) error {
	_, err := o.c.Insert(ctx, noopArgs{EnqueuedAt: time.Now().UnixNano()}, nil)
	return err
}

// work starts the client on n queued jobs and times it until River reports
// n of them completed.
func (o riverOps[TTx]) work(ctx context.Context, n int) (time.Duration, error) {
	events, cancel := o.c.SubscribeConfig(&river.SubscribeConfig{
		ChanSize: n + 1000,
		Kinds:    []river.EventKind{river.EventKindJobCompleted},
	})
	defer cancel()
	start := time.Now()
	if err := o.c.Start(ctx); err != nil {
		return 0, err
	}
	defer o.c.Stop(context.Background())
	timeout := time.After(workTimeout)
	for seen := 0; seen < n; {
		select {
		case <-events:
			seen++
		case <-timeout:
			return 0, fmt.Errorf("river: %d of %d jobs done after %s", seen, n, workTimeout)
		}
	}
	return time.Since(start), nil
}

func (o riverOps[TTx]) idleWorker(ctx context.Context) (func(), error) {
	if err := o.c.Start(ctx); err != nil {
		return nil, err
	}
	return func() { o.c.Stop(context.Background()) }, nil
}
