package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
)

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

// signalSQL records signal $3 of value $4 for job $2 unless it has
// finished or holds its bound of signals, and makes the job available now
// when its last step is a wait for that signal. It runs after
// signalLockSQL, in its transaction: an outcome that moves the job to its
// wait commits either before (and the signal wakes it) or after (and the
// worker, reading the signal, wakes it; see errand.WaitFor), and the
// signals it counts include every one committed before the lock was taken.
var signalSQL = `WITH j AS (SELECT seq, state, queue, (SELECT count(*) FROM {signals} g WHERE g.job_seq = jj.seq) AS held
		FROM {jobs} jj WHERE id = $2 FOR UPDATE),
	ins AS (
		INSERT INTO {signals} (job_seq, name, value, sent_at)
		SELECT seq, $3, $4::jsonb, {now} FROM j
		WHERE state IN (` + errandstore.SQLStates(errandstore.UnfinishedStates) + `) AND held < ` + strconv.Itoa(errandstore.MaxJobSignals) + `
		RETURNING job_seq),
	wake AS (
		UPDATE {jobs} w SET available_at = {now} FROM ins
		WHERE w.seq = ins.job_seq AND w.state = 'queued' AND w.available_at > {now}
			AND EXISTS (SELECT 1 FROM (SELECT s.name, s.result FROM {steps} s WHERE s.job_seq = w.seq ORDER BY s.idx DESC LIMIT 1) last
				WHERE last.name = '` + errandstore.WaitStepName + `' AND last.result->>'signal' = $3)
		RETURNING 1)
	SELECT state, queue, held, EXISTS (SELECT 1 FROM wake) FROM j`

// signalLockSQL locks the row of job $1 for a signal, in a statement of its
// own: a statement that waits for a lock still reads with the snapshot it
// began with, so signalSQL alone, waiting for a concurrent signal's
// commit, would count the signals without that one and let the job hold
// more than its bound.
var signalLockSQL = `SELECT 1 FROM {jobs} WHERE id = $1 FOR UPDATE`

// JobSignal implements [errandstore.StepStore].
func (s *Store) JobSignal(ctx context.Context, p *errandstore.JobSignalParams) (*errandstore.SignalResult, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if !errandtype.StorableText(p.ID) {
		return nil, errandtype.ErrNotFound
	}
	var state string
	var held int
	var r errandstore.SignalResult
	b := &pgx.Batch{}
	b.Queue(beginSQL)
	b.Queue(s.sql(signalLockSQL), p.ID)
	b.Queue(s.sql(signalSQL), s.nowArg(), p.ID, p.Name, string(p.Value))
	err := s.sendTx(ctx, b, func(br pgx.BatchResults) error {
		return br.QueryRow().Scan(&state, &r.Queue, &held, &r.Woke)
	})
	if isNoRows(err) {
		return nil, errandtype.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("signal job %s: %w", p.ID, badValue(err))
	}
	if err := errandstore.CheckSignal(p.ID, errandtype.JobState(state), held); err != nil {
		return nil, err
	}
	return &r, nil
}

// JobSignals implements [errandstore.StepStore].
func (s *Store) JobSignals(ctx context.Context, p *errandstore.JobSignalsParams) ([]errandtype.Signal, error) {
	if !errandtype.StorableText(p.ID) || !errandtype.StorableText(p.Name) {
		return nil, nil
	}
	rows, err := s.pool.Query(ctx, s.sql(`SELECT s.name, s.value::text, s.sent_at FROM {signals} s
		JOIN {jobs} j ON j.seq = s.job_seq WHERE j.id = $1 AND s.name = $2 ORDER BY s.id`), p.ID, p.Name)
	if err != nil {
		return nil, fmt.Errorf("signals of job %s: %w", p.ID, err)
	}
	sigs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (errandtype.Signal, error) {
		var sig errandtype.Signal
		var value string
		err := row.Scan(&sig.Name, &value, &sig.SentAt)
		sig.Value, sig.SentAt = json.RawMessage(value), sig.SentAt.UTC()
		return sig, err
	})
	if err != nil {
		return nil, fmt.Errorf("signals of job %s: %w", p.ID, err)
	}
	return sigs, nil
}

// JobWake implements [errandstore.StepStore].
func (s *Store) JobWake(ctx context.Context, p *errandstore.JobWakeParams) (bool, error) {
	if !errandtype.StorableText(p.ID) {
		return false, nil
	}
	tag, err := s.pool.Exec(ctx, s.sql(`UPDATE {jobs} SET available_at = {now}
		WHERE id = $2 AND state = 'queued' AND available_at > {now}`), s.nowArg(), p.ID)
	if err != nil {
		return false, fmt.Errorf("wake job %s: %w", p.ID, err)
	}
	return tag.RowsAffected() == 1, nil
}

// setEventSQL publishes event $4 = $5 for the job that lease ($2, $3)
// holds, share-locking the job's row as recordStepSQL does.
var setEventSQL = `WITH owner AS (
		SELECT j.seq, l.now FROM {jobs} j, ` + leaseRows("$2::text AS id, $3::text AS token", "", "l") + `
		WHERE ` + leaseFence("j", "l") + `
		FOR SHARE OF j)
	INSERT INTO {events} (job_seq, key, value, set_at)
	SELECT seq, $4, $5::jsonb, now FROM owner
	ON CONFLICT (job_seq, key) DO UPDATE SET value = excluded.value, set_at = excluded.set_at`

// JobSetEvent implements [errandstore.StepStore].
func (s *Store) JobSetEvent(ctx context.Context, p *errandstore.JobSetEventParams) error {
	if err := p.Validate(); err != nil {
		return err
	}
	tag, err := s.pool.Exec(ctx, s.sql(setEventSQL), s.nowArg(), p.ID, p.LeaseToken, p.Key, string(p.Value))
	if err != nil {
		return fmt.Errorf("set event %s of job %s: %w", p.Key, p.ID, badValue(err))
	}
	if tag.RowsAffected() == 0 {
		return errandtype.ErrLeaseLost
	}
	return nil
}

// JobEvent implements [errandstore.StepStore].
func (s *Store) JobEvent(ctx context.Context, p *errandstore.JobEventParams) (*errandtype.Event, error) {
	if !errandtype.StorableText(p.ID) || !errandtype.StorableText(p.Key) {
		return nil, errandtype.ErrNotFound
	}
	var e errandtype.Event
	var value string
	err := s.pool.QueryRow(ctx, s.sql(`SELECT e.key, e.value::text, e.set_at FROM {events} e
		JOIN {jobs} j ON j.seq = e.job_seq WHERE j.id = $1 AND e.key = $2`), p.ID, p.Key).Scan(&e.Key, &value, &e.SetAt)
	if isNoRows(err) {
		return nil, errandtype.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("event %s of job %s: %w", p.Key, p.ID, err)
	}
	e.Value, e.SetAt = json.RawMessage(value), e.SetAt.UTC()
	return &e, nil
}

// streamOwnerSQL locks the job that lease ($2, $3) holds, so that its
// appends take their indexes one at a time.
var streamOwnerSQL = `SELECT j.seq, l.now FROM {jobs} j, ` + leaseRows("$2::text AS id, $3::text AS token", "", "l") + `
		WHERE ` + leaseFence("j", "l") + `
		FOR UPDATE OF j`

// streamSizeSQL reads the size of job $1's stream, in a statement after
// streamOwnerSQL's: a statement that waited for the lock would still read
// with the snapshot it began with, without the chunk of the append it
// waited for, and take its index.
var streamSizeSQL = `SELECT count(*)::int, coalesce(sum(octet_length(data)), 0)::int FROM {streams} WHERE job_seq = $1`

// JobStreamAppend implements [errandstore.StepStore].
func (s *Store) JobStreamAppend(ctx context.Context, p *errandstore.JobStreamAppendParams) (int, error) {
	if err := p.Validate(); err != nil {
		return 0, err
	}
	var idx int
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var seq int64
		var now time.Time
		var bytes int
		err := tx.QueryRow(ctx, s.sql(streamOwnerSQL), s.nowArg(), p.ID, p.LeaseToken).Scan(&seq, &now)
		if isNoRows(err) {
			return errandtype.ErrLeaseLost
		}
		if err != nil {
			return err
		}
		if err := tx.QueryRow(ctx, s.sql(streamSizeSQL), seq).Scan(&idx, &bytes); err != nil {
			return err
		}
		if err := errandstore.CheckStreamRoom(idx, bytes, len(p.Data)); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, s.sql(`INSERT INTO {streams} (job_seq, idx, data, at) VALUES ($1, $2, $3, $4)`), seq, idx, p.Data, now)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("append to the stream of job %s: %w", p.ID, badValue(err))
	}
	return idx, nil
}

// JobStream implements [errandstore.StepStore].
func (s *Store) JobStream(ctx context.Context, p *errandstore.JobStreamParams) (*errandstore.StreamPage, error) {
	if !errandtype.StorableText(p.ID) {
		return nil, errandtype.ErrNotFound
	}
	rows, err := s.pool.Query(ctx, s.sql(`SELECT j.state, s.idx, s.data, s.at FROM {jobs} j
		LEFT JOIN {streams} s ON s.job_seq = j.seq AND s.idx > $2 WHERE j.id = $1 ORDER BY s.idx LIMIT $3`), p.ID, p.After, p.Size())
	if err != nil {
		return nil, fmt.Errorf("stream of job %s: %w", p.ID, err)
	}
	defer rows.Close()
	page, err := errandstore.ReadStream(func() (c errandtype.Chunk, state errandtype.JobState, ok bool, err error) {
		if !rows.Next() {
			return c, "", false, rows.Err()
		}
		var idx *int
		var data *string
		var at *time.Time
		if err := rows.Scan(&state, &idx, &data, &at); err != nil {
			return c, "", false, err
		}
		c.Index = -1
		if idx != nil {
			c = errandtype.Chunk{Index: *idx, Data: *data, At: at.UTC()}
		}
		return c, state, true, nil
	})
	if err != nil && err != errandtype.ErrNotFound {
		return nil, fmt.Errorf("stream of job %s: %w", p.ID, err)
	}
	return page, err
}

// recordStepSQL is recordStepsSQL for one step, from scalars: $2 and $3
// its job's id and token, $4 to $7 its index, name, result and error.
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

// recordStepsSQL appends steps, each to the job its lease holds: $2 to $7
// are their jobs' ids, tokens, and their indexes, names, results and
// errors. The jobs' rows are share-locked, so a sweep or an outcome that
// ends a lease either waits for its step or, having committed first, fails
// the fence: a step is never recorded by an attempt that lost its job. It
// returns, for each step in order, whether its fence held and whether it
// was written.
var recordStepsSQL = `WITH owner AS (
		SELECT l.ord, j.seq, j.attempt, l.now FROM {jobs} j, ` + leaseRows("u.id, u.token, u.ord", `unnest($2::text[], $3::text[]) WITH ORDINALITY AS u(id, token, ord)`, "l") + `
		WHERE ` + leaseFence("j", "l") + `
		FOR SHARE OF j),
	ins AS (
		INSERT INTO {steps} (job_seq, idx, name, result, error, attempt, at)
		SELECT o.seq, s.idx, s.name, s.result::jsonb, s.error, o.attempt, o.now
		FROM owner o JOIN unnest($4::int[], $5::text[], $6::text[], $7::text[]) WITH ORDINALITY AS s(idx, name, result, error, ord) ON s.ord = o.ord
		ON CONFLICT (job_seq, idx) DO NOTHING
		RETURNING job_seq)
	SELECT n.ord, o.seq IS NOT NULL, EXISTS (SELECT 1 FROM ins WHERE ins.job_seq = o.seq)
	FROM generate_series(1, cardinality($2::text[])) AS n(ord) LEFT JOIN owner o ON o.ord = n.ord ORDER BY n.ord`

// JobStepRecordMany implements [errandstore.StepStore].
func (s *Store) JobStepRecordMany(ctx context.Context, ps []*errandstore.JobStepRecordParams) ([]error, error) {
	errs, at := errandstore.ValidSteps(ps) // at: each row's place in ps
	var ids, tokens, names []string
	var results, messages []*string
	var idxs []int
	for _, i := range at {
		p := ps[i]
		result, msg := errandstore.StepColumns(&p.Step)
		ids, tokens, idxs, names = append(ids, p.ID), append(tokens, p.LeaseToken), append(idxs, p.Step.Index), append(names, p.Step.Name)
		results, messages = append(results, result), append(messages, msg)
	}
	if len(at) == 0 {
		return errs, nil
	}
	if len(at) == 1 {
		// One step, as when a single flow runs: a statement of scalars,
		// planned cheaply.
		var owned, written bool
		err := s.pool.QueryRow(ctx, s.sql(recordStepSQL), s.nowArg(), ids[0], tokens[0], idxs[0], names[0], results[0], messages[0]).Scan(&owned, &written)
		if err != nil {
			return nil, fmt.Errorf("record a step: %w", badValue(err))
		}
		errs[at[0]] = errandstore.StepWritten(owned, written)
		return errs, nil
	}
	// One round trip. The statement's generic plan is the one wanted, and
	// a custom plan costs more to make than the write itself: with the
	// default plan_cache_mode, a step of one flow took 0.7 to 0.8 ms
	// against 0.28 for a single-row statement (BenchmarkStep).
	b := &pgx.Batch{}
	b.Queue(beginSQL)
	b.Queue(genericPlans)
	b.Queue(s.sql(recordStepsSQL), s.nowArg(), ids, tokens, idxs, names, results, messages)
	err := s.sendTx(ctx, b, func(br pgx.BatchResults) error {
		rows, err := br.Query()
		if err != nil {
			return err
		}
		var ord int64
		var owned, written bool
		_, err = pgx.ForEachRow(rows, []any{&ord, &owned, &written}, func() error {
			errs[at[ord-1]] = errandstore.StepWritten(owned, written)
			return nil
		})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("record %d steps: %w", len(at), badValue(err))
	}
	return errs, nil
}

// sendTx sends b, whose first statement begins a transaction, and a COMMIT
// after its last, in one round trip: read reads the last statement's
// result, and the others' are skipped.
func (s *Store) sendTx(ctx context.Context, b *pgx.Batch, read func(pgx.BatchResults) error) error {
	n := b.Len()
	b.Queue("COMMIT")
	br := s.pool.SendBatch(ctx, b)
	defer br.Close()
	for range n - 1 {
		if _, err := br.Exec(); err != nil {
			return err
		}
	}
	if err := read(br); err != nil {
		return err
	}
	_, err := br.Exec()
	return err
}
