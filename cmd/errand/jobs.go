package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandtype"
)

var jobsCommand = &command{
	name:    "jobs",
	args:    "[flags]",
	summary: "list jobs, oldest first",
	detail: `
With --json, prints one JSON array of job records ([] when none match),
field names as in the job record, times in RFC 3339 UTC.

--args-has '{"user_id":42}' keeps jobs whose args hold the object's fields
(scalars or nested objects, matched at their paths); --output-has does the
same for the output a handler recorded; --tag keeps jobs with every tag
given. --after SEQ continues after the last job (its seq) of a page.`,
	setup: func(fs *flag.FlagSet, e *env) func(context.Context, []string) error {
		db := dbFlag(fs)
		state := fs.String("state", "", "only jobs in `STATE` ("+errandtype.StateNames()+"; comma-separate several)")
		queue := fs.String("queue", "", "only jobs in `QUEUE`")
		kind := fs.String("kind", "", "only jobs of `KIND`")
		limit := intFlag(fs, "limit", 100, "at most `N` jobs (default 100)")
		argsHas := fs.String("args-has", "", "only jobs whose args hold this JSON `OBJECT`'s fields, e.g. '{\"user_id\":42}'")
		outputHas := fs.String("output-has", "", "only jobs whose output holds this JSON `OBJECT`'s fields")
		tags := listFlag(fs, "tag", "only jobs with `TAG` (repeatable: every one)")
		after := fs.Int64("after", 0, "list after the job with seq `SEQ` (the last of the previous page)")
		asJSON := fs.Bool("json", false, "print a JSON array of job records")

		return func(ctx context.Context, pos []string) error {
			if len(pos) > 0 {
				return usagef("unexpected argument %q; filter with --state, --queue, --kind, --args-has, --output-has or --tag", pos[0])
			}
			if *limit < 1 {
				return usagef("--limit must be at least 1")
			}
			params := &errand.ListOpts{Queue: *queue, Kind: *kind, Limit: *limit, Tags: *tags, AfterSeq: *after}
			if *argsHas != "" {
				params.ArgsHas = json.RawMessage(*argsHas)
			}
			if *outputHas != "" {
				params.OutputHas = json.RawMessage(*outputHas)
			}
			if *state != "" {
				for _, s := range strings.Split(*state, ",") {
					st, err := errandtype.ParseJobState(strings.TrimSpace(s))
					if err != nil {
						return usagef("--state: %v", err)
					}
					params.States = append(params.States, st)
				}
			}
			c, closeDB, err := openClient(ctx, *db, mustExist, &errand.Config{})
			if err != nil {
				return err
			}
			defer closeDB()
			jobs, err := c.List(ctx, params)
			if err != nil {
				return opsInputError(err)
			}
			if *asJSON {
				if jobs == nil {
					jobs = []*errandtype.Job{}
				}
				return writeJSON(e.stdout, jobs)
			}
			if len(jobs) == 0 {
				_, err := fmt.Fprintln(e.stdout, "no jobs")
				return err
			}
			now, err := c.Store().Now(ctx)
			if err != nil {
				return err
			}
			if err := writeJobsTable(e.stdout, jobs, now); err != nil {
				return err
			}
			if len(jobs) == *limit {
				e.logger.Info("more jobs may match; raise --limit, narrow the filters, or page on with --after", "limit", *limit, "after", jobs[len(jobs)-1].Seq)
			}
			return nil
		}
	},
}

// writeJobsTable prints one line per job: what an operator scans for. Every
// value from the database is escaped (see printable).
func writeJobsTable(w io.Writer, jobs []*errandtype.Job, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tKIND\tQUEUE\tSTATE\tATTEMPT\tNEXT RUN\tLAST ERROR")
	for _, j := range jobs {
		lastErr := "-"
		if j.LastError != nil {
			lastErr = printable(j.LastError.Class)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", printable(j.ID), printable(j.Kind), printable(j.Queue),
			printable(string(j.State)), strconv.Itoa(j.Attempt)+"/"+strconv.Itoa(j.MaxAttempts), nextRun(j, now), lastErr)
	}
	return tw.Flush()
}

// nextRun says in a few words when the job runs next.
func nextRun(j *errandtype.Job, now time.Time) string {
	switch j.State {
	case errandtype.StateQueued, errandtype.StateRetrying:
		if j.HeldBy != nil {
			return "held by " + printable(*j.HeldBy)
		}
		if j.AvailableAt.After(now) {
			return "in " + approx(j.AvailableAt.Sub(now))
		}
		return "now"
	case errandtype.StateRunning:
		if j.LeaseUntil != nil && j.LeaseUntil.After(now) {
			return "running, lease " + approx(j.LeaseUntil.Sub(now)) + " left"
		}
		return "lease expired"
	}
	return "-"
}
