package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandtype"
)

var pauseCommand = &command{
	name:    "pause",
	args:    "(--queue QUEUE | --kind KIND) --reason TEXT [--json]",
	summary: "stop the claims of a queue or a kind across the cluster",
	detail: `
No worker, remote worker or errand work claims a job of a paused queue or
kind until errand resume: the pause is kept in the database, and every
process sees it within a second at the default poll interval. Running jobs
finish; waiting ones wait, their attempts unused, and errand stats counts
them as paused. A kind's pause does not bind a claim that names no kind (a
Faktory worker's FETCH). Pausing what is paused keeps the first pause.

The operator (--operator, default the OS user), the reason and the time go
with the pause and to the audit (action pause). With --json, prints
{"pause", "changed"}: the pause in force ({"scope", "name", "paused_at",
"operator", "reason"}) and whether this call made it.`,
	setup: func(fs *flag.FlagSet, e *env) func(context.Context, []string) error {
		return pauseSetup(fs, e, true)
	},
}

var resumeCommand = &command{
	name:    "resume",
	args:    "(--queue QUEUE | --kind KIND) --reason TEXT [--json]",
	summary: "lift the pause of a queue or a kind",
	detail: `
Lifts a pause made with errand pause: every process claims the queue's or
the kind's jobs again within a second at the default poll interval. The
operator (--operator, default the OS user), the reason and the time go to
the audit (action resume). Resuming what is not paused changes nothing.
With --json, prints {"changed"}.`,
	setup: func(fs *flag.FlagSet, e *env) func(context.Context, []string) error {
		return pauseSetup(fs, e, false)
	},
}

var pausesCommand = &command{
	name:    "pauses",
	args:    "[--json]",
	summary: "list the paused queues and kinds",
	detail: `
Lists the pauses in force, queues first, then by name: what is paused, since
when, by whom and why. With --json, one JSON array of {"scope", "name",
"paused_at", "operator", "reason"}.`,
	setup: func(fs *flag.FlagSet, e *env) func(context.Context, []string) error {
		db := dbFlag(fs)
		asJSON := fs.Bool("json", false, "print the pauses as one JSON array")
		return func(ctx context.Context, pos []string) error {
			if len(pos) > 0 {
				return usagef("unexpected argument %q; errand pauses takes no arguments", pos[0])
			}
			c, closeDB, err := openClient(ctx, *db, mustExist, &errand.Config{})
			if err != nil {
				return err
			}
			defer closeDB()
			ps, err := c.Pauses(ctx)
			if err != nil {
				return err
			}
			if *asJSON {
				return writeJSON(e.stdout, ps)
			}
			return writePausesTable(e.stdout, ps)
		}
	},
}

// pauseSetup is the setup of errand pause (paused) and errand resume.
func pauseSetup(fs *flag.FlagSet, e *env, paused bool) func(context.Context, []string) error {
	verb := map[bool]string{true: "pause", false: "resume"}[paused]
	db := dbFlag(fs)
	queue := fs.String("queue", "", "the `QUEUE` to "+verb)
	kind := fs.String("kind", "", "the `KIND` to "+verb+", in every queue")
	reason := fs.String("reason", "", "why, for the audit (`TEXT`, required)")
	operator := fs.String("operator", "", "who, for the audit (`NAME`, default the OS user)")
	asJSON := fs.Bool("json", false, "print the outcome as JSON")
	return func(ctx context.Context, pos []string) error {
		if len(pos) > 0 {
			return usagef("unexpected argument %q; name what to %s with --queue or --kind", pos[0], verb)
		}
		if (*queue == "") == (*kind == "") {
			return usagef("give --queue QUEUE or --kind KIND, one of them")
		}
		if strings.TrimSpace(*reason) == "" {
			return usagef("give --reason TEXT: the audit records why, e.g. --reason \"provider outage\"")
		}
		op, err := operatorFlag(fs, *operator, verb+"s it")
		if err != nil {
			return err
		}
		c, closeDB, err := openClient(ctx, *db, mustExist, &errand.Config{})
		if err != nil {
			return err
		}
		defer closeDB()
		target := errand.PauseTarget{Queue: *queue, Kind: *kind}
		what := pauseWhat(target)
		if !paused {
			changed, err := c.Resume(ctx, target, op, *reason)
			if err != nil {
				return flagInputError(err)
			}
			if *asJSON {
				return writeJSON(e.stdout, map[string]bool{"changed": changed})
			}
			_, err = fmt.Fprintf(e.stdout, "%s: %s\n", what, map[bool]string{true: "resumed", false: "was not paused"}[changed])
			return err
		}
		p, changed, err := c.Pause(ctx, target, op, *reason)
		if err != nil {
			return flagInputError(err)
		}
		if *asJSON {
			return writeJSON(e.stdout, struct {
				Pause   *errandtype.Pause `json:"pause"`
				Changed bool              `json:"changed"`
			}{p, changed})
		}
		if !changed {
			_, err = fmt.Fprintf(e.stdout, "%s: already paused since %s by %s (%s)\n", what, formatTime(p.PausedAt), printable(p.Operator), printable(p.Reason))
			return err
		}
		_, err = fmt.Fprintf(e.stdout, "%s: paused\n", what)
		return err
	}
}

func pauseWhat(t errand.PauseTarget) string {
	if t.Queue != "" {
		return "queue " + printable(t.Queue)
	}
	return "kind " + printable(t.Kind)
}

func writePausesTable(w io.Writer, ps []errandtype.Pause) error {
	if len(ps) == 0 {
		_, err := fmt.Fprintln(w, "nothing paused")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SCOPE\tNAME\tPAUSED AT\tOPERATOR\tREASON")
	for _, p := range ps {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", p.Scope, printable(p.Name), formatTime(p.PausedAt), printable(p.Operator), printable(p.Reason))
	}
	return tw.Flush()
}
