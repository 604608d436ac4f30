package postgres

import (
	"context"
	"fmt"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
)

// LeaderElect implements [errandstore.LeaderElector]. One statement takes the lease when
// it is free or expired and renews it when the candidate holds it; the row
// lock it takes serialises candidates on every host, and the database's
// clock decides expiry.
func (s *Store) LeaderElect(ctx context.Context, p *errandstore.LeaderElectParams) (*errandtype.Leader, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	l := errandtype.Leader{Name: p.Name}
	err := s.pool.QueryRow(ctx, s.sql(`INSERT INTO {leaders} AS l (name, holder, elected_at, until)
		VALUES ($2, $3, {now}, {now} + $4 * interval '1 microsecond')
		ON CONFLICT (name) DO UPDATE SET
			elected_at = CASE WHEN l.holder = excluded.holder THEN l.elected_at ELSE excluded.elected_at END,
			holder = excluded.holder, until = excluded.until
		WHERE l.holder = excluded.holder OR l.until <= {now}
		RETURNING holder, elected_at, until`), s.nowArg(), p.Name, p.Holder, us(p.TTL)).Scan(&l.Holder, &l.Elected, &l.Until)
	switch {
	case err == nil:
		l.Leading = true
	case isNoRows(err):
		// Someone else holds a live lease. This statement sees it even if
		// it was committed while the election above waited for its lock.
		err = s.pool.QueryRow(ctx, s.sql(`SELECT holder, elected_at, until FROM {leaders} WHERE name = $1`), p.Name).
			Scan(&l.Holder, &l.Elected, &l.Until)
	}
	if err != nil {
		return nil, fmt.Errorf("elect leader: %w", err)
	}
	l.Elected, l.Until = l.Elected.UTC(), l.Until.UTC()
	return &l, nil
}

// LeaderResign implements [errandstore.LeaderElector].
func (s *Store) LeaderResign(ctx context.Context, p *errandstore.LeaderResignParams) error {
	if err := p.Validate(); err != nil {
		return err
	}
	if _, err := s.pool.Exec(ctx, s.sql(`DELETE FROM {leaders} WHERE name = $1 AND holder = $2`), p.Name, p.Holder); err != nil {
		return fmt.Errorf("resign leader: %w", err)
	}
	return nil
}

// LeaderGet implements [errandstore.LeaderElector].
func (s *Store) LeaderGet(ctx context.Context, p *errandstore.LeaderGetParams) (*errandtype.Leader, error) {
	name := p.Name
	if !errandtype.StorableText(name) {
		return nil, errandtype.ErrNotFound // no leadership has such a name
	}
	l := errandtype.Leader{Name: name}
	err := s.pool.QueryRow(ctx, s.sql(`SELECT holder, elected_at, until FROM {leaders}
		WHERE name = $2 AND until > {now}`), s.nowArg(), name).Scan(&l.Holder, &l.Elected, &l.Until)
	if isNoRows(err) {
		return nil, errandtype.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("get leader: %w", err)
	}
	l.Elected, l.Until = l.Elected.UTC(), l.Until.UTC()
	return &l, nil
}
