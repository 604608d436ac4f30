package postgres

import (
	"context"
	"time"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
	"github.com/jackc/pgx/v5"
)

var _ errandstore.ConcurrencyClaimer = (*Store)(nil)

// JobClaimLimited implements [errandstore.ConcurrencyClaimer]. The upsert
// locks the limit's row until the transaction ends, so limited claims of
// one kind, from any process, run one after the other; each counts, in a
// statement that starts once it holds the lock, the jobs the claims
// before it committed. A claim that met a concurrent claim's ordering key
// is tried again, as JobClaimMany's is.
func (s *Store) JobClaimLimited(ctx context.Context, p *errandstore.JobClaimLimitedParams) (*errandstore.JobClaimLimitedResult, error) {
	for try := 1; ; try++ {
		r, err := s.claimLimitedOnce(ctx, p)
		if try < claimTries && orderingRace(err) {
			continue
		}
		return r, err
	}
}

func (s *Store) claimLimitedOnce(ctx context.Context, p *errandstore.JobClaimLimitedParams) (*errandstore.JobClaimLimitedResult, error) {
	return errandstore.ClaimLimited(p, func(fn func(pgx.Tx) error) error { return pgx.BeginFunc(ctx, s.pool, fn) },
		func(tx pgx.Tx) (errandtype.LimiterState, time.Time, error) {
			return s.upsertLimiter(ctx, tx, p.Name, p.Spec, errandstore.CountsColumn(p.Counts))
		},
		func(tx pgx.Tx, kinds []string, now time.Time) (int, error) {
			return s.countRunning(ctx, tx, kinds, now)
		},
		func(tx pgx.Tx, c *errandstore.JobClaimParams, now time.Time) ([]*errandtype.Job, error) {
			b := &pgx.Batch{}
			b.Queue(claimNoJIT)
			s.queueClaim(b, c, now)
			br := tx.SendBatch(ctx, b)
			defer br.Close()
			if _, err := br.Exec(); err != nil {
				return nil, err
			}
			rs, err := br.Query()
			if err != nil {
				return nil, err
			}
			return scanClaimedJobs(rs)
		},
		func(tx pgx.Tx, st errandtype.LimiterState, cur errandtype.LimiterSpec, denied int) error {
			return s.writeTaken(ctx, tx, p.Name, st, cur, denied)
		})
}

// countRunning counts the jobs of kinds that run under a live lease at now.
func (s *Store) countRunning(ctx context.Context, q interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}, kinds []string, now time.Time) (int, error) {
	var n int
	err := q.QueryRow(ctx, s.sql(`SELECT count(*) FROM {jobs}
		WHERE state = 'running' AND lease_until > $1 AND kind = ANY($2::text[])`), now, kinds).Scan(&n)
	return n, err
}

// fillRunning counts the running jobs of each concurrency limit of rs
// (see [errandstore.FillAllRunning]).
func (s *Store) fillRunning(ctx context.Context, rs []*errandtype.LimiterRecord, states []errandtype.LimiterState, now time.Time) error {
	return errandstore.FillAllRunning(rs, states, now, func(kinds []string) (int, error) {
		return s.countRunning(ctx, s.pool, kinds, now)
	})
}
