package main

import (
	"context"
	"database/sql"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandtype"
)

var cancelCommand = &command{
	name:    "cancel",
	args:    "ID --reason TEXT [flags]",
	summary: "cancel a job; a running one is stopped by its worker",
	detail: `
A cancelled job does not run unless replayed. A queued or retrying job is
cancelled at once. A running job gets a cancel request: its worker cancels
the handler (within a second when it listens for notifications, at its
next lease renewal otherwise) and ends the attempt cancelled; the command
prints "cancel requested" and, with --wait, waits until the job has left
running. The operator (--operator, default the OS user), the reason and
the time go to the audit (errand audit shows it).`,
	setup: func(fs *flag.FlagSet, e *env) func(context.Context, []string) error {
		db := dbFlag(fs)
		reason := fs.String("reason", "", "why the job is cancelled, for the audit (`TEXT`, required)")
		operator := fs.String("operator", "", "who cancels it, for the audit (`NAME`, default the OS user)")
		asJSON := fs.Bool("json", false, "print the job record as JSON (after the wait, with --wait)")
		wait := durationFlag(fs, "wait", "for a running job, wait up to `DUR` (e.g. 10s) until its worker has ended it")

		return func(ctx context.Context, pos []string) error {
			id, err := onePositional(pos, "id", "cancel")
			if err != nil {
				return err
			}
			if *wait < 0 {
				return usagef("--wait is negative; give a duration such as 10s, or leave it out")
			}
			if strings.TrimSpace(*reason) == "" {
				return usagef("give --reason TEXT: the audit records why, e.g. --reason \"customer withdrew the order\"")
			}
			op, err := operatorFlag(fs, *operator, "cancels the job")
			if err != nil {
				return err
			}
			c, closeDB, err := openClient(ctx, *db, mustExist, &errand.Config{})
			if err != nil {
				return err
			}
			defer closeDB()
			j, err := c.Cancel(ctx, id, &errand.CancelOpts{Operator: op, Reason: *reason})
			if err != nil {
				return jobError(id, err)
			}
			if j.CancelPending() && *wait > 0 {
				if j, err = waitLeavesRunning(ctx, c, j, *wait); err != nil {
					return err
				}
			}
			if *asJSON {
				return writeJSON(e.stdout, j)
			}
			switch {
			case j.CancelPending():
				_, err = fmt.Fprintf(e.stdout, "cancel requested %s: its worker stops it and ends the attempt cancelled\n", printable(j.ID))
			case j.State == errandtype.StateCancelled:
				_, err = fmt.Fprintf(e.stdout, "cancelled %s\n", printable(j.ID))
			default: // it finished otherwise before the request reached it
				_, err = fmt.Fprintf(e.stdout, "cancel requested %s, but it ended %s first\n", printable(j.ID), j.State)
			}
			return err
		}
	},
}

// cancelWaitPoll is how often cancel --wait reads the job.
const cancelWaitPoll = 100 * time.Millisecond

// waitLeavesRunning reads job j until it is no longer running, for at most
// limit, and returns it. Still running at the limit is an error that says
// so.
func waitLeavesRunning(ctx context.Context, c *errand.Client[*sql.Tx], j *errandtype.Job, limit time.Duration) (*errandtype.Job, error) {
	id := j.ID
	deadline := time.Now().Add(limit)
	for j.State == errandtype.StateRunning {
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("job %s is still running after %s with its cancel requested; its worker may be gone (the lease expiry ends it cancelled) or its handler ignores cancellation", printable(j.ID), limit)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(cancelWaitPoll):
		}
		var err error
		if j, err = c.Get(ctx, id); err != nil {
			return nil, jobError(id, err)
		}
	}
	return j, nil
}
