package main

import (
	"context"
	"flag"
	"fmt"

	"github.com/errandhq/errand"
)

var cancelCommand = &command{
	name:    "cancel",
	args:    "ID [flags]",
	summary: "cancel a queued or retrying job",
	detail: `
A cancelled job does not run unless replayed. A running job cannot be
cancelled: its worker holds it until it finishes or its lease expires.`,
	setup: func(fs *flag.FlagSet, e *env) func(context.Context, []string) error {
		db := dbFlag(fs)
		asJSON := fs.Bool("json", false, "print the cancelled job record as JSON")

		return func(ctx context.Context, pos []string) error {
			id, err := onePositional(pos, "id", "cancel")
			if err != nil {
				return err
			}
			c, closeDB, err := openClient(ctx, *db, mustExist, &errand.Config{})
			if err != nil {
				return err
			}
			defer closeDB()
			j, err := c.Cancel(ctx, id)
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
