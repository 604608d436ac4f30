package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/errandhq/errand/errandstore"
)

var _ errandstore.PriorityAger = (*Store)(nil)

// agedPriority is errandtype.PriorityAging.Aged of a job's enqueued
// priority and its wait since available_at: ?1 now, ?3 the floor, ?4 the
// step, all in microseconds but the floor.
const agedPriority = `max(?3, coalesce(base_priority, priority) - (?1 - available_at) / ?4)`

// agePrioritiesSQL ages up to ?5 waiting jobs of queue ?2 whose aged
// priority is below their priority now, through the claim index's range of
// the queue's priorities above the floor.
var agePrioritiesSQL = `UPDATE errand_jobs SET base_priority = coalesce(base_priority, priority), priority = ` + agedPriority + `
	WHERE seq IN (SELECT seq FROM errand_jobs INDEXED BY errand_jobs_claim
		WHERE queue = ?2 AND state IN (` + waiting + `) AND priority > ?3 AND available_at <= ?1 - ?4
			AND ` + agedPriority + ` < priority
		LIMIT ?5)`

// JobAgePriorities implements [errandstore.PriorityAger].
func (s *Store) JobAgePriorities(ctx context.Context, p *errandstore.JobAgePrioritiesParams) (int, error) {
	if err := p.Validate(); err != nil {
		return 0, err
	}
	var n int64
	err := s.tx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, agePrioritiesSQL, micros(s.clock.Now()), p.Queue, p.Aging.Floor, p.Aging.Step.Microseconds(), p.Limit)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("age priorities: %w", err)
	}
	return int(n), nil
}
