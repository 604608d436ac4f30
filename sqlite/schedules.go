package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
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
	return errandstore.AdvanceSchedule(p, func(fn func(*sql.Tx) error) error { return s.tx(ctx, fn) }, errandstore.ScheduleAdvanceSteps[*sql.Tx]{
		Advance: func(tx *sql.Tx) (*errandtype.ScheduleRecord, error) {
			r, err := scanSchedule(tx.QueryRowContext(ctx, `UPDATE errand_schedules SET next_fire_at = ?, updated_at = ?
				WHERE name = ? AND next_fire_at = ? AND (?5 = '' OR spec = ?5) RETURNING `+scheduleColumns,
				micros(p.To), micros(s.clock.Now()), p.Name, micros(p.From), p.Spec))
			if errors.Is(err, sql.ErrNoRows) {
				return nil, nil
			}
			return r, err
		},
		Read: func(tx *sql.Tx) (*errandtype.ScheduleRecord, error) {
			r, err := scanSchedule(tx.QueryRowContext(ctx, `SELECT `+scheduleColumns+` FROM errand_schedules WHERE name = ?`, p.Name))
			if errors.Is(err, sql.ErrNoRows) {
				return nil, errandtype.ErrNotFound
			}
			return r, err
		},
		Insert: func(tx *sql.Tx, j *errandstore.JobInsertParams) (errandstore.JobInsertResult, error) {
			rs, err := s.insert(ctx, tx, []*errandstore.JobInsertParams{j})
			if err != nil {
				return errandstore.JobInsertResult{}, err
			}
			return rs[0], nil
		},
		Fired: func(tx *sql.Tx, jobID string) (*errandtype.ScheduleRecord, error) {
			return scanSchedule(tx.QueryRowContext(ctx, `UPDATE errand_schedules SET last_fire_at = ?, last_job_id = ?
				WHERE name = ? RETURNING `+scheduleColumns, micros(p.Tick), jobID, p.Name))
		},
	})
}

// ScheduleList implements [errandstore.ScheduleStore].
func (s *Store) ScheduleList(ctx context.Context, _ *errandstore.ScheduleListParams) ([]*errandtype.ScheduleRecord, error) {
	out, err := readList(ctx, s.read, scanSchedule, `SELECT `+scheduleColumns+` FROM errand_schedules ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("list schedules: %w", err)
	}
	return out, nil
}

// ScheduleDelete implements [errandstore.ScheduleStore].
func (s *Store) ScheduleDelete(ctx context.Context, p *errandstore.ScheduleDeleteParams) (*errandtype.ScheduleRecord, error) {
	return errandstore.DeleteSchedule(p, func(fn func(*sql.Tx) error) error { return s.tx(ctx, fn) },
		func(tx *sql.Tx) (*errandtype.ScheduleRecord, error) {
			r, err := scanSchedule(tx.QueryRowContext(ctx, `DELETE FROM errand_schedules WHERE name = ? RETURNING `+scheduleColumns, p.Name))
			if errors.Is(err, sql.ErrNoRows) {
				return nil, errandtype.ErrNotFound
			}
			return r, err
		},
		func(tx *sql.Tx, details json.RawMessage) error {
			return insertAudit(ctx, tx, &auditEntry{action: errandtype.AuditScheduleDelete, operator: p.Operator, reason: p.Reason,
				at: s.clock.Now(), details: details})
		})
}
