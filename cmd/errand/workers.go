package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/errandhq/errand"
)

var workersCommand = &command{
	name:    "workers",
	args:    "[--json]",
	summary: "list worker processes: queues, heartbeat, last job, alive/gone/stopped",
	detail: `
Every errand work (and every errand.Worker) records itself in the database:
its id (the lease_owner of the jobs it claims), host, pid, queues and start
time, and heartbeats while it runs. A worker that drained shows as stopped;
one that missed three heartbeats without stopping (killed, frozen, cut off)
shows as gone, and the leases of its jobs expire as usual.

With --json, prints one JSON array of worker records, newest first, with
since_last_completed_seconds added (null before the first finished job).`,
	setup: func(fs *flag.FlagSet, e *env) func(context.Context, []string) error {
		db := dbFlag(fs)
		asJSON := fs.Bool("json", false, "print a JSON array of worker records")

		return func(ctx context.Context, pos []string) error {
			if len(pos) > 0 {
				return usagef("unexpected argument %q; errand workers takes no arguments", pos[0])
			}
			c, closeDB, err := openClient(ctx, *db, mustExist, errand.Config{})
			if err != nil {
				return err
			}
			defer closeDB()
			ws, err := c.Workers(ctx)
			if err != nil {
				return err
			}
			now, err := c.Store().Now(ctx)
			if err != nil {
				return err
			}
			if *asJSON {
				out := make([]workerJSON, len(ws))
				for i, w := range ws {
					out[i] = workerJSON{WorkerRecord: w}
					if w.LastCompletedAt != nil {
						s := now.Sub(*w.LastCompletedAt).Seconds()
						out[i].SinceLastCompletedSeconds = &s
					}
				}
				return writeJSON(e.stdout, out)
			}
			if len(ws) == 0 {
				_, err := fmt.Fprintln(e.stdout, "no workers")
				return err
			}
			return writeWorkersTable(e.stdout, ws, now)
		}
	},
}

// workerJSON is a worker record with the time since its last finished job.
type workerJSON struct {
	*errand.WorkerRecord
	SinceLastCompletedSeconds *float64 `json:"since_last_completed_seconds"`
}

func writeWorkersTable(w io.Writer, ws []*errand.WorkerRecord, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tHOST\tPID\tQUEUES\tSTARTED\tHEARTBEAT\tLAST JOB\tSTATUS")
	for _, r := range ws {
		qs := make([]string, len(r.Queues))
		for i, q := range r.Queues {
			qs[i] = q.Name + "=" + strconv.Itoa(q.Concurrency)
		}
		last := "-"
		if r.LastCompletedAt != nil {
			last = relative(now, *r.LastCompletedAt)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\n", r.ID, r.Host, r.PID, strings.Join(qs, ","),
			formatTime(r.StartedAt), relative(now, r.HeartbeatAt), last, r.Status)
	}
	return tw.Flush()
}
