package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
)

const workerColumns = `id, host, pid, queues, heartbeat_interval_us, started_at, heartbeat_at,
	stopped_at, last_completed_at, jobs_running, jobs_completed, clock_skew_ms, draining_at, kinds`

// scanWorker reads one registry row; the caller sets its status. Times are
// microseconds since the epoch.
func scanWorker(row scanner) (*errandtype.WorkerRecord, error) {
	var (
		w                           errandtype.WorkerRecord
		c                           errandtype.WorkerColumns
		start, beat                 int64
		stopped, completed, drained sql.NullInt64
	)
	err := row.Scan(&w.ID, &w.Host, &w.PID, &c.Queues, &c.HeartbeatIntervalUS, &start, &beat,
		&stopped, &completed, &w.JobsRunning, &w.JobsCompleted, &w.ClockSkewMS, &drained, &c.Kinds)
	if err != nil {
		return nil, err
	}
	w.StartedAt, w.HeartbeatAt = fromMicros(start), fromMicros(beat)
	w.StoppedAt, w.LastCompletedAt, w.DrainingAt = nullMicros(stopped), nullMicros(completed), nullMicros(drained)
	return &w, w.DecodeColumns(&c)
}

// WorkerRegister implements [errandstore.WorkerRegistry].
func (s *Store) WorkerRegister(ctx context.Context, p *errandstore.WorkerRegisterParams) (*errandtype.WorkerRecord, error) {
	c, err := p.Columns()
	if err != nil {
		return nil, err
	}
	var w *errandtype.WorkerRecord
	err = s.tx(ctx, func(tx *sql.Tx) error {
		now := micros(s.clock.Now())
		row := tx.QueryRowContext(ctx, `INSERT INTO errand_workers (id, host, pid, queues, kinds,
				heartbeat_interval_us, started_at, heartbeat_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?)
			`+errandstore.WorkerReregisterSQL+`
			RETURNING `+workerColumns,
			p.ID, p.Host, p.PID, c.Queues, c.Kinds, c.HeartbeatIntervalUS, now, now)
		var err error
		w, err = scanWorker(row)
		if err != nil {
			return err
		}
		w.Status = errandstore.WorkerStatusAt(w, fromMicros(now), 0)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("register worker %s: %w", p.ID, err)
	}
	return w, nil
}

// WorkerHeartbeat implements [errandstore.WorkerRegistry]. SQLite's clock is the worker's
// machine's, so it records no clock skew.
func (s *Store) WorkerHeartbeat(ctx context.Context, p *errandstore.WorkerHeartbeatParams) (*errandtype.WorkerRecord, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	id, st := p.ID, p.Stats
	var w *errandtype.WorkerRecord
	err := s.tx(ctx, func(tx *sql.Tx) error {
		now := micros(s.clock.Now())
		var last any // NULL when nothing completed
		if st.JobsCompleted > 0 {
			last = now - st.LastCompletedAgo.Microseconds()
		}
		// last_completed_at moves only when the count does, so that the
		// worker's and the store's clocks drifting apart between beats do
		// not make it wander.
		row := tx.QueryRowContext(ctx, `UPDATE errand_workers SET heartbeat_at = ?,
				last_completed_at = CASE
					WHEN ? IS NULL THEN NULL
					WHEN last_completed_at IS NULL OR jobs_completed <> ? THEN ?
					ELSE last_completed_at END,
				jobs_running = ?, jobs_completed = ?,
				draining_at = CASE WHEN ? THEN coalesce(draining_at, ?) ELSE draining_at END
			WHERE id = ? AND stopped_at IS NULL
			RETURNING `+workerColumns,
			now, last, st.JobsCompleted, last, st.JobsRunning, st.JobsCompleted, st.Draining, now, id)
		var err error
		w, err = scanWorker(row)
		if errors.Is(err, sql.ErrNoRows) {
			return errandtype.ErrNotFound
		}
		if err != nil {
			return err
		}
		w.Status = errandstore.WorkerStatusAt(w, fromMicros(now), 0)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("heartbeat worker %s: %w", id, err)
	}
	return w, nil
}

// WorkerStop implements [errandstore.WorkerRegistry].
func (s *Store) WorkerStop(ctx context.Context, p *errandstore.WorkerStopParams) error {
	id := p.ID
	err := s.tx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE errand_workers
			SET stopped_at = coalesce(stopped_at, ?), jobs_running = 0 WHERE id = ?`,
			micros(s.clock.Now()), id)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return errandtype.ErrNotFound
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("stop worker %s: %w", id, err)
	}
	return nil
}

// WorkerList implements [errandstore.WorkerRegistry].
func (s *Store) WorkerList(ctx context.Context, p *errandstore.WorkerListParams) ([]*errandtype.WorkerRecord, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	rows, err := s.read.QueryContext(ctx, `SELECT `+workerColumns+` FROM errand_workers
		ORDER BY started_at DESC, id`)
	if err != nil {
		return nil, fmt.Errorf("list workers: %w", err)
	}
	defer rows.Close()
	now := fromMicros(micros(s.clock.Now()))
	ws := []*errandtype.WorkerRecord{}
	for rows.Next() {
		w, err := scanWorker(rows)
		if err != nil {
			return nil, fmt.Errorf("list workers: %w", err)
		}
		w.Status = errandstore.WorkerStatusAt(w, now, p.StaleAfter)
		ws = append(ws, w)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list workers: %w", err)
	}
	return ws, nil
}

// WorkerPrune implements [errandstore.WorkerRegistry].
func (s *Store) WorkerPrune(ctx context.Context, p *errandstore.WorkerPruneParams) (int, error) {
	if err := p.Validate(); err != nil {
		return 0, err
	}
	var n int64
	err := s.tx(ctx, func(tx *sql.Tx) error {
		now := micros(s.clock.Now())
		cut := now - p.OlderThan.Microseconds()
		res, err := tx.ExecContext(ctx, `DELETE FROM errand_workers WHERE
			(stopped_at IS NOT NULL AND stopped_at <= ?)
			OR (stopped_at IS NULL AND heartbeat_at + ? * heartbeat_interval_us <= ? AND heartbeat_at <= ?)`,
			cut, errandstore.WorkerMissedHeartbeats, now, cut)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("prune workers: %w", err)
	}
	return int(n), nil
}
