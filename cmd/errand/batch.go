package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/errandhq/errand"
)

var batchCommand = &command{
	name:    "batch",
	args:    "ID [--json]",
	summary: "show a batch: its members' states, its completion and its callback job",
	detail: `
A batch is jobs enqueued together (errand.Client.EnqueueBatch) whose
callback job is enqueued once, when every member has finished: succeeded,
dead or cancelled. The callback's args carry the final counts in their
field "batch". A batch completes once: a member replayed afterwards is
counted in its new state under "now" but changes neither the final counts
nor the callback.

With --json, prints the batch record: {"id", "total", "counts": {STATE: N},
"callback": {"kind", "queue", "args", ...} or null, "callback_job_id",
"created_at", "completed_at", "final": {"id", "total", "succeeded", "dead",
"cancelled", "completed_at"} or null}, times RFC 3339 in UTC.`,
	setup: func(fs *flag.FlagSet, e *env) func(context.Context, []string) error {
		db := dbFlag(fs)
		asJSON := fs.Bool("json", false, "print the batch record as one JSON object")

		return func(ctx context.Context, pos []string) error {
			id, err := onePositional(pos, "id", "batch")
			if err != nil {
				return err
			}
			c, closeDB, err := openClient(ctx, *db, mustExist, &errand.Config{})
			if err != nil {
				return err
			}
			defer closeDB()
			b, err := c.Batch(ctx, id)
			if errors.Is(err, errand.ErrNotFound) {
				return fmt.Errorf("no batch with id %s", id)
			}
			if err != nil {
				return err
			}
			if *asJSON {
				return writeJSON(e.stdout, b)
			}
			now, err := c.Store().Now(ctx)
			if err != nil {
				return err
			}
			return writeBatch(e, b, now)
		}
	},
}

func writeBatch(e *env, b *errand.Batch, now time.Time) error {
	w := e.stdout
	fmt.Fprintf(w, "batch %s\n", printable(b.ID))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	field := func(name, value string) { fmt.Fprintf(tw, "  %s\t%s\n", name, printable(value)) }
	field("jobs", fmt.Sprint(b.Total))
	field("created", formatTime(b.CreatedAt)+" ("+relative(now, b.CreatedAt)+")")
	nowCounts := ""
	for _, st := range errand.JobStates {
		if n := b.Counts[st]; n > 0 {
			if nowCounts != "" {
				nowCounts += ", "
			}
			nowCounts += fmt.Sprintf("%d %s", n, st)
		}
	}
	if nowCounts == "" {
		nowCounts = "no members left (deleted by retention)"
	}
	field("now", nowCounts)
	if b.CompletedAt == nil {
		field("completed", fmt.Sprintf("no: %d of %d members unfinished", b.Pending(), b.Total))
	} else {
		field("completed", formatTime(*b.CompletedAt)+" ("+relative(now, *b.CompletedAt)+")")
		field("final", fmt.Sprintf("%d succeeded, %d dead, %d cancelled", b.Final.Succeeded, b.Final.Dead, b.Final.Cancelled))
	}
	switch {
	case b.Callback == nil:
		field("callback", "-")
	case b.CallbackJobID != nil:
		field("callback", fmt.Sprintf("%s in %s: job %s (errand inspect %s)", b.Callback.Kind, b.Callback.Queue, *b.CallbackJobID, *b.CallbackJobID))
	default:
		field("callback", fmt.Sprintf("%s in %s, enqueued as %s when the batch completes", b.Callback.Kind, b.Callback.Queue, errand.BatchCallbackJobID(b.ID)))
	}
	return tw.Flush()
}
