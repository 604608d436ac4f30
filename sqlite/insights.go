package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
)

// insightsDepthSQL puts every unfinished or dead job in its bucket. ?1 is
// now.
var insightsDepthSQL = `SELECT queue, kind,
		CASE WHEN state = 'running' THEN 'running'
			WHEN state = 'dead' THEN 'dead'
			WHEN available_at > ?1 THEN CASE WHEN state = 'retrying' THEN 'retrying' ELSE 'scheduled' END
			WHEN NOT ` + errandstore.OrderingFreeSQL("errand_jobs") + ` THEN 'held'
			ELSE 'ready' END AS bucket,
		count(*), min(available_at)
	FROM errand_jobs j WHERE state IN (` + errandstore.SQLStates(errandstore.InsightsDepthStates) + `)
	GROUP BY queue, kind, bucket`

// insightsFinishedSQL counts the last day's finished jobs by window. ?1 is
// a minute ago, ?2 five minutes, ?3 an hour, ?4 a day.
var insightsFinishedSQL = `SELECT queue, kind, state,
		sum(finished_at >= ?1), sum(finished_at >= ?2), sum(finished_at >= ?3), count(*)
	FROM errand_jobs INDEXED BY errand_jobs_finished
	WHERE state IN (` + errandstore.SQLStates(errandstore.TerminalStates) + `) AND finished_at IS NOT NULL AND finished_at >= ?4
	GROUP BY queue, kind, state`

// insightsFailuresSQL counts the last hour's failures by class. A job with
// a failure in the hour finished in the hour, is running or retrying, or is
// queued again with its last error in the hour (replayed, snoozed or given
// back since; errand_jobs_requeued holds the queued jobs with an error). An
// entry killed its job when it ended its delivery cycle (see
// [errandstore.FailureKilledSQL]). ?1 is an hour ago in microseconds, ?2 in
// seconds (history times are text).
var insightsFailuresSQL = `SELECT j.queue, j.kind, e.value ->> '$.class', count(*),
		sum(CASE WHEN ` + errandstore.FailureKilledSQL("j", "e.value ->> '$.replay'", "j.errors ->> ('$[' || (e.key + 1) || '].replay')", "") + `
			THEN 0 ELSE 1 END)
	FROM errand_jobs j, json_each(j.errors) e
		` + errandstore.ReplayedFromDeadJoinSQL("errand_audit", "j", "e.value ->> '$.replay'", "") + `
	WHERE j.seq IN (
			SELECT seq FROM errand_jobs INDEXED BY errand_jobs_finished
				WHERE state IN (` + errandstore.SQLStates(errandstore.TerminalStates) + `) AND finished_at IS NOT NULL AND finished_at >= ?1
			UNION ALL
			SELECT seq FROM errand_jobs INDEXED BY errand_jobs_state WHERE state IN (` + errandstore.SQLStates(errandstore.InsightsFailingStates) + `)
			UNION ALL
			SELECT seq FROM errand_jobs INDEXED BY errand_jobs_requeued
				WHERE state = 'queued' AND last_error IS NOT NULL AND unixepoch(last_error ->> '$.at', 'subsec') >= ?2)
		AND e.value ->> '$.class' <> 'interrupted'
		AND unixepoch(e.value ->> '$.at', 'subsec') >= ?2
	GROUP BY j.queue, j.kind, e.value ->> '$.class'`

// insightsSamplesSQL reads the last hour's succeeded jobs, newest first. ?1
// is an hour ago, ?2 the limit.
const insightsSamplesSQL = `SELECT queue, kind, finished_at - attempted_at, attempted_at - available_at
	FROM errand_jobs INDEXED BY errand_jobs_finished
	WHERE state = 'succeeded' AND finished_at IS NOT NULL AND finished_at >= ?1 AND attempted_at IS NOT NULL
	ORDER BY finished_at DESC LIMIT ?2`

// JobInsights implements [errandstore.OperatorStore]. The reads run in one read
// transaction, so that they see one moment.
func (s *Store) JobInsights(ctx context.Context, p *errandstore.JobInsightsParams) (*errandtype.InsightsData, error) {
	now := s.clock.Now().UTC().Truncate(time.Microsecond)
	d := &errandtype.InsightsData{Now: now}
	ago := func(w time.Duration) int64 { return micros(now.Add(-w)) }
	tx, err := s.read.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("insights: %w", err)
	}
	defer tx.Rollback()
	err = each(ctx, tx, insightsDepthSQL, []any{micros(now)}, func(rows *sql.Rows) error {
		var c errandtype.DepthCount
		var bucket string
		var oldest int64
		if err := rows.Scan(&c.Queue, &c.Kind, &bucket, &c.Jobs, &oldest); err != nil {
			return err
		}
		c.Bucket, c.OldestAvailableAt = errandtype.DepthBucket(bucket), fromMicros(oldest)
		d.Depth = append(d.Depth, c)
		return nil
	})
	if err == nil {
		err = each(ctx, tx, insightsFinishedSQL, []any{ago(time.Minute), ago(5 * time.Minute), ago(time.Hour), ago(24 * time.Hour)},
			func(rows *sql.Rows) error {
				var c errandtype.FinishedCount
				var state string
				if err := rows.Scan(&c.Queue, &c.Kind, &state, &c.Last1m, &c.Last5m, &c.Last1h, &c.Last24h); err != nil {
					return err
				}
				c.State = errandtype.JobState(state)
				d.Finished = append(d.Finished, c)
				return nil
			})
	}
	if err == nil {
		hour := now.Add(-errandstore.InsightsWindow)
		err = each(ctx, tx, insightsFailuresSQL, []any{micros(hour), float64(hour.UnixMicro()) / 1e6}, func(rows *sql.Rows) error {
			var c errandtype.FailureCount
			if err := rows.Scan(&c.Queue, &c.Kind, &c.Class, &c.Failures, &c.Retried); err != nil {
				return err
			}
			d.Failures = append(d.Failures, c)
			return nil
		})
	}
	if err == nil {
		err = each(ctx, tx, insightsSamplesSQL, []any{ago(errandstore.InsightsWindow), errandstore.InsightsSample(p.SampleLimit)}, func(rows *sql.Rows) error {
			var c errandtype.TimingSample
			var run, wait int64
			if err := rows.Scan(&c.Queue, &c.Kind, &run, &wait); err != nil {
				return err
			}
			c.Run, c.Wait = time.Duration(run)*time.Microsecond, time.Duration(wait)*time.Microsecond
			d.Samples = append(d.Samples, c)
			return nil
		})
	}
	if err != nil {
		return nil, fmt.Errorf("insights: %w", err)
	}
	return d, nil
}

// each runs q and calls fn for every row.
func each(ctx context.Context, tx *sql.Tx, q string, args []any, fn func(*sql.Rows) error) error {
	rows, err := tx.QueryContext(ctx, q, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := fn(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}
