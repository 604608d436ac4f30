package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"

	"github.com/errandhq/errand"
)

var signalCommand = &command{
	name:    "signal",
	args:    "ID NAME [--value JSON] [flags]",
	summary: "send a job the signal its handler waits for (errand.WaitFor)",
	detail: `
The signal is kept until the job's handler takes it with errand.WaitFor, in
the order signals of its name were sent; a job waiting for it is woken at
once. --value is the signal's value as JSON (default true). A finished job
never reads a signal: sending it one is refused, and nothing is written.`,
	setup: func(fs *flag.FlagSet, e *env) func(context.Context, []string) error {
		db := dbFlag(fs)
		value := fs.String("value", "true", "the signal's value, as `JSON`")

		return func(ctx context.Context, pos []string) error {
			if len(pos) != 2 {
				return usagef("give the job's id and the signal's name: errand signal ID NAME [--value JSON]")
			}
			id, name := pos[0], pos[1]
			if !json.Valid([]byte(*value)) {
				return usagef("--value %q is not JSON; quote a string, e.g. --value '\"approved\"'", *value)
			}
			c, closeDB, err := openClient(ctx, *db, mustExist, &errand.Config{})
			if err != nil {
				return err
			}
			defer closeDB()
			if err := c.Signal(ctx, id, name, json.RawMessage(*value)); err != nil {
				return jobError(id, err)
			}
			_, err = fmt.Fprintf(e.stdout, "signalled %s: %s\n", printable(id), printable(name))
			return err
		}
	},
}
