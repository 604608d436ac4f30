package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
	"github.com/jackc/pgx/v5"
)

// insightsDepthSQL puts every unfinished or dead job in its bucket. $1 is
// now.
var insightsDepthSQL = `SELECT queue, kind,
		CASE WHEN state = 'running' THEN 'running'
			WHEN state = 'dead' THEN 'dead'
			WHEN available_at > $1 THEN CASE WHEN state = 'retrying' THEN 'retrying' ELSE 'scheduled' END
			WHEN NOT ` + orderingFree + ` THEN 'held'
			ELSE 'ready' END AS bucket,
		count(*), min(available_at)
	FROM {jobs} j WHERE ` + statesWhere(errandstore.InsightsDepthStates) + `
	GROUP BY queue, kind, bucket`

// insightsFinishedSQL counts the last day's finished jobs by window. $1 is
// a minute ago, $2 five minutes, $3 an hour, $4 a day.
var insightsFinishedSQL = `SELECT queue, kind, state,
		count(*) FILTER (WHERE finished_at >= $1), count(*) FILTER (WHERE finished_at >= $2),
		count(*) FILTER (WHERE finished_at >= $3), count(*)
	FROM {jobs}
	WHERE state IN (` + errandstore.SQLStates(errandstore.TerminalStates) + `) AND finished_at IS NOT NULL AND finished_at >= $4
	GROUP BY queue, kind, state`

// insightsFailuresSQL counts the last hour's failures by class. A job with
// a failure in the hour finished in the hour, is running or retrying, or is
// queued again with its last error in the hour (replayed, snoozed or given
// back since; errand_jobs_requeued holds the queued jobs with an error). An
// entry killed its job when it ended its delivery cycle
// (see [errandstore.FailureKilledSQL]). $1 is an hour ago.
var insightsFailuresSQL = `SELECT j.queue, j.kind, e.v ->> 'class', count(*),
		count(*) FILTER (WHERE NOT ` + errandstore.FailureKilledSQL("j", "e.v ->> 'replay'", "j.errors -> e.n::int ->> 'replay'", "::int") + `)
	FROM (
			SELECT * FROM {jobs}
				WHERE state IN (` + errandstore.SQLStates(errandstore.TerminalStates) + `) AND finished_at IS NOT NULL AND finished_at >= $1
			UNION ALL
			SELECT * FROM {jobs} WHERE ` + statesWhere(errandstore.InsightsFailingStates) + `
			UNION ALL
			SELECT * FROM {jobs}
				WHERE state = 'queued' AND last_error IS NOT NULL AND (last_error ->> 'at')::timestamptz >= $1) j
		CROSS JOIN LATERAL jsonb_array_elements(j.errors) WITH ORDINALITY AS e(v, n)
		` + errandstore.ReplayedFromDeadJoinSQL("{audit}", "j", "e.v ->> 'replay'", "::int") + `
	WHERE e.v ->> 'class' <> 'interrupted' AND (e.v ->> 'at')::timestamptz >= $1
	GROUP BY j.queue, j.kind, e.v ->> 'class'`

// insightsSamplesSQL reads the last hour's succeeded jobs, newest first. $1
// is an hour ago, $2 the limit. Durations are whole microseconds.
const insightsSamplesSQL = `SELECT queue, kind,
		(extract(epoch FROM finished_at - attempted_at) * 1000000)::bigint,
		(extract(epoch FROM attempted_at - available_at) * 1000000)::bigint
	FROM {jobs}
	WHERE state = 'succeeded' AND finished_at IS NOT NULL AND finished_at >= $1 AND attempted_at IS NOT NULL
	ORDER BY finished_at DESC LIMIT $2`

// JobInsights implements [errandstore.OperatorStore]. The reads run in one
// repeatable-read, read-only transaction, so that they see one snapshot.
func (s *Store) JobInsights(ctx context.Context, p *errandstore.JobInsightsParams) (*errandtype.InsightsData, error) {
	now, err := s.Now(ctx)
	if err != nil {
		return nil, fmt.Errorf("insights: %w", err)
	}
	now = micro(now)
	d := &errandtype.InsightsData{Now: now}
	ago := func(w time.Duration) time.Time { return now.Add(-w) }
	err = s.insightsTx(ctx, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, s.sql(insightsDepthSQL), now)
		if err != nil {
			return err
		}
		var dc errandtype.DepthCount
		var bucket string
		var oldest time.Time
		_, err = pgx.ForEachRow(rows, []any{&dc.Queue, &dc.Kind, &bucket, &dc.Jobs, &oldest}, func() error {
			c := dc
			c.Bucket, c.OldestAvailableAt = errandtype.DepthBucket(bucket), oldest.UTC()
			d.Depth = append(d.Depth, c)
			return nil
		})
		if err != nil {
			return err
		}
		rows, err = tx.Query(ctx, s.sql(insightsFinishedSQL), ago(time.Minute), ago(5*time.Minute), ago(time.Hour), ago(24*time.Hour))
		if err != nil {
			return err
		}
		var fc errandtype.FinishedCount
		var state string
		_, err = pgx.ForEachRow(rows, []any{&fc.Queue, &fc.Kind, &state, &fc.Last1m, &fc.Last5m, &fc.Last1h, &fc.Last24h}, func() error {
			c := fc
			c.State = errandtype.JobState(state)
			d.Finished = append(d.Finished, c)
			return nil
		})
		if err != nil {
			return err
		}
		rows, err = tx.Query(ctx, s.sql(insightsFailuresSQL), ago(errandstore.InsightsWindow))
		if err != nil {
			return err
		}
		var xc errandtype.FailureCount
		_, err = pgx.ForEachRow(rows, []any{&xc.Queue, &xc.Kind, &xc.Class, &xc.Failures, &xc.Retried}, func() error {
			d.Failures = append(d.Failures, xc)
			return nil
		})
		if err != nil {
			return err
		}
		rows, err = tx.Query(ctx, s.sql(insightsSamplesSQL), ago(errandstore.InsightsWindow), errandstore.InsightsSample(p.SampleLimit))
		if err != nil {
			return err
		}
		var ts errandtype.TimingSample
		var run, wait int64
		_, err = pgx.ForEachRow(rows, []any{&ts.Queue, &ts.Kind, &run, &wait}, func() error {
			c := ts
			c.Run, c.Wait = time.Duration(run)*time.Microsecond, time.Duration(wait)*time.Microsecond
			d.Samples = append(d.Samples, c)
			return nil
		})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("insights: %w", err)
	}
	return d, nil
}

// insightsTx runs fn in the transaction the insights are read in: repeatable
// read and read-only, so that the reads see one snapshot (see operatorTx).
func (s *Store) insightsTx(ctx context.Context, fn func(pgx.Tx) error) error {
	return s.operatorTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, fn)
}

// noJIT turns JIT compilation off for the rest of a transaction.
const noJIT = "SET LOCAL jit = off"

// operatorTx runs fn, an operator's read of figures over many jobs, in a
// transaction without JIT compilation. The planner charges these reads for
// every job they may visit (a subplan per waiting job, history entries per
// job); on 100,000 jobs, once analyzed, the depth query's estimate passed
// jit_above_cost and compiling took 270 ms of its 310. They are small
// reads, so compiling never pays.
func (s *Store) operatorTx(ctx context.Context, opts pgx.TxOptions, fn func(pgx.Tx) error) error {
	return pgx.BeginTxFunc(ctx, s.pool, opts, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, noJIT); err != nil {
			return err
		}
		return fn(tx)
	})
}
