package sqlite

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

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
	var args []any
	if c := p.Before; c != nil {
		args = append(args, micros(c.CreatedAt), c.ID)
	}
	rows, err := s.read.QueryContext(ctx, batchListSQL(p.State, p.Before != nil), append(args, limit)...)
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
	byID := make(map[string]*errandstore.Batch, len(bs))
	ids := make([]string, len(bs))
	for i, b := range bs {
		b.Counts = errandstore.NewBatchCounts()
		byID[b.ID] = b
		ids[i] = b.ID
	}
	if len(bs) == 0 {
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
	for rows.Next() {
		var id, st string
		var n int
		if err := rows.Scan(&id, &st, &n); err != nil {
			return err
		}
		if b := byID[id]; b != nil {
			b.Counts[errandtype.JobState(st)] = n
		}
	}
	return rows.Err()
}

// batchListSQL lists the batches in state (every batch when empty), newest
// first, at most ? of them.
func batchListSQL(state errandtype.BatchState, before bool) string {
	var where []string
	switch state {
	case errandtype.BatchOpen:
		where = append(where, `completed_at IS NULL`)
	case errandtype.BatchCompleted:
		where = append(where, `completed_at IS NOT NULL`)
	}
	if before {
		where = append(where, `(created_at, id) < (?, ?)`)
	}
	q := `SELECT ` + batchColumns + ` FROM errand_batches`
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, ` AND `)
	}
	return q + ` ORDER BY created_at DESC, id DESC LIMIT ?`
}

// batchListCountsSQL counts the members of the batches in the JSON array
// ? by state.
const batchListCountsSQL = `SELECT batch_id, state, count(*) FROM errand_jobs
	WHERE batch_id IN (SELECT value FROM json_each(?)) GROUP BY batch_id, state`
