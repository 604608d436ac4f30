package errandstore

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/errandhq/errand/errandtype"
)

const (
	// MaxPruneBatch is the most jobs deleted in one transaction, and the
	// most batches and the most workflows.
	MaxPruneBatch = 1000
)

// JobPruneParams describe one batch of retention.
type JobPruneParams struct {
	// SucceededAge: succeeded and cancelled jobs finished at least this
	// long ago go. Zero keeps them.
	SucceededAge time.Duration
	// DeadAge: dead jobs that died at least this long ago go. Zero keeps
	// them.
	DeadAge time.Duration
	// Limit is the most jobs to delete: 1 to MaxPruneBatch. It bounds the
	// batches and the workflows deleted in the same transaction alike.
	Limit    int
	Operator string
	Reason   string
	DryRun   bool
}

// Validate reports bad params as an *InputError.
func (p *JobPruneParams) Validate() error {
	if err := CheckPruneAges(p.SucceededAge, p.DeadAge); err != nil {
		return err
	}
	if !p.DryRun && (p.Limit < 1 || p.Limit > MaxPruneBatch) {
		return &errandtype.InputError{Field: "limit", Message: fmt.Sprintf("%d is out of range; delete 1 to %d jobs per batch", p.Limit, MaxPruneBatch)}
	}
	if !p.DryRun {
		return CheckOperatorAction(p.Operator, p.Reason, "pruning jobs")
	}
	return checkPreviewAudit(p.Operator, p.Reason)
}

func CheckPruneAges(succeeded, dead time.Duration) error {
	switch {
	case succeeded < 0:
		return &errandtype.InputError{Field: "succeeded_age", Message: "must not be negative; give an age such as 168h, or 0 to keep succeeded and cancelled jobs"}
	case dead < 0:
		return &errandtype.InputError{Field: "dead_age", Message: "must not be negative; give an age such as 720h, or 0 to keep dead jobs"}
	case succeeded == 0 && dead == 0:
		return &errandtype.InputError{Field: "succeeded_age", Message: "is 0 and so is the age for dead jobs, which prunes nothing; give at least one age"}
	case dead > 0 && succeeded > 0 && dead < succeeded:
		return &errandtype.InputError{Field: "dead_age", Message: fmt.Sprintf("%s is shorter than the age for succeeded jobs, %s; keep dead jobs, the evidence of failures, at least as long", dead, succeeded)}
	}
	return nil
}

// PruneGroup is one state a prune deletes from, and how old its jobs must
// be.
type PruneGroup struct {
	State errandtype.JobState
	Age   time.Duration
}

// PruneGroups lists the states p prunes, in the order a store deletes
// from them: succeeded, cancelled, dead; states whose age is 0 are left
// out. A store deletes one state at a time, oldest first, so that an index
// on (state, finished_at) yields the rows in order.
func PruneGroups(p *JobPruneParams) []PruneGroup {
	var gs []PruneGroup
	if p.SucceededAge > 0 {
		gs = append(gs, PruneGroup{errandtype.StateSucceeded, p.SucceededAge}, PruneGroup{errandtype.StateCancelled, p.SucceededAge})
	}
	if p.DeadAge > 0 {
		gs = append(gs, PruneGroup{errandtype.StateDead, p.DeadAge})
	}
	return gs
}

// PruneResult counts the jobs a prune deleted (or, dry, would delete), and
// the batches and workflows that went with their last jobs.
type PruneResult struct {
	Succeeded int `json:"succeeded"`
	Cancelled int `json:"cancelled"`
	Dead      int `json:"dead"`
	// Batches counts the completed batches deleted because none of their
	// jobs (members and callback) was left; Workflows the finished
	// workflows deleted because none of their jobs was left. A dry run
	// counts those whose every job this prune would delete.
	Batches   int  `json:"batches"`
	Workflows int  `json:"workflows"`
	DryRun    bool `json:"dry_run"`
}

// Total is the number of jobs.
func (r PruneResult) Total() int { return r.Succeeded + r.Cancelled + r.Dead }

// more reports whether a prune of limit per transaction that returned r
// may have left something to delete: a full batch of jobs, batches or
// workflows.
func (r PruneResult) More(limit int) bool {
	return r.Total() >= limit || r.Batches >= limit || r.Workflows >= limit
}

// PruneDetails is the details of an [errandtype.AuditPrune] record: the ages applied
// and what one transaction deleted (batches and workflows only when some
// went).
func PruneDetails(p *JobPruneParams, r PruneResult) json.RawMessage {
	return mustJSON(struct {
		SucceededAge string `json:"succeeded_age"`
		DeadAge      string `json:"dead_age"`
		Succeeded    int    `json:"succeeded"`
		Cancelled    int    `json:"cancelled"`
		Dead         int    `json:"dead"`
		Batches      int    `json:"batches,omitempty"`
		Workflows    int    `json:"workflows,omitempty"`
	}{p.SucceededAge.String(), p.DeadAge.String(), r.Succeeded, r.Cancelled, r.Dead, r.Batches, r.Workflows})
}

// PruneBatchCutoff is the time before which a completed batch or finished
// workflow must have finished for a prune to delete it once its jobs are
// gone: the shorter of p's ages (those not 0) before now. A batch or
// workflow finishes no earlier than its jobs (a replayed job finishes later
// still), so one that finished since cannot have lost all its jobs to this
// prune; the bound keeps a store from looking at recent ones at all.
func PruneBatchCutoff(p *JobPruneParams, now time.Time) time.Time {
	age := p.DeadAge
	if p.SucceededAge > 0 && (age == 0 || p.SucceededAge < age) {
		age = p.SucceededAge
	}
	return now.Add(-age)
}

// Add counts n pruned jobs in state st.
func (r *PruneResult) Add(st errandtype.JobState, n int) {
	switch st {
	case errandtype.StateSucceeded:
		r.Succeeded += n
	case errandtype.StateCancelled:
		r.Cancelled += n
	case errandtype.StateDead:
		r.Dead += n
	}
}

// RunPrune runs a prune of p with the store's steps: count, for a dry run,
// or remove, each counting into the result it is given. A failed prune
// reports nothing pruned.
func RunPrune(p *JobPruneParams, count, remove func(r *PruneResult) error) (PruneResult, error) {
	r := PruneResult{DryRun: p.DryRun}
	var err error
	if p.DryRun {
		err = count(&r)
	} else {
		err = remove(&r)
	}
	if err != nil {
		return PruneResult{DryRun: p.DryRun}, fmt.Errorf("prune: %w", err)
	}
	return r, nil
}

// PruneJobs deletes up to limit jobs of groups, group by group, oldest
// first within a group: del deletes up to left jobs of group g and
// returns the states of those it deleted, which PruneJobs counts.
func (r *PruneResult) PruneJobs(groups []PruneGroup, limit int, del func(g PruneGroup, left int) ([]string, error)) error {
	left := limit
	for _, g := range groups {
		if left == 0 {
			break
		}
		states, err := del(g, left)
		if err != nil {
			return err
		}
		for _, st := range states {
			r.Add(errandtype.JobState(st), 1)
		}
		left -= len(states)
	}
	return nil
}
