package postgres

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
	"github.com/errandhq/errand/internal/sqlbuild"
	"github.com/jackc/pgx/v5"
)

var (
	_ errandstore.BatchTxStore[pgx.Tx]  = (*Store)(nil)
	_ errandstore.BatchTxStore[*sql.Tx] = (*SQLStore)(nil)
	_ errandstore.DeadHookStore         = (*Store)(nil)
	_ errandstore.DeadHookCursorStore   = (*Store)(nil)
)

// unfinished is errandstore.UnfinishedStates as a SQL list, for IN (...).
var unfinished = errandstore.SQLStates(errandstore.UnfinishedStates)

const batchColumns = `id, total, callback, callback_job_id, created_at, completed_at, succeeded, dead, cancelled`

// batchSQL expands a batch statement: {batches} and what r expands.
func (s *Store) batchSQL(r *strings.Replacer, q string) string {
	return r.Replace(strings.ReplaceAll(q, "{batches}", s.table("errand_batches")))
}

func scanBatch(row scanner) (*errandstore.Batch, error) {
	var (
		b                    errandstore.Batch
		cb                   *string
		succeeded, dead, cnc int
	)
	if err := row.Scan(&b.ID, &b.Total, &cb, &b.CallbackJobID, &b.CreatedAt, &b.CompletedAt, &succeeded, &dead, &cnc); err != nil {
		return nil, err
	}
	var err error
	if b.Callback, err = errandstore.DecodeBatchCallback(cb); err != nil {
		return nil, err
	}
	b.CreatedAt, b.CompletedAt = b.CreatedAt.UTC(), utc(b.CompletedAt)
	b.ReadFinal(succeeded, dead, cnc)
	return &b, nil
}

// queryBatch reads one batch row with q, or reports found false.
func queryBatch(ctx context.Context, q querier, sql string, args ...any) (*errandstore.Batch, bool, error) {
	rs, err := q.query(ctx, sql, args...)
	if err != nil {
		return nil, false, err
	}
	defer rs.Close()
	if !rs.Next() {
		return nil, false, rs.Err()
	}
	b, err := scanBatch(rs)
	if err != nil {
		return nil, false, err
	}
	rs.Close()
	return b, true, rs.Err()
}

// batchCounts fills b.Counts from its members' states.
func (s *Store) batchCounts(ctx context.Context, q querier, b *errandstore.Batch) error {
	rs, err := q.query(ctx, s.sql(`SELECT state, count(*) FROM {jobs} WHERE batch_id = $1 GROUP BY state`), b.ID)
	if err != nil {
		return err
	}
	defer rs.Close()
	return b.ReadCounts(rs)
}

// BatchInsert implements [errandstore.BatchStore].
func (s *Store) BatchInsert(ctx context.Context, p *errandstore.BatchInsertParams) (*errandstore.BatchInsertResult, error) {
	var res *errandstore.BatchInsertResult
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		res, err = s.insertBatch(ctx, pgxQuerier{tx}, s.own, p, func(jobs []*errandstore.JobInsertParams) ([]errandstore.JobInsertResult, error) {
			return s.insert(ctx, pgxQuerier{tx}, s.own, jobs)
		})
		return err
	})
	return res, err
}

// BatchInsertTx implements [errandstore.BatchTxStore]: tx is a pgx.Tx on the
// store's database.
func (s *Store) BatchInsertTx(ctx context.Context, tx pgx.Tx, p *errandstore.BatchInsertParams) (*errandstore.BatchInsertResult, error) {
	return s.insertBatch(ctx, pgxQuerier{tx}, s.inTx, p, func(jobs []*errandstore.JobInsertParams) ([]errandstore.JobInsertResult, error) {
		return s.insertCallerTx(ctx, tx, jobs)
	})
}

// BatchInsertTx implements [errandstore.BatchTxStore]: tx is a *sql.Tx of the
// pgx driver on the store's database.
func (s *SQLStore) BatchInsertTx(ctx context.Context, tx *sql.Tx, p *errandstore.BatchInsertParams) (*errandstore.BatchInsertResult, error) {
	return s.insertBatch(ctx, sqlQuerier{tx}, s.inTx, p, func(jobs []*errandstore.JobInsertParams) ([]errandstore.JobInsertResult, error) {
		return s.insert(ctx, sqlQuerier{tx}, s.inTx, jobs)
	})
}

func (s *Store) insertBatch(ctx context.Context, q querier, r *strings.Replacer, p *errandstore.BatchInsertParams,
	insert func([]*errandstore.JobInsertParams) ([]errandstore.JobInsertResult, error)) (*errandstore.BatchInsertResult, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	cb, err := errandstore.EncodeBatchCallback(p.Callback)
	if err != nil {
		return nil, err
	}
	b, found, err := queryBatch(ctx, q, s.batchSQL(r, `INSERT INTO {batches} (id, total, callback, created_at)
		VALUES ($2, $3, $4, {now}) ON CONFLICT (id) DO NOTHING RETURNING `+batchColumns), s.nowArg(), p.ID, len(p.Jobs), cb)
	if err != nil {
		return nil, fmt.Errorf("insert batch %s: %w", p.ID, badValue(err))
	}
	if !found {
		b, found, err = queryBatch(ctx, q, s.batchSQL(r, `SELECT `+batchColumns+` FROM {batches} WHERE id = $1`), p.ID)
		if err == nil && !found {
			err = errandtype.ErrNotFound
		}
		if err == nil {
			err = s.batchCounts(ctx, q, b)
		}
		if err != nil {
			return nil, fmt.Errorf("insert batch %s: %w", p.ID, err)
		}
		return &errandstore.BatchInsertResult{Batch: b, Duplicate: true}, nil
	}
	rs, err := insert(p.Jobs)
	if err != nil {
		return nil, err
	}
	return errandstore.AddBatchMembers(b, p, rs, func(ids []string) error {
		_, err := q.exec(ctx, r.Replace(`UPDATE {jobs} SET batch_id = $1 WHERE id = ANY($2)`), p.ID, ids)
		return err
	})
}

// BatchGet implements [errandstore.BatchStore].
func (s *Store) BatchGet(ctx context.Context, p *errandstore.BatchGetParams) (*errandstore.Batch, error) {
	if !errandtype.StorableText(p.ID) {
		return nil, errandtype.ErrNotFound
	}
	q := pgxQuerier{s.pool}
	b, found, err := queryBatch(ctx, q, s.batchSQL(s.own, `SELECT `+batchColumns+` FROM {batches} WHERE id = $1`), p.ID)
	if err == nil && !found {
		return nil, errandtype.ErrNotFound
	}
	if err == nil {
		err = s.batchCounts(ctx, q, b)
	}
	if err != nil {
		return nil, fmt.Errorf("get batch %s: %w", p.ID, err)
	}
	return b, nil
}

// BatchComplete implements [errandstore.BatchStore]. The UPDATE's row lock
// serialises completions of one batch; a process that waited for it reads
// the row again (READ COMMITTED), finds completed_at set, and updates
// nothing. Each completion reads the members after its own statement began,
// so of two workers that finish a batch's last two members at once, the
// later to commit sees both finished.
func (s *Store) BatchComplete(ctx context.Context, p *errandstore.BatchCompleteParams) ([]*errandstore.Batch, error) {
	// One read first: a member's outcome while others are unfinished, and
	// an idle reconcile pass, cost one round trip and no transaction.
	limit := p.Limit
	if limit <= 0 {
		limit = 100
	}
	var only []string
	for _, id := range p.IDs {
		if errandtype.StorableText(id) {
			only = append(only, id)
		}
	}
	if len(p.IDs) > 0 && len(only) == 0 {
		return nil, nil
	}
	rs, err := s.pool.Query(ctx, s.batchSQL(s.own, `SELECT b.id FROM {batches} b
		WHERE b.completed_at IS NULL AND ($1::text[] IS NULL OR b.id = ANY($1)) AND NOT EXISTS (
			SELECT 1 FROM {jobs} j WHERE j.batch_id = b.id AND j.state IN (`+unfinished+`))
		ORDER BY b.created_at, b.id LIMIT $2`), only, max(limit, len(only)))
	if err != nil {
		return nil, fmt.Errorf("complete batches: %w", err)
	}
	ids, err := pgx.CollectRows(rs, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("complete batches: %w", err)
	}
	return errandstore.EachID(ctx, ids, "complete batch", func(id string) (b *errandstore.Batch, err error) {
		err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			b, err = s.completeBatch(ctx, pgxQuerier{tx}, id)
			return err
		})
		return b, err
	})
}

// completeBatch completes batch id with q, in a transaction, if it is open
// and no member is unfinished; nil when it is not.
func (s *Store) completeBatch(ctx context.Context, q querier, id string) (*errandstore.Batch, error) {
	b, found, err := queryBatch(ctx, q, s.batchSQL(s.own, `UPDATE {batches} b SET completed_at = {now}
		WHERE b.id = $2 AND b.completed_at IS NULL AND NOT EXISTS (
			SELECT 1 FROM {jobs} j WHERE j.batch_id = b.id AND j.state IN (`+unfinished+`))
		RETURNING `+batchColumns), s.nowArg(), id)
	if err != nil || !found {
		return nil, err // not found: completed already, unknown, or not finished
	}
	return errandstore.FinishBatch(b, *b.CompletedAt, errandstore.BatchFinishSteps{
		Count: func(b *errandstore.Batch) error { return s.batchCounts(ctx, q, b) },
		Insert: func(p *errandstore.JobInsertParams) (*errandtype.Job, error) {
			rs, err := s.insert(ctx, q, s.own, []*errandstore.JobInsertParams{p})
			if err != nil {
				return nil, err
			}
			return rs[0].Job, nil
		},
		Record: func(b *errandstore.Batch) error {
			_, err := q.exec(ctx, s.batchSQL(s.own, `UPDATE {batches} SET succeeded = $1, dead = $2, cancelled = $3, callback_job_id = $4
				WHERE id = $5`), b.Final.Succeeded, b.Final.Dead, b.Final.Cancelled, b.CallbackJobID, b.ID)
			return err
		},
	})
}

// JobListDeadUnhooked implements [errandstore.DeadHookStore].
func (s *Store) JobListDeadUnhooked(ctx context.Context, p *errandstore.JobListDeadUnhookedParams) ([]*errandtype.Job, error) {
	if len(p.Kinds) == 0 {
		return []*errandtype.Job{}, nil
	}
	rs, err := s.pool.Query(ctx, s.sql(`SELECT `+prefixed("j", jobColumns)+` FROM {jobs} j
		WHERE j.state = 'dead' AND j.finished_at IS NOT NULL AND j.finished_at >= $1
			AND j.kind = ANY($2)
			AND NOT EXISTS (SELECT 1 FROM {jobs} c WHERE c.id = `+errandstore.DeadHookJobIDSQL("j")+`)
		ORDER BY j.finished_at, j.seq LIMIT $3`), micro(p.Since), storableOnly(p.Kinds), p.PageSize())
	if err != nil {
		return nil, fmt.Errorf("list dead jobs without hook: %w", err)
	}
	jobs, err := scanJobs(rs, jobScanner())
	if err != nil {
		return nil, fmt.Errorf("list dead jobs without hook: %w", err)
	}
	if jobs == nil {
		jobs = []*errandtype.Job{}
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
	rs, err := s.pool.Query(ctx, s.sql(`SELECT kind, finished_at FROM {dead_hook_cursors} WHERE kind = ANY($1)`), storableOnly(p.Kinds))
	if err != nil {
		return nil, fmt.Errorf("read dead-hook cursors: %w", err)
	}
	defer rs.Close()
	for rs.Next() {
		var kind string
		var at time.Time
		if err := rs.Scan(&kind, &at); err != nil {
			return nil, fmt.Errorf("read dead-hook cursors: %w", err)
		}
		out[kind] = at.UTC()
	}
	if err := rs.Err(); err != nil {
		return nil, fmt.Errorf("read dead-hook cursors: %w", err)
	}
	return out, nil
}

// DeadHookCursorAdvance implements [errandstore.DeadHookCursorStore]. Kinds are
// written in order, so that two workers advancing the same kinds lock
// their rows in one order.
func (s *Store) DeadHookCursorAdvance(ctx context.Context, p *errandstore.DeadHookCursorAdvanceParams) error {
	if err := p.Validate(); err != nil {
		return err
	}
	if len(p.Kinds) == 0 {
		return nil
	}
	kinds := slices.Clone(p.Kinds)
	slices.Sort(kinds)
	_, err := s.pool.Exec(ctx, s.sql(`INSERT INTO {dead_hook_cursors} (kind, finished_at)
		SELECT DISTINCT k, $2::timestamptz FROM unnest($1::text[]) k ORDER BY k
		ON CONFLICT (kind) DO UPDATE SET finished_at = greatest({dead_hook_cursors}.finished_at, excluded.finished_at)`),
		kinds, micro(p.To))
	if err != nil {
		return fmt.Errorf("advance dead-hook cursors: %w", err)
	}
	return nil
}
