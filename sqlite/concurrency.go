package sqlite

import (
	"context"
	"database/sql"
	"time"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
)

var _ errandstore.ConcurrencyClaimer = (*Store)(nil)

// JobClaimLimited implements [errandstore.ConcurrencyClaimer]. The writer
// transaction serialises limited claims, in this process and every other
// on the file; the limit's row is written like a rate limit's.
func (s *Store) JobClaimLimited(ctx context.Context, p *errandstore.JobClaimLimitedParams) (*errandstore.JobClaimLimitedResult, error) {
	return errandstore.ClaimLimited(p, func(fn func(*sql.Tx) error) error { return s.tx(ctx, fn) },
		func(tx *sql.Tx) (errandtype.LimiterState, time.Time, error) {
			now := fromMicros(micros(s.clock.Now()))
			st, err := upsertLimiter(ctx, tx, p.Name, p.Spec, errandstore.CountsColumn(p.Counts), now)
			return st, now, err
		},
		func(tx *sql.Tx, kinds []string, now time.Time) (int, error) {
			return countRunning(ctx, tx, kinds, now)
		},
		func(tx *sql.Tx, c *errandstore.JobClaimParams, now time.Time) ([]*errandtype.Job, error) {
			// The claim is one statement of a longer transaction: a row that
			// does not decode rolls it all back.
			jobs, unread, err := s.claimIn(ctx, tx, c, now)
			if err == nil && len(unread) > 0 {
				err = unread[0].Err
			}
			return jobs, err
		},
		func(tx *sql.Tx, st errandtype.LimiterState, cur errandtype.LimiterSpec, denied int) error {
			return writeTaken(ctx, tx, p.Name, st, cur, denied)
		})
}

// countRunning counts the jobs of kinds that run under a live lease at now.
func countRunning(ctx context.Context, q interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}, kinds []string, now time.Time) (int, error) {
	args := []any{micros(now)}
	for _, k := range kinds {
		args = append(args, k)
	}
	var n int
	err := q.QueryRowContext(ctx, `SELECT count(*) FROM errand_jobs
		WHERE state = 'running' AND lease_until > ? AND kind IN (`+placeholders(len(kinds))+`)`, args...).Scan(&n)
	return n, err
}

// fillRunning counts the running jobs of each concurrency limit of rs
// (see [errandstore.FillAllRunning]).
func (s *Store) fillRunning(ctx context.Context, rs []*errandtype.LimiterRecord, states []errandtype.LimiterState, now time.Time) error {
	return errandstore.FillAllRunning(rs, states, now, func(kinds []string) (int, error) {
		return countRunning(ctx, s.read, kinds, now)
	})
}
