package errandstore

import (
	"context"
	"fmt"
	"time"

	"github.com/errandhq/errand/errandtype"
)

// PriorityAger is the optional capability of priority aging, which a
// cluster's leader applies between claims. errand/sqlite and
// errand/postgres implement it.
//
// Aging rewrites the stored priority, the column claims order by, rather
// than ordering claims by an expression of the wait: the claim keeps
// walking its index, and a job is rewritten at most once per step it
// climbs. The enqueued priority is kept in base_priority.
type PriorityAger interface {
	// JobAgePriorities lowers the priority of up to Limit waiting jobs of
	// Queue, available for at least Aging.Step, to Aging.Aged of their
	// enqueued priority and their wait since available_at, where that is
	// lower than their priority now; it keeps the enqueued priority in
	// BasePriority. It returns how many jobs it changed. A retried job keeps
	// the priority it reached; a replay restores the enqueued one.
	JobAgePriorities(ctx context.Context, params *JobAgePrioritiesParams) (int, error)
}

// JobAgePrioritiesParams are JobAgePriorities' parameters.
type JobAgePrioritiesParams struct {
	Queue string
	Aging errandtype.PriorityAging
	// Limit bounds the jobs changed by one call.
	Limit int
}

// MinAgingStep is the shortest step of priority aging.
const MinAgingStep = time.Second

// AgingLimit is how many jobs of a queue the leader ages at most per sweep.
const AgingLimit = 1000

// Validate checks the params before a store uses them.
func (p *JobAgePrioritiesParams) Validate() error {
	if err := CheckIdentifier("queue", p.Queue, MaxIDBytes); err != nil {
		return err
	}
	if p.Limit < 1 {
		return &errandtype.InputError{Field: "limit", Message: "must be at least 1"}
	}
	return CheckPriorityAging("priority_aging."+p.Queue, p.Aging)
}

// CheckPriorityAging refuses a step shorter than [MinAgingStep].
func CheckPriorityAging(field string, a errandtype.PriorityAging) error {
	if a.Step < MinAgingStep {
		return &errandtype.InputError{Field: field + ".step", Message: fmt.Sprintf("%s is too short; give at least %s, e.g. 1m", a.Step, MinAgingStep)}
	}
	return nil
}
