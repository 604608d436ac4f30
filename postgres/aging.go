package postgres

import (
	"context"
	"fmt"

	"github.com/errandhq/errand/errandstore"
)

var _ errandstore.PriorityAger = (*Store)(nil)

// agedPriority is errandtype.PriorityAging.Aged of a job's enqueued
// priority and its wait since available_at: $3 the floor, $4 the step in
// microseconds. bigint, so that a long wait over a short step cannot
// overflow.
const agedPriority = `greatest($3::bigint, coalesce(base_priority, priority)::bigint
		- floor(extract(epoch FROM {now} - available_at) * 1000000 / $4::bigint)::bigint)`

// agePrioritiesSQL ages up to $5 waiting jobs of queue $2 whose aged
// priority is below their priority now, through the claim index's range of
// the queue's priorities above the floor.
var agePrioritiesSQL = `UPDATE {jobs} SET base_priority = coalesce(base_priority, priority), priority = a.aged
	FROM (SELECT seq AS aseq, ` + agedPriority + `::integer AS aged FROM {jobs}
		WHERE queue = $2 AND state IN (` + waiting + `) AND priority > $3
			AND available_at <= {now} - $4 * interval '1 microsecond'
			AND ` + agedPriority + ` < priority
		LIMIT $5
		FOR UPDATE SKIP LOCKED) a
	WHERE seq = a.aseq`

// JobAgePriorities implements [errandstore.PriorityAger].
func (s *Store) JobAgePriorities(ctx context.Context, p *errandstore.JobAgePrioritiesParams) (int, error) {
	if err := p.Validate(); err != nil {
		return 0, err
	}
	tag, err := s.pool.Exec(ctx, s.sql(agePrioritiesSQL), s.nowArg(), p.Queue, p.Aging.Floor, us(p.Aging.Step), p.Limit)
	if err != nil {
		return 0, fmt.Errorf("age priorities: %w", err)
	}
	return int(tag.RowsAffected()), nil
}
