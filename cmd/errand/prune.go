package main

import (
	"context"
	"flag"
	"fmt"
	"strings"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/internal/english"
)

var pruneCommand = &command{
	name:    "prune",
	args:    "--succeeded-after AGE [--dead-after AGE] [--retain-kind KIND=SUCCEEDED[:DEAD]]... [flags]",
	summary: "delete finished jobs past their retention age",
	detail: `
Prune deletes succeeded and cancelled jobs that finished at least
--succeeded-after ago, and dead jobs that died at least --dead-after ago
(give at least one; --dead-after, when both are given, must be at least
--succeeded-after: dead jobs are the evidence of failures). --retain-kind
KIND=SUCCEEDED[:DEAD] (repeatable) gives a kind its own ages, which replace
the two for its jobs; an age left out or 0 leaves that state to them. With
only --retain-kind, only those kinds are pruned. Queued,
scheduled, retrying and running jobs are never deleted. It deletes in
transactions of at most --batch jobs (default and most 1000), so no lock is
held long, and records each transaction in the audit; the audit itself and
the effect ledger are kept. A completed batch and a finished workflow go
with their last job, once none of their jobs is left (at most --batch of
each per transaction). --dry-run counts what would go. A worker can prune on
its own (errand work --retain-succeeded, --retain-dead).`,
	setup: func(fs *flag.FlagSet, e *env) func(context.Context, []string) error {
		db := dbFlag(fs)
		succeeded := durationFlag(fs, "succeeded-after", "delete succeeded and cancelled jobs finished at least `AGE` ago, e.g. 168h")
		dead := durationFlag(fs, "dead-after", "delete dead jobs that died at least `AGE` ago, e.g. 720h")
		batch := intFlag(fs, "batch", 0, "at most `N` jobs per transaction (default 1000)")
		reason := fs.String("reason", "manual prune", "why, for the audit (`TEXT`)")
		operator := fs.String("operator", "", "who prunes, for the audit (`NAME`, default the OS user)")
		dryRun := fs.Bool("dry-run", false, "count the jobs that would be deleted, delete nothing")
		retain := listFlag(fs, "retain-kind", "delete jobs of KIND at their own ages instead of --succeeded-after and --dead-after (`KIND=SUCCEEDED[:DEAD]`, repeatable, e.g. email=1h)")
		asJSON := fs.Bool("json", false, `print {"succeeded", "cancelled", "dead", "batches", "workflows", "dry_run"} as JSON`)

		return func(ctx context.Context, pos []string) error {
			if len(pos) > 0 {
				return usagef("unexpected argument %q; give ages with --succeeded-after and --dead-after", pos[0])
			}
			kinds, err := retainKinds("--retain-kind", *retain)
			if err != nil {
				return err
			}
			if *succeeded == 0 && *dead == 0 && len(kinds) == 0 {
				return usagef("--succeeded-after, --dead-after and --retain-kind are all missing or 0, which prunes nothing; give at least one, e.g. --succeeded-after 168h --dead-after 720h")
			}
			if *batch < 0 || *batch > errandstore.MaxPruneBatch {
				return usagef("--batch %d is out of range; give 1 to %d", *batch, errandstore.MaxPruneBatch)
			}
			if strings.TrimSpace(*reason) == "" {
				return usagef("--reason is empty; say why, or leave the flag out")
			}
			op, err := operatorFlag(fs, *operator, "prunes")
			if err != nil {
				return err
			}
			c, closeDB, err := openClient(ctx, *db, mustExist, &errand.Config{})
			if err != nil {
				return err
			}
			defer closeDB()
			r, err := c.Prune(ctx, &errand.PruneOpts{SucceededAge: *succeeded, DeadAge: *dead, Kinds: kinds, BatchSize: *batch,
				Operator: op, Reason: *reason, DryRun: *dryRun})
			if err != nil {
				return opsInputError(err)
			}
			if *asJSON {
				return writeJSON(e.stdout, r)
			}
			verb := "pruned"
			if r.DryRun {
				verb = "would prune"
			}
			_, err = fmt.Fprintf(e.stdout, "%s %s: %d succeeded, %d cancelled, %d dead; %s, %s\n",
				verb, english.Count(r.Total(), "job"), r.Succeeded, r.Cancelled, r.Dead,
				english.Count(r.Batches, "batch"), english.Count(r.Workflows, "workflow"))
			return err
		}
	},
}
