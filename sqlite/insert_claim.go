package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
)

var _ errandstore.InsertClaimer = (*Store)(nil)

// claimInsertedSQL claims, by the claim's rule, the job the transaction has
// just inserted: its parameters are a claim's for one queue and that many
// kinds, then the job's seq.
func claimInsertedSQL(kinds int) string {
	return claimUpdate(`SELECT j.seq FROM errand_jobs j WHERE ` + claimable(1, kinds, 0) + ` AND j.seq = ?`)
}

// JobInsertClaim implements [errandstore.InsertClaimer]: the insert, then
// the claim of the job it wrote, in one transaction of the writer.
func (s *Store) JobInsertClaim(ctx context.Context, p *errandstore.JobInsertClaimParams) (errandstore.JobInsertResult, bool, error) {
	if err := p.Validate(); err != nil {
		return errandstore.JobInsertResult{}, false, err
	}
	var r errandstore.JobInsertResult
	claimed := false
	err := s.tx(ctx, func(tx *sql.Tx) error {
		rs, err := s.insertWith(ctx, s.ownStmts(tx), []*errandstore.JobInsertParams{p.Job})
		if err != nil {
			return err
		}
		r = rs[0]
		if r.Duplicate {
			return nil
		}
		j, err := s.claimInserted(ctx, tx, r.Job, &p.Claim)
		if err != nil || j == nil {
			return err
		}
		r.Job, claimed = j, true
		return nil
	})
	if err != nil {
		return errandstore.JobInsertResult{}, false, err
	}
	return r, claimed, nil
}

// claimInserted claims job, just inserted by tx, under c if the claim's rule
// lets it, and returns it claimed, or nil.
func (s *Store) claimInserted(ctx context.Context, tx *sql.Tx, job *errandtype.Job, c *errandstore.JobClaimParams) (*errandtype.Job, error) {
	now := s.clock.Now()
	args := []any{micros(now), micros(now.Add(c.Lease)), c.Owner, micros(now), job.Queue}
	for _, k := range c.Kinds {
		args = append(args, k)
	}
	args = append(args, job.Seq)
	st := s.ownStmts(tx)
	defer st.Close()
	claim, err := st.get(ctx, claimInsertedSQL(len(c.Kinds)))
	if err != nil {
		return nil, err
	}
	rows, err := claim.QueryContext(ctx, args...)
	if err != nil {
		return nil, fmt.Errorf("claim: %w", err)
	}
	jobs, err := scanJobs(rows, scanJob)
	if err != nil || len(jobs) == 0 {
		return nil, err
	}
	return jobs[0], nil
}
