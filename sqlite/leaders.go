package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
)

// LeaderElect implements [errandstore.LeaderElector].
func (s *Store) LeaderElect(ctx context.Context, p *errandstore.LeaderElectParams) (*errandtype.Leader, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	var l errandtype.Leader
	err := s.tx(ctx, func(tx *sql.Tx) error {
		now := micros(s.clock.Now())
		// Take the lease when it is free or expired; renew it when held.
		_, err := tx.ExecContext(ctx, `INSERT INTO errand_leaders (name, holder, elected_at, until)
			VALUES (?1, ?2, ?3, ?4)
			ON CONFLICT (name) DO UPDATE SET
				elected_at = CASE WHEN errand_leaders.holder = excluded.holder
					THEN errand_leaders.elected_at ELSE excluded.elected_at END,
				holder = excluded.holder, until = excluded.until
			WHERE errand_leaders.holder = excluded.holder OR errand_leaders.until <= ?3`,
			p.Name, p.Holder, now, now+p.TTL.Microseconds())
		if err != nil {
			return err
		}
		var elected, until int64
		if err := tx.QueryRowContext(ctx, `SELECT holder, elected_at, until FROM errand_leaders WHERE name = ?`, p.Name).
			Scan(&l.Holder, &elected, &until); err != nil {
			return err
		}
		l.Name, l.Elected, l.Until = p.Name, fromMicros(elected), fromMicros(until)
		l.Leading = l.Holder == p.Holder && until > now
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("elect leader: %w", err)
	}
	return &l, nil
}

// LeaderResign implements [errandstore.LeaderElector].
func (s *Store) LeaderResign(ctx context.Context, p *errandstore.LeaderResignParams) error {
	if err := p.Validate(); err != nil {
		return err
	}
	return s.tx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `DELETE FROM errand_leaders WHERE name = ? AND holder = ?`, p.Name, p.Holder)
		return err
	})
}

// LeaderGet implements [errandstore.LeaderElector].
func (s *Store) LeaderGet(ctx context.Context, p *errandstore.LeaderGetParams) (*errandtype.Leader, error) {
	name := p.Name
	var l errandtype.Leader
	var elected, until int64
	err := s.read.QueryRowContext(ctx, `SELECT holder, elected_at, until FROM errand_leaders
		WHERE name = ? AND until > ?`, name, micros(s.clock.Now())).Scan(&l.Holder, &elected, &until)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, errandtype.ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	l.Name, l.Elected, l.Until = name, fromMicros(elected), fromMicros(until)
	return &l, nil
}
