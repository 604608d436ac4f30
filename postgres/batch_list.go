package postgres

import (
	"context"
	"fmt"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
)

// BatchList implements [errandstore.BatchStore]: the rows in one query, read
// from an index on created_at (errand_batches_open for open batches,
// errand_batches_created otherwise), and the counts of all their members
// in another, from the members' index on (batch_id, state).
func (s *Store) BatchList(ctx context.Context, p *errandstore.BatchListParams) ([]*errandstore.Batch, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	limit := p.Limit
	if limit <= 0 {
		limit = 100
	}
	db := pgxQuerier{s.pool}
	args := []any{limit}
	if c := p.Before; c != nil {
		args = append(args, c.CreatedAt, c.ID)
	}
	rs, err := db.query(ctx, s.batchSQL(s.own, batchListSQL(p.State, p.Before != nil)), args...)
	if err != nil {
		return nil, fmt.Errorf("list batches: %w", err)
	}
	bs := []*errandstore.Batch{}
	for rs.Next() {
		b, err := scanBatch(rs)
		if err != nil {
			rs.Close()
			return nil, fmt.Errorf("list batches: %w", err)
		}
		bs = append(bs, b)
	}
	rs.Close()
	if err := rs.Err(); err != nil {
		return nil, fmt.Errorf("list batches: %w", err)
	}
	if err := s.batchListCounts(ctx, db, bs); err != nil {
		return nil, fmt.Errorf("list batches: %w", err)
	}
	return bs, nil
}

// batchListCounts fills the Counts of bs from their members' states, in
// one query.
func (s *Store) batchListCounts(ctx context.Context, q querier, bs []*errandstore.Batch) error {
	ids := errandstore.ResetBatchCounts(bs)
	if len(ids) == 0 {
		return nil
	}
	rs, err := q.query(ctx, s.sql(batchListCountsSQL), ids)
	if err != nil {
		return err
	}
	defer rs.Close()
	return errandstore.AddBatchCounts(bs, rs)
}

// batchListSQL lists the batches in state (every batch when empty), newest
// first, at most $1 of them; with before, only those before ($2, $3).
func batchListSQL(state errandtype.BatchState, before bool) string {
	return dialect.BatchList(batchColumns, state, before)
}

// batchListCountsSQL counts the members of the batches $1 by state.
const batchListCountsSQL = `SELECT batch_id, state, count(*) FROM {jobs}
	WHERE batch_id = ANY($1) GROUP BY batch_id, state`
