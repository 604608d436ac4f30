package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
	"github.com/errandhq/errand/internal/sqlbuild"
)

var (
	_ errandstore.BatchTxStore[*sql.Tx] = (*Store)(nil)
	_ errandstore.DeadHookStore         = (*Store)(nil)
	_ errandstore.DeadHookCursorStore   = (*Store)(nil)
)

// unfinished is errandstore.UnfinishedStates as a SQL list, for IN (...).
var unfinished = errandstore.SQLStates(errandstore.UnfinishedStates)

const batchColumns = `id, total, callback, callback_job_id, created_at, completed_at, succeeded, dead, cancelled`

func scanBatch(row scanner) (*errandstore.Batch, error) {
	var (
		b                    errandstore.Batch
		cb, cbJob            sql.NullString
		created              int64
		completed            sql.NullInt64
		succeeded, dead, cnc int
	)
	if err := row.Scan(&b.ID, &b.Total, &cb, &cbJob, &created, &completed, &succeeded, &dead, &cnc); err != nil {
		return nil, err
	}
	var err error
	if b.Callback, err = errandstore.DecodeBatchCallback(nullString(cb)); err != nil {
		return nil, err
	}
	b.CallbackJobID, b.CreatedAt, b.CompletedAt = nullString(cbJob), fromMicros(created), nullMicros(completed)
	b.ReadFinal(succeeded, dead, cnc)
	return &b, nil
}

// batchCounts fills b.Counts from its members' states.
func batchCounts(ctx context.Context, q interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}, b *errandstore.Batch) error {
	rows, err := q.QueryContext(ctx, `SELECT state, count(*) FROM errand_jobs WHERE batch_id = ? GROUP BY state`, b.ID)
	if err != nil {
		return err
	}
	defer rows.Close()
	return b.ReadCounts(rows)
}

// BatchInsert implements [errandstore.BatchStore].
func (s *Store) BatchInsert(ctx context.Context, p *errandstore.BatchInsertParams) (*errandstore.BatchInsertResult, error) {
	var res *errandstore.BatchInsertResult
	err := s.tx(ctx, func(tx *sql.Tx) error {
		var err error
		res, err = s.insertBatch(ctx, tx, p)
		return err
	})
	return res, err
}

// BatchInsertTx implements [errandstore.BatchTxStore]. tx is a transaction on
// [Store.DB].
func (s *Store) BatchInsertTx(ctx context.Context, tx *sql.Tx, p *errandstore.BatchInsertParams) (*errandstore.BatchInsertResult, error) {
	return s.insertBatch(ctx, tx, p)
}

func (s *Store) insertBatch(ctx context.Context, tx *sql.Tx, p *errandstore.BatchInsertParams) (*errandstore.BatchInsertResult, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	cb, err := errandstore.EncodeBatchCallback(p.Callback)
	if err != nil {
		return nil, err
	}
	now := s.clock.Now()
	b, err := scanBatch(tx.QueryRowContext(ctx, `INSERT INTO errand_batches (id, total, callback, created_at)
		VALUES (?, ?, ?, ?) ON CONFLICT (id) DO NOTHING RETURNING `+batchColumns, p.ID, len(p.Jobs), cb, micros(now)))
	if errors.Is(err, sql.ErrNoRows) {
		b, err = scanBatch(tx.QueryRowContext(ctx, `SELECT `+batchColumns+` FROM errand_batches WHERE id = ?`, p.ID))
		if err != nil {
			return nil, fmt.Errorf("insert batch %s: %w", p.ID, err)
		}
		if err := batchCounts(ctx, tx, b); err != nil {
			return nil, fmt.Errorf("insert batch %s: %w", p.ID, err)
		}
		return &errandstore.BatchInsertResult{Batch: b, Duplicate: true}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("insert batch %s: %w", p.ID, err)
	}
	rs, err := s.insert(ctx, tx, p.Jobs)
	if err != nil {
		return nil, err
	}
	return errandstore.AddBatchMembers(b, p, rs, func(ids []string) error {
		// Members are marked in chunks far below SQLite's parameter limit.
		const chunk = 1000
		for start := 0; start < len(ids); start += chunk {
			end := min(start+chunk, len(ids))
			args := []any{p.ID}
			for _, id := range ids[start:end] {
				args = append(args, id)
			}
			if _, err := tx.ExecContext(ctx, `UPDATE errand_jobs SET batch_id = ? WHERE id IN (`+
				strings.TrimSuffix(strings.Repeat("?, ", end-start), ", ")+`)`, args...); err != nil {
				return err
			}
		}
		return nil
	})
}

// BatchGet implements [errandstore.BatchStore].
func (s *Store) BatchGet(ctx context.Context, p *errandstore.BatchGetParams) (*errandstore.Batch, error) {
	b, err := scanBatch(s.read.QueryRowContext(ctx, `SELECT `+batchColumns+` FROM errand_batches WHERE id = ?`, p.ID))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, errandtype.ErrNotFound
	}
	if err == nil {
		err = batchCounts(ctx, s.read, b)
	}
	if err != nil {
		return nil, fmt.Errorf("get batch %s: %w", p.ID, err)
	}
	return b, nil
}

// readyBatchesSQL finds open batches without an unfinished member.
const readyBatchesSQL = `SELECT b.id FROM errand_batches b
	WHERE b.completed_at IS NULL AND NOT EXISTS (
		SELECT 1 FROM errand_jobs j WHERE j.batch_id = b.id AND j.state IN (` + "%s" + `))`

// BatchComplete implements [errandstore.BatchStore]. The single writer
// serialises completions; the condition on completed_at is the
// compare-and-set.
func (s *Store) BatchComplete(ctx context.Context, p *errandstore.BatchCompleteParams) ([]*errandstore.Batch, error) {
	ids, err := s.readyBatches(ctx, p)
	if err != nil {
		return nil, fmt.Errorf("complete batches: %w", err)
	}
	return errandstore.EachID(ctx, ids, "complete batch", func(id string) (b *errandstore.Batch, err error) {
		err = s.tx(ctx, func(tx *sql.Tx) error {
			b, err = s.completeBatch(ctx, tx, id)
			return err
		})
		return b, err
	})
}

// readyBatches reads the batches of p that are ready to complete from the
// reader: a member's outcome while others are unfinished, and an idle
// reconcile pass, cost no write transaction (the writer is the store's one
// scarce resource). A read begun after the caller's outcome committed sees
// every outcome committed before it, so the last of two racing members
// still finds the batch ready.
func (s *Store) readyBatches(ctx context.Context, p *errandstore.BatchCompleteParams) ([]string, error) {
	q, args := fmt.Sprintf(readyBatchesSQL, unfinished), []any{}
	if len(p.IDs) > 0 {
		q += ` AND b.id IN (` + strings.TrimSuffix(strings.Repeat("?, ", len(p.IDs)), ", ") + `)`
		for _, id := range p.IDs {
			args = append(args, id)
		}
	} else {
		limit := p.Limit
		if limit <= 0 {
			limit = 100
		}
		q += ` ORDER BY b.created_at, b.id LIMIT ?`
		args = append(args, limit)
	}
	rows, err := s.read.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	return scanRows(rows, func(row scanner) (id string, err error) { return id, row.Scan(&id) })
}

// completeBatch completes batch id in tx if it is open and no member is
// unfinished; nil when it is not.
func (s *Store) completeBatch(ctx context.Context, tx *sql.Tx, id string) (*errandstore.Batch, error) {
	now := s.clock.Now()
	b, err := scanBatch(tx.QueryRowContext(ctx, `UPDATE errand_batches SET completed_at = ?
		WHERE id = ? AND completed_at IS NULL AND NOT EXISTS (
			SELECT 1 FROM errand_jobs j WHERE j.batch_id = errand_batches.id AND j.state IN (`+unfinished+`))
		RETURNING `+batchColumns, micros(now), id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil // completed already, unknown, or not finished
	}
	if err != nil {
		return nil, err
	}
	return errandstore.FinishBatch(b, fromMicros(micros(now)), errandstore.BatchFinishSteps{
		Count: func(b *errandstore.Batch) error { return batchCounts(ctx, tx, b) },
		Insert: func(p *errandstore.JobInsertParams) (*errandtype.Job, error) {
			rs, err := s.insert(ctx, tx, []*errandstore.JobInsertParams{p})
			if err != nil {
				return nil, err
			}
			return rs[0].Job, nil
		},
		Record: func(b *errandstore.Batch) error {
			var cbID any
			if b.CallbackJobID != nil {
				cbID = *b.CallbackJobID
			}
			_, err := tx.ExecContext(ctx, `UPDATE errand_batches SET succeeded = ?, dead = ?, cancelled = ?, callback_job_id = ?
				WHERE id = ?`, b.Final.Succeeded, b.Final.Dead, b.Final.Cancelled, cbID, b.ID)
			return err
		},
	})
}

// JobListDeadUnhooked implements [errandstore.DeadHookStore].
func (s *Store) JobListDeadUnhooked(ctx context.Context, p *errandstore.JobListDeadUnhookedParams) ([]*errandtype.Job, error) {
	if len(p.Kinds) == 0 {
		return []*errandtype.Job{}, nil
	}
	args := []any{micros(p.Since)}
	for _, k := range p.Kinds {
		args = append(args, k)
	}
	args = append(args, p.PageSize())
	jobs, err := readList(ctx, s.read, scanJob, `SELECT `+prefixed("j", jobColumns)+` FROM errand_jobs j
		WHERE j.state = 'dead' AND j.finished_at IS NOT NULL AND j.finished_at >= ?
			AND j.kind IN (`+strings.TrimSuffix(strings.Repeat("?, ", len(p.Kinds)), ", ")+`)
			AND NOT EXISTS (SELECT 1 FROM errand_jobs c WHERE c.id = `+errandstore.DeadHookJobIDSQL("j")+`)
		ORDER BY j.finished_at, j.seq LIMIT ?`, args...)
	if err != nil {
		return nil, fmt.Errorf("list dead jobs without hook: %w", err)
	}
	return jobs, nil
}

// prefixed qualifies each column of a column list with alias.
var prefixed = sqlbuild.Prefixed

// DeadHookCursors implements [errandstore.DeadHookCursorStore].
func (s *Store) DeadHookCursors(ctx context.Context, p *errandstore.DeadHookCursorsParams) (map[string]time.Time, error) {
	out := map[string]time.Time{}
	if len(p.Kinds) == 0 {
		return out, nil
	}
	kinds, err := json.Marshal(p.Kinds)
	if err != nil {
		return nil, err
	}
	type cursor struct {
		kind string
		at   int64
	}
	cs, err := readList(ctx, s.read, func(row scanner) (c cursor, err error) { return c, row.Scan(&c.kind, &c.at) },
		`SELECT kind, finished_at FROM errand_dead_hook_cursors WHERE kind IN (SELECT value FROM json_each(?))`, string(kinds))
	if err != nil {
		return nil, fmt.Errorf("read dead-hook cursors: %w", err)
	}
	for _, c := range cs {
		out[c.kind] = fromMicros(c.at)
	}
	return out, nil
}

// DeadHookCursorAdvance implements [errandstore.DeadHookCursorStore].
func (s *Store) DeadHookCursorAdvance(ctx context.Context, p *errandstore.DeadHookCursorAdvanceParams) error {
	if err := p.Validate(); err != nil {
		return err
	}
	if len(p.Kinds) == 0 {
		return nil
	}
	kinds, err := json.Marshal(p.Kinds)
	if err != nil {
		return err
	}
	err = s.tx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO errand_dead_hook_cursors (kind, finished_at)
			SELECT k.value, ?2 FROM json_each(?1) k WHERE true
			ON CONFLICT (kind) DO UPDATE SET finished_at = max(finished_at, excluded.finished_at)`, string(kinds), micros(p.To))
		return err
	})
	if err != nil {
		return fmt.Errorf("advance dead-hook cursors: %w", err)
	}
	return nil
}
