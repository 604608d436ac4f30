package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/postgres"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The bare-SQL ceiling of PostgreSQL work: the least a queue on errand's
// table must do per batch, in plain pgx. Each of as many loops as the pool
// has connections claims up to ceilingBatch jobs in one statement (UPDATE
// ... WHERE seq IN (SELECT ... FOR UPDATE SKIP LOCKED LIMIT n) RETURNING,
// a fresh token per row; the jobs have no fairness key, so it walks the
// claim index's range of such jobs alone) and acknowledges them in one statement fenced by
// those tokens, each an implicit transaction. No handler, no leases kept,
// no sweeps, no events: what is left is the database's share, which a queue
// can only add to. errand's work divided by it is how much of the database's
// throughput errand reaches at the same batch size.

const ceilingClaimSQL = `UPDATE %[1]s SET
		state = 'running', attempt = attempt + 1, attempted_at = now(),
		lease_token = replace(gen_random_uuid()::text, '-', ''),
		lease_until = now() + interval '1 minute', lease_owner = 'ceiling'
	WHERE seq IN (SELECT seq FROM %[1]s
		WHERE queue = 'default' AND fairness_key IS NULL AND state IN ('queued', 'retrying') AND available_at <= now()
		ORDER BY priority, available_at, seq
		LIMIT $1
		FOR UPDATE SKIP LOCKED)
	RETURNING id, lease_token`

const ceilingAckSQL = `UPDATE %[1]s j SET
		state = 'succeeded', finished_at = now(), lease_token = NULL, lease_until = NULL
	FROM unnest($1::text[], $2::text[]) AS l(id, token)
	WHERE j.id = l.id AND j.state = 'running' AND j.lease_token = l.token AND j.lease_until > now()`

// ceilingDeleteSQL is the acknowledgment of the ceiling that deletes its
// jobs, as errand does with KindOpts.DeleteOnSuccess.
const ceilingDeleteSQL = `DELETE FROM %[1]s j
	USING unnest($1::text[], $2::text[]) AS l(id, token)
	WHERE j.id = l.id AND j.state = 'running' AND j.lease_token = l.token AND j.lease_until > now()`

// ceilingWork enqueues n jobs with errand into a fresh schema (untimed) and
// times the bare claim+ack loops until all n are acknowledged; deleting,
// the acknowledgments delete the jobs.
func ceilingWork(ctx context.Context, env *env, n, batch int, deleting bool) (result, error) {
	b, err := newBareSchema(ctx, env, "ceiling")
	if err != nil {
		return result{}, err
	}
	defer b.close()
	pool, store, table := b.pool, b.store, b.table
	client, err := errand.NewClient(store, &errand.Config{Kinds: errandKinds(nil, nil)})
	if err != nil {
		return result{}, err
	}
	defer client.Close()
	if err := (errandOps[pgxTx]{c: client}).enqueueMany(ctx, n); err != nil {
		return result{}, err
	}
	ack := ceilingAckSQL
	if deleting {
		ack = ceilingDeleteSQL
	}
	d, err := ceilingLoops(ctx, pool, table, ack, n, batch)
	if err != nil {
		return result{}, err
	}
	return result{perSec: float64(n) / d.Seconds()}, nil
}

// ceilingLoops runs one claim+ack loop per pool connection, acknowledging
// with ack, until n jobs are acknowledged, and returns how long that took.
func ceilingLoops(ctx context.Context, pool *pgxpool.Pool, table, ack string, n, batch int) (time.Duration, error) {
	claimSQL, ackSQL := fmt.Sprintf(ceilingClaimSQL, table), fmt.Sprintf(ack, table)
	var acked atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, pool.Config().MaxConns)
	start := time.Now()
	for range pool.Config().MaxConns {
		wg.Go(func() {
			ids, tokens := make([]string, 0, batch), make([]string, 0, batch)
			for acked.Load() < int64(n) {
				ids, tokens = ids[:0], tokens[:0]
				rows, err := pool.Query(ctx, claimSQL, batch)
				if err != nil {
					errs <- err
					return
				}
				var id, token string
				_, err = pgx.ForEachRow(rows, []any{&id, &token}, func() error {
					ids, tokens = append(ids, id), append(tokens, token)
					return nil
				})
				if err != nil {
					errs <- err
					return
				}
				if len(ids) == 0 {
					continue // the other loops hold the last jobs
				}
				tag, err := pool.Exec(ctx, ackSQL, ids, tokens)
				if err != nil {
					errs <- err
					return
				}
				if int(tag.RowsAffected()) != len(ids) {
					errs <- fmt.Errorf("ceiling: acknowledged %d of %d claimed jobs", tag.RowsAffected(), len(ids))
					return
				}
				acked.Add(int64(len(ids)))
			}
		})
	}
	wg.Wait()
	d := time.Since(start)
	close(errs)
	if err := <-errs; err != nil {
		return 0, err
	}
	if got := acked.Load(); got != int64(n) {
		return 0, fmt.Errorf("ceiling: %d of %d jobs acknowledged", got, n)
	}
	return d, nil
}

// The bare-SQL floor of PostgreSQL latency: the least a queue on errand's
// table must do between an enqueue and the start of its job, in plain pgx.
// Each sample inserts one job in its own implicit transaction (a durable
// commit, as an enqueue must be) and at once claims it with the ceiling's
// claim (another durable commit, as a claim that counts the attempt must
// be), on the same connection, with no wake-up, no listener and no
// handler between them. The delay runs from before the insert to the end
// of the claim, and the samples pause, and warm up, as the latency
// measure's do, so the database is as idle before each. errand's latency divided by it is how
// much errand adds to the two commits it cannot avoid.

const floorInsertSQL = `INSERT INTO %[1]s (id, queue, kind, args, state, max_attempts, available_at, created_at)
	VALUES ($1, 'default', 'noop', '{}', 'queued', 25, now(), now())`

// floorLatency times samples insert-then-claim pairs into a fresh schema.
func floorLatency(ctx context.Context, env *env, samples sampling) (result, error) {
	b, err := newBareSchema(ctx, env, "floor")
	if err != nil {
		return result{}, err
	}
	defer b.close()
	pool, table := b.pool, b.table
	insertSQL, claimSQL := fmt.Sprintf(floorInsertSQL, table), fmt.Sprintf(ceilingClaimSQL, table)
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return result{}, err
	}
	defer conn.Release()
	time.Sleep(200 * time.Millisecond) // as the latency measure lets its worker settle
	var r result
	for i := range samples.warmup + samples.samples {
		start := time.Now()
		if _, err := conn.Exec(ctx, insertSQL, fmt.Sprintf("floor-%d", i)); err != nil {
			return result{}, err
		}
		tag, err := conn.Exec(ctx, claimSQL, 1)
		if err != nil {
			return result{}, err
		}
		if tag.RowsAffected() != 1 {
			return result{}, fmt.Errorf("floor: claimed %d jobs, want 1", tag.RowsAffected())
		}
		r.add(i, samples, time.Since(start))
		time.Sleep(5 * time.Millisecond)
	}
	return r, nil
}

// bareSchema is a fresh schema migrated by errand, with a pool of its own,
// for the bare-SQL measures to run their statements on.
type bareSchema struct {
	pool  *pgxpool.Pool
	store *postgres.Store
	table string // errand_jobs, qualified
	drop  func()
}

func newBareSchema(ctx context.Context, env *env, prefix string) (*bareSchema, error) {
	schema, drop, err := env.freshSchema(ctx, prefix)
	if err != nil {
		return nil, err
	}
	pool, err := env.pool(ctx)
	if err != nil {
		drop()
		return nil, err
	}
	store, err := postgres.New(ctx, pool, &postgres.Options{Schema: schema})
	if err != nil {
		pool.Close()
		drop()
		return nil, err
	}
	return &bareSchema{pool: pool, store: store, table: pgx.Identifier{schema, "errand_jobs"}.Sanitize(), drop: drop}, nil
}

func (b *bareSchema) close() {
	b.store.Close()
	b.pool.Close()
	b.drop()
}
