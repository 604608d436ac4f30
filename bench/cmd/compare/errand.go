package main

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
	"github.com/errandhq/errand/postgres"
	"github.com/errandhq/errand/sqlite"
)

// noopArgs is the job both systems run: it does nothing but note when it
// was enqueued, for the latency measure.
type noopArgs struct {
	EnqueuedAt int64 `json:"enqueued_at"`
}

func (noopArgs) Kind() string { return "noop" }

// errandKinds declares the no-op kind with opts (nil: the defaults);
// started, when not nil, receives each job's enqueue-to-start delay.
func errandKinds(started chan<- time.Duration, opts *errand.KindOpts) *errand.Kinds {
	kinds := errand.NewKinds()
	errand.Handle(kinds, func(ctx context.Context, job *errandtype.Job, args noopArgs) error {
		if started != nil && args.EnqueuedAt != 0 {
			started <- time.Since(time.Unix(0, args.EnqueuedAt))
		}
		return nil
	}, opts)
	return kinds
}

// withErrand opens errand on a fresh database of env and calls fn with a
// client, closing everything afterwards.
func withErrand(ctx context.Context, env *env, started chan<- time.Duration, fn func(c errandClient) (result, error)) (result, error) {
	return withErrandKinds(ctx, env, errandKinds(started, nil), fn)
}

// withErrandKinds is withErrand with the client's kinds.
func withErrandKinds(ctx context.Context, env *env, kinds *errand.Kinds, fn func(c errandClient) (result, error)) (result, error) {
	cfg := &errand.Config{Kinds: kinds}
	switch env.store {
	case "sqlite":
		dir, cleanup, err := env.freshDir()
		if err != nil {
			return result{}, err
		}
		defer cleanup()
		store, err := sqlite.Open(ctx, filepath.Join(dir, "errand.db"), &sqlite.Options{Synchronous: "NORMAL"})
		if err != nil {
			return result{}, err
		}
		defer store.Close()
		client, err := errand.NewClient(store, cfg)
		if err != nil {
			return result{}, err
		}
		defer client.Close()
		another := func(ctx context.Context) (errandStore[sqlTx], error) {
			return sqlite.Open(ctx, filepath.Join(dir, "errand.db"), &sqlite.Options{Synchronous: "NORMAL"})
		}
		return fn(errandOps[sqlTx]{client, env.concurrency(), analyzeUnsupported, anotherClient(cfg, another)})
	default:
		schema, drop, err := env.freshSchema(ctx, "errand")
		if err != nil {
			return result{}, err
		}
		defer drop()
		pool, err := env.pool(ctx)
		if err != nil {
			return result{}, err
		}
		defer pool.Close()
		store, err := postgres.New(ctx, pool, &postgres.Options{Schema: schema})
		if err != nil {
			return result{}, err
		}
		defer store.Close()
		client, err := errand.NewClient(store, cfg)
		if err != nil {
			return result{}, err
		}
		defer client.Close()
		another := func(ctx context.Context) (errandStore[pgxTx], error) {
			return postgres.Open(ctx, env.url, &postgres.Options{Schema: schema, MaxConns: 4})
		}
		analyze := func(ctx context.Context) error { return analyzeSchema(ctx, pool, schema) }
		return fn(errandOps[pgxTx]{client, env.concurrency(), analyze, anotherClient(cfg, another)})
	}
}

// errandStore is a store that a client opened apart closes.
type errandStore[TTx any] interface {
	errandstore.TxStore[TTx]
	Close() error
}

// anotherClient returns errandOps.another: a client of cfg on a store
// open opens, as another process would have.
func anotherClient[TTx any](cfg *errand.Config, open func(context.Context) (errandStore[TTx], error)) func(context.Context) (func(context.Context) error, func(), error) {
	return func(ctx context.Context) (func(context.Context) error, func(), error) {
		store, err := open(ctx)
		if err != nil {
			return nil, nil, err
		}
		c, err := errand.NewClient(store, cfg)
		if err != nil {
			store.Close()
			return nil, nil, err
		}
		return errandOps[TTx]{c: c}.enqueueOne, func() { c.Close(); store.Close() }, nil
	}
}

// errandClient hides the client's transaction type from the measures.
type errandClient interface {
	enqueueMany(ctx context.Context, n int) error
	enqueueBatches(ctx context.Context, n, batch int) error
	enqueueOne(ctx context.Context) error
	work(ctx context.Context, n int) (time.Duration, error)
	idleWorker(ctx context.Context) (stop func(), err error)
	analyze(ctx context.Context) error
	// another opens another client of the same database, on a store of
	// its own, and returns its enqueueOne and what closes it.
	another(ctx context.Context) (enqueueOne func(context.Context) error, close func(), err error)
}

type errandOps[TTx any] struct {
	c       *errand.Client[TTx]
	workers int // the queue's concurrency
	// analyzeTables analyzes the client's tables (PostgreSQL only).
	analyzeTables func(ctx context.Context) error
	anotherClient func(ctx context.Context) (func(context.Context) error, func(), error)
}

func (o errandOps[TTx]) another(ctx context.Context) (func(context.Context) error, func(), error) {
	return o.anotherClient(ctx)
}

// analyze has PostgreSQL take the statistics of errand's tables, as
// autovacuum does of a table that changed (see analyzeSchema).
func (o errandOps[TTx]) analyze(ctx context.Context) error { return o.analyzeTables(ctx) }

// enqueueMany enqueues n jobs, batchSize a call.
func (o errandOps[TTx]) enqueueMany(ctx context.Context, n int) error {
	return o.enqueueBatches(ctx, n, batchSize)
}

// enqueueBatches enqueues n jobs, batch a call.
func (o errandOps[TTx]) enqueueBatches(ctx context.Context, n, batch int) error {
	for done := 0; done < n; done += batch {
		params := make([]errand.EnqueueParams, min(batch, n-done))
		for i := range params {
			params[i] = errand.EnqueueParams{Args: noopArgs{}}
		}
		if _, err := o.c.EnqueueMany(ctx, params); err != nil {
			return err
		}
	}
	return nil
}

func (o errandOps[TTx]) enqueueOne(ctx context.Context) error {
	_, err := o.c.Enqueue(ctx, noopArgs{EnqueuedAt: time.Now().UnixNano()}, nil)
	return err
}

func (o errandOps[TTx]) newWorker() (*errand.Worker, error) {
	return o.c.NewWorker(&errand.WorkerConfig{Queues: map[string]int{"default": o.workers}})
}

// work starts a worker on n queued jobs and times it until the client has
// recorded n outcomes.
func (o errandOps[TTx]) work(ctx context.Context, n int) (time.Duration, error) {
	events, cancel := o.c.Subscribe(errand.ResultSucceeded)
	defer cancel()
	w, err := o.newWorker()
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
	timeout := time.After(workTimeout)
	for seen+int(o.c.DroppedEvents()) < n {
		select {
		case <-events:
			seen++
		case <-tick.C:
		case <-timeout:
			return 0, fmt.Errorf("errand: %d of %d jobs done after %s", seen, n, workTimeout)
		}
	}
	return time.Since(start), nil
}

func (o errandOps[TTx]) idleWorker(ctx context.Context) (func(), error) {
	w, err := o.newWorker()
	if err != nil {
		return nil, err
	}
	if err := w.Start(ctx); err != nil {
		return nil, err
	}
	return func() { w.Stop(context.Background()) }, nil
}
