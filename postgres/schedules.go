package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
	"github.com/errandhq/errand/internal/rowscan"
	"github.com/jackc/pgx/v5"
)

var _ errandstore.ScheduleStore = (*Store)(nil)

const scheduleColumns = `name, spec, kind, queue, missed, next_fire_at, last_fire_at, last_job_id, created_at, updated_at`

// schedSQL expands a schedule statement: {schedules} and what [Store.sql]
// expands.
func (s *Store) schedSQL(q string) string {
	return s.sql(strings.ReplaceAll(q, "{schedules}", s.table("errand_schedules")))
}

func scanSchedule(row scanner) (*errandtype.ScheduleRecord, error) {
	var r errandtype.ScheduleRecord
	var missed string
	if err := row.Scan(&r.Name, &r.Spec, &r.Kind, &r.Queue, &missed, &r.NextFireAt, &r.LastFireAt, &r.LastJobID,
		&r.CreatedAt, &r.UpdatedAt); err != nil {
		return nil, err
	}
	r.Missed = errandtype.MissedPolicy(missed)
	r.NextFireAt, r.CreatedAt, r.UpdatedAt = r.NextFireAt.UTC(), r.CreatedAt.UTC(), r.UpdatedAt.UTC()
	r.LastFireAt = utc(r.LastFireAt)
	return &r, nil
}

// ScheduleUpsert implements [errandstore.ScheduleStore].
func (s *Store) ScheduleUpsert(ctx context.Context, p *errandstore.ScheduleUpsertParams) (*errandtype.ScheduleRecord, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	r, err := scanSchedule(s.pool.QueryRow(ctx, s.schedSQL(`INSERT INTO {schedules} AS c
		(name, spec, kind, queue, missed, next_fire_at, created_at, updated_at)
		VALUES ($2, $3, $4, $5, $6, $7, {now}, {now})
		ON CONFLICT (name) DO UPDATE SET
			next_fire_at = CASE WHEN c.spec = excluded.spec THEN c.next_fire_at ELSE excluded.next_fire_at END,
			spec = excluded.spec, kind = excluded.kind, queue = excluded.queue,
			missed = excluded.missed, updated_at = excluded.updated_at
		RETURNING `+scheduleColumns),
		s.nowArg(), p.Name, p.Spec, p.Kind, p.Queue, string(p.Missed), micro(p.NextFireAt)))
	if err != nil {
		return nil, fmt.Errorf("upsert schedule %s: %w", p.Name, badValue(err))
	}
	return r, nil
}

// ScheduleAdvance implements [errandstore.ScheduleStore]. The UPDATE's row lock
// serialises advances of one schedule; a process that waited for it reads
// the row again (READ COMMITTED), finds next_fire_at moved, and updates
// nothing.
func (s *Store) ScheduleAdvance(ctx context.Context, p *errandstore.ScheduleAdvanceParams) (*errandstore.ScheduleAdvanceResult, error) {
	return errandstore.AdvanceSchedule(p, func(fn func(pgx.Tx) error) error { return pgx.BeginFunc(ctx, s.pool, fn) }, errandstore.ScheduleAdvanceSteps[pgx.Tx]{
		Advance: func(tx pgx.Tx) (*errandtype.ScheduleRecord, error) {
			r, err := scanSchedule(tx.QueryRow(ctx, s.schedSQL(`UPDATE {schedules} SET next_fire_at = $2, updated_at = {now}
				WHERE name = $3 AND next_fire_at = $4 AND ($5 = '' OR spec = $5) RETURNING `+scheduleColumns),
				s.nowArg(), micro(p.To), p.Name, micro(p.From), p.Spec))
			if isNoRows(err) {
				return nil, nil
			}
			return r, err
		},
		Read: func(tx pgx.Tx) (*errandtype.ScheduleRecord, error) {
			r, err := scanSchedule(tx.QueryRow(ctx, s.schedSQL(`SELECT `+scheduleColumns+` FROM {schedules} WHERE name = $1`), p.Name))
			if isNoRows(err) {
				return nil, errandtype.ErrNotFound
			}
			return r, err
		},
		Insert: func(tx pgx.Tx, j *errandstore.JobInsertParams) (errandstore.JobInsertResult, error) {
			rs, err := s.insert(ctx, pgxQuerier{tx}, s.own, []*errandstore.JobInsertParams{j})
			if err != nil {
				return errandstore.JobInsertResult{}, err
			}
			return rs[0], nil
		},
		Fired: func(tx pgx.Tx, jobID string) (*errandtype.ScheduleRecord, error) {
			return scanSchedule(tx.QueryRow(ctx, s.schedSQL(`UPDATE {schedules} SET last_fire_at = $1, last_job_id = $2
				WHERE name = $3 RETURNING `+scheduleColumns), micro(p.Tick), jobID, p.Name))
		},
	})
}

// ScheduleList implements [errandstore.ScheduleStore].
func (s *Store) ScheduleList(ctx context.Context, _ *errandstore.ScheduleListParams) ([]*errandtype.ScheduleRecord, error) {
	rows, err := s.pool.Query(ctx, s.schedSQL(`SELECT `+scheduleColumns+` FROM {schedules} ORDER BY name`))
	if err != nil {
		return nil, fmt.Errorf("list schedules: %w", err)
	}
	defer rows.Close()
	out, err := rowscan.List(rows, scanSchedule)
	if err != nil {
		return nil, fmt.Errorf("list schedules: %w", err)
	}
	return out, nil
}

// ScheduleDelete implements [errandstore.ScheduleStore].
func (s *Store) ScheduleDelete(ctx context.Context, p *errandstore.ScheduleDeleteParams) (*errandtype.ScheduleRecord, error) {
	return errandstore.DeleteSchedule(p, func(fn func(pgx.Tx) error) error { return pgx.BeginFunc(ctx, s.pool, fn) },
		func(tx pgx.Tx) (*errandtype.ScheduleRecord, error) {
			r, err := scanSchedule(tx.QueryRow(ctx, s.schedSQL(`DELETE FROM {schedules} WHERE name = $1 RETURNING `+scheduleColumns), p.Name))
			if isNoRows(err) {
				return nil, errandtype.ErrNotFound
			}
			return r, err
		},
		func(tx pgx.Tx, details json.RawMessage) error {
			return s.insertAudit(ctx, tx, s.nowArg(), &auditEntry{action: errandtype.AuditScheduleDelete, operator: p.Operator, reason: p.Reason,
				details: details})
		})
}
