package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
)

// ownsJob reports whether job id is running under token with a live lease.
func ownsJob(ctx context.Context, tx *sql.Tx, id, token string, now time.Time) (bool, error) {
	var n int
	err := tx.QueryRowContext(ctx, `SELECT count(*) FROM errand_jobs
		WHERE id = ? AND state = 'running' AND lease_token = ? AND lease_until > ?`,
		id, token, micros(now)).Scan(&n)
	return n > 0, err
}

// EffectRecordTx implements [errandstore.TxStore]. tx is a transaction on
// [Store.DB].
func (s *Store) EffectRecordTx(ctx context.Context, tx *sql.Tx, p *errandstore.EffectRecordParams) (bool, error) {
	if err := p.Validate(); err != nil {
		return false, err
	}
	now := s.clock.Now()
	if p.LeaseToken != "" {
		owns, err := ownsJob(ctx, tx, p.JobID, p.LeaseToken, now)
		if err != nil {
			return false, err
		}
		if !owns {
			return false, errandtype.ErrLeaseLost
		}
	}
	res, err := tx.ExecContext(ctx, `INSERT INTO errand_effects (key, job_id, state, lease_token, created_at, updated_at)
		VALUES (?, ?, 'completed', ?, ?, ?) ON CONFLICT (key) DO NOTHING`,
		p.Key, p.JobID, p.LeaseToken, micros(now), micros(now))
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

const effectColumns = `key, job_id, state, lease_token, message, created_at, updated_at`

func scanEffect(row scanner) (*errandstore.Effect, error) {
	var e errandstore.Effect
	var state string
	var created, updated int64
	if err := row.Scan(&e.Key, &e.JobID, &state, &e.LeaseToken, &e.Message, &created, &updated); err != nil {
		return nil, err
	}
	e.State = errandtype.EffectState(state)
	e.CreatedAt, e.UpdatedAt = fromMicros(created), fromMicros(updated)
	return &e, nil
}

// EffectBegin implements [errandstore.EffectStore].
func (s *Store) EffectBegin(ctx context.Context, p *errandstore.EffectParams) (*errandstore.Effect, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	var e *errandstore.Effect
	err := s.tx(ctx, func(tx *sql.Tx) error {
		now := s.clock.Now()
		owns, err := ownsJob(ctx, tx, p.JobID, p.LeaseToken, now)
		if err != nil {
			return err
		}
		if !owns {
			return errandtype.ErrLeaseLost
		}
		found, err := scanEffect(tx.QueryRowContext(ctx, `SELECT `+effectColumns+` FROM errand_effects WHERE key = ?`, p.Key))
		if errors.Is(err, sql.ErrNoRows) {
			found, err = nil, nil
		}
		if err != nil {
			return err
		}
		e, err = errandstore.BeginEffect(found, p.LeaseToken, func() (bool, error) {
			return ownsJob(ctx, tx, found.JobID, found.LeaseToken, now)
		}, func() (*errandstore.Effect, error) {
			return scanEffect(tx.QueryRowContext(ctx, `INSERT INTO errand_effects
					(key, job_id, state, lease_token, message, created_at, updated_at)
				VALUES (?, ?, 'in_progress', ?, '', ?, ?)
				ON CONFLICT (key) DO UPDATE SET job_id = excluded.job_id, state = 'in_progress',
					lease_token = excluded.lease_token, updated_at = excluded.updated_at
				RETURNING `+effectColumns, p.Key, p.JobID, p.LeaseToken, micros(now), micros(now)))
		})
		return err
	})
	if err != nil {
		return nil, err
	}
	return e, nil
}

// EffectComplete implements [errandstore.EffectStore].
func (s *Store) EffectComplete(ctx context.Context, p *errandstore.EffectParams) (*errandstore.Effect, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return s.effectFinish(ctx, p, errandtype.EffectCompleted, "")
}

// EffectRelease implements [errandstore.EffectStore].
func (s *Store) EffectRelease(ctx context.Context, p *errandstore.EffectReleaseParams) (*errandstore.Effect, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return s.effectFinish(ctx, &p.EffectParams, errandtype.EffectFailed, p.Message)
}

func (s *Store) effectFinish(ctx context.Context, p *errandstore.EffectParams, state errandtype.EffectState, message string) (*errandstore.Effect, error) {
	var e *errandstore.Effect
	err := s.tx(ctx, func(tx *sql.Tx) error {
		now := s.clock.Now()
		owns, err := ownsJob(ctx, tx, p.JobID, p.LeaseToken, now)
		if err != nil {
			return err
		}
		if !owns {
			return errandtype.ErrLeaseLost
		}
		e, err = scanEffect(tx.QueryRowContext(ctx, `UPDATE errand_effects
			SET state = ?, message = ?, updated_at = ?
			WHERE key = ? AND lease_token = ? AND state = 'in_progress'
			RETURNING `+effectColumns, string(state), message, micros(now), p.Key, p.LeaseToken))
		if errors.Is(err, sql.ErrNoRows) {
			return errandtype.ErrLeaseLost
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return e, nil
}

// EffectGet implements [errandstore.EffectStore].
func (s *Store) EffectGet(ctx context.Context, p *errandstore.EffectGetParams) (*errandstore.Effect, error) {
	e, err := scanEffect(s.read.QueryRowContext(ctx, `SELECT `+effectColumns+` FROM errand_effects WHERE key = ?`, p.Key))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, errandtype.ErrNotFound
	}
	return e, err
}
