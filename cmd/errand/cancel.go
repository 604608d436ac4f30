package main

import (
	"context"
	"flag"
	"fmt"
	"strings"

	"github.com/errandhq/errand"
)

var cancelCommand = &command{
	name:    "cancel",
	args:    "ID --reason TEXT [flags]",
	summary: "cancel a queued or retrying job",
	detail: `
A cancelled job does not run unless replayed. A running job cannot be
cancelled: its worker holds it until it finishes or its lease expires. The
operator (--operator, default the OS user), the reason and the time go to
the audit (errand audit shows it).`,
	setup: func(fs *flag.FlagSet, e *env) func(context.Context, []string) error {
		db := dbFlag(fs)
		reason := fs.String("reason", "", "why the job is cancelled, for the audit (required)")
		operator := fs.String("operator", "", "who cancels it, for the audit (default the OS user)")
		asJSON := fs.Bool("json", false, "print the cancelled job record as JSON")

		return func(ctx context.Context, pos []string) error {
			id, err := onePositional(pos, "id", "cancel")
			if err != nil {
				return err
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
			if *asJSON {
				return writeJSON(e.stdout, j)
			}
			_, err = fmt.Fprintf(e.stdout, "cancelled %s\n", printable(j.ID))
			return err
		}
	},
}
