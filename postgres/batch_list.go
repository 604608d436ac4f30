package postgres

import (
	"context"
	"fmt"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
	"github.com/errandhq/errand/internal/rowscan"
)

// BatchList implements [errandstore.BatchStore]: the rows in one query
// (see [sqlbuild.Dialect.BatchList]), the counts of all their members in
// another, from the members' index on (batch_id, state).
func (s *Store) BatchList(ctx context.Context, p *errandstore.BatchListParams) ([]*errandstore.Batch, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	db := pgxQuerier{s.pool}
	rs, err := db.query(ctx, s.batchSQL(s.own, batchListSQL(p.State, p.Before != nil)), dialect.BatchListArgs(p)...)
	if err != nil {
		return nil, fmt.Errorf("list batches: %w", err)
	}
	bs, err := rowscan.List(rs, scanBatch)
	rs.Close()
	if err != nil {
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
