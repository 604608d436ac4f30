package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
)

var enqueueCommand = &command{
	name:    "enqueue",
	args:    "KIND [JSON_ARGS] [flags]",
	summary: "enqueue a job and print its id",
	detail: `
JSON_ARGS is the job's argument document (default {}). A job whose --id
matches an existing job, or whose --unique-key another job holds, is not
enqueued again: errand prints the existing job's id and exits 0. An --id
whose job differs from this one (other args, queue, priority...) is an
error naming what differs, exit 1, unless --first-wins.

A unique key is held in every state of its job unless --unique-scope says
otherwise: until_finished (queued, running or retrying: free again once the
job succeeded, died or was cancelled), until_succeeded (also while dead), or
a comma-separated list of states that names all of queued, running and
retrying, plus any of succeeded, dead and cancelled, e.g.
queued,running,retrying,succeeded (queued,succeeded is refused).
--unique-window 1h holds it once per clock hour. A job with an
--ordering-key runs after the earlier jobs of its key; --ordering-on-dead
hold makes it, should it die, hold them back until it is replayed or
cancelled.

--debounce-key folds a burst of enqueues of one key and kind into one job.
With --debounce-mode last_wins (the default) the job starts
--debounce-window after the latest enqueue, with its args, and no later
than --debounce-max-wait (default ten windows) after the first; with
first_wins an enqueue within a window of the key's last job is absorbed by
it. An absorbed enqueue prints the id of the job that absorbed it.`,
	setup: func(fs *flag.FlagSet, e *env) func(context.Context, []string) error {
		db := dbFlag(fs)
		id := fs.String("id", "", "the job's `ID` (default a new UUIDv7); a duplicate id returns the existing job, if it is this one")
		firstWins := fs.Bool("first-wins", false, "a duplicate --id returns the existing job even when it differs from this one")
		queue := fs.String("queue", "", "`QUEUE` to run in (default \"default\")")
		priority := intFlag(fs, "priority", 0, "priority `N`: lower runs first")
		delay := durationFlag(fs, "delay", "run no sooner than `DUR` from now")
		runAt := fs.String("run-at", "", "run no sooner than `TIME` (RFC 3339, e.g. 2026-11-29T09:00:00Z)")
		maxAttempts := intFlag(fs, "max-attempts", 0, "attempt budget `N` (default the kind's, 20)")
		backoffBase := durationFlag(fs, "backoff-base", "retry delay cap after the first failure `DUR` (default 1s)")
		backoffMax := durationFlag(fs, "backoff-max", "largest retry delay `DUR` (default 1h)")
		maxAge := durationFlag(fs, "max-age", "dead-letter the job (class expired) if it has not succeeded `DUR` after enqueue")
		startBy := fs.String("start-by", "", "never start the job after `TIME` (RFC 3339): not started by then, it dies with class start_by")
		startWithin := durationFlag(fs, "start-within", "never start the job later than `DUR` from now (--start-by now+DUR)")
		key := fs.String("unique-key", "", "unique `KEY`: while a job holds it, enqueueing it again returns that job")
		legacyKey := fs.String("key", "", "unique `KEY`, the same as --unique-key (kept for scripts that use it)")
		uniqueScope := fs.String("unique-scope", "", "`SCOPE` of --unique-key: always (default), until_finished, until_succeeded, or states like queued,running,retrying,succeeded")
		uniqueWindow := durationFlag(fs, "unique-window", "hold --unique-key once per clock window of `DUR` (e.g. 1h)")
		orderingKey := fs.String("ordering-key", "", "ordering `KEY`: jobs of a key run one at a time, in enqueue order")
		orderingOnDead := fs.String("ordering-on-dead", "", "`hold` the --ordering-key while the job is dead, until replayed or cancelled, or `release` it (default the kind's, release)")
		fairnessKey := fs.String("fairness-key", "", "who the job is for (`KEY`, e.g. tenant:42): workers share its queue fairly among keys")
		tags := listFlag(fs, "tag", "a free-form label `TAG` for operators (repeatable)")
		metadata := fs.String("metadata", "", "a JSON object `OBJ` kept with the job for its producers and consumers, e.g. '{\"traceparent\": \"00-...\"}'")
		debounce := debounceFlags(fs)
		asJSON := fs.Bool("json", false, "print {\"id\", \"duplicate\", \"absorbed\", \"job\"} as JSON")

		return func(ctx context.Context, pos []string) error {
			if len(pos) == 0 {
				return usagef("give the job's kind: errand enqueue KIND [JSON_ARGS]")
			}
			if len(pos) > 2 {
				return usagef("unexpected argument %q: give KIND and at most one JSON_ARGS (quote the JSON)", pos[2])
			}
			args := json.RawMessage("{}")
			if len(pos) == 2 {
				var v any
				if err := json.Unmarshal([]byte(pos[1]), &v); err != nil {
					return usagef("args are not valid JSON (%v); pass one quoted document such as '{\"id\": 7}'", err)
				}
				args = json.RawMessage(pos[1])
			}
			opts := &errand.EnqueueOpts{
				ID:          *id,
				FirstWins:   *firstWins,
				Queue:       *queue,
				Priority:    *priority,
				Delay:       *delay,
				MaxAttempts: *maxAttempts,
				BackoffBase: *backoffBase,
				BackoffMax:  *backoffMax,
				MaxAge:      *maxAge,
				OrderingKey: *orderingKey,
				FairnessKey: *fairnessKey,
				Tags:        *tags,
				Metadata:    json.RawMessage(*metadata),
			}
			if isSet(fs, "key") {
				if isSet(fs, "unique-key") {
					return usagef("give --unique-key or --key, not both")
				}
				*key = *legacyKey
			}
			u := &errand.UniqueOpts{Key: *key, Window: *uniqueWindow}
			if *uniqueScope != "" {
				sc, err := errandtype.ParseUniqueScope(*uniqueScope)
				if err != nil {
					return flagInputError(err)
				}
				u.Scope = sc
			}
			if (isSet(fs, "unique-scope") || isSet(fs, "unique-window")) && *key == "" {
				return usagef("--unique-scope and --unique-window need --unique-key")
			}
			if *key != "" {
				opts.Unique = u
			}
			hold, err := errand.ParseOrderingOnDead(*orderingOnDead)
			if err != nil {
				return flagInputError(err)
			}
			if isSet(fs, "ordering-on-dead") && *orderingKey == "" {
				return usagef("--ordering-on-dead needs --ordering-key")
			}
			opts.OrderingOnDead = hold
			if opts.Debounce, err = debounce(); err != nil {
				return err
			}
			if isSet(fs, "delay") && isSet(fs, "run-at") {
				return usagef("give --delay or --run-at, not both")
			}
			if *runAt != "" {
				t, err := time.Parse(time.RFC3339, *runAt)
				if err != nil {
					return usagef("--run-at %q is not an RFC 3339 time; write it like 2026-11-29T09:00:00Z", *runAt)
				}
				opts.RunAt = t
			}
			if err := setStartBy(fs, opts, *startBy, *startWithin); err != nil {
				return err
			}
			if isSet(fs, "max-attempts") && (*maxAttempts < 1 || *maxAttempts > errandtype.MaxAttemptsLimit) {
				return usagef("--max-attempts %d is out of range; give 1 to %d", *maxAttempts, errandtype.MaxAttemptsLimit)
			}
			if *priority < errandstore.MinPriority || *priority > errandstore.MaxPriority {
				return usagef("--priority %d is out of range; give %d to %d", *priority, errandstore.MinPriority, errandstore.MaxPriority)
			}
			for _, name := range []string{"id", "queue", "key", "unique-key", "ordering-key", "fairness-key"} {
				if isSet(fs, name) && fs.Lookup(name).Value.String() == "" {
					return usagef("--%s is empty; give a value or leave the flag out", name)
				}
			}

			// Checked before the database is opened, so that bad input
			// creates none.
			job := errand.RawArgs{KindName: pos[0], JSON: args}
			if err := errand.CheckEnqueue(job, opts); err != nil {
				return flagInputError(err)
			}
			c, closeDB, err := openClient(ctx, *db, mayCreate, &errand.Config{})
			if err != nil {
				return err
			}
			defer closeDB()
			res, err := c.Enqueue(ctx, job, opts)
			if err != nil {
				return idConflict(flagInputError(err), "--id", "--first-wins")
			}
			if res.Absorbed {
				e.logger.Info("absorbed by the pending job of its debounce key", "id", res.Job.ID, "absorbed", res.Job.Absorbed)
			} else if res.Duplicate {
				e.logger.Info("job already exists; not enqueued again", "id", res.Job.ID, "state", string(res.Job.State))
			}
			if *asJSON {
				return writeJSON(e.stdout, struct {
					ID        string          `json:"id"`
					Duplicate bool            `json:"duplicate"`
					Absorbed  bool            `json:"absorbed"`
					Job       *errandtype.Job `json:"job"`
				}{res.Job.ID, res.Duplicate, res.Absorbed, res.Job})
			}
			_, err = e.stdout.Write([]byte(printable(res.Job.ID) + "\n"))
			return err
		}
	},
}

// enqueueFlags names the flag that sets each field the library may refuse.
var enqueueFlags = map[string]string{
	"id": "--id", "first_wins": "--first-wins", "queue": "--queue", "kind": "KIND", "args": "JSON_ARGS",
	"priority": "--priority", "max_attempts": "--max-attempts", "delay": "--delay",
	"run_at": "--run-at", "max_age": "--max-age", "unique_key": "--unique-key",
	"unique_scope": "--unique-scope", "unique_window": "--unique-window",
	"ordering_key": "--ordering-key", "ordering_on_dead": "--ordering-on-dead", "fairness_key": "--fairness-key",
	"backoff": "--backoff-base and --backoff-max", "backoff_max": "--backoff-max",
	"tag": "--tag", "tags": "--tag", "metadata": "--metadata", "start_by": "--start-by or --start-within",
	"debounce_key": "--debounce-key", "debounce_mode": "--debounce-mode", "debounce_window": "--debounce-window",
	"debounce_max_wait": "--debounce-max-wait", "Debounce": "--debounce-key",
}

// debounceFlags defines the debounce flags on fs and returns what reads
// them: nil options without --debounce-key.
func debounceFlags(fs *flag.FlagSet) func() (*errand.DebounceOpts, error) {
	key := fs.String("debounce-key", "", "debounce `KEY`: enqueues of the key and kind within a window fold into one job")
	mode := fs.String("debounce-mode", "", "`MODE` of --debounce-key: last_wins (default: the newest args, run once the burst is quiet) or first_wins (throttle)")
	window := durationFlag(fs, "debounce-window", "quiet time (last_wins) or throttle period (first_wins) `DUR` of --debounce-key")
	maxWait := durationFlag(fs, "debounce-max-wait", "last_wins: run no later than `DUR` after the first enqueue (default ten windows)")
	return func() (*errand.DebounceOpts, error) {
		if *key == "" {
			for _, name := range []string{"debounce-key", "debounce-mode", "debounce-window", "debounce-max-wait"} {
				if isSet(fs, name) {
					return nil, usagef("--%s needs a non-empty --debounce-key", name)
				}
			}
			return nil, nil
		}
		m, err := errandtype.ParseDebounceMode(*mode)
		if err != nil {
			return nil, flagInputError(err)
		}
		if !isSet(fs, "debounce-window") {
			return nil, usagef("--debounce-key needs --debounce-window, e.g. 5s")
		}
		return &errand.DebounceOpts{Key: *key, Mode: m, Window: *window, MaxWait: *maxWait}, nil
	}
}

// setStartBy sets opts.StartBy from --start-by or --start-within, the
// latter from this host's clock.
func setStartBy(fs *flag.FlagSet, opts *errand.EnqueueOpts, at string, within time.Duration) error {
	switch {
	case isSet(fs, "start-by") && isSet(fs, "start-within"):
		return usagef("give --start-by or --start-within, not both")
	case at != "":
		t, err := time.Parse(time.RFC3339, at)
		if err != nil {
			return usagef("--start-by %q is not an RFC 3339 time; write it like 2026-11-29T09:00:00Z", at)
		}
		opts.StartBy = t
	case isSet(fs, "start-within"):
		if within <= 0 {
			return usagef("--start-within %s is not positive; give a duration such as 10m", within)
		}
		opts.StartBy = time.Now().Add(within)
	}
	return nil
}

// idConflict says what to change of err, an *errand.IDConflictError, in
// the terms of a command: give a new id (idHow), or get the existing job,
// batch or workflow (optOut). Any other error is returned as it is.
func idConflict(err error, idHow, optOut string) error {
	var ice *errand.IDConflictError
	if !errors.As(err, &ice) {
		return err
	}
	return fmt.Errorf("%s id %q is taken by a different %s (%s differ); give a new %s for a new %s, or %s to get the existing one",
		ice.What, ice.ID, ice.What, strings.Join(ice.Fields, ", "), idHow, ice.What, optOut)
}

// flagInputError renames the field of a library's input error after the
// flag or argument that set it, so the message says what to change.
func flagInputError(err error) error {
	var ie *errandtype.InputError
	if errors.As(err, &ie) {
		if name, ok := enqueueFlags[ie.Field]; ok {
			return usagef("%s: %s", name, ie.Message)
		}
	}
	return err
}
