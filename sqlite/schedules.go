package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
)

var _ errandstore.ScheduleStore = (*Store)(nil)

const scheduleColumns = `name, spec, kind, queue, missed, next_fire_at, last_fire_at, last_job_id, created_at, updated_at`

func scanSchedule(row scanner) (*errandtype.ScheduleRecord, error) {
	var r errandtype.ScheduleRecord
	var next, created, updated int64
	var last sql.NullInt64
	var lastJob sql.NullString
	if err := row.Scan(&r.Name, &r.Spec, &r.Kind, &r.Queue, &r.Missed, &next, &last, &lastJob, &created, &updated); err != nil {
		return nil, err
	}
	r.NextFireAt, r.CreatedAt, r.UpdatedAt = fromMicros(next), fromMicros(created), fromMicros(updated)
	r.LastFireAt, r.LastJobID = nullMicros(last), nullString(lastJob)
	return &r, nil
}

// ScheduleUpsert implements [errandstore.ScheduleStore].
func (s *Store) ScheduleUpsert(ctx context.Context, p *errandstore.ScheduleUpsertParams) (*errandtype.ScheduleRecord, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	var r *errandtype.ScheduleRecord
	err := s.tx(ctx, func(tx *sql.Tx) error {
		now := micros(s.clock.Now())
		var err error
		r, err = scanSchedule(tx.QueryRowContext(ctx, `INSERT INTO errand_schedules AS c
			(name, spec, kind, queue, missed, next_fire_at, created_at, updated_at)
			VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?7)
			ON CONFLICT (name) DO UPDATE SET
				next_fire_at = CASE WHEN c.spec = excluded.spec THEN c.next_fire_at ELSE excluded.next_fire_at END,
				spec = excluded.spec, kind = excluded.kind, queue = excluded.queue,
				missed = excluded.missed, updated_at = excluded.updated_at
			RETURNING `+scheduleColumns,
			p.Name, p.Spec, p.Kind, p.Queue, string(p.Missed), micros(p.NextFireAt), now))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("upsert schedule %s: %w", p.Name, err)
	}
	return r, nil
}

// ScheduleAdvance implements [errandstore.ScheduleStore]. The writer
// transaction serialises advances; the condition on next_fire_at is the
// compare-and-set.
func (s *Store) ScheduleAdvance(ctx context.Context, p *errandstore.ScheduleAdvanceParams) (*errandstore.ScheduleAdvanceResult, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	res := &errandstore.ScheduleAdvanceResult{}
	err := s.tx(ctx, func(tx *sql.Tx) error {
		now := micros(s.clock.Now())
		r, err := scanSchedule(tx.QueryRowContext(ctx, `UPDATE errand_schedules SET next_fire_at = ?, updated_at = ?
			WHERE name = ? AND next_fire_at = ? AND (?5 = '' OR spec = ?5) RETURNING `+scheduleColumns,
			micros(p.To), now, p.Name, micros(p.From), p.Spec))
		if errors.Is(err, sql.ErrNoRows) {
			res.Schedule, err = scanSchedule(tx.QueryRowContext(ctx, `SELECT `+scheduleColumns+` FROM errand_schedules WHERE name = ?`, p.Name))
			if errors.Is(err, sql.ErrNoRows) {
				return errandtype.ErrNotFound
			}
			return err
		}
		if err != nil {
			return err
		}
		res.Advanced, res.Schedule = true, r
		if p.Job == nil {
			return nil
		}
		rs, err := s.insert(ctx, tx, []*errandstore.JobInsertParams{p.Job})
		if err != nil {
			return err
		}
		res.Job = &rs[0]
		res.Schedule, err = scanSchedule(tx.QueryRowContext(ctx, `UPDATE errand_schedules SET last_fire_at = ?, last_job_id = ?
			WHERE name = ? RETURNING `+scheduleColumns, micros(p.Tick), rs[0].Job.ID, p.Name))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("advance schedule %s: %w", p.Name, err)
	}
	return res, nil
}

// ScheduleList implements [errandstore.ScheduleStore].
func (s *Store) ScheduleList(ctx context.Context, _ *errandstore.ScheduleListParams) ([]*errandtype.ScheduleRecord, error) {
	rows, err := s.read.QueryContext(ctx, `SELECT `+scheduleColumns+` FROM errand_schedules ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("list schedules: %w", err)
	}
	out, err := scanRows(rows, scanSchedule)
	if err != nil {
		return nil, fmt.Errorf("list schedules: %w", err)
	}
	if out == nil {
		out = []*errandtype.ScheduleRecord{} // a list, in JSON too
	}
	return out, nil
}

// ScheduleDelete implements [errandstore.ScheduleStore].
func (s *Store) ScheduleDelete(ctx context.Context, p *errandstore.ScheduleDeleteParams) (*errandtype.ScheduleRecord, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	var r *errandtype.ScheduleRecord
	err := s.tx(ctx, func(tx *sql.Tx) error {
		var err error
		r, err = scanSchedule(tx.QueryRowContext(ctx, `DELETE FROM errand_schedules WHERE name = ? RETURNING `+scheduleColumns, p.Name))
		if errors.Is(err, sql.ErrNoRows) {
			return errandtype.ErrNotFound
		}
		if err != nil {
			return err
		}
		return insertAudit(ctx, tx, &auditEntry{action: errandtype.AuditScheduleDelete, operator: p.Operator, reason: p.Reason,
			at: s.clock.Now(), details: errandstore.ScheduleDeleteDetails(r)})
	})
	if err != nil {
		return nil, fmt.Errorf("delete schedule %s: %w", p.Name, err)
	}
	return r, nil
}
