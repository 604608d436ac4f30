package postgres

import (
	"context"
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
	rs, err := q.query(ctx, s.sql(batchListCountsSQL), ids)
	if err != nil {
		return err
	}
	defer rs.Close()
	for rs.Next() {
		var id, st string
		var n int
		if err := rs.Scan(&id, &st, &n); err != nil {
			return err
		}
		if b := byID[id]; b != nil {
			b.Counts[errandtype.JobState(st)] = n
		}
	}
	return rs.Err()
}

// batchListSQL lists the batches in state (every batch when empty), newest
// first, at most $1 of them; with before, only those before the position
// ($2, $3), a creation time and an id.
func batchListSQL(state errandtype.BatchState, before bool) string {
	var where []string
	switch state {
	case errandtype.BatchOpen:
		where = append(where, `completed_at IS NULL`)
	case errandtype.BatchCompleted:
		where = append(where, `completed_at IS NOT NULL`)
	}
	if before {
		where = append(where, `(created_at, id) < ($2, $3)`)
	}
	q := `SELECT ` + batchColumns + ` FROM {batches}`
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, ` AND `)
	}
	return q + ` ORDER BY created_at DESC, id DESC LIMIT $1`
}

// batchListCountsSQL counts the members of the batches $1 by state.
const batchListCountsSQL = `SELECT batch_id, state, count(*) FROM {jobs}
	WHERE batch_id = ANY($1) GROUP BY batch_id, state`
