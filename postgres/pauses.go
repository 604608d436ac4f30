package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
	"github.com/jackc/pgx/v5"
)

var _ errandstore.PauseStore = (*Store)(nil)

const pauseColumns = `scope, name, paused_at, operator, reason`

// PauseSet implements [errandstore.PauseStore].
func (s *Store) PauseSet(ctx context.Context, p *errandstore.PauseSetParams) (*errandstore.PauseSetResult, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	var res *errandstore.PauseSetResult
	now, scope := s.nowArg(), string(p.Scope)
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		res, err = p.Apply(errandstore.PauseOps{
			Insert: func() (*errandtype.Pause, bool, error) {
				pz, err := scanPause(tx.QueryRow(ctx, s.sql(`INSERT INTO {pauses} (`+pauseColumns+`)
					VALUES ($2, $3, {now}, $4, $5) ON CONFLICT DO NOTHING RETURNING `+pauseColumns),
					now, scope, p.Name, p.Operator, p.Reason))
				if isNoRows(err) {
					return nil, false, nil
				}
				return pz, err == nil, err
			},
			Read: func() (*errandtype.Pause, error) {
				return scanPause(tx.QueryRow(ctx, s.sql(`SELECT `+pauseColumns+` FROM {pauses} WHERE scope = $1 AND name = $2`), scope, p.Name))
			},
			Delete: func() (bool, error) {
				tag, err := tx.Exec(ctx, s.sql(`DELETE FROM {pauses} WHERE scope = $1 AND name = $2`), scope, p.Name)
				return err == nil && tag.RowsAffected() > 0, err
			},
			Audit: func(action errandtype.AuditAction, details json.RawMessage) error {
				return s.insertAudit(ctx, tx, now, &auditEntry{action: action, operator: p.Operator, reason: p.Reason, details: details})
			},
		})
		return err
	})
	if err != nil {
		return nil, p.Failed(badValue(err))
	}
	return res, nil
}

// PauseList implements [errandstore.PauseStore].
func (s *Store) PauseList(ctx context.Context) ([]errandtype.Pause, error) {
	rows, err := s.pool.Query(ctx, s.sql(`SELECT `+pauseColumns+` FROM {pauses} ORDER BY scope <> 'queue', name`))
	if err != nil {
		return nil, fmt.Errorf("list pauses: %w", err)
	}
	out := []errandtype.Pause{}
	for rows.Next() {
		pz, err := scanPause(rows)
		if err != nil {
			rows.Close()
			return nil, fmt.Errorf("list pauses: %w", err)
		}
		out = append(out, *pz)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list pauses: %w", err)
	}
	return out, nil
}

func scanPause(row scanner) (*errandtype.Pause, error) {
	var p errandtype.Pause
	var scope string
	var at time.Time
	if err := row.Scan(&scope, &p.Name, &at, &p.Operator, &p.Reason); err != nil {
		return nil, err
	}
	p.Scope, p.PausedAt = errandtype.PauseScope(scope), at.UTC()
	return &p, nil
}
