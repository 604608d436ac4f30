package main

import (
	"context"
	"flag"
	"fmt"
)

var migrateCommand = &command{
	name:    "migrate",
	args:    "[flags]",
	summary: "apply errand's migrations and print the schema version",
	detail: `
enqueue, batch enqueue, workflow enqueue, work, serve and bench also create
and migrate the database when they open it; migrate is for deployments
that apply migrations as a step of their own. The other subcommands, which
read or change existing jobs, never create or migrate anything: on a
database errand has not migrated they say so and change nothing.`,
	setup: func(fs *flag.FlagSet, e *env) func(context.Context, []string) error {
		db := dbFlag(fs)

		return func(ctx context.Context, pos []string) error {
			if len(pos) > 0 {
				return usagef("unexpected argument %q; migrate takes only --db", pos[0])
			}
			st, err := openStore(ctx, *db, mayCreate, e.logger)
			if err != nil {
				return err
			}
			defer st.Close()
			v, err := st.SchemaVersion(ctx)
			if err != nil {
				return fmt.Errorf("read schema version: %w", err)
			}
			_, err = fmt.Fprintf(e.stdout, "schema version %d\n", v)
			return err
		}
	},
}
