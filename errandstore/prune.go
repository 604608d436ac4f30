package errandstore

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/errandhq/errand/errandtype"
)

const (
	// MaxPruneBatch is the most jobs deleted in one transaction, and the
	// most batches and the most workflows.
	MaxPruneBatch = 1000
	// MaxPruneKinds is the most kinds given their own retention.
	MaxPruneKinds = 100
)

// KindRetention is the retention of one kind: each age not 0 replaces,
// for that kind's jobs, the default age of the same states; an age of 0
// leaves them to the default.
type KindRetention struct {
	SucceededAge time.Duration `json:"succeeded_age"`
	DeadAge      time.Duration `json:"dead_age"`
}

// JobPruneParams describe one batch of retention.
type JobPruneParams struct {
	// SucceededAge: succeeded and cancelled jobs finished at least this
	// long ago go. Zero keeps them.
	SucceededAge time.Duration
	// DeadAge: dead jobs that died at least this long ago go. Zero keeps
	// them.
	DeadAge time.Duration
	// Kinds gives kinds their own ages (see [KindRetention]).
	Kinds map[string]KindRetention
	// Limit is the most jobs to delete: 1 to MaxPruneBatch. It bounds the
	// batches and the workflows deleted in the same transaction alike.
	Limit    int
	Operator string
	Reason   string
	DryRun   bool
}

// Validate reports bad params as an *InputError.
func (p *JobPruneParams) Validate() error {
	if err := CheckPrune(p.SucceededAge, p.DeadAge, p.Kinds); err != nil {
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

// CheckPrune validates a prune's default ages and its kinds' own: with a
// kind of its own, both defaults may be 0 (only that kind is pruned), and
// each kind keeps its dead jobs at least as long as its succeeded ones,
// counting the default where it gives no age of its own.
func CheckPrune(succeeded, dead time.Duration, kinds map[string]KindRetention) error {
	if len(kinds) == 0 {
		return CheckPruneAges(succeeded, dead)
	}
	if len(kinds) > MaxPruneKinds {
		return &errandtype.InputError{Field: "kinds", Message: fmt.Sprintf("has %d kinds; give at most %d their own retention", len(kinds), MaxPruneKinds)}
	}
	if err := checkPruneAges(succeeded, dead, false); err != nil {
		return err
	}
	for _, k := range sortedKinds(kinds) {
		a, f := kinds[k], "kinds["+k+"]"
		if k == "" {
			return &errandtype.InputError{Field: "kinds", Message: "names an empty kind; give each kind's name, e.g. email=1h"}
		}
		if a.SucceededAge == 0 && a.DeadAge == 0 {
			return &errandtype.InputError{Field: f, Message: "gives no age; give a succeeded age, a dead age or both, e.g. " + k + "=1h:720h"}
		}
		if err := checkPruneAges(a.SucceededAge, a.DeadAge, false); err != nil {
			err.(*errandtype.InputError).Field = f + "." + err.(*errandtype.InputError).Field
			return err
		}
		r := RetentionOf(succeeded, dead, kinds, k)
		s, d := r.SucceededAge, r.DeadAge
		if s > 0 && d > 0 && d < s {
			return &errandtype.InputError{Field: f + ".dead_age", Message: fmt.Sprintf("dead jobs of %s would go after %s, sooner than its succeeded ones (%s); give %s a dead age of at least %s, e.g. %s=%s:%s", k, d, s, k, s, k, s, s)}
		}
	}
	return nil
}

// RetentionOf is the retention in force for kind's jobs under the default
// ages and kinds' own: each of its own ages that is not 0, else the
// default. An age of 0 in the result keeps those jobs.
func RetentionOf(succeeded, dead time.Duration, kinds map[string]KindRetention, kind string) KindRetention {
	own := kinds[kind]
	return KindRetention{SucceededAge: kindAge(own.SucceededAge, succeeded), DeadAge: kindAge(own.DeadAge, dead)}
}

// kindAge is a kind's age for a state: its own, or else the default.
func kindAge(own, def time.Duration) time.Duration {
	if own > 0 {
		return own
	}
	return def
}

func sortedKinds(kinds map[string]KindRetention) []string {
	return slices.Sorted(maps.Keys(kinds))
}

// CheckPruneAges validates a prune's ages when no kind has its own.
func CheckPruneAges(succeeded, dead time.Duration) error {
	return checkPruneAges(succeeded, dead, true)
}

// checkPruneAges validates a pair of ages; needOne: both 0 is an error.
func checkPruneAges(succeeded, dead time.Duration, needOne bool) error {
	switch {
	case succeeded < 0:
		return &errandtype.InputError{Field: "succeeded_age", Message: "must not be negative; give an age such as 168h, or 0 to keep succeeded and cancelled jobs"}
	case dead < 0:
		return &errandtype.InputError{Field: "dead_age", Message: "must not be negative; give an age such as 720h, or 0 to keep dead jobs"}
	case needOne && succeeded == 0 && dead == 0:
		return &errandtype.InputError{Field: "succeeded_age", Message: "is 0 and so is the age for dead jobs, which prunes nothing; give at least one age"}
	case dead > 0 && succeeded > 0 && dead < succeeded:
		return &errandtype.InputError{Field: "dead_age", Message: fmt.Sprintf("%s is shorter than the age for succeeded jobs, %s; keep dead jobs, the evidence of failures, at least as long", dead, succeeded)}
	}
	return nil
}

// PruneGroup is one state a prune deletes from, how old its jobs must be,
// and of which kinds: only Kind when it is set, else all but Except.
type PruneGroup struct {
	State  errandtype.JobState
	Age    time.Duration
	Kind   string
	Except []string
}

// PruneGroups lists the groups p prunes, in the order a store deletes
// from them: succeeded, cancelled, dead; within a state each kind with an
// age of its own (by name), then the other kinds at the default age;
// groups whose age is 0 are left out. A store deletes one group at a time,
// oldest first, so that an index on (state, finished_at) yields the rows
// in order.
func PruneGroups(p *JobPruneParams) []PruneGroup {
	kinds := sortedKinds(p.Kinds)
	var gs []PruneGroup
	for _, st := range []struct {
		state errandtype.JobState
		def   time.Duration
		own   func(KindRetention) time.Duration
	}{
		{errandtype.StateSucceeded, p.SucceededAge, func(a KindRetention) time.Duration { return a.SucceededAge }},
		{errandtype.StateCancelled, p.SucceededAge, func(a KindRetention) time.Duration { return a.SucceededAge }},
		{errandtype.StateDead, p.DeadAge, func(a KindRetention) time.Duration { return a.DeadAge }},
	} {
		var own []string
		for _, k := range kinds {
			if age := st.own(p.Kinds[k]); age > 0 {
				gs = append(gs, PruneGroup{State: st.state, Age: age, Kind: k})
				own = append(own, k)
			}
		}
		if st.def > 0 {
			gs = append(gs, PruneGroup{State: st.state, Age: st.def, Except: own})
		}
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
	type ages struct {
		SucceededAge string `json:"succeeded_age"`
		DeadAge      string `json:"dead_age"`
	}
	var kinds map[string]ages
	for k, a := range p.Kinds {
		if kinds == nil {
			kinds = map[string]ages{}
		}
		kinds[k] = ages{a.SucceededAge.String(), a.DeadAge.String()}
	}
	return mustJSON(struct {
		SucceededAge string          `json:"succeeded_age"`
		DeadAge      string          `json:"dead_age"`
		Kinds        map[string]ages `json:"kinds,omitempty"`
		Succeeded    int             `json:"succeeded"`
		Cancelled    int             `json:"cancelled"`
		Dead         int             `json:"dead"`
		Batches      int             `json:"batches,omitempty"`
		Workflows    int             `json:"workflows,omitempty"`
	}{p.SucceededAge.String(), p.DeadAge.String(), kinds, r.Succeeded, r.Cancelled, r.Dead, r.Batches, r.Workflows})
}

// PruneBatchCutoff is the time before which a completed batch or finished
// workflow must have finished for a prune to delete it once its jobs are
// gone: the shortest of p's ages (those not 0, a kind's own included)
// before now. A batch or
// workflow finishes no earlier than its jobs (a replayed job finishes later
// still), so one that finished since cannot have lost all its jobs to this
// prune; the bound keeps a store from looking at recent ones at all.
func PruneBatchCutoff(p *JobPruneParams, now time.Time) time.Time {
	var age time.Duration
	for _, g := range PruneGroups(p) {
		if age == 0 || g.Age < age {
			age = g.Age
		}
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
// first within a group: del deletes up to left jobs of groups[i] and
// returns the states of those it deleted, which PruneJobs counts.
func (r *PruneResult) PruneJobs(groups []PruneGroup, limit int, del func(i int, left int) ([]string, error)) error {
	left := limit
	for i := range groups {
		if left == 0 {
			break
		}
		states, err := del(i, left)
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
