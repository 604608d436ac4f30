package main

import (
	"context"
	"encoding/json"
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
		argsFlag := fs.String("args", "", "replace the job's args: JSON, or @FILE to read it from a file (the audit keeps the old and new args)")
		asJSON := fs.Bool("json", false, "print the replayed job record as JSON")

		return func(ctx context.Context, pos []string) error {
			id, err := onePositional(pos, "id", "replay")
			if err != nil {
				return err
			}
			if strings.TrimSpace(*reason) == "" {
				return usagef("give --reason TEXT: the replay audit records why, e.g. --reason \"receipt service fixed\"")
			}
			op, err := operatorFlag(fs, *operator, "replays the job")
			if err != nil {
				return err
			}
			var newArgs json.RawMessage
			if isSet(fs, "args") {
				if newArgs, err = readArgsFlag(*argsFlag); err != nil {
					return err
				}
			}
			c, closeDB, err := openClient(ctx, *db, mustExist, &errand.Config{})
			if err != nil {
				return err
			}
			defer closeDB()
			j, err := c.Replay(ctx, id, &errand.ReplayOpts{Operator: op, Reason: *reason, Args: newArgs})
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

// operatorFlag returns the operator for the audit: the --operator flag's
// value, or the OS user when it is not given. doing says what the operator
// does, for the message when the flag is given empty.
func operatorFlag(fs *flag.FlagSet, value, doing string) (string, error) {
	if isSet(fs, "operator") && strings.TrimSpace(value) == "" {
		return "", usagef("--operator is empty; name who %s or leave the flag out", doing)
	}
	if value == "" {
		return currentUser(), nil
	}
	return value, nil
}

// readArgsFlag reads --args: JSON, or @FILE naming a file that holds it.
func readArgsFlag(v string) (json.RawMessage, error) {
	b := []byte(v)
	if name, ok := strings.CutPrefix(v, "@"); ok {
		var err error
		if b, err = os.ReadFile(name); err != nil {
			return nil, usagef("--args %s: %v; give JSON or @FILE of a readable file", v, err)
		}
	}
	if !json.Valid(b) {
		return nil, usagef("--args is not valid JSON; give an object such as '{\"id\": 7}' or @FILE")
	}
	return json.RawMessage(b), nil
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
