package sqlbuild

import (
	"fmt"
	"strings"
	"time"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
)

// PruneConds renders the conditions of a prune of groups at now, with
// numbered parameters from first on, and their arguments. aged(alias)
// holds for a finished job old enough to go. prunable holds for a job j
// nothing keeps: it belongs to no open workflow, to no failed workflow
// whose failed step's job this prune keeps (but that job itself), and to
// no open batch. An open workflow reads its finished jobs to start a step,
// to know it succeeded and to compensate, and so does a failed one once a
// replay of its failed step resumes it, so a failed workflow's jobs go
// with its failed step's; an open batch counts its members when it
// completes. Each costs a primary-key lookup or two, and only for a job of
// a workflow or batch.
func (d Dialect) PruneConds(groups []errandstore.PruneGroup, now time.Time, first int) (aged func(alias string) string, prunable string, args []any) {
	aged, _, prunable, args = d.pruneConds(groups, now, first)
	return aged, prunable, args
}

// PruneWhere renders, for each of groups, what a job j of the group's
// state and age must also satisfy to go: be of the group's kinds, and
// prunable (see PruneConds); with parameters from first on, and their
// arguments. The kinds are a filter on the rows the (state, finished_at)
// index yields.
func (d Dialect) PruneWhere(groups []errandstore.PruneGroup, now time.Time, first int) (where []string, args []any) {
	_, kinds, prunable, args := d.pruneConds(groups, now, first)
	for _, k := range kinds {
		where = append(where, k("j")+prunable)
	}
	return where, args
}

// pruneConds is PruneConds, and each group's kind condition on an alias
// (empty, or ending in AND).
func (d Dialect) pruneConds(groups []errandstore.PruneGroup, now time.Time, first int) (aged func(alias string) string, kinds []func(alias string) string, prunable string, args []any) {
	type group struct{ state, cut string }
	var gs []group
	for _, g := range groups {
		n := first + len(args)
		gs = append(gs, group{d.Param(n), d.Param(n + 1)})
		args = append(args, string(g.State), d.Time(now.Add(-g.Age)))
		var cond string
		switch {
		case g.Kind != "":
			cond = `%[1]s.kind = ` + d.Param(first+len(args)) + ` AND `
			args = append(args, g.Kind)
		case len(g.Except) > 0:
			var ps []string
			for _, k := range g.Except {
				ps = append(ps, d.Param(first+len(args)))
				args = append(args, k)
			}
			cond = `%[1]s.kind NOT IN (` + strings.Join(ps, `, `) + `) AND `
		}
		kinds = append(kinds, func(a string) string {
			if cond == "" {
				return ""
			}
			return fmt.Sprintf(cond, a)
		})
	}
	aged = func(a string) string {
		var or []string
		for i, g := range gs {
			or = append(or, fmt.Sprintf(`(%[1]s.state = %[2]s AND %[1]s.finished_at IS NOT NULL AND %[4]s%[1]s.finished_at < %[3]s)`, a, g.state, g.cut, kinds[i](a)))
		}
		return `(` + strings.Join(or, ` OR `) + `)`
	}
	failedStep := errandstore.FailedStepJobIDSQL("w")
	prunable = `(j.workflow_id IS NULL OR NOT EXISTS (SELECT 1 FROM ` + d.Table("workflows") + ` w
			WHERE w.id = j.workflow_id AND (w.state IN (` + errandstore.OpenWorkflowsSQL + `)
				OR (w.state = '` + string(errandtype.WorkflowFailed) + `' AND j.id <> ` + failedStep + `
					AND EXISTS (SELECT 1 FROM ` + d.Table("jobs") + ` f WHERE f.id = ` + failedStep + `
						AND NOT ` + aged("f") + `)))))
		AND (j.batch_id IS NULL OR NOT EXISTS (SELECT 1 FROM ` + d.Table("batches") + ` b
			WHERE b.id = j.batch_id AND b.completed_at IS NULL))`
	return aged, kinds, prunable, args
}

// PruneCounts are a store's counting statements for a prune's dry run,
// each given the condition to add to its WHERE and the arguments of all
// its parameters.
type PruneCounts struct {
	// Jobs counts the finished jobs of state $1 that finished before $2
	// and satisfy where (parameters from 3 on).
	Jobs func(where string, args []any) (int, error)
	// Batches counts the batches completed before $1 of which no job,
	// member or callback, satisfies kept (parameters from 2 on).
	Batches func(kept string, args []any) (int, error)
	// Workflows counts the workflows finished before $1 of which no job
	// satisfies kept (parameters from 2 on).
	Workflows func(kept string, args []any) (int, error)
}

// PruneDryRun counts into r what a prune of p at now would delete, with
// the store's statements c.
func (d Dialect) PruneDryRun(p *errandstore.JobPruneParams, now time.Time, r *errandstore.PruneResult, c PruneCounts) error {
	groups := errandstore.PruneGroups(p)
	where, args := d.PruneWhere(groups, now, 3)
	for i, g := range groups {
		n, err := c.Jobs(where[i], append([]any{string(g.State), d.Time(now.Add(-g.Age))}, args...))
		if err != nil {
			return err
		}
		r.Add(g.State, n)
	}
	// A batch or workflow goes when no job of it is kept: too young,
	// or kept by what prunable says.
	aged, prunable, args := d.PruneConds(groups, now, 2)
	kept := `(NOT ` + aged("j") + ` OR NOT ` + prunable + `)`
	args = append([]any{d.Time(errandstore.PruneBatchCutoff(p, now))}, args...)
	var err error
	if r.Batches, err = c.Batches(kept, args); err != nil {
		return err
	}
	r.Workflows, err = c.Workflows(kept, args)
	return err
}
