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
	type group struct{ state, cut string }
	var gs []group
	for _, g := range groups {
		n := first + len(args)
		gs = append(gs, group{d.Param(n), d.Param(n + 1)})
		args = append(args, string(g.State), d.Time(now.Add(-g.Age)))
	}
	aged = func(a string) string {
		var or []string
		for _, g := range gs {
			or = append(or, fmt.Sprintf(`(%[1]s.state = %[2]s AND %[1]s.finished_at IS NOT NULL AND %[1]s.finished_at < %[3]s)`, a, g.state, g.cut))
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
	return aged, prunable, args
}
