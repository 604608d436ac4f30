package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandtype"
)

var limitsCommand = &command{
	name:    "limits",
	args:    "[--json]",
	summary: "list rate limits, retry budgets and concurrency limits: tokens now, rule, claims held back",
	detail: `
Lists every rate limit and retry budget that a worker has taken tokens from
(errand work --rate-limit and --retry-budget, or
errand.WorkerConfig.RateLimits and RetryBudgets in a program), from the
database, where the cluster's tokens are held: the bucket's name
(queue:NAME, kind:NAME, dependency:NAME, retry:KIND), its tokens now, its rule as the last
worker to use it gave it, how many takes it held back (in every process),
and when it was last used. A rate limit's tokens are the jobs that may
start at once; a retry budget's, the retries that may start (0 or less:
the kind's retries wait).

A concurrency limit (errand work --concurrency-limit, or
errand.WorkerConfig.ConcurrencyLimits), named concurrency:KIND or
concurrency:dependency:NAME, shows the jobs that may start now (its free
slots) as its tokens, and the jobs it counts running now under a live
lease in its rule.

An adaptive limit (a kind's or a dependency's rate or concurrency limit,
given floor= and ceiling=) shows its rate or limit now,
its bounds, and a line saying when and why it last moved.

With --json, prints one JSON array ordered by name: {"name", "spec":
{"mode", "rate", "burst", "min", "ratio", "window_seconds"}, "tokens",
"denied", "updated_at"}; a spec's fields its mode does not use are null.
An adaptive limit's spec adds "floor", "ceiling" and, with a latency
target, "target_seconds", and its record "adaptive": {"held_until",
"moved_at", "reason", "decreases", "cuts", "peak"}. A concurrency
limit's record adds "running" and "counts", the kinds it counts.`,
	setup: func(fs *flag.FlagSet, e *env) func(context.Context, []string) error {
		db := dbFlag(fs)
		asJSON := fs.Bool("json", false, "print a JSON array of limit records")

		return func(ctx context.Context, pos []string) error {
			if len(pos) > 0 {
				return usagef("unexpected argument %q; errand limits takes no arguments", pos[0])
			}
			c, closeDB, err := openClient(ctx, *db, mustExist, &errand.Config{})
			if err != nil {
				return err
			}
			defer closeDB()
			rs, err := c.Limits(ctx)
			if err != nil {
				return err
			}
			if *asJSON {
				return writeJSON(e.stdout, rs)
			}
			if len(rs) == 0 {
				_, err := fmt.Fprintln(e.stdout, "no rate limits, retry budgets or concurrency limits")
				return err
			}
			return writeLimitsTable(e.stdout, rs)
		}
	},
}

func writeLimitsTable(w io.Writer, rs []*errandtype.LimiterRecord) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tTOKENS\tRULE\tHELD BACK\tUPDATED")
	var moves []string
	for _, r := range rs {
		rule := limitRule(r.Spec)
		if r.Running != nil {
			rule += ", " + strconv.Itoa(*r.Running) + " running"
		}
		if len(r.Counts) > 1 {
			rule += " of " + printable(strings.Join(r.Counts, ", "))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\n", printable(r.Name), strconv.FormatFloat(r.Tokens, 'f', 2, 64),
			rule, r.Denied, formatTime(r.UpdatedAt))
		if a := r.Adaptive; a != nil && !a.MovedAt.IsZero() {
			m := fmt.Sprintf("%s last moved %s: %s", printable(r.Name), formatTime(a.MovedAt), printable(a.Reason))
			if a.HeldUntil.After(a.MovedAt) {
				m += fmt.Sprintf(" (held until %s)", formatTime(a.HeldUntil))
			}
			moves = append(moves, m)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, m := range moves {
		if _, err := fmt.Fprintln(w, m); err != nil {
			return err
		}
	}
	return nil
}

// limitRule describes a bucket's rule for a person.
func limitRule(s errandtype.LimiterSpec) string {
	f := func(v float64) string { return strconv.FormatFloat(v, 'g', 4, 64) }
	if s.Mode == errandtype.LimiterModeConcurrency {
		r := strconv.Itoa(int(math.Floor(s.Rate+1e-9))) + " at once"
		if s.Adaptive() {
			r += " (" + f(s.Rate) + ") adaptive between " + f(s.Floor) + " and " + f(s.Ceiling) + target(s)
		}
		return r
	}
	if s.Mode == errandtype.LimiterModeRate && s.Adaptive() {
		return f(s.Rate) + "/s adaptive between " + f(s.Floor) + " and " + f(s.Ceiling) + target(s) + ", burst " + f(s.Burst)
	}
	if s.Mode == errandtype.LimiterModeRate {
		return f(s.Rate) + "/s, burst " + f(s.Burst)
	}
	return f(s.Ratio) + " per first attempt over " + s.Window.String() + ", min " + f(s.Min)
}

// target describes an adaptive limit's latency target, if it has one.
func target(s errandtype.LimiterSpec) string {
	if s.Target <= 0 {
		return ""
	}
	return " within " + s.Target.String()
}

// limitFlags are the --rate-limit and --retry-budget flags of errand work
// and errand serve.
type limitFlags struct {
	rates   *[]string
	budgets *[]string
	conc    *[]string
}

func addLimitFlags(fs *flag.FlagSet) limitFlags {
	return limitFlags{
		rates: listFlag(fs, "rate-limit", "start at most N jobs of a queue, kind or dependency per PER across every worker "+
			"(`queue:NAME=N/PER`, kind:NAME=N/PER or dependency:NAME=N/PER, PER s, m, h or a duration, optional ,burst=B; repeatable)"),
		budgets: listFlag(fs, "retry-budget", "let KIND retry at most RATIO per first attempt over WINDOW (default 1m), "+
			"plus N a window (default 10) (`KIND=RATIO[/WINDOW][,min=N]`; repeatable)"),
		conc: listFlag(fs, "concurrency-limit", "run at most N jobs of a kind, or of the kinds of a dependency, at once across every worker "+
			"(`kind:NAME=N` or dependency:NAME=N, adaptive with ,floor=F,ceiling=C[,target=DUR]; repeatable)"),
	}
}

// set reports whether any limit was given.
func (l limitFlags) set() bool { return len(*l.rates) > 0 || len(*l.budgets) > 0 || len(*l.conc) > 0 }

// concurrency reads the --concurrency-limit flags.
func (l limitFlags) concurrency() ([]errand.ConcurrencyLimit, error) {
	var out []errand.ConcurrencyLimit
	for _, f := range *l.conc {
		c, err := errand.ParseConcurrencyLimit(f)
		if err != nil {
			return nil, usagef("--concurrency-limit: %v", err)
		}
		out = append(out, c)
	}
	return out, nil
}

// parse reads the flags.
func (l limitFlags) parse() ([]errand.RateLimit, []errand.RetryBudget, error) {
	var rates []errand.RateLimit
	for _, f := range *l.rates {
		r, err := errand.ParseRateLimit(f)
		if err != nil {
			return nil, nil, usagef("--rate-limit: %v", err)
		}
		rates = append(rates, r)
	}
	var budgets []errand.RetryBudget
	for _, f := range *l.budgets {
		b, err := errand.ParseRetryBudget(f)
		if err != nil {
			return nil, nil, usagef("--retry-budget: %v", err)
		}
		budgets = append(budgets, b)
	}
	return rates, budgets, nil
}

// workerConfigError names the flag to fix for a worker configuration
// that NewWorker refused.
func workerConfigError(err error) error {
	var ie *errandtype.InputError
	if errors.As(err, &ie) {
		switch {
		case strings.HasPrefix(ie.Field, "RateLimits"):
			msg := strings.Replace(ie.Message, "add it to Queues", "work it with --queue NAME=N", 1)
			return usagef("--rate-limit: %s", strings.Replace(msg, "with KindOpts.Dependency", "with --dependency KIND=DEP", 1))
		case strings.HasPrefix(ie.Field, "RetryBudgets"):
			return usagef("--retry-budget: %s", ie.Message)
		case strings.HasPrefix(ie.Field, "ConcurrencyLimits"):
			return usagef("--concurrency-limit: %s", ie.Message)
		}
	}
	return retentionFlagError(err)
}
