package sqlite

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
)

// BatchList implements [errandstore.BatchStore]: the rows in one query
// (see [sqlbuild.Dialect.BatchList]), the counts of all their members in
// another, from the members' index on (batch_id, state).
func (s *Store) BatchList(ctx context.Context, p *errandstore.BatchListParams) ([]*errandstore.Batch, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	rows, err := s.read.QueryContext(ctx, batchListSQL(p.State, p.Before != nil), dialect.BatchListArgs(p)...)
	if err != nil {
		return nil, fmt.Errorf("list batches: %w", err)
	}
	bs, err := scanRows(rows, scanBatch)
	if err != nil {
		return nil, fmt.Errorf("list batches: %w", err)
	}
	if err := s.batchListCounts(ctx, bs); err != nil {
		return nil, fmt.Errorf("list batches: %w", err)
	}
	if bs == nil {
		bs = []*errandstore.Batch{}
	}
	return bs, nil
}

// batchListCounts fills the Counts of bs from their members' states, in
// one query.
func (s *Store) batchListCounts(ctx context.Context, bs []*errandstore.Batch) error {
	ids := errandstore.ResetBatchCounts(bs)
	if len(ids) == 0 {
		return nil
	}
	list, err := json.Marshal(ids)
	if err != nil {
		return err
	}
	rows, err := s.read.QueryContext(ctx, batchListCountsSQL, string(list))
	if err != nil {
		return err
	}
	defer rows.Close()
	return errandstore.AddBatchCounts(bs, rows)
}

// batchListSQL lists the batches in state (every batch when empty), newest
// first, at most ?1 of them; with before, only those before (?2, ?3).
func batchListSQL(state errandtype.BatchState, before bool) string {
	return dialect.BatchList(batchColumns, state, before)
}

// batchListCountsSQL counts the members of the batches in the JSON array
// ? by state.
const batchListCountsSQL = `SELECT batch_id, state, count(*) FROM errand_jobs
	WHERE batch_id IN (SELECT value FROM json_each(?)) GROUP BY batch_id, state`
