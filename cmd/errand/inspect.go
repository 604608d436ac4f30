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
	summary: "show a job, its error history, its steps, its replays and what happens next",
	detail: `
With --json, prints the job record with three more fields: "steps" (the
steps its durable handler recorded, in order), "replays_audit" (every
replay: operator, reason, prior state, time) and "next" (what happens
next, in words).`,
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
			steps, err := c.Steps(ctx, id)
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
			if s := errand.Suspension(steps); s != "" && j.State.Waiting() {
				next += "; " + s
			}
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
					Steps        []errandtype.Step         `json:"steps"`
					ReplaysAudit []errandtype.ReplayRecord `json:"replays_audit"`
					Next         string                    `json:"next"`
				}{j, steps, audit, next})
			}
			return writeInspect(e.stdout, j, steps, audit, next, now)
		}
	},
}

// writeInspect prints a job for a person to read. Every value from the
// database is escaped (see printable); error messages and stacks keep their
// line breaks.
func writeInspect(w io.Writer, j *errandtype.Job, steps []errandtype.Step, audit []errandtype.ReplayRecord, next string, now time.Time) error {
	fmt.Fprintf(w, "job %s\n", printable(j.ID))
	f := inspectFields{tw: tabwriter.NewWriter(w, 0, 0, 2, ' ', 0), now: now}
	f.run(j)
	f.keys(j)
	f.rest(j)
	if err := f.tw.Flush(); err != nil {
		return err
	}
	writeErrorHistory(w, j.Errors)
	writeSteps(w, steps)
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
	f.field("priority", priorityText(j))
	f.field("args", fmt.Sprintf("%s (version %d)", compactJSON(j.Args), j.ArgsVersion))
	f.field("created", f.when(&j.CreatedAt))
	f.field("available", f.when(&j.AvailableAt))
	f.field("attempted", f.when(j.AttemptedAt))
	f.field("finished", f.when(j.FinishedAt))
	f.field("deadline", f.when(j.Deadline))
	if j.StartBy != nil {
		f.field("start by", f.when(j.StartBy))
	}
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
	if j.DebounceKey != nil {
		f.field("debounce key", fmt.Sprintf("%s (absorbed %d enqueues)", *j.DebounceKey, j.Absorbed))
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
	if len(j.Metadata) > 0 {
		f.field("metadata", compactJSON(j.Metadata))
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

// maxStepShown bounds a step's result as errand inspect shows it: the
// --json form has all of it.
const maxStepShown = 200

// writeSteps writes the steps of a durable handler; nothing for a job
// without any.
func writeSteps(w io.Writer, steps []errandtype.Step) {
	if len(steps) == 0 {
		return
	}
	fmt.Fprintf(w, "\nsteps (%d):\n", len(steps))
	for _, s := range steps {
		what := compactJSON(s.Result)
		if s.Error != "" {
			what = "failed: " + s.Error
		}
		if len(what) > maxStepShown {
			what = fmt.Sprintf("%s... (%d bytes)", strings.ToValidUTF8(what[:maxStepShown], ""), len(what))
		}
		fmt.Fprintf(w, "  %d %s, attempt %d, at %s: %s\n", s.Index, printable(s.Name), s.Attempt, formatTime(s.At), printable(what))
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
	if kid, ok := errand.SealedKeyID(raw); ok {
		return "(encrypted with key " + kid + "; set " + codecKeysEnv + " to a file holding it to read it)"
	}
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

// nextSentence says in words what happens to the job next. Which step
// applies is errandtype.NextOf's to say; sentences words it.
func nextSentence(j *errandtype.Job, breaker *errandtype.BreakerRecord, now time.Time) string {
	n := sentenceOf{j: j, next: errandtype.NextOf(j, now)}
	n.at = func(t time.Time) string { return formatTime(t) + " (" + relative(now, t) + ")" }
	switch {
	case j.HeldBy != nil && j.OrderingKey != nil:
		n.held = fmt.Sprintf("held by job %s of ordering key %s (jobs of one key run one at a time, in order)",
			*j.HeldBy, *j.OrderingKey)
	case breaker != nil:
		n.held = breakerHeld(breaker, n.at, now)
	}
	s := sentences[n.next.Step](n)
	if j.Deadline != nil && j.State.Waiting() {
		s += "; expires (class " + j.DeadlineClass() + ") at " + n.at(*j.Deadline)
	}
	return s
}

// sentenceOf is what nextSentence says of one job: the job, its next step,
// how a time reads and what holds it back ("" for nothing: an ordering key
// or a circuit breaker).
type sentenceOf struct {
	j    *errandtype.Job
	next errandtype.Next
	at   func(time.Time) string
	held string
}

// sentences words each of errandtype.NextSteps for errand inspect. A job
// held back by a breaker is due by its own rules, so due words a hold too.
var sentences = map[errandtype.NextStep]func(sentenceOf) string{
	errandtype.NextScheduled: sentenceOf.scheduled,
	errandtype.NextHeld:      sentenceOf.due,
	errandtype.NextDue:       sentenceOf.due,
	errandtype.NextRunning: func(n sentenceOf) string {
		if n.j.LeaseUntil == nil {
			return "running under lease of " + n.next.Owner
		}
		return fmt.Sprintf("running attempt %d of %d under lease of %s until %s", n.next.Attempt, n.j.MaxAttempts, n.next.Owner, n.at(*n.j.LeaseUntil))
	},
	errandtype.NextCancelling: func(n sentenceOf) string {
		return fmt.Sprintf("cancel requested at %s: %s cancels the handler and ends the attempt cancelled", n.at(*n.j.CancelRequestedAt), n.next.Owner)
	},
	errandtype.NextSweepCancel: func(n sentenceOf) string {
		return fmt.Sprintf("cancel requested at %s, and its worker's lease expired at %s; the next claim or sweep cancels it", n.at(*n.j.CancelRequestedAt), n.at(*n.j.LeaseUntil))
	},
	errandtype.NextSweepRetry: func(n sentenceOf) string {
		return fmt.Sprintf("its worker's lease expired at %s; the next claim retries it", n.at(*n.j.LeaseUntil))
	},
	errandtype.NextSweepDead: func(n sentenceOf) string {
		return fmt.Sprintf("its worker's lease expired at %s on the final attempt; the next claim dead-letters it (class lease_expired)", n.at(*n.j.LeaseUntil))
	},
	errandtype.NextNever: func(n sentenceOf) string {
		s := string(n.j.State)
		if n.j.FinishedAt != nil {
			s += " at " + n.at(*n.j.FinishedAt)
		}
		return s + "; it will not run again"
	},
	errandtype.NextReplay: sentenceOf.replay,
	errandtype.NextUnknown: func(n sentenceOf) string {
		return "in unknown state " + string(n.j.State)
	},
}

// retrying is how a sentence about a retrying job starts: the attempt
// that failed and how; "" for any other job.
func (n sentenceOf) retrying() string {
	j := n.j
	if j.State != errandtype.StateRetrying {
		return ""
	}
	class := "error"
	if j.LastError != nil {
		class = j.LastError.Class
	}
	return fmt.Sprintf("retrying: attempt %d of %d failed with class %s; ", j.Attempt, j.MaxAttempts, class)
}

// scheduled is the sentence of a waiting job whose time has not come.
func (n sentenceOf) scheduled() string {
	if s := n.retrying(); s != "" {
		s += "runs again at " + n.at(n.j.AvailableAt)
		if n.held != "" {
			s += " at the earliest; " + n.held
		}
		return s
	}
	s := "scheduled for " + n.at(n.j.AvailableAt)
	if n.held != "" {
		s += "; " + n.held
	}
	return s
}

// due is the sentence of a waiting job whose time has come.
func (n sentenceOf) due() string {
	since := n.at(n.j.AvailableAt)
	if s := n.retrying(); s != "" {
		if n.held != "" {
			return s + n.held + "; due since " + since
		}
		return s + "runs again as soon as a worker claims it; due since " + since
	}
	if n.held != "" {
		return "queued: " + n.held + "; available since " + since
	}
	return "queued: waiting for a worker since " + since
}

// replay is the sentence of a finished job that only a replay runs again.
func (n sentenceOf) replay() string {
	j := n.j
	replay := "errand replay " + j.ID + " --reason \"...\""
	if j.State != errandtype.StateDead {
		return string(j.State) + ": will not run unless replayed: " + replay
	}
	s := "dead"
	if j.LastError != nil {
		s += fmt.Sprintf(" (class %s, attempt %d of %d)", j.LastError.Class, j.Attempt, j.MaxAttempts)
	}
	return s + ": will not run again unless replayed: " + replay
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

// priorityText is the job's priority, and the enqueued one once it aged.
func priorityText(j *errandtype.Job) string {
	if j.BasePriority != nil {
		return fmt.Sprintf("%d (aged from %d while waiting)", j.Priority, *j.BasePriority)
	}
	return fmt.Sprint(j.Priority)
}
