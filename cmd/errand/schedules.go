package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/errandhq/errand"
)

var schedulesCommand = &command{
	name:    "schedules",
	args:    "[--json]",
	summary: "list recurring jobs: spec, next fire, last fire, last job, missed-tick policy",
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
before the first fire.`,
	setup: func(fs *flag.FlagSet, e *env) func(context.Context, []string) error {
		db := dbFlag(fs)
		asJSON := fs.Bool("json", false, "print a JSON array of schedule records")

		return func(ctx context.Context, pos []string) error {
			if len(pos) > 0 {
				return usagef("unexpected argument %q; errand schedules takes no arguments", pos[0])
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

func writeSchedulesTable(w io.Writer, rs []*errand.ScheduleRecord, now time.Time) error {
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
