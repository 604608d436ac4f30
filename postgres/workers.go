package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
	"github.com/jackc/pgx/v5"
)

const workerColumns = `id, host, pid, queues::text, heartbeat_interval_us, started_at, heartbeat_at,
	stopped_at, last_completed_at, jobs_running, jobs_completed, clock_skew_ms, draining_at, kinds::text`

// scanWorker reads one registry row, and any extra columns after it; the
// caller sets its status.
func scanWorker(row scanner, extra ...any) (*errandtype.WorkerRecord, error) {
	var (
		w errandtype.WorkerRecord
		c errandtype.WorkerColumns
	)
	dest := append([]any{&w.ID, &w.Host, &w.PID, &c.Queues, &c.HeartbeatIntervalUS, &w.StartedAt, &w.HeartbeatAt,
		&w.StoppedAt, &w.LastCompletedAt, &w.JobsRunning, &w.JobsCompleted, &w.ClockSkewMS, &w.DrainingAt, &c.Kinds}, extra...)
	if err := row.Scan(dest...); err != nil {
		return nil, err
	}
	// pgx returns times in the local zone; the contract's are UTC.
	w.StartedAt, w.HeartbeatAt = w.StartedAt.UTC(), w.HeartbeatAt.UTC()
	for _, t := range []**time.Time{&w.StoppedAt, &w.LastCompletedAt, &w.DrainingAt} {
		*t = utc(*t)
	}
	if err := w.DecodeColumns(&c); err != nil {
		return nil, err
	}
	return &w, nil
}

// WorkerRegister implements [errandstore.WorkerRegistry].
func (s *Store) WorkerRegister(ctx context.Context, p *errandstore.WorkerRegisterParams) (*errandtype.WorkerRecord, error) {
	c, err := p.Columns()
	if err != nil {
		return nil, err
	}
	w, err := scanWorker(s.pool.QueryRow(ctx, s.sql(`INSERT INTO {workers} (id, host, pid, queues, kinds,
			heartbeat_interval_us, started_at, heartbeat_at)
		VALUES ($2, $3, $4, $5::jsonb, $7::jsonb, $6, {now}, {now})
		`+errandstore.WorkerReregisterSQL+`
		RETURNING `+workerColumns),
		s.nowArg(), p.ID, p.Host, p.PID, c.Queues, c.HeartbeatIntervalUS, c.Kinds))
	if err != nil {
		return nil, fmt.Errorf("register worker %s: %w", p.ID, badValue(err))
	}
	w.Status = errandstore.WorkerStatusAt(w, w.HeartbeatAt, 0)
	return w, nil
}

// WorkerHeartbeat implements [errandstore.WorkerRegistry]. When stats.SentAt is set it
// records the clock skew: the database's clock minus the worker's, in
// milliseconds (including the heartbeat's transit time).
func (s *Store) WorkerHeartbeat(ctx context.Context, p *errandstore.WorkerHeartbeatParams) (*errandtype.WorkerRecord, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	id, st := p.ID, p.Stats
	if !errandtype.StorableText(id) {
		return nil, fmt.Errorf("heartbeat worker %s: %w", id, errandtype.ErrNotFound) // no worker has such an id
	}
	var ago *int64 // NULL when nothing completed
	if st.JobsCompleted > 0 {
		v := us(st.LastCompletedAgo)
		ago = &v
	}
	var sent *time.Time
	if !st.SentAt.IsZero() {
		t := micro(st.SentAt)
		sent = &t
	}
	// last_completed_at moves only when the count does, so that the
	// worker's and the store's clocks drifting apart between beats do not
	// make it wander.
	w, err := scanWorker(s.pool.QueryRow(ctx, s.sql(`UPDATE {workers} SET heartbeat_at = {now},
			last_completed_at = CASE
				WHEN $2::bigint IS NULL THEN NULL
				WHEN last_completed_at IS NULL OR jobs_completed <> $3 THEN {now} - $2 * interval '1 microsecond'
				ELSE last_completed_at END,
			jobs_running = $4, jobs_completed = $3,
			clock_skew_ms = CASE WHEN $5::timestamptz IS NULL THEN clock_skew_ms
				ELSE trunc(extract(epoch FROM {now} - $5::timestamptz) * 1000)::bigint END,
			draining_at = CASE WHEN $7 THEN coalesce(draining_at, {now}) ELSE draining_at END
		WHERE id = $6 AND stopped_at IS NULL
		RETURNING `+workerColumns),
		s.nowArg(), ago, st.JobsCompleted, st.JobsRunning, sent, id, st.Draining))
	if isNoRows(err) {
		return nil, fmt.Errorf("heartbeat worker %s: %w", id, errandtype.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("heartbeat worker %s: %w", id, err)
	}
	w.Status = errandstore.WorkerStatusAt(w, w.HeartbeatAt, 0)
	return w, nil
}

// WorkerList implements [errandstore.WorkerRegistry].
func (s *Store) WorkerList(ctx context.Context, p *errandstore.WorkerListParams) ([]*errandtype.WorkerRecord, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, s.sql(`SELECT `+workerColumns+`, {now} FROM {workers}
		ORDER BY started_at DESC, id`), s.nowArg())
	if err != nil {
		return nil, fmt.Errorf("list workers: %w", err)
	}
	ws, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*errandtype.WorkerRecord, error) {
		var now time.Time
		w, err := scanWorker(row, &now)
		if err != nil {
			return nil, err
		}
		w.Status = errandstore.WorkerStatusAt(w, now, p.StaleAfter)
		return w, nil
	})
	if err != nil {
		return nil, fmt.Errorf("list workers: %w", err)
	}
	if ws == nil {
		ws = []*errandtype.WorkerRecord{}
	}
	return ws, nil
}

// WorkerStop implements [errandstore.WorkerRegistry].
func (s *Store) WorkerStop(ctx context.Context, p *errandstore.WorkerStopParams) error {
	id := p.ID
	if !errandtype.StorableText(id) {
		return fmt.Errorf("stop worker %s: %w", id, errandtype.ErrNotFound) // no worker has such an id
	}
	tag, err := s.pool.Exec(ctx, s.sql(`UPDATE {workers}
		SET stopped_at = coalesce(stopped_at, {now}), jobs_running = 0 WHERE id = $2`), s.nowArg(), id)
	if err != nil {
		return fmt.Errorf("stop worker %s: %w", id, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("stop worker %s: %w", id, errandtype.ErrNotFound)
	}
	return nil
}

// WorkerPrune implements [errandstore.WorkerRegistry].
func (s *Store) WorkerPrune(ctx context.Context, p *errandstore.WorkerPruneParams) (int, error) {
	if err := p.Validate(); err != nil {
		return 0, err
	}
	tag, err := s.pool.Exec(ctx, s.sql(`DELETE FROM {workers} WHERE
		(stopped_at IS NOT NULL AND stopped_at <= {now} - $2 * interval '1 microsecond')
		OR (stopped_at IS NULL
			AND heartbeat_at + $3 * heartbeat_interval_us * interval '1 microsecond' <= {now}
			AND heartbeat_at <= {now} - $2 * interval '1 microsecond')`),
		s.nowArg(), us(p.OlderThan), errandstore.WorkerMissedHeartbeats)
	if err != nil {
		return 0, fmt.Errorf("prune workers: %w", err)
	}
	return int(tag.RowsAffected()), nil
}
