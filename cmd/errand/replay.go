package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/user"
	"strings"

	"github.com/errandhq/errand"
)

var replayCommand = &command{
	name:    "replay",
	args:    "ID --reason TEXT [flags]",
	summary: "run a dead or cancelled job again, keeping its id and history",
	detail: `
Replay starts a new delivery cycle: attempt 0, available now. The operator,
reason, prior state and time go to the job's replay audit (errand inspect
shows it). Only dead and cancelled jobs can be replayed.`,
	setup: func(fs *flag.FlagSet, e *env) func(context.Context, []string) error {
		db := dbFlag(fs)
		reason := fs.String("reason", "", "why the job is replayed, for the audit (required)")
		operator := fs.String("operator", "", "who replays it, for the audit (default the OS user)")
		asJSON := fs.Bool("json", false, "print the replayed job record as JSON")

		return func(ctx context.Context, pos []string) error {
			id, err := onePositional(pos, "id", "replay")
			if err != nil {
				return err
			}
			if strings.TrimSpace(*reason) == "" {
				return usagef("give --reason TEXT: the replay audit records why, e.g. --reason \"receipt service fixed\"")
			}
			op := *operator
			if isSet(fs, "operator") && strings.TrimSpace(op) == "" {
				return usagef("--operator is empty; name who replays the job or leave the flag out")
			}
			if op == "" {
				op = currentUser()
			}
			c, closeDB, err := openClient(ctx, *db, mustExist, &errand.Config{})
			if err != nil {
				return err
			}
			defer closeDB()
			j, err := c.Replay(ctx, id, &errand.ReplayOpts{Operator: op, Reason: *reason})
			if err != nil {
				return jobError(id, err)
			}
			if *asJSON {
				return writeJSON(e.stdout, j)
			}
			_, err = fmt.Fprintf(e.stdout, "replayed %s (replay %d): %s, available now\n", printable(j.ID), j.Replays, printable(string(j.State)))
			return err
		}
	},
}

// currentUser names the operator for the audit when --operator is not
// given: the OS account, then $USER, then "unknown".
func currentUser() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	if u := os.Getenv("USER"); u != "" {
		return u
	}
	return "unknown"
}
