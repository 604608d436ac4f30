package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
)

var _ errandstore.InsertClaimer = (*Store)(nil)

// claimInsertedSQL claims, by the claim's rule, the job ($4, its id) that
// the INSERT before it in the same transaction wrote: the xmin test leaves
// alone a job of that id the insert did not write (its duplicate). Its
// parameters are a claim's, the id in place of the queue.
var claimInsertedSQL = replacePick(claimSQL,
	`SELECT seq FROM {jobs} j WHERE id = $4 AND xmin = pg_current_xact_id()::xid AND `+claimable)

// JobInsertClaim implements [errandstore.InsertClaimer]. The insert and the
// claim go in one pipelined batch, which the server runs as one implicit
// transaction: one round trip and one commit, as an enqueue alone costs.
// A claim that meets a job of its ordering key started meanwhile (see
// orderingRace) fails the batch, which writes nothing; the job is then
// inserted unclaimed.
func (s *Store) JobInsertClaim(ctx context.Context, p *errandstore.JobInsertClaimParams) (errandstore.JobInsertResult, bool, error) {
	if err := p.Validate(); err != nil {
		return errandstore.JobInsertResult{}, false, err
	}
	params := []*errandstore.JobInsertParams{p.Job}
	cols, err := newInsertColumns(params)
	if err != nil {
		return errandstore.JobInsertResult{}, false, err
	}
	q := pgxQuerier{s.pool}
	now, err := s.insertNow(ctx, q, s.own, &cols, params)
	if err != nil {
		return errandstore.JobInsertResult{}, false, err
	}
	inserted, claimed, err := s.insertClaimBatch(ctx, &cols, p, now)
	if orderingRace(err) {
		rs, err := s.insertOwnTx(ctx, params)
		if err != nil {
			return errandstore.JobInsertResult{}, false, err
		}
		return rs[0], false, nil
	}
	if err != nil {
		return errandstore.JobInsertResult{}, false, fmt.Errorf("insert job: %w", badValue(err))
	}
	out, dups := matchInserted(params, inserted)
	if len(dups) > 0 {
		again, err := findDuplicates(ctx, q, s.own, params, cols.uwindows, dups, out)
		if err == nil && len(again) > 0 {
			out, err = s.insertAgain(ctx, q, s.own, params, again, out, 1)
		}
		if err != nil {
			return errandstore.JobInsertResult{}, false, err
		}
		return out[0], false, nil
	}
	if claimed == nil {
		return out[0], false, nil
	}
	return errandstore.JobInsertResult{Job: claimed}, true, nil
}

// insertClaimBatch sends the insert of cols and the claim of p's job, and
// returns what each wrote.
func (s *Store) insertClaimBatch(ctx context.Context, cols *insertColumns, p *errandstore.JobInsertClaimParams, now any) (inserted []*errandtype.Job, claimed *errandtype.Job, err error) {
	b := &pgx.Batch{}
	sql, args := cols.statement(s.own, now)
	b.Queue(sql, args...)
	b.Queue(s.sql(claimInsertedSQL), now, us(p.Claim.Lease), p.Claim.Owner, p.Job.ID, kindFilter(p.Claim.Kinds))
	br := s.pool.SendBatch(ctx, b)
	defer func() {
		if cerr := br.Close(); err == nil {
			err = cerr
		}
	}()
	rs, err := br.Query()
	if err != nil {
		return nil, nil, err
	}
	if inserted, err = scanJobs(rs, jobScanner()); err != nil {
		return nil, nil, err
	}
	rs, err = br.Query()
	if err != nil {
		return nil, nil, err
	}
	jobs, err := scanClaimedJobs(rs)
	if err != nil || len(jobs) == 0 {
		return inserted, nil, err
	}
	return inserted, jobs[0], nil
}
