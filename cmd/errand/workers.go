package main

import (
	"context"
	"errors"
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

var workersCommand = &command{
	name:    "workers",
	args:    "[--json]",
	summary: "list worker processes: queues, kinds, heartbeat, last job, leader, alive/draining/gone/stopped",
	detail: `
Every errand work (and every errand.Worker) records itself in the database:
its id (the lease_owner of the jobs it claims), host, pid, queues, the kinds
it has handlers for (the only kinds it claims) and start time, and
heartbeats while it runs. A worker told to stop shows as draining
while it finishes its jobs (it claims no more), then as stopped; one that
missed three heartbeats without stopping (killed, frozen, cut off) shows as
gone, draining or not, and the leases of its jobs expire as usual.

LEADER marks the worker that holds the cluster's leadership lease (it sweeps
expired leases and prunes this list); none does for a moment after a leader
dies, until its lease expires. SKEW is the database's clock minus the
worker's at its last heartbeat, on a database with a clock of its own
(PostgreSQL); on SQLite it is 0.

With --json, prints one JSON array of worker records, newest first, with
since_last_completed_seconds added (null before the first finished job) and
"leader": true for the leader, false for every other worker.`,
	setup: func(fs *flag.FlagSet, e *env) func(context.Context, []string) error {
		db := dbFlag(fs)
		asJSON := fs.Bool("json", false, "print a JSON array of worker records")

		return func(ctx context.Context, pos []string) error {
			if len(pos) > 0 {
				return usagef("unexpected argument %q; errand workers takes no arguments", pos[0])
			}
			c, closeDB, err := openClient(ctx, *db, mustExist, &errand.Config{})
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
			leader := ""
			switch l, err := c.Leader(ctx); {
			case err == nil:
				leader = l.Holder
			case !errors.Is(err, errandtype.ErrNotFound):
				return err
			}
			if *asJSON {
				out := make([]workerJSON, len(ws))
				for i, w := range ws {
					out[i] = workerJSON{WorkerRecord: w, Leader: leader != "" && w.ID == leader}
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
			return writeWorkersTable(e.stdout, ws, now, leader)
		}
	},
}

// workerJSON is a worker record with the time since its last finished job
// and whether it leads.
type workerJSON struct {
	*errandtype.WorkerRecord
	SinceLastCompletedSeconds *float64 `json:"since_last_completed_seconds"`
	Leader                    bool     `json:"leader"`
}

func writeWorkersTable(w io.Writer, ws []*errandtype.WorkerRecord, now time.Time, leader string) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tHOST\tPID\tQUEUES\tKINDS\tSTARTED\tHEARTBEAT\tLAST JOB\tSKEW\tLEADER\tSTATUS")
	for _, r := range ws {
		qs := make([]string, len(r.Queues))
		for i, q := range r.Queues {
			qs[i] = printable(q.Name) + "=" + strconv.Itoa(q.Concurrency)
			if q.Weight > 0 {
				qs[i] += " (weight " + strconv.Itoa(q.Weight) + ")"
			}
		}
		last := "-"
		if r.LastCompletedAt != nil {
			last = relative(now, *r.LastCompletedAt)
		}
		lead := "-"
		if leader != "" && r.ID == leader {
			lead = "yes"
		}
		kinds := strings.Join(r.Kinds, ",")
		if kinds == "" {
			kinds = "-" // not recorded: an older errand's worker
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", printable(r.ID), printable(r.Host), r.PID, strings.Join(qs, ","),
			printable(kinds), formatTime(r.StartedAt), relative(now, r.HeartbeatAt), last, skew(r.ClockSkewMS), lead, printable(string(r.Status)))
	}
	return tw.Flush()
}

// skew prints a clock skew in milliseconds, signed: positive when the
// database's clock is ahead of the worker's.
func skew(ms int64) string {
	d := time.Duration(ms) * time.Millisecond
	if d < 0 {
		return "-" + approx(d)
	}
	if d > 0 {
		return "+" + approx(d)
	}
	return "0s"
}
