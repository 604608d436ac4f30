package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
)

// JobStepRecord implements [errandstore.StepStore].
func (s *Store) JobStepRecord(ctx context.Context, p *errandstore.JobStepRecordParams) error {
	if err := p.Validate(); err != nil {
		return err
	}
	var result, msg any
	if p.Step.Error != "" {
		msg = p.Step.Error
	} else {
		result = string(p.Step.Result)
	}
	err := s.tx(ctx, func(tx *sql.Tx) error {
		now := s.clock.Now()
		var seq int64
		var attempt int
		err := tx.QueryRowContext(ctx, `SELECT seq, attempt FROM errand_jobs
			WHERE id = ? AND state = 'running' AND lease_token = ? AND lease_until > ?`,
			p.ID, p.LeaseToken, micros(now)).Scan(&seq, &attempt)
		if err == sql.ErrNoRows {
			return errandstore.StepWritten(false, false)
		}
		if err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, `INSERT INTO errand_steps (job_seq, idx, name, result, error, attempt, at)
			VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (job_seq, idx) DO NOTHING`,
			seq, p.Step.Index, p.Step.Name, result, msg, attempt, micros(now))
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return err
		}
		return errandstore.StepWritten(true, n == 1)
	})
	if err != nil && err != errandtype.ErrLeaseLost && err != errandstore.ErrStepRecorded {
		return fmt.Errorf("record step %d of job %s: %w", p.Step.Index, p.ID, err)
	}
	return err
}

// JobSteps implements [errandstore.StepStore].
func (s *Store) JobSteps(ctx context.Context, p *errandstore.JobStepsParams) ([]errandtype.Step, error) {
	rows, err := s.read.QueryContext(ctx, `SELECT s.idx, s.name, s.result, s.error, s.attempt, s.at
		FROM errand_jobs j LEFT JOIN errand_steps s ON s.job_seq = j.seq WHERE j.id = ? ORDER BY s.idx`, p.ID)
	if err != nil {
		return nil, fmt.Errorf("steps of job %s: %w", p.ID, err)
	}
	defer rows.Close()
	steps, err := errandstore.ReadSteps(func() (st errandtype.Step, ok bool, err error) {
		if !rows.Next() {
			return st, false, rows.Err()
		}
		var idx, attempt, at sql.NullInt64
		var name, result, msg sql.NullString
		if err := rows.Scan(&idx, &name, &result, &msg, &attempt, &at); err != nil {
			return st, false, err
		}
		st.Index = -1
		if idx.Valid { // else the job, without steps
			st = errandtype.Step{Index: int(idx.Int64), Name: name.String, Attempt: int(attempt.Int64), At: fromMicros(at.Int64), Error: msg.String}
			if result.Valid {
				st.Result = json.RawMessage(result.String)
			}
		}
		return st, true, nil
	})
	if err != nil && err != errandtype.ErrNotFound {
		return nil, fmt.Errorf("steps of job %s: %w", p.ID, err)
	}
	return steps, err
}
