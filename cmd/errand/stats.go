package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/errandhq/errand"
)

var statsCommand = &command{
	name:    "stats",
	args:    "[flags]",
	summary: "summarise each queue: jobs per state, oldest ready age, dead letters",
	detail: `
A job held back by its ordering key is not ready: it does not count in the
oldest ready age. Below the table, a line names each kind whose jobs wait in
a queue that no live worker handles (no alive worker runs the queue with a
handler for the kind): they will not run until one does, and a misspelt kind
never will.

With --json, prints {"queues": [{"queue", "counts": {STATE: N},
"oldest_ready_age_seconds", "dead", "waiting_by_kind": {KIND: N},
"unhandled_kinds": [{"kind", "waiting"}]}]}.`,
	setup: func(fs *flag.FlagSet, e *env) func(context.Context, []string) error {
		db := dbFlag(fs)
		asJSON := fs.Bool("json", false, "print the summary as one JSON object")

		return func(ctx context.Context, pos []string) error {
			if len(pos) > 0 {
				return usagef("unexpected argument %q; stats takes only flags", pos[0])
			}
			c, closeDB, err := openClient(ctx, *db, mustExist, &errand.Config{})
			if err != nil {
				return err
			}
			defer closeDB()
			stats, err := c.Stats(ctx)
			if err != nil {
				return err
			}
			if stats == nil {
				stats = []errand.QueueStats{}
			}
			if *asJSON {
				return writeJSON(e.stdout, struct {
					Queues []errand.QueueStats `json:"queues"`
				}{stats})
			}
			return writeStatsTable(e.stdout, stats)
		}
	},
}

func writeStatsTable(w io.Writer, stats []errand.QueueStats) error {
	if len(stats) == 0 {
		_, err := fmt.Fprintln(w, "no jobs")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprint(tw, "QUEUE")
	for _, st := range errand.JobStates {
		fmt.Fprintf(tw, "\t%s", strings.ToUpper(string(st)))
	}
	fmt.Fprintln(tw, "\tOLDEST READY")
	for _, q := range stats {
		fmt.Fprint(tw, printable(q.Queue))
		for _, st := range errand.JobStates {
			fmt.Fprintf(tw, "\t%d", q.Counts[st])
		}
		oldest := "-"
		if q.OldestReadyAgeSeconds > 0 {
			oldest = approx(time.Duration(q.OldestReadyAgeSeconds * float64(time.Second)))
		}
		fmt.Fprintf(tw, "\t%s\n", oldest)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, q := range stats {
		for _, k := range q.UnhandledKinds {
			jobs := "jobs"
			if k.Waiting == 1 {
				jobs = "job"
			}
			if _, err := fmt.Fprintf(w, "%d %s of kind %s in queue %s: no live worker handles this kind\n",
				k.Waiting, jobs, printable(k.Kind), printable(q.Queue)); err != nil {
				return err
			}
		}
	}
	return nil
}
