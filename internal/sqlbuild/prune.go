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
// whose failed step's job is still there (but that job itself), and to no
// open batch. An open workflow reads its finished jobs to start a step, to
// know it succeeded and to compensate, and so does a failed one once a
// replay of its failed step resumes it, so a failed workflow's other jobs
// go only after its failed step's. Were they to go first, or beside it in
// a prune that stops at its limit between them, a replay of that step
// would resume a workflow waiting for ever on jobs that are gone; deleted
// first, the step can no longer be replayed. An open batch counts its
// members when it completes. Each costs a primary-key lookup or two, and
// only for a job of a workflow or batch.
func (d Dialect) PruneConds(groups []errandstore.PruneGroup, now time.Time, first int) (aged func(alias string) string, prunable string, args []any) {
	var or []func(alias string) string
	for _, g := range groups {
		n := first + len(args)
		state, cut := d.Param(n), d.Param(n+1)
		args = append(args, string(g.State), d.Time(now.Add(-g.Age)))
		kind, kargs := d.pruneKind(g, first+len(args))
		args = append(args, kargs...)
		or = append(or, func(a string) string {
			return fmt.Sprintf(`(%[1]s.state = %[2]s AND %[1]s.finished_at IS NOT NULL AND %[4]s%[1]s.finished_at < %[3]s)`, a, state, cut, kind(a))
		})
	}
	aged = func(a string) string {
		conds := make([]string, len(or))
		for i, f := range or {
			conds[i] = f(a)
		}
		return `(` + strings.Join(conds, ` OR `) + `)`
	}
	return aged, d.prunable(), args
}

// PruneWhere renders, for each of groups, what a job j of the group's
// state and age must also satisfy to go: be of the group's kinds, and
// prunable (see PruneConds); with parameters from first on, and their
// arguments, group by group. The kinds are a filter on the rows the
// (state, finished_at) index yields.
func (d Dialect) PruneWhere(groups []errandstore.PruneGroup, first int) (where []string, args [][]any) {
	prunable := d.prunable()
	for _, g := range groups {
		kind, kargs := d.pruneKind(g, first)
		where = append(where, kind("j")+prunable)
		args = append(args, kargs)
	}
	return where, args
}

// pruneKind renders g's condition on kind for an alias (empty, or ending in
// AND), with parameters from first on, and their arguments.
func (d Dialect) pruneKind(g errandstore.PruneGroup, first int) (cond func(alias string) string, args []any) {
	var c string
	switch {
	case g.Kind != "":
		c = `%[1]s.kind = ` + d.Param(first) + ` AND `
		args = append(args, g.Kind)
	case len(g.Except) > 0:
		var ps []string
		for _, k := range g.Except {
			ps = append(ps, d.Param(first+len(args)))
			args = append(args, k)
		}
		c = `%[1]s.kind NOT IN (` + strings.Join(ps, `, `) + `) AND `
	}
	return func(a string) string {
		if c == "" {
			return ""
		}
		return fmt.Sprintf(c, a)
	}, args
}

// prunable is PruneConds' prunable, which takes no parameters.
func (d Dialect) prunable() string {
	failedStep := errandstore.FailedStepJobIDSQL("w")
	return `(j.workflow_id IS NULL OR NOT EXISTS (SELECT 1 FROM ` + d.Table("workflows") + ` w
			WHERE w.id = j.workflow_id AND (w.state IN (` + errandstore.OpenWorkflowsSQL + `)
				OR (w.state = '` + string(errandtype.WorkflowFailed) + `' AND j.id <> ` + failedStep + `
					AND EXISTS (SELECT 1 FROM ` + d.Table("jobs") + ` f WHERE f.id = ` + failedStep + `)))))
		AND (j.batch_id IS NULL OR NOT EXISTS (SELECT 1 FROM ` + d.Table("batches") + ` b
			WHERE b.id = j.batch_id AND b.completed_at IS NULL))`
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
	where, args := d.PruneWhere(groups, 3)
	for i, g := range groups {
		n, err := c.Jobs(where[i], append([]any{string(g.State), d.Time(now.Add(-g.Age))}, args[i]...))
		if err != nil {
			return err
		}
		r.Add(g.State, n)
	}
	// A batch or workflow goes when no job of it is kept: too young,
	// or kept by what prunable says.
	aged, prunable, condArgs := d.PruneConds(groups, now, 2)
	kept := `(NOT ` + aged("j") + ` OR NOT ` + prunable + `)`
	condArgs = append([]any{d.Time(errandstore.PruneBatchCutoff(p, now))}, condArgs...)
	var err error
	if r.Batches, err = c.Batches(kept, condArgs); err != nil {
		return err
	}
	r.Workflows, err = c.Workflows(kept, condArgs)
	return err
}
