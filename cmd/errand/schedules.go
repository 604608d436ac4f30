package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandtype"
)

var schedulesCommand = &command{
	name:    "schedules",
	args:    "[--json] | delete NAME --reason TEXT [--operator NAME]",
	summary: "list recurring jobs (spec, next fire, last fire, last job, missed-tick policy), or delete one",
	detail: `
Lists every schedule a worker registered (errand work --cron, or
errand.WorkerConfig.Schedules in a program), from the database: its name,
spec (with its time zone as a CRON_TZ= prefix), the kind and queue of its
jobs, when it fires next, when it last fired and the id of that job, and
what it does with ticks missed while no worker ran it (skip, or catch_up:
one job for all of them). Each tick enqueues one job however many workers
run the schedule. A schedule that no running worker registers any more
stays listed; its next fire time then lies in the past.

With --json, prints one JSON array of schedule records ordered by name:
{"name", "spec", "kind", "queue", "missed", "next_fire_at", "last_fire_at",
"last_job_id", "created_at", "updated_at"}, times RFC 3339 in UTC, null
before the first fire.

errand schedules delete NAME --reason TEXT deletes a schedule; the operator
(--operator, default the OS user), the reason and the schedule as it was go
to the audit. Jobs it enqueued stay. A worker still running with the
schedule (errand work --cron, or WorkerConfig.Schedules) registers it again
when its next tick comes due and goes on firing: remove it from every worker
first.
With --json, prints the deleted schedule record.`,
	setup: func(fs *flag.FlagSet, e *env) func(context.Context, []string) error {
		db := dbFlag(fs)
		asJSON := fs.Bool("json", false, "print a JSON array of schedule records (with delete: the deleted record)")
		reason := fs.String("reason", "", "with delete: why the schedule is deleted, for the audit (`TEXT`, required)")
		operator := fs.String("operator", "", "with delete: who deletes it, for the audit (`NAME`, default the OS user)")

		return func(ctx context.Context, pos []string) error {
			if len(pos) > 0 && pos[0] == "delete" {
				return deleteSchedule(ctx, fs, e, *db, pos[1:], *reason, *operator, *asJSON)
			}
			if *reason != "" || *operator != "" {
				return usagef("--reason and --operator go with delete: errand schedules delete NAME --reason TEXT")
			}
			if len(pos) > 0 {
				return usagef("unexpected argument %q; use errand schedules, or errand schedules delete NAME --reason TEXT", pos[0])
			}
			c, closeDB, err := openClient(ctx, *db, mustExist, &errand.Config{})
			if err != nil {
				return err
			}
			defer closeDB()
			rs, err := c.Schedules(ctx)
			if err != nil {
				return err
			}
			if *asJSON {
				return writeJSON(e.stdout, rs)
			}
			if len(rs) == 0 {
				_, err := fmt.Fprintln(e.stdout, "no schedules")
				return err
			}
			now, err := c.Store().Now(ctx)
			if err != nil {
				return err
			}
			return writeSchedulesTable(e.stdout, rs, now)
		}
	},
}

func writeSchedulesTable(w io.Writer, rs []*errandtype.ScheduleRecord, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tSPEC\tKIND\tQUEUE\tNEXT FIRE\tLAST FIRE\tLAST JOB\tMISSED")
	for _, r := range rs {
		last, job := "-", "-"
		if r.LastFireAt != nil {
			last = formatTime(*r.LastFireAt) + " (" + relative(now, *r.LastFireAt) + ")"
		}
		if r.LastJobID != nil {
			job = printable(*r.LastJobID)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", printable(r.Name), printable(r.Spec), printable(r.Kind), printable(r.Queue),
			formatTime(r.NextFireAt)+" ("+relative(now, r.NextFireAt)+")", last, job, printable(string(r.Missed)))
	}
	return tw.Flush()
}

// deleteSchedule is errand schedules delete NAME.
func deleteSchedule(ctx context.Context, fs *flag.FlagSet, e *env, db string, pos []string, reason, operator string, asJSON bool) error {
	name, err := onePositional(pos, "name", "schedules delete")
	if err != nil {
		return err
	}
	if strings.TrimSpace(reason) == "" {
		return usagef("give --reason TEXT: the audit records why, e.g. --reason \"report retired\"")
	}
	op, err := operatorFlag(fs, operator, "deletes the schedule")
	if err != nil {
		return err
	}
	c, closeDB, err := openClient(ctx, db, mustExist, &errand.Config{})
	if err != nil {
		return err
	}
	defer closeDB()
	r, err := c.DeleteSchedule(ctx, name, &errand.DeleteScheduleOpts{Operator: op, Reason: reason})
	if errors.Is(err, errandtype.ErrNotFound) {
		return fmt.Errorf("no schedule named %s; errand schedules lists them", name)
	}
	if err != nil {
		return err
	}
	if asJSON {
		return writeJSON(e.stdout, r)
	}
	_, err = fmt.Fprintf(e.stdout, "deleted schedule %s (%s); a worker still running it registers it again\n", printable(r.Name), printable(r.Spec))
	return err
}
