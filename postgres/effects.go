package postgres

import (
	"context"
	"fmt"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
	"github.com/jackc/pgx/v5"
)

// ownsJobSQL reports whether job $2 is running under token $3 with a live
// lease.
var ownsJobSQL = `SELECT EXISTS (SELECT 1 FROM {jobs} j, ` + leaseRows("$2::text AS id, $3::text AS token", "", "l") + `
	WHERE ` + leaseFence("j", "l") + `)`

// EffectRecordTx implements [errandstore.TxStore]: tx is a pgx.Tx on the
// store's database. The lease is checked against statement_timestamp(), not
// the start of the caller's transaction.
func (s *Store) EffectRecordTx(ctx context.Context, tx pgx.Tx, p *errandstore.EffectRecordParams) (bool, error) {
	return s.recordEffect(ctx, pgxQuerier{tx}, p)
}

// recordEffect is EffectRecordTx in the caller's transaction q.
func (s *Store) recordEffect(ctx context.Context, q querier, p *errandstore.EffectRecordParams) (bool, error) {
	if err := p.Validate(); err != nil {
		return false, err
	}
	key, jobID, leaseToken := p.Key, p.JobID, p.LeaseToken
	now := s.nowArg()
	if leaseToken != "" {
		rs, err := q.query(ctx, s.inTx.Replace(ownsJobSQL), now, jobID, leaseToken)
		if err != nil {
			return false, fmt.Errorf("record effect %s: %w", key, badValue(err))
		}
		var owns bool
		for rs.Next() {
			err = rs.Scan(&owns)
		}
		rs.Close()
		if err == nil {
			err = rs.Err()
		}
		if err != nil {
			return false, fmt.Errorf("record effect %s: %w", key, badValue(err))
		}
		if !owns {
			return false, errandtype.ErrLeaseLost
		}
	}
	n, err := q.exec(ctx, s.inTx.Replace(`INSERT INTO {effects} (key, job_id, state, lease_token, created_at, updated_at)
		VALUES ($2, $3, 'completed', $4, {now}, {now}) ON CONFLICT (key) DO NOTHING`), now, key, jobID, leaseToken)
	if err != nil {
		return false, fmt.Errorf("record effect %s: %w", key, badValue(err))
	}
	return n == 1, nil
}

const effectColumns = `key, job_id, state, lease_token, message, created_at, updated_at`

func scanEffect(row scanner) (*errandstore.Effect, error) {
	var e errandstore.Effect
	var state string
	if err := row.Scan(&e.Key, &e.JobID, &state, &e.LeaseToken, &e.Message, &e.CreatedAt, &e.UpdatedAt); err != nil {
		return nil, err
	}
	e.State = errandtype.EffectState(state)
	e.CreatedAt, e.UpdatedAt = e.CreatedAt.UTC(), e.UpdatedAt.UTC()
	return &e, nil
}

func (s *Store) ownsJob(ctx context.Context, tx pgx.Tx, now any, id, token string) (bool, error) {
	var owns bool
	err := tx.QueryRow(ctx, s.sql(ownsJobSQL), now, id, token).Scan(&owns)
	return owns, err
}

// EffectBegin implements [errandstore.EffectStore]. It inserts the entry first: two
// deliveries beginning one key at once then meet on its primary key, and
// the second waits for the first and reads what it wrote, locked.
func (s *Store) EffectBegin(ctx context.Context, p *errandstore.EffectParams) (*errandstore.Effect, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	var e *errandstore.Effect
	if err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		now := s.nowArg()
		owns, err := s.ownsJob(ctx, tx, now, p.JobID, p.LeaseToken)
		if err != nil {
			return err
		}
		if !owns {
			return errandtype.ErrLeaseLost
		}
		e, err = scanEffect(tx.QueryRow(ctx, s.sql(`INSERT INTO {effects}
				(key, job_id, state, lease_token, message, created_at, updated_at)
			VALUES ($2, $3, 'in_progress', $4, '', {now}, {now})
			ON CONFLICT (key) DO NOTHING
			RETURNING `+effectColumns), now, p.Key, p.JobID, p.LeaseToken))
		if err == nil {
			e.Status = errandtype.EffectBegun // there was no entry
			return nil
		}
		if !isNoRows(err) {
			return err
		}
		found, err := scanEffect(tx.QueryRow(ctx, s.sql(`SELECT `+effectColumns+` FROM {effects}
			WHERE key = $1 FOR UPDATE`), p.Key))
		if err != nil {
			return err
		}
		e, err = errandstore.BeginEffect(found, p.LeaseToken, func() (bool, error) {
			return s.ownsJob(ctx, tx, now, found.JobID, found.LeaseToken)
		}, func() (*errandstore.Effect, error) {
			return scanEffect(tx.QueryRow(ctx, s.sql(`UPDATE {effects}
				SET job_id = $3, state = 'in_progress', lease_token = $4, updated_at = {now}
				WHERE key = $2 RETURNING `+effectColumns), now, p.Key, p.JobID, p.LeaseToken))
		})
		return err
	}); err != nil {
		return nil, err
	}
	return e, nil
}

// EffectComplete implements [errandstore.EffectStore] in one statement, fenced
// by the entry's token and by the job's live lease under it.
func (s *Store) EffectComplete(ctx context.Context, p *errandstore.EffectParams) (*errandstore.Effect, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return s.effectFinish(ctx, errandtype.EffectCompleted, &errandstore.EffectReleaseParams{EffectParams: *p})
}

// EffectRelease implements [errandstore.EffectStore] in one statement, fenced by
// the entry's token and by the job's live lease under it.
func (s *Store) EffectRelease(ctx context.Context, p *errandstore.EffectReleaseParams) (*errandstore.Effect, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return s.effectFinish(ctx, errandtype.EffectFailed, p)
}

// effectFinish ends a begun effect as state, with p's message.
func (s *Store) effectFinish(ctx context.Context, state errandtype.EffectState, p *errandstore.EffectReleaseParams) (*errandstore.Effect, error) {
	e, err := scanEffect(s.pool.QueryRow(ctx, s.sql(`UPDATE {effects}
		SET state = $2, message = $3, updated_at = {now}
		WHERE key = $4 AND lease_token = $5 AND state = 'in_progress'
			AND EXISTS (SELECT 1 FROM {jobs} j, `+leaseRows("$6::text AS id, $5::text AS token", "", "l")+`
				WHERE `+leaseFence("j", "l")+`)
		RETURNING `+effectColumns), s.nowArg(), string(state), p.Message, p.Key, p.LeaseToken, p.JobID))
	if isNoRows(err) {
		return nil, errandtype.ErrLeaseLost
	}
	if err != nil {
		return nil, fmt.Errorf("finish effect %s: %w", p.Key, badValue(err))
	}
	return e, nil
}

// EffectGet implements [errandstore.EffectStore].
func (s *Store) EffectGet(ctx context.Context, p *errandstore.EffectGetParams) (*errandstore.Effect, error) {
	key := p.Key
	if !errandtype.StorableText(key) {
		return nil, errandtype.ErrNotFound
	}
	e, err := scanEffect(s.pool.QueryRow(ctx, s.sql(`SELECT `+effectColumns+` FROM {effects} WHERE key = $1`), key))
	if isNoRows(err) {
		return nil, errandtype.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("get effect %s: %w", key, err)
	}
	return e, nil
}
