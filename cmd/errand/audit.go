package main

import (
	"context"
	"flag"
	"fmt"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
)

var auditCommand = &command{
	name:    "audit",
	args:    "[flags]",
	summary: "list operators' actions: replays, cancels, bulk replays, prunes, breaker resets, schedule deletions",
	detail: `
Audit lists what operators did, newest first: who, what, which job, why and
when, with the action's details (a replay's old and new args, a bulk
replay's filter, a prune's counts). To page, pass the last id printed as
--before.`,
	setup: func(fs *flag.FlagSet, e *env) func(context.Context, []string) error {
		db := dbFlag(fs)
		job := fs.String("job", "", "only records of job `ID`")
		action := fs.String("action", "", "only `ACTION` (replay, replay_args, bulk_replay, cancel, prune, breaker_reset, schedule_delete)")
		since := fs.String("since", "", "only records at or after `TIME` (RFC 3339, or a duration ago such as 24h)")
		until := fs.String("until", "", "only records before `TIME`")
		before := intFlag(fs, "before", 0, "only records with an id below `ID`, for the next page")
		limit := intFlag(fs, "limit", 100, "at most `N` records (at most 1000)")
		asJSON := fs.Bool("json", false, "print a JSON array of audit records")

		return func(ctx context.Context, pos []string) error {
			if len(pos) > 0 {
				return usagef("unexpected argument %q; filter with --job, --action, --since or --until", pos[0])
			}
			if *limit < 1 || *limit > errandstore.MaxAuditLimit {
				return usagef("--limit %d is out of range; give 1 to %d", *limit, errandstore.MaxAuditLimit)
			}
			now := time.Now()
			opts := &errand.AuditOpts{JobID: *job, Action: errandtype.AuditAction(*action), BeforeID: int64(*before), Limit: *limit}
			var err error
			if opts.Since, err = timeFlag("since", *since, now); err != nil {
				return err
			}
			if opts.Until, err = timeFlag("until", *until, now); err != nil {
				return err
			}
			c, closeDB, err := openClient(ctx, *db, mustExist, &errand.Config{})
			if err != nil {
				return err
			}
			defer closeDB()
			rs, err := c.Audit(ctx, opts)
			if err != nil {
				return opsInputError(err)
			}
			if *asJSON {
				return writeJSON(e.stdout, rs)
			}
			if len(rs) == 0 {
				_, err := fmt.Fprintln(e.stdout, "no audit records")
				return err
			}
			for _, r := range rs {
				job := "-"
				if r.JobID != nil {
					job = printable(*r.JobID)
				}
				fmt.Fprintf(e.stdout, "%d  %s  %s  %s  by %s: %s", r.ID, formatTime(r.At), printable(string(r.Action)), job,
					printable(r.Operator), printable(r.Reason))
				if r.Details != nil {
					fmt.Fprintf(e.stdout, "  %s", printable(string(errand.RedactSealed(r.Details))))
				}
				fmt.Fprintln(e.stdout)
			}
			return nil
		}
	},
}
