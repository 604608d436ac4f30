package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandtype"
)

var inspectCommand = &command{
	name:    "inspect",
	args:    "ID [flags]",
	summary: "show a job, its error history, its replays and what happens next",
	detail: `
With --json, prints the job record with two more fields: "replays_audit"
(every replay: operator, reason, prior state, time) and "next" (what
happens next, in words).`,
	setup: func(fs *flag.FlagSet, e *env) func(context.Context, []string) error {
		db := dbFlag(fs)
		asJSON := fs.Bool("json", false, "print the job record, replays_audit and next as one JSON object")

		return func(ctx context.Context, pos []string) error {
			id, err := onePositional(pos, "id", "inspect")
			if err != nil {
				return err
			}
			c, closeDB, err := openClient(ctx, *db, mustExist, &errand.Config{})
			if err != nil {
				return err
			}
			defer closeDB()
			j, err := c.Get(ctx, id)
			if err != nil {
				return jobError(id, err)
			}
			audit, err := c.ReplayAudit(ctx, id)
			if err != nil {
				return err
			}
			now, err := c.Store().Now(ctx)
			if err != nil {
				return err
			}
			var breaker *errandtype.BreakerRecord
			if j.HeldByBreaker != nil {
				h, err := c.BreakerHolds(ctx)
				if err != nil {
					return err
				}
				breaker = h.HeldBy(j.Kind)
			}
			next := nextSentence(j, breaker, now)
			if j.State.Waiting() {
				ws, err := c.Workers(ctx)
				if err != nil {
					return err
				}
				if !errand.KindHandled(ws, j.Queue, j.Kind) {
					next = unhandledSentence(j, next)
				}
			}
			if *asJSON {
				return writeJSON(e.stdout, struct {
					*errandtype.Job
					ReplaysAudit []errandtype.ReplayRecord `json:"replays_audit"`
					Next         string                    `json:"next"`
				}{j, audit, next})
			}
			return writeInspect(e.stdout, j, audit, next, now)
		}
	},
}

// writeInspect prints a job for a person to read. Every value from the
// database is escaped (see printable); error messages and stacks keep their
// line breaks.
func writeInspect(w io.Writer, j *errandtype.Job, audit []errandtype.ReplayRecord, next string, now time.Time) error {
	fmt.Fprintf(w, "job %s\n", printable(j.ID))
	f := inspectFields{tw: tabwriter.NewWriter(w, 0, 0, 2, ' ', 0), now: now}
	f.run(j)
	f.keys(j)
	f.rest(j)
	if err := f.tw.Flush(); err != nil {
		return err
	}
	writeErrorHistory(w, j.Errors)
	writeReplays(w, audit)
	_, err := fmt.Fprintf(w, "\nnext: %s\n", printable(next))
	return err
}

// inspectFields writes the fields of errand inspect, one a line, aligned.
type inspectFields struct {
	tw  *tabwriter.Writer
	now time.Time
}

func (f inspectFields) field(name, value string) {
	fmt.Fprintf(f.tw, "  %s\t%s\n", name, printable(value))
}

// when is t with how long ago or ahead it is; "-" for none.
func (f inspectFields) when(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return formatTime(*t) + " (" + relative(f.now, *t) + ")"
}

func optString(s *string) string {
	if s == nil {
		return "-"
	}
	return *s
}

// run writes what the job runs and when: kind, queue, state, attempts,
// args, times, backoff and lease.
func (f inspectFields) run(j *errandtype.Job) {
	f.field("kind", j.Kind)
	f.field("queue", j.Queue)
	f.field("state", string(j.State))
	f.field("attempt", fmt.Sprintf("%d of %d", j.Attempt, j.MaxAttempts))
	f.field("replays", fmt.Sprint(j.Replays))
	f.field("priority", fmt.Sprint(j.Priority))
	f.field("args", fmt.Sprintf("%s (version %d)", compactJSON(j.Args), j.ArgsVersion))
	f.field("created", f.when(&j.CreatedAt))
	f.field("available", f.when(&j.AvailableAt))
	f.field("attempted", f.when(j.AttemptedAt))
	f.field("finished", f.when(j.FinishedAt))
	f.field("deadline", f.when(j.Deadline))
	if j.BackoffBase != 0 || j.BackoffMax != 0 {
		f.field("backoff", fmt.Sprintf("base %s, max %s", orDefault(j.BackoffBase), orDefault(j.BackoffMax)))
	}
	if j.State == errandtype.StateRunning {
		f.field("lease owner", optString(j.LeaseOwner))
		f.field("lease until", f.when(j.LeaseUntil))
	} else if j.LeaseOwner != nil {
		f.field("last worker", *j.LeaseOwner)
	}
}

// keys writes the job's unique, ordering and fairness keys and what holds
// it back.
func (f inspectFields) keys(j *errandtype.Job) {
	f.field("unique key", optString(j.UniqueKey))
	if j.UniqueScope != nil {
		f.field("unique scope", j.UniqueScope.String())
	}
	if j.UniqueWindowStart != nil {
		f.field("unique window", "from "+f.when(j.UniqueWindowStart))
	}
	if j.OrderingKey != nil {
		ordering := *j.OrderingKey
		if j.OrderingHold {
			ordering += " (held while dead, until replayed or cancelled)"
		}
		f.field("ordering key", ordering)
	}
	if j.FairnessKey != nil {
		f.field("fairness key", *j.FairnessKey)
	}
	if j.HeldBy != nil {
		f.field("held by", *j.HeldBy)
	}
}

// rest writes the optional rest: batch, workflow, output, progress, a
// cancel request and tags.
func (f inspectFields) rest(j *errandtype.Job) {
	if j.BatchID != nil {
		f.field("batch", *j.BatchID+" (errand batch "+*j.BatchID+")")
	}
	if j.WorkflowID != nil {
		f.field("workflow", *j.WorkflowID+" (errand workflow "+*j.WorkflowID+")")
	}
	if len(j.Output) > 0 {
		f.field("output", compactJSON(j.Output))
	}
	if len(j.Progress) > 0 {
		f.field("progress", compactJSON(j.Progress))
	}
	if j.CancelRequestedAt != nil {
		f.field("cancel requested", f.when(j.CancelRequestedAt))
	}
	if len(j.Tags) > 0 {
		f.field("tags", strings.Join(j.Tags, ", "))
	}
}

// writeErrorHistory writes every attempt's error; messages and stacks
// keep their line breaks.
func writeErrorHistory(w io.Writer, errs []errandtype.AttemptError) {
	fmt.Fprintf(w, "\nerrors (%d):\n", len(errs))
	if len(errs) == 0 {
		fmt.Fprintln(w, "  none")
	}
	for _, e := range errs {
		fmt.Fprintf(w, "  attempt %d, replay %d, at %s: %s\n", e.Attempt, e.Replay, formatTime(e.At), printable(e.Class))
		fmt.Fprint(w, indent(printableLines(e.Message), "      "))
		if e.Stack != "" {
			fmt.Fprintln(w, "    stack:")
			fmt.Fprint(w, indent(printableLines(e.Stack), "      "))
		}
	}
}

// writeReplays writes the job's replay audit.
func writeReplays(w io.Writer, audit []errandtype.ReplayRecord) {
	fmt.Fprintf(w, "\nreplays (%d):\n", len(audit))
	if len(audit) == 0 {
		fmt.Fprintln(w, "  none")
	}
	for _, r := range audit {
		fmt.Fprintf(w, "  replay %d at %s by %s, from %s: %s\n", r.Replay, formatTime(r.At),
			printable(r.Operator), printable(string(r.PriorState)), printable(r.Reason))
	}
}

// compactJSON drops a JSON document's insignificant whitespace, so that one
// written over several lines reads on one.
func compactJSON(raw []byte) string {
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return string(raw)
	}
	return b.String()
}

func orDefault(d errandtype.Duration) string {
	if d == 0 {
		return "default"
	}
	return time.Duration(d).String()
}

func indent(s, prefix string) string {
	s = strings.TrimRight(s, "\n")
	if s == "" {
		return ""
	}
	return prefix + strings.ReplaceAll(s, "\n", "\n"+prefix) + "\n"
}

// unhandledSentence is next for a waiting job whose kind no live worker
// handles in its queue: it says so instead of "waiting for a worker", and
// after what would happen once a worker does.
func unhandledSentence(j *errandtype.Job, next string) string {
	nobody := fmt.Sprintf("no live worker handles kind %s in queue %s, so it waits until one does (a misspelt kind waits forever)",
		j.Kind, j.Queue)
	if rest, ok := strings.CutPrefix(next, "queued: waiting for a worker since "); ok {
		return "queued since " + rest + ", but " + nobody
	}
	return next + "; but " + nobody
}

// nextSentence says in words what happens to the job next.
func nextSentence(j *errandtype.Job, breaker *errandtype.BreakerRecord, now time.Time) string {
	at := func(t time.Time) string { return formatTime(t) + " (" + relative(now, t) + ")" }
	held := ""
	switch {
	case j.HeldBy != nil && j.OrderingKey != nil:
		held = fmt.Sprintf("held by job %s of ordering key %s (jobs of one key run one at a time, in order)",
			*j.HeldBy, *j.OrderingKey)
	case breaker != nil:
		held = breakerHeld(breaker, at, now)
	}
	var s string
	switch j.State {
	case errandtype.StateQueued:
		s = queuedSentence(j, held, at, now)
	case errandtype.StateRetrying:
		s = retryingSentence(j, held, at, now)
	case errandtype.StateRunning:
		s = runningSentence(j, at, now)
	default:
		s = finishedSentence(j, at)
	}
	if j.Deadline != nil && j.State.Waiting() {
		s += "; expires (class expired) at " + at(*j.Deadline)
	}
	return s
}

// queuedSentence is nextSentence for a queued job; held says what holds
// it back, if anything.
func queuedSentence(j *errandtype.Job, held string, at func(time.Time) string, now time.Time) string {
	switch {
	case j.AvailableAt.After(now):
		s := "scheduled for " + at(j.AvailableAt)
		if held != "" {
			s += "; " + held
		}
		return s
	case held != "":
		return "queued: " + held + "; available since " + at(j.AvailableAt)
	default:
		return "queued: waiting for a worker since " + at(j.AvailableAt)
	}
}

// retryingSentence is nextSentence for a job waiting out its backoff.
func retryingSentence(j *errandtype.Job, held string, at func(time.Time) string, now time.Time) string {
	class := "error"
	if j.LastError != nil {
		class = j.LastError.Class
	}
	s := fmt.Sprintf("retrying: attempt %d of %d failed with class %s; ", j.Attempt, j.MaxAttempts, class)
	switch {
	case j.AvailableAt.After(now):
		s += "runs again at " + at(j.AvailableAt)
		if held != "" {
			s += " at the earliest; " + held
		}
	case held != "":
		s += held + "; due since " + at(j.AvailableAt)
	default:
		s += "runs again as soon as a worker claims it; due since " + at(j.AvailableAt)
	}
	return s
}

// runningSentence is nextSentence for a running job: its lease, or what
// happens now that the lease has expired.
func runningSentence(j *errandtype.Job, at func(time.Time) string, now time.Time) string {
	owner := "an unnamed worker"
	if j.LeaseOwner != nil {
		owner = *j.LeaseOwner
	}
	switch {
	case j.CancelRequestedAt != nil && (j.LeaseUntil == nil || j.LeaseUntil.After(now)):
		return fmt.Sprintf("cancel requested at %s: %s cancels the handler and ends the attempt cancelled", at(*j.CancelRequestedAt), owner)
	case j.CancelRequestedAt != nil:
		return fmt.Sprintf("cancel requested at %s, and its worker's lease expired at %s; the next claim or sweep cancels it", at(*j.CancelRequestedAt), at(*j.LeaseUntil))
	case j.LeaseUntil == nil:
		return "running under lease of " + owner
	case j.LeaseUntil.After(now):
		return fmt.Sprintf("running attempt %d of %d under lease of %s until %s", j.Attempt, j.MaxAttempts, owner, at(*j.LeaseUntil))
	case j.Attempt >= j.MaxAttempts:
		return fmt.Sprintf("its worker's lease expired at %s on the final attempt; the next claim dead-letters it (class lease_expired)", at(*j.LeaseUntil))
	default:
		return fmt.Sprintf("its worker's lease expired at %s; the next claim retries it", at(*j.LeaseUntil))
	}
}

// finishedSentence is nextSentence for a job in a terminal state (or one
// this binary does not know).
func finishedSentence(j *errandtype.Job, at func(time.Time) string) string {
	replay := "errand replay " + j.ID + " --reason \"...\""
	switch j.State {
	case errandtype.StateSucceeded:
		s := "succeeded"
		if j.FinishedAt != nil {
			s += " at " + at(*j.FinishedAt)
		}
		return s + "; it will not run again"
	case errandtype.StateDead:
		s := "dead"
		if j.LastError != nil {
			s += fmt.Sprintf(" (class %s, attempt %d of %d)", j.LastError.Class, j.Attempt, j.MaxAttempts)
		}
		return s + ": will not run again unless replayed: " + replay
	case errandtype.StateCancelled:
		return "cancelled: will not run unless replayed: " + replay
	default:
		return "in unknown state " + string(j.State)
	}
}

// breakerHeld says how the open or half-open circuit breaker b holds a
// job back.
func breakerHeld(b *errandtype.BreakerRecord, at func(time.Time) string, now time.Time) string {
	dep := printable(b.Dependency)
	switch {
	case b.State == errandtype.BreakerHalfOpen:
		return "held by breaker " + dep + " (half-open: it runs once a probe job succeeds)"
	case b.OpenUntil != nil && b.OpenUntil.After(now):
		return "held by breaker " + dep + " (open until " + at(*b.OpenUntil) + ", then a probe job tests " + dep + ")"
	}
	return "held by breaker " + dep + " (open, cool-down over: it runs once a probe job succeeds)"
}
