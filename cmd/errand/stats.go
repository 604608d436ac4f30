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
With --json, prints {"queues": [{"queue", "counts": {STATE: N},
"oldest_ready_age_seconds", "dead"}]}.`,
	setup: func(fs *flag.FlagSet, e *env) func(context.Context, []string) error {
		db := dbFlag(fs)
		asJSON := fs.Bool("json", false, "print the summary as one JSON object")

		return func(ctx context.Context, pos []string) error {
			if len(pos) > 0 {
				return usagef("unexpected argument %q; stats takes only flags", pos[0])
			}
			c, closeDB, err := openClient(ctx, *db, mustExist, errand.Config{})
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
	return tw.Flush()
}
