package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandtype"
)

var breakersCommand = &command{
	name:    "breakers",
	args:    "[reset DEPENDENCY --reason TEXT] [--json]",
	summary: "list dependencies' circuit breakers, or reset one",
	detail: `
Lists the circuit breaker of every dependency that has counted a failure
(a kind names its dependency: errand.KindOpts.Dependency, or --dependency
KIND=DEP of errand work and serve), from the database: its state (closed,
open, half_open), the failures of its current run and when it began, when
an open breaker lets a probe through, the probes running, how often it
opened, and the last failure's message. While a breaker is open no worker
claims the jobs of its dependency's kinds: they wait with their attempts
unused.

errand breakers reset DEPENDENCY --reason TEXT closes a breaker at once, so
its jobs run without waiting for the cool-down and a probe. The operator
(--operator, default the OS user), the reason and the time go to the audit
(action breaker_reset).

With --json, the list is one JSON array of breaker records ordered by
dependency: {"dependency", "state", "failures", "failing_since",
"opened_at", "open_until", "probes", "probe_until", "trips", "last_error",
"updated_at"}, times RFC 3339 in UTC, null when unset; a reset prints the
breaker's record.`,
	setup: func(fs *flag.FlagSet, e *env) func(context.Context, []string) error {
		db := dbFlag(fs)
		asJSON := fs.Bool("json", false, "print JSON: an array of breaker records, or the reset breaker's record")
		reason := fs.String("reason", "", "why the breaker is reset, for the audit (`TEXT`, required by reset)")
		operator := fs.String("operator", "", "who resets it, for the audit (`NAME`, default the OS user)")

		return func(ctx context.Context, pos []string) error {
			switch {
			case len(pos) == 0:
			case pos[0] != "reset":
				return usagef("unexpected argument %q; use errand breakers, or errand breakers reset DEPENDENCY --reason TEXT", pos[0])
			case len(pos) != 2:
				return usagef("give one dependency: errand breakers reset DEPENDENCY --reason TEXT")
			}
			if len(pos) == 0 && (isSet(fs, "reason") || isSet(fs, "operator")) {
				return usagef("--reason and --operator go with reset: errand breakers reset DEPENDENCY --reason TEXT")
			}
			var op string
			if len(pos) == 2 {
				if strings.TrimSpace(*reason) == "" {
					return usagef("give --reason TEXT: the audit records why, e.g. --reason \"smtp relay fixed\"")
				}
				var err error
				if op, err = operatorFlag(fs, *operator, "resets the breaker"); err != nil {
					return err
				}
			}
			c, closeDB, err := openClient(ctx, *db, mustExist, &errand.Config{})
			if err != nil {
				return err
			}
			defer closeDB()
			if len(pos) == 2 {
				b, err := c.ResetBreaker(ctx, pos[1], op, *reason)
				if errors.Is(err, errandtype.ErrNotFound) {
					return fmt.Errorf("no circuit breaker for dependency %s; errand breakers lists them", strconv.Quote(pos[1]))
				}
				if err != nil {
					return err
				}
				if *asJSON {
					return writeJSON(e.stdout, b)
				}
				_, err = fmt.Fprintf(e.stdout, "reset %s: closed\n", printable(b.Dependency))
				return err
			}
			bs, err := c.Breakers(ctx)
			if err != nil {
				return err
			}
			if *asJSON {
				return writeJSON(e.stdout, bs)
			}
			if len(bs) == 0 {
				_, err := fmt.Fprintln(e.stdout, "no circuit breakers")
				return err
			}
			now, err := c.Store().Now(ctx)
			if err != nil {
				return err
			}
			return writeBreakersTable(e.stdout, bs, now)
		}
	},
}

func writeBreakersTable(w io.Writer, bs []*errandtype.BreakerRecord, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "DEPENDENCY\tSTATE\tFAILURES\tFAILING SINCE\tOPEN UNTIL\tPROBES\tTRIPS\tLAST ERROR")
	opt := func(t *time.Time) string {
		if t == nil {
			return "-"
		}
		return formatTime(*t) + " (" + relative(now, *t) + ")"
	}
	for _, b := range bs {
		last := printable(b.LastError)
		if r := []rune(last); len(r) > 60 {
			last = string(r[:57]) + "..."
		}
		if last == "" {
			last = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%d\t%d\t%s\n", printable(b.Dependency), b.State, b.Failures,
			opt(b.FailingSince), opt(b.OpenUntil), b.Probes, b.Trips, last)
	}
	return tw.Flush()
}
