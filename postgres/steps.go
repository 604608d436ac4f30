package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
)

// recordStepSQL appends step $4 to the job that lease ($2, $3) holds. The
// job's row is share-locked, so a sweep or an outcome that ends the lease
// either waits for the step or, having committed first, fails the fence:
// a step is never recorded by an attempt that lost its job. It returns
// whether the fence held and whether the step was written.
var recordStepSQL = `WITH owner AS (
		SELECT j.seq, j.attempt, l.now FROM {jobs} j, ` + leaseRows("$2::text AS id, $3::text AS token", "", "l") + `
		WHERE ` + leaseFence("j", "l") + `
		FOR SHARE OF j),
	ins AS (
		INSERT INTO {steps} (job_seq, idx, name, result, error, attempt, at)
		SELECT seq, $4, $5, $6::jsonb, $7, attempt, now FROM owner
		ON CONFLICT (job_seq, idx) DO NOTHING
		RETURNING 1)
	SELECT EXISTS (SELECT 1 FROM owner), EXISTS (SELECT 1 FROM ins)`

// JobStepRecord implements [errandstore.StepStore].
func (s *Store) JobStepRecord(ctx context.Context, p *errandstore.JobStepRecordParams) error {
	if err := p.Validate(); err != nil {
		return err
	}
	var result, msg *string
	if p.Step.Error != "" {
		msg = &p.Step.Error
	} else {
		r := string(p.Step.Result)
		result = &r
	}
	var owned, written bool
	err := s.pool.QueryRow(ctx, s.sql(recordStepSQL), s.nowArg(), p.ID, p.LeaseToken, p.Step.Index, p.Step.Name, result, msg).Scan(&owned, &written)
	if err != nil {
		return fmt.Errorf("record step %d of job %s: %w", p.Step.Index, p.ID, badValue(err))
	}
	return errandstore.StepWritten(owned, written)
}

// JobSteps implements [errandstore.StepStore].
func (s *Store) JobSteps(ctx context.Context, p *errandstore.JobStepsParams) ([]errandtype.Step, error) {
	if !errandtype.StorableText(p.ID) {
		return nil, errandtype.ErrNotFound
	}
	rows, err := s.pool.Query(ctx, s.sql(`SELECT s.idx, s.name, s.result::text, s.error, s.attempt, s.at
		FROM {jobs} j LEFT JOIN {steps} s ON s.job_seq = j.seq WHERE j.id = $1 ORDER BY s.idx`), p.ID)
	if err != nil {
		return nil, fmt.Errorf("steps of job %s: %w", p.ID, err)
	}
	defer rows.Close()
	steps, err := errandstore.ReadSteps(func() (st errandtype.Step, ok bool, err error) {
		if !rows.Next() {
			return st, false, rows.Err()
		}
		var idx, attempt *int
		var name, result, msg *string
		var at *time.Time
		if err := rows.Scan(&idx, &name, &result, &msg, &attempt, &at); err != nil {
			return st, false, err
		}
		st.Index = -1
		if idx != nil { // else the job, without steps
			st = errandtype.Step{Index: *idx, Name: *name, Attempt: *attempt, At: at.UTC()}
			if result != nil {
				st.Result = json.RawMessage(*result)
			}
			if msg != nil {
				st.Error = *msg
			}
		}
		return st, true, nil
	})
	if err != nil && err != errandtype.ErrNotFound {
		return nil, fmt.Errorf("steps of job %s: %w", p.ID, err)
	}
	return steps, err
}
