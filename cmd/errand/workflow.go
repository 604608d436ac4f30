package main

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandhttp"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
	"github.com/errandhq/errand/internal/workflowview"
)

var workflowsCommand = &command{
	name:    "workflows",
	args:    "[--state STATE] [--limit N] [--before ID] [--json]",
	summary: "list workflows, newest first: state, failed step, steps",
	detail: `
A workflow is a graph of steps, each an ordinary job, enqueued once the
steps it depends on have succeeded (errand.Client.EnqueueWorkflow, POST
/api/v1/workflows, or errand workflow enqueue). Its state is running,
compensating (a step failed; the compensations of the steps that succeeded
run, latest first), succeeded or failed. errand workflow ID shows one.

When --limit cuts the list short, a line on stderr says so with how many
workflows are in each state. To page, pass the id of the last workflow
printed as --before.

With --json, prints one JSON array of workflows ([] when none match), each
as errand workflow ID --json prints it.`,
	setup: func(fs *flag.FlagSet, e *env) func(context.Context, []string) error {
		db := dbFlag(fs)
		state := fs.String("state", "", "only workflows in `STATE` ("+workflowStateNames()+"; comma-separate several)")
		limit := intFlag(fs, "limit", 100, "at most `N` workflows (default 100)")
		before := fs.String("before", "", "only workflows listed after workflow `ID`, the last of the previous page")
		asJSON := fs.Bool("json", false, "print a JSON array of workflows")

		return func(ctx context.Context, pos []string) error {
			if len(pos) > 0 {
				return usagef("unexpected argument %q; errand workflow ID shows one workflow", pos[0])
			}
			if *limit < 1 {
				return usagef("--limit must be at least 1")
			}
			p := &errandstore.WorkflowListParams{Limit: *limit}
			if *state != "" {
				for _, s := range strings.Split(*state, ",") {
					st := errandtype.WorkflowState(strings.TrimSpace(s))
					if !st.Valid() {
						return usagef("--state: %q is not a workflow state; use one of %s", s, workflowStateNames())
					}
					p.States = append(p.States, st)
				}
			}
			c, closeDB, err := openClient(ctx, *db, mustExist, &errand.Config{})
			if err != nil {
				return err
			}
			defer closeDB()
			if p.Before, err = beforeCursor(ctx, "workflow", *before, func(ctx context.Context, id string) (time.Time, error) {
				w, err := c.Workflow(ctx, id)
				if err != nil {
					return time.Time{}, err
				}
				return w.CreatedAt, nil
			}); err != nil {
				return err
			}
			ws, err := c.Workflows(ctx, p)
			if err != nil {
				return err
			}
			if *asJSON {
				shown := make([]*workflowview.Shown, len(ws))
				for i, wf := range ws {
					shown[i] = workflowview.Show(wf)
				}
				return writeJSON(e.stdout, shown)
			}
			if err := printList(ctx, e, c.Store(), ws, false, "workflows", writeWorkflowsTable); err != nil {
				return err
			}
			if len(ws) == *limit {
				// How many there are, by state: one grouped count.
				attrs := []any{"limit", *limit, "before", ws[len(ws)-1].ID}
				if counts, err := c.WorkflowCounts(ctx); err == nil {
					for _, st := range errandtype.WorkflowStates {
						attrs = append(attrs, string(st), counts[st])
					}
				}
				e.logger.Info("more workflows may match; for the next page pass --before with the last id", attrs...)
			}
			return nil
		}
	},
}

func workflowStateNames() string {
	names := make([]string, len(errandtype.WorkflowStates))
	for i, s := range errandtype.WorkflowStates {
		names[i] = string(s)
	}
	return strings.Join(names, ", ")
}

func writeWorkflowsTable(w io.Writer, ws []*errandtype.Workflow, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tNAME\tSTATE\tFAILED STEP\tSTEPS\tCREATED")
	for _, wf := range ws {
		name, failed := "-", "-"
		if wf.Name != "" {
			name = printable(wf.Name)
		}
		if wf.FailedStep != nil {
			failed = printable(*wf.FailedStep)
		}
		succeeded := 0
		for _, s := range wf.Steps {
			if s.State != nil && *s.State == errandtype.StateSucceeded {
				succeeded++
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", printable(wf.ID), name, printable(string(wf.State)), failed,
			fmt.Sprintf("%d/%d succeeded", succeeded, len(wf.Steps)), relative(now, wf.CreatedAt))
	}
	return tw.Flush()
}

var workflowCommand = &command{
	name:    "workflow",
	args:    "ID [--json] | enqueue --file FILE.json [--json] | rerun ID [--id NEW] [--json]",
	summary: "show a workflow: its state, each step's job and compensation; enqueue one from JSON; or rerun one",
	detail: `
Shows a workflow's state, the step whose failure stopped it, and each step
in declaration order: the steps it depends on, its kind, its job (ID.step.NAME,
see errand inspect), the job's state and attempts, and its compensation's
job (ID.undo.NAME) and state. A step's job is enqueued once the steps it
depends on have succeeded. When a step ends dead or cancelled no further
step starts and, once the steps in flight finish, the compensations of the
steps that succeeded run one at a time, latest declared first; then the
workflow is failed. errand replay of a dead compensation goes on
compensating. errand replay of the failed step resumes the workflow from
that step only while no compensation has been enqueued (steps still in
flight, or nothing to undo); once one has, the replay is refused, and
errand workflow rerun ID, once the workflow has finished, runs it again as
a new workflow from the step definitions it was enqueued with (--id NEW
names it; otherwise an id is generated). The old workflow stays as history
with "rerun_as" set, and its steps are no longer replayed; the new one has
"rerun_of". A workflow still running or compensating is not rerun. rerun
prints the new workflow's id, or with --json {"workflow", "jobs",
"duplicate"}: a rerun retried with the same --id prints the same workflow
with "duplicate" true.

With --json, prints the workflow: {"id", "name", "state", "next", "failed_step",
"steps": [{"name", "depends_on", "kind", "job_id", "state", "enqueued",
"attempts", "max_attempts", "output", "last_error", "compensation":
{"kind", "job_id", "state", "enqueued", "attempts", "last_error"} or null}],
"created_at", "updated_at", "finished_at", "compensation_started_at",
"rerun_of", "rerun_as"}, times RFC 3339 in UTC; "next" says in words what
happens next, as the line "next" does without --json; a step's
state is null before its job is enqueued, its last_error ({"class",
"message", "at"}) null while its job never failed. Without --json, the
last errors of the steps and compensations that did not succeed follow
the table.

errand workflow enqueue --file FILE.json enqueues a workflow (FILE - reads
standard input), written as POST /api/v1/workflows takes it:

  {"id": "order-7", "name": "checkout", "steps": [
    {"name": "charge", "kind": "charge_card", "args": {"order": 7},
     "compensate": {"kind": "refund_card", "args": {"order": 7}}},
    {"name": "ship", "kind": "ship_order", "args": {"order": 7},
     "depends_on": ["charge"], "queue": "shipping", "max_attempts": 5}]}

A step and its compensation take the job fields kind, args (a JSON
object), queue, priority, delay, max_attempts, max_age, ordering_key,
ordering_on_dead, fairness_key and tags. A workflow whose id exists is not
enqueued again: errand prints its id and exits 0. It prints the workflow's
id, or with --json {"workflow", "jobs", "duplicate"}.`,
	setup: func(fs *flag.FlagSet, e *env) func(context.Context, []string) error {
		db := dbFlag(fs)
		asJSON := fs.Bool("json", false, "print the workflow as one JSON object")
		file := fs.String("file", "", "with enqueue: the workflow to enqueue, a JSON `FILE` (- for standard input)")
		newID := fs.String("id", "", "with rerun: the new workflow's `ID` (default: generated)")

		return func(ctx context.Context, pos []string) error {
			if len(pos) > 0 && pos[0] == "enqueue" {
				return enqueueWorkflow(ctx, e, *db, pos[1:], *file, *asJSON)
			}
			if len(pos) > 0 && pos[0] == "rerun" {
				return rerunWorkflow(ctx, e, *db, pos[1:], *newID, *asJSON)
			}
			if *file != "" {
				return usagef("--file goes with enqueue: errand workflow enqueue --file FILE.json")
			}
			if *newID != "" {
				return usagef("--id goes with rerun: errand workflow rerun ID --id NEW")
			}
			id, err := onePositional(pos, "id", "workflow")
			if err != nil {
				return err
			}
			return showByID(ctx, e, *db, id, "workflow", *asJSON, (*errand.Client[*sql.Tx]).Workflow,
				func(wf *errandtype.Workflow) any { return workflowview.Show(wf) },
				func(wf *errandtype.Workflow, now time.Time) error { return writeWorkflow(e.stdout, wf, now) })
		}
	},
}

// enqueueWorkflow is errand workflow enqueue --file FILE.
func enqueueWorkflow(ctx context.Context, e *env, db string, pos []string, file string, asJSON bool) error {
	var req errandhttp.WorkflowRequest
	var steps []errand.WorkflowStep
	var opts *errand.WorkflowOpts
	var res *errandstore.WorkflowInsertResult
	err := enqueueFile(ctx, db, pos, file, "workflow", "/api/v1/workflows", &req,
		func() (err error) {
			if steps, opts, err = req.Workflow(); err != nil {
				return err
			}
			return errand.CheckEnqueueWorkflow(steps, opts)
		},
		func(c *errand.Client[*sql.Tx]) (err error) {
			res, err = c.EnqueueWorkflow(ctx, steps, opts)
			return err
		})
	if err != nil {
		return err
	}
	if res.Duplicate {
		e.logger.Info("workflow already exists; not enqueued again", "id", res.Workflow.ID, "state", string(res.Workflow.State))
	}
	return writeWorkflowInsert(e, res, asJSON)
}

// writeWorkflowInsert prints what enqueuing or rerunning a workflow did:
// its id, or with --json {"workflow", "jobs", "duplicate"}.
func writeWorkflowInsert(e *env, res *errandstore.WorkflowInsertResult, asJSON bool) error {
	if asJSON {
		return writeJSON(e.stdout, struct {
			Workflow  *workflowview.Shown `json:"workflow"`
			Jobs      []*errandtype.Job   `json:"jobs"`
			Duplicate bool                `json:"duplicate"`
		}{workflowview.Show(res.Workflow), orEmpty(res.Jobs), res.Duplicate})
	}
	_, err := fmt.Fprintln(e.stdout, printable(res.Workflow.ID))
	return err
}

// rerunWorkflow is errand workflow rerun ID [--id NEW].
func rerunWorkflow(ctx context.Context, e *env, db string, pos []string, newID string, asJSON bool) error {
	id, err := onePositional(pos, "id", "workflow rerun")
	if err != nil {
		return err
	}
	c, closeDB, err := openClient(ctx, db, mustExist, &errand.Config{})
	if err != nil {
		return err
	}
	defer closeDB()
	res, err := c.RerunWorkflow(ctx, id, &errand.WorkflowRerunOpts{ID: newID})
	var ie *errandtype.InputError
	switch {
	case errors.Is(err, errandtype.ErrNotFound):
		return fmt.Errorf("no workflow with id %s; errand workflows lists them", id)
	case errors.As(err, &ie) && ie.Field == "new workflow id":
		return usagef("--id: %s", ie.Message)
	case errors.As(err, &ie):
		return usagef("%s", ie.Error())
	case err != nil:
		return err
	}
	if res.Duplicate {
		e.logger.Info("workflow already rerun as this id; nothing enqueued again", "id", id, "rerun_as", res.Workflow.ID)
	}
	return writeWorkflowInsert(e, res, asJSON)
}

// writeWorkflow prints a workflow: its fields, then a table of its steps.
func writeWorkflow(w io.Writer, wf *errandtype.Workflow, now time.Time) error {
	fmt.Fprintf(w, "workflow %s\n", printable(wf.ID))
	if err := writeWorkflowFields(w, wf, now); err != nil {
		return err
	}
	fmt.Fprintln(w)
	if err := writeWorkflowSteps(w, wf.Steps); err != nil {
		return err
	}
	// Why the steps and compensations that did not succeed failed last.
	var whys []string
	for _, s := range wf.Steps {
		if failing(s.State, s.LastError) {
			whys = append(whys, "step "+s.Name+": "+lastErrorLine(s.LastError))
		}
		if c := s.Compensation; c != nil && failing(c.State, c.LastError) {
			whys = append(whys, "undo "+s.Name+": "+lastErrorLine(c.LastError))
		}
	}
	if len(whys) > 0 {
		fmt.Fprintln(w)
		fmt.Fprintln(w, "last errors:")
		for _, l := range whys {
			fmt.Fprintln(w, "  "+printable(l))
		}
	}
	return nil
}

// writeWorkflowFields prints a workflow's own fields, one a line.
func writeWorkflowFields(w io.Writer, wf *errandtype.Workflow, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	field := func(name, value string) { fmt.Fprintf(tw, "  %s\t%s\n", name, printable(value)) }
	optField := func(name string, value *string) {
		if value != nil {
			field(name, *value)
		}
	}
	when := func(t time.Time) string { return formatTime(t) + " (" + relative(now, t) + ")" }
	if wf.Name != "" {
		field("name", wf.Name)
	}
	field("state", string(wf.State))
	field("next", workflowview.Next(wf))
	optField("failed step", wf.FailedStep)
	if wf.CompensationStartedAt != nil {
		field("undo began", when(*wf.CompensationStartedAt))
	}
	optField("rerun of", wf.RerunOf)
	optField("rerun as", wf.RerunAs)
	field("created", when(wf.CreatedAt))
	if wf.FinishedAt != nil {
		field("finished", when(*wf.FinishedAt))
	}
	return tw.Flush()
}

// writeWorkflowSteps prints a table of a workflow's steps and their
// compensations.
func writeWorkflowSteps(w io.Writer, steps []errandtype.WorkflowStepView) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "STEP\tDEPENDS ON\tKIND\tJOB\tSTATE\tATTEMPTS\tCOMPENSATION\tCOMPENSATION STATE")
	for _, s := range steps {
		deps := "-"
		if len(s.DependsOn) > 0 {
			deps = strings.Join(s.DependsOn, ",")
		}
		job, state, attempts := "-", stepState(s.State, s.Enqueued), "-"
		if s.Enqueued {
			job = s.JobID
		}
		if s.State != nil {
			attempts = strconv.Itoa(s.Attempts) + "/" + strconv.Itoa(s.MaxAttempts)
		}
		comp, compState := "-", "-"
		if c := s.Compensation; c != nil {
			comp = c.Kind
			if c.Enqueued {
				comp += " " + c.JobID
			}
			if c.Enqueued || c.State != nil {
				compState = stepState(c.State, c.Enqueued)
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", printable(s.Name), printable(deps), printable(s.Kind), printable(job),
			state, attempts, printable(comp), compState)
	}
	return tw.Flush()
}

// failing reports whether a job's last failure is worth showing beside its
// state: it has one and did not succeed since.
func failing(s *errandtype.JobState, e *errandtype.LastError) bool {
	return s != nil && e != nil && *s != errandtype.StateSucceeded
}

// lastErrorLine is a job's last failure on one line: its class and the
// first line of its message, cut to 200 characters.
func lastErrorLine(e *errandtype.LastError) string {
	msg, _, cut := strings.Cut(e.Message, "\n")
	if r := []rune(msg); len(r) > 200 {
		msg, cut = string(r[:199]), true
	}
	if cut {
		msg += "…"
	}
	return e.Class + ": " + msg
}

// stepState names the state of a workflow's job: its job's, "waiting"
// before it is enqueued, "deleted" once retention removed it.
func stepState(s *errandtype.JobState, enqueued bool) string {
	switch {
	case s != nil:
		return string(*s)
	case enqueued:
		return "deleted"
	}
	return "waiting"
}
