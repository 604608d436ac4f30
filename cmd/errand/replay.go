package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/user"
	"strconv"
	"strings"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
	"github.com/errandhq/errand/internal/english"
)

var replayCommand = &command{
	name:    "replay",
	args:    "ID --reason TEXT [--args JSON|@FILE] [--restart | --from-step N] | --state dead [filters] --reason TEXT [flags]",
	summary: "run dead or cancelled jobs again, keeping their ids and history",
	detail: `
Replay starts a new delivery cycle: attempt 0, available now. The operator,
reason, prior state and time go to the audit (errand inspect and errand
audit show it). Only dead and cancelled jobs can be replayed.

With an ID it replays that job. A job's checkpoint (its progress) is kept,
so a job that checkpoints resumes where it stopped; --restart clears it,
and the steps of a durable handler with it. --from-step N forks a durable
handler's job from step N: the steps before it keep their results, it and
those after it run again.
--args replaces the job's args first (the fix-and-replay case), checked as
an enqueue checks them, and clears the checkpoint; the audit keeps the old
and the new args.

With --state dead and no ID it replays the dead jobs that --kind, --queue,
--class (of the last error) and --since/--until (when they died; an RFC 3339
time or a duration ago, e.g. 24h) select, oldest first, at most --limit
(default 100, at most 1000), no faster than --rate (e.g. 10/s). Each job gets
its own audit record naming the bulk run and its filter. --dry-run lists the
jobs and changes nothing.`,
	setup: func(fs *flag.FlagSet, e *env) func(context.Context, []string) error {
		db := dbFlag(fs)
		reason := fs.String("reason", "", "why the job is replayed, for the audit (`TEXT`, required)")
		operator := fs.String("operator", "", "who replays it, for the audit (`NAME`, default the OS user)")
		argsFlag := fs.String("args", "", "replace the job's args: `JSON`, or @FILE to read it from a file (the audit keeps the old and new args)")
		asJSON := fs.Bool("json", false, "print the replayed job record as JSON (in bulk: the run, with its jobs)")
		restart := fs.Bool("restart", false, "clear the job's checkpoint (progress) and steps, so it starts from the beginning")
		fromStep := intFlag(fs, "from-step", 0, "fork the job from its durable handler's step `N`: the steps before it are kept, the rest run again")
		state := fs.String("state", "", "replay in bulk the jobs in `STATE` (only dead) that the filters select")
		kind := fs.String("kind", "", "bulk: only jobs of `KIND`")
		queue := fs.String("queue", "", "bulk: only jobs in `QUEUE`")
		class := fs.String("class", "", "bulk: only jobs whose last error has `CLASS`")
		since := fs.String("since", "", "bulk: only jobs that died at or after `TIME` (RFC 3339, or a duration ago such as 24h)")
		until := fs.String("until", "", "bulk: only jobs that died before `TIME` (RFC 3339, or a duration ago)")
		limit := intFlag(fs, "limit", 0, "bulk: at most `N` jobs (default 100, at most 1000)")
		rate := fs.String("rate", "", "bulk: at most `R/s` jobs per second, e.g. 10/s (default no limit)")
		dryRun := fs.Bool("dry-run", false, "bulk: list the jobs that would be replayed, change nothing")

		return func(ctx context.Context, pos []string) error {
			bulkFlags := []string{"state", "kind", "queue", "class", "since", "until", "limit", "rate", "dry-run"}
			var bulk []string
			for _, f := range bulkFlags {
				if isSet(fs, f) {
					bulk = append(bulk, "--"+f)
				}
			}
			if len(bulk) > 0 {
				if len(pos) > 0 {
					return usagef("give an ID or %s, not both: errand replay ID replays one job, errand replay --state dead [filters] many", strings.Join(bulk, " "))
				}
				if isSet(fs, "args") {
					return usagef("--args replaces one job's args; give an ID, not %s", strings.Join(bulk, " "))
				}
				if *restart || isSet(fs, "from-step") {
					return usagef("--restart and --from-step replay one job; give an ID, not %s", strings.Join(bulk, " "))
				}
				if *state != string(errandtype.StateDead) {
					return usagef("bulk replay needs --state dead: only dead jobs are replayed in bulk")
				}
				return replayMany(ctx, e, fs, &bulkReplay{db: *db, reason: *reason, operator: *operator, kind: *kind,
					queue: *queue, class: *class, since: *since, until: *until, limit: *limit, rate: *rate,
					dryRun: *dryRun, asJSON: *asJSON})
			}
			if len(pos) == 0 {
				return usagef("give the id: errand replay ID, or select dead jobs with --state dead")
			}
			id, err := onePositional(pos, "id", "replay")
			if err != nil {
				return err
			}
			if strings.TrimSpace(*reason) == "" {
				return usagef("give --reason TEXT: the replay audit records why, e.g. --reason \"receipt service fixed\"")
			}
			op, err := operatorFlag(fs, *operator, "replays the job")
			if err != nil {
				return err
			}
			var newArgs json.RawMessage
			if isSet(fs, "args") {
				if newArgs, err = readArgsFlag(*argsFlag); err != nil {
					return err
				}
			}
			c, closeDB, err := openClient(ctx, *db, mustExist, &errand.Config{})
			if err != nil {
				return err
			}
			defer closeDB()
			var from *int
			if isSet(fs, "from-step") {
				from = fromStep
			}
			j, err := c.Replay(ctx, id, &errand.ReplayOpts{Operator: op, Reason: *reason, Args: newArgs, Restart: *restart, FromStep: from})
			if err != nil {
				return opsInputError(jobError(id, err))
			}
			if *asJSON {
				return writeJSON(e.stdout, j)
			}
			_, err = fmt.Fprintf(e.stdout, "replayed %s (replay %d): %s, available now\n", printable(j.ID), j.Replays, printable(string(j.State)))
			return err
		}
	},
}

// bulkReplay is the flags of a bulk replay.
type bulkReplay struct {
	db, reason, operator string
	kind, queue, class   string
	since, until         string
	limit                int
	rate                 string
	dryRun, asJSON       bool
}

func replayMany(ctx context.Context, e *env, fs *flag.FlagSet, b *bulkReplay) error {
	opts, err := b.opts(fs)
	if err != nil {
		return err
	}
	c, closeDB, err := openClient(ctx, b.db, mustExist, &errand.Config{})
	if err != nil {
		return err
	}
	defer closeDB()
	res, err := c.ReplayMany(ctx, opts)
	if err != nil && res == nil {
		return opsInputError(err)
	}
	if b.asJSON {
		if werr := writeJSON(e.stdout, res); werr != nil {
			return werr
		}
		return err
	}
	writeReplayMany(e.stdout, res, b.dryRun)
	limit := opts.Limit
	if limit == 0 {
		limit = errand.DefaultReplayMany
	}
	if len(res.Jobs) == limit {
		e.logger.Info("more dead jobs may match; run again or raise --limit", "limit", len(res.Jobs))
	}
	return err
}

// opts checks the flags and returns the replay they ask for.
func (b *bulkReplay) opts(fs *flag.FlagSet) (*errand.ReplayManyOpts, error) {
	opts := &errand.ReplayManyOpts{
		Filter: errandstore.DeadFilter{Kind: b.kind, Queue: b.queue, Class: b.class},
		Limit:  b.limit, Reason: b.reason, DryRun: b.dryRun,
	}
	if !b.dryRun && strings.TrimSpace(b.reason) == "" {
		return nil, usagef("give --reason TEXT: the audit records why, e.g. --reason \"mail provider back up\"")
	}
	if isSet(fs, "limit") && (b.limit < 1 || b.limit > errand.MaxReplayMany) {
		return nil, usagef("--limit %d is out of range; give 1 to %d", b.limit, errand.MaxReplayMany)
	}
	op, err := operatorFlag(fs, b.operator, "replays the jobs")
	if err != nil {
		return nil, err
	}
	opts.Operator = op
	now := time.Now()
	if opts.Filter.DiedSince, err = timeFlag("since", b.since, now); err != nil {
		return nil, err
	}
	if opts.Filter.DiedUntil, err = timeFlag("until", b.until, now); err != nil {
		return nil, err
	}
	if b.rate != "" {
		r, err := strconv.ParseFloat(strings.TrimSuffix(b.rate, "/s"), 64)
		if err != nil || r <= 0 || math.IsInf(r, 0) {
			return nil, usagef("--rate %q: give jobs per second, e.g. 10/s or 0.5/s", b.rate)
		}
		opts.Rate = r
	}
	return opts, nil
}

// writeReplayMany prints a bulk replay's jobs, and the dead steps it left
// out, for a person to read.
func writeReplayMany(w io.Writer, res *errand.ReplayManyResult, dryRun bool) {
	verb := "replayed"
	if dryRun {
		verb = "would replay"
	}
	fmt.Fprintf(w, "%s %s", verb, english.Count(len(res.Jobs), "dead job"))
	if !dryRun {
		fmt.Fprintf(w, " (bulk %s)", res.Bulk)
	}
	fmt.Fprintln(w)
	for _, j := range res.Jobs {
		fmt.Fprintf(w, "  %s  %s  %s\n", printable(j.ID), printable(j.Kind), printable(j.Queue))
	}
	if len(res.Held) > 0 {
		fmt.Fprintf(w, "left out %s of workflows that have compensated; rerun each workflow once it has failed (errand workflow rerun ID):\n", english.Count(len(res.Held), "dead step"))
		for _, id := range res.Held {
			fmt.Fprintf(w, "  %s\n", printable(id))
		}
	}
}

// opsFlags names the flag behind each field of the operator commands'
// input errors.
var opsFlags = map[string]string{
	"kind": "--kind", "queue": "--queue", "class": "--class", "since": "--since", "until": "--until",
	"limit": "--limit", "rate": "--rate", "args": "--args", "operator": "--operator", "reason": "--reason",
	"succeeded_age": "--succeeded-after", "dead_age": "--dead-after", "action": "--action", "before_id": "--before",
	"args_has": "--args-has", "output_has": "--output-has", "tag": "--tag", "tags": "--tag",
}

// opsInputError makes a library's input error a usage error naming the
// flag to change.
func opsInputError(err error) error {
	var ie *errandtype.InputError
	if errors.As(err, &ie) {
		if name, ok := opsFlags[ie.Field]; ok {
			return usagef("%s: %s", name, ie.Message)
		}
		if strings.HasPrefix(ie.Field, "kinds") {
			return usagef("--retain-kind: %s", ie.Message)
		}
		return usagef("%s", ie.Error())
	}
	return err
}

// timeFlag reads a time flag: RFC 3339, or a Go duration meaning that long
// before now. Empty is the zero time.
func timeFlag(name, v string, now time.Time) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return t, nil
	}
	if d, err := time.ParseDuration(v); err == nil && d >= 0 {
		return now.Add(-d), nil
	}
	return time.Time{}, usagef("--%s %q: give an RFC 3339 time such as 2026-11-30T09:00:00Z, or a duration ago such as 24h", name, v)
}

// operatorFlag returns the operator for the audit: the --operator flag's
// value, or the OS user when it is not given. doing says what the operator
// does, for the message when the flag is given empty.
func operatorFlag(fs *flag.FlagSet, value, doing string) (string, error) {
	if isSet(fs, "operator") && strings.TrimSpace(value) == "" {
		return "", usagef("--operator is empty; name who %s or leave the flag out", doing)
	}
	if value == "" {
		return currentUser(), nil
	}
	return value, nil
}

// readArgsFlag reads --args: JSON, or @FILE naming a file that holds it.
func readArgsFlag(v string) (json.RawMessage, error) {
	b := []byte(v)
	if name, ok := strings.CutPrefix(v, "@"); ok {
		var err error
		if b, err = os.ReadFile(name); err != nil {
			return nil, usagef("--args %s: %v; give JSON or @FILE of a readable file", v, err)
		}
	}
	if !json.Valid(b) {
		return nil, usagef("--args is not valid JSON; give an object such as '{\"id\": 7}' or @FILE")
	}
	return json.RawMessage(b), nil
}

// currentUser names the operator for the audit when --operator is not
// given: the OS account, then $USER, then "unknown".
func currentUser() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	if u := os.Getenv("USER"); u != "" {
		return u
	}
	return "unknown"
}
