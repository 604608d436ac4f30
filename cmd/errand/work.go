package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/internal/exechandler"
)

var workCommand = &command{
	name:    "work",
	args:    "--once --exec KIND=COMMAND... [flags]",
	summary: "claim one job of a mapped kind, run it with a command, record the outcome",
	detail: `
Each --exec maps a kind to a command, split on spaces and run without a
shell. Only mapped kinds are claimed. The command gets the job's args on
stdin and ERRAND_JOB_ID, ERRAND_ATTEMPT, ERRAND_LEASE_TOKEN in its
environment; its output goes to this log. Exit 0 succeeds; 75 retries
(class tempfail); 65 dead-letters (class permanent); any other status N
retries (class exit_N); a signal retries (class signal).

Prints one JSON line: {"result": "idle"|"succeeded"|"retrying"|"dead"|
"lease_lost", "job_id": ..., "attempt": N}, and exits 0 whenever an
outcome was recorded.`,
	setup: func(fs *flag.FlagSet, e *env) func(context.Context, []string) error {
		db := dbFlag(fs)
		once := fs.Bool("once", false, "claim and run one job, then exit (required for now)")
		execs := listFlag(fs, "exec", "run jobs of KIND with COMMAND (`KIND=COMMAND`, repeatable)")
		timeouts := listFlag(fs, "timeout", "fail an attempt of KIND with class timeout after DUR (`KIND=DUR`, repeatable)")
		queues := listFlag(fs, "queue", "claim from `QUEUE` (repeatable; default \"default\")")
		lease := durationFlag(fs, "lease", "lease `DUR`, renewed every third of it while the command runs (default 30s)")

		return func(ctx context.Context, pos []string) error {
			if len(pos) > 0 {
				return usagef("unexpected argument %q; map kinds with --exec KIND=COMMAND", pos[0])
			}
			if !*once {
				return usagef("the long-running worker is not available yet; pass --once to work one job")
			}
			if len(*execs) == 0 {
				return usagef("give at least one --exec KIND=COMMAND: errand work --once --exec send_receipt=./send_receipt.sh")
			}
			if isSet(fs, "lease") && *lease == 0 {
				return usagef("--lease must be positive, e.g. 30s")
			}
			kinds, err := execKinds(*execs, *timeouts, e)
			if err != nil {
				return err
			}
			c, closeDB, err := openClient(ctx, *db, mayCreate, errand.Config{Kinds: kinds, Logger: e.logger})
			if err != nil {
				return err
			}
			defer closeDB()
			res, err := c.WorkOne(ctx, errand.WorkOneOpts{Queues: *queues, Lease: *lease})
			if err != nil {
				return err
			}
			b, err := json.Marshal(res)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(e.stdout, "%s\n", b)
			return err
		}
	},
}

// execKinds builds a kind with an exec handler for every --exec, with the
// timeouts --timeout gives.
func execKinds(execs, timeouts []string, e *env) ([]errand.Kind, error) {
	byName := map[string]*errand.Kind{}
	var order []string
	for _, spec := range execs {
		kind, command, ok := strings.Cut(spec, "=")
		if !ok || kind == "" || strings.TrimSpace(command) == "" {
			return nil, usagef("--exec %q: write KIND=COMMAND, e.g. --exec send_receipt=./send_receipt.sh", spec)
		}
		if _, dup := byName[kind]; dup {
			return nil, usagef("--exec maps kind %q twice; give one command per kind", kind)
		}
		h, err := exechandler.New(command, &exechandler.Options{Logger: e.logger})
		if err != nil {
			return nil, usagef("--exec %q: %v", spec, err)
		}
		byName[kind] = &errand.Kind{Name: kind, Handler: h}
		order = append(order, kind)
	}
	for _, spec := range timeouts {
		kind, dur, ok := strings.Cut(spec, "=")
		if !ok || kind == "" {
			return nil, usagef("--timeout %q: write KIND=DUR, e.g. --timeout send_receipt=30s", spec)
		}
		k := byName[kind]
		if k == nil {
			return nil, usagef("--timeout names kind %q, which no --exec maps", kind)
		}
		d, err := time.ParseDuration(dur)
		if err != nil || d <= 0 {
			return nil, usagef("--timeout %q: want a positive Go duration such as 250ms, 30s or 1h", spec)
		}
		k.Timeout = d
	}
	kinds := make([]errand.Kind, len(order))
	for i, name := range order {
		kinds[i] = *byName[name]
	}
	return kinds, nil
}
