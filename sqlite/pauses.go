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

var _ errandstore.PauseStore = (*Store)(nil)

const pauseColumns = `scope, name, paused_at, operator, reason`

// PauseSet implements [errandstore.PauseStore].
func (s *Store) PauseSet(ctx context.Context, p *errandstore.PauseSetParams) (*errandstore.PauseSetResult, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	var res *errandstore.PauseSetResult
	scope := string(p.Scope)
	err := s.tx(ctx, func(tx *sql.Tx) error {
		now := s.clock.Now()
		var err error
		res, err = p.Apply(errandstore.PauseOps{
			Insert: func() (*errandtype.Pause, bool, error) {
				pz, err := scanPause(tx.QueryRowContext(ctx, `INSERT INTO errand_pauses (`+pauseColumns+`)
					VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING RETURNING `+pauseColumns,
					scope, p.Name, micros(now), p.Operator, p.Reason))
				if errors.Is(err, sql.ErrNoRows) {
					return nil, false, nil
				}
				return pz, err == nil, err
			},
			Read: func() (*errandtype.Pause, error) {
				return scanPause(tx.QueryRowContext(ctx, `SELECT `+pauseColumns+` FROM errand_pauses WHERE scope = ? AND name = ?`, scope, p.Name))
			},
			Delete: func() (bool, error) {
				r, err := tx.ExecContext(ctx, `DELETE FROM errand_pauses WHERE scope = ? AND name = ?`, scope, p.Name)
				if err != nil {
					return false, err
				}
				n, err := r.RowsAffected()
				return n > 0, err
			},
			Audit: func(action errandtype.AuditAction, details json.RawMessage) error {
				return insertAudit(ctx, tx, &auditEntry{action: action, operator: p.Operator, reason: p.Reason, at: now, details: details})
			},
		})
		return err
	})
	if err != nil {
		return nil, p.Failed(err)
	}
	return res, nil
}

// PauseList implements [errandstore.PauseStore].
func (s *Store) PauseList(ctx context.Context) ([]errandtype.Pause, error) {
	rows, err := s.read.QueryContext(ctx, `SELECT `+pauseColumns+` FROM errand_pauses ORDER BY scope <> 'queue', name`)
	if err != nil {
		return nil, fmt.Errorf("list pauses: %w", err)
	}
	ps, err := scanRows(rows, func(row scanner) (errandtype.Pause, error) {
		p, err := scanPause(row)
		if err != nil {
			return errandtype.Pause{}, err
		}
		return *p, nil
	})
	if err != nil {
		return nil, fmt.Errorf("list pauses: %w", err)
	}
	if ps == nil {
		ps = []errandtype.Pause{}
	}
	return ps, nil
}

func scanPause(row scanner) (*errandtype.Pause, error) {
	var p errandtype.Pause
	var scope string
	var at int64
	if err := row.Scan(&scope, &p.Name, &at, &p.Operator, &p.Reason); err != nil {
		return nil, err
	}
	p.Scope, p.PausedAt = errandtype.PauseScope(scope), fromMicros(at)
	return &p, nil
}
