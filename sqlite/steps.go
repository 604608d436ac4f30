package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
)

// JobStepRecordMany implements [errandstore.StepStore]: one transaction,
// a fenced insert for each step.
func (s *Store) JobStepRecordMany(ctx context.Context, ps []*errandstore.JobStepRecordParams) ([]error, error) {
	errs, valid := errandstore.ValidSteps(ps)
	err := s.tx(ctx, func(tx *sql.Tx) error {
		now := micros(s.clock.Now())
		for _, i := range valid {
			p := ps[i]
			result, msg := errandstore.StepColumns(&p.Step)
			res, err := tx.ExecContext(ctx, `INSERT INTO errand_steps (job_seq, idx, name, result, error, attempt, at)
				SELECT seq, ?, ?, ?, ?, attempt, ? FROM errand_jobs
				WHERE id = ? AND state = 'running' AND lease_token = ? AND lease_until > ?
				ON CONFLICT (job_seq, idx) DO NOTHING`,
				p.Step.Index, p.Step.Name, result, msg, now, p.ID, p.LeaseToken, now)
			if err != nil {
				return err
			}
			if n, err := res.RowsAffected(); err != nil {
				return err
			} else if n == 1 {
				continue
			}
			// Nothing written: the lease is gone, or the index is taken.
			var owned bool
			if err := tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM errand_jobs
				WHERE id = ? AND state = 'running' AND lease_token = ? AND lease_until > ?)`, p.ID, p.LeaseToken, now).Scan(&owned); err != nil {
				return err
			}
			errs[i] = errandstore.StepWritten(owned, false)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("record %d steps: %w", len(ps), err)
	}
	return errs, nil
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

// JobSignal implements [errandstore.StepStore].
func (s *Store) JobSignal(ctx context.Context, p *errandstore.JobSignalParams) (*errandstore.SignalResult, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	var r errandstore.SignalResult
	err := s.tx(ctx, func(tx *sql.Tx) error {
		now := micros(s.clock.Now())
		var seq int64
		var state string
		err := tx.QueryRowContext(ctx, `SELECT seq, state, queue FROM errand_jobs WHERE id = ?`, p.ID).Scan(&seq, &state, &r.Queue)
		if err == sql.ErrNoRows {
			return errandtype.ErrNotFound
		}
		if err != nil {
			return err
		}
		var held int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM errand_signals WHERE job_seq = ?`, seq).Scan(&held); err != nil {
			return err
		}
		if err := errandstore.CheckSignal(p.ID, errandtype.JobState(state), held); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO errand_signals (job_seq, name, value, sent_at) VALUES (?, ?, ?, ?)`,
			seq, p.Name, string(p.Value), now); err != nil {
			return err
		}
		// Wake the job when its last step is a wait for this signal.
		res, err := tx.ExecContext(ctx, `UPDATE errand_jobs SET available_at = ?
			WHERE seq = ? AND state = 'queued' AND available_at > ?
				AND (SELECT name = '`+errandstore.WaitStepName+`' AND json_extract(result, '$.signal') = ?
					FROM errand_steps WHERE job_seq = ? ORDER BY idx DESC LIMIT 1)`,
			now, seq, now, p.Name, seq)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		r.Woke = n == 1
		return err
	})
	if err != nil {
		return nil, err
	}
	return &r, nil
}

// JobSignals implements [errandstore.StepStore].
func (s *Store) JobSignals(ctx context.Context, p *errandstore.JobSignalsParams) ([]errandtype.Signal, error) {
	rows, err := s.read.QueryContext(ctx, `SELECT s.name, s.value, s.sent_at FROM errand_signals s
		JOIN errand_jobs j ON j.seq = s.job_seq WHERE j.id = ? AND s.name = ? ORDER BY s.id`, p.ID, p.Name)
	if err != nil {
		return nil, fmt.Errorf("signals of job %s: %w", p.ID, err)
	}
	sigs, err := scanRows(rows, func(row scanner) (sig errandtype.Signal, err error) {
		var value string
		var at int64
		err = row.Scan(&sig.Name, &value, &at)
		sig.Value, sig.SentAt = json.RawMessage(value), fromMicros(at)
		return sig, err
	})
	if err != nil {
		return nil, fmt.Errorf("signals of job %s: %w", p.ID, err)
	}
	return sigs, nil
}

// JobWake implements [errandstore.StepStore].
func (s *Store) JobWake(ctx context.Context, p *errandstore.JobWakeParams) (bool, error) {
	var woke bool
	err := s.tx(ctx, func(tx *sql.Tx) error {
		now := micros(s.clock.Now())
		res, err := tx.ExecContext(ctx, `UPDATE errand_jobs SET available_at = ?
			WHERE id = ? AND state = 'queued' AND available_at > ?`, now, p.ID, now)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		woke = n == 1
		return err
	})
	if err != nil {
		return false, fmt.Errorf("wake job %s: %w", p.ID, err)
	}
	return woke, nil
}

// JobSetEvent implements [errandstore.StepStore].
func (s *Store) JobSetEvent(ctx context.Context, p *errandstore.JobSetEventParams) error {
	if err := p.Validate(); err != nil {
		return err
	}
	return s.fencedWrite(ctx, func(now int64) (string, []any) {
		return `INSERT INTO errand_events (job_seq, key, value, set_at)
			SELECT seq, ?, ?, ? FROM errand_jobs WHERE id = ? AND state = 'running' AND lease_token = ? AND lease_until > ?
			ON CONFLICT (job_seq, key) DO UPDATE SET value = excluded.value, set_at = excluded.set_at`,
			[]any{p.Key, string(p.Value), now, p.ID, p.LeaseToken, now}
	})
}

// JobEvent implements [errandstore.StepStore].
func (s *Store) JobEvent(ctx context.Context, p *errandstore.JobEventParams) (*errandtype.Event, error) {
	var e errandtype.Event
	var value string
	var at int64
	err := s.read.QueryRowContext(ctx, `SELECT e.key, e.value, e.set_at FROM errand_events e
		JOIN errand_jobs j ON j.seq = e.job_seq WHERE j.id = ? AND e.key = ?`, p.ID, p.Key).Scan(&e.Key, &value, &at)
	if err == sql.ErrNoRows {
		return nil, errandtype.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("event %s of job %s: %w", p.Key, p.ID, err)
	}
	e.Value, e.SetAt = json.RawMessage(value), fromMicros(at)
	return &e, nil
}

// JobStreamAppend implements [errandstore.StepStore].
func (s *Store) JobStreamAppend(ctx context.Context, p *errandstore.JobStreamAppendParams) (int, error) {
	if err := p.Validate(); err != nil {
		return 0, err
	}
	var idx int
	err := s.tx(ctx, func(tx *sql.Tx) error {
		now := micros(s.clock.Now())
		var seq int64
		var bytes int
		err := tx.QueryRowContext(ctx, `SELECT j.seq, count(s.idx), coalesce(sum(length(CAST(s.data AS BLOB))), 0)
			FROM errand_jobs j LEFT JOIN errand_streams s ON s.job_seq = j.seq
			WHERE j.id = ? AND j.state = 'running' AND j.lease_token = ? AND j.lease_until > ? GROUP BY j.seq`,
			p.ID, p.LeaseToken, now).Scan(&seq, &idx, &bytes)
		if err == sql.ErrNoRows {
			return errandtype.ErrLeaseLost
		}
		if err != nil {
			return err
		}
		if err := errandstore.CheckStreamRoom(idx, bytes, len(p.Data)); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO errand_streams (job_seq, idx, data, at) VALUES (?, ?, ?, ?)`, seq, idx, p.Data, now)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("append to the stream of job %s: %w", p.ID, err)
	}
	return idx, nil
}

// JobStream implements [errandstore.StepStore].
func (s *Store) JobStream(ctx context.Context, p *errandstore.JobStreamParams) (*errandstore.StreamPage, error) {
	rows, err := s.read.QueryContext(ctx, `SELECT j.state, s.idx, s.data, s.at FROM errand_jobs j
		LEFT JOIN errand_streams s ON s.job_seq = j.seq AND s.idx > ? WHERE j.id = ? ORDER BY s.idx LIMIT ?`, p.After, p.ID, p.Size())
	if err != nil {
		return nil, fmt.Errorf("stream of job %s: %w", p.ID, err)
	}
	defer rows.Close()
	page, err := errandstore.ReadStream(func() (c errandtype.Chunk, state errandtype.JobState, ok bool, err error) {
		if !rows.Next() {
			return c, "", false, rows.Err()
		}
		var idx, at sql.NullInt64
		var data sql.NullString
		if err := rows.Scan(&state, &idx, &data, &at); err != nil {
			return c, "", false, err
		}
		c.Index = -1
		if idx.Valid {
			c = errandtype.Chunk{Index: int(idx.Int64), Data: data.String, At: fromMicros(at.Int64)}
		}
		return c, state, true, nil
	})
	if err != nil && err != errandtype.ErrNotFound {
		return nil, fmt.Errorf("stream of job %s: %w", p.ID, err)
	}
	return page, err
}
