package main

import (
	"context"
	"database/sql"
	"flag"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandhttp"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
)

var batchesCommand = &command{
	name:    "batches",
	args:    "[--state open|completed] [--limit N] [--before ID] [--json]",
	summary: "list batches, newest first: members by outcome, completion, callback job",
	detail: `
A batch is jobs enqueued together (errand.Client.EnqueueBatch, POST
/api/v1/batches, or errand batch enqueue) whose callback job is enqueued
once every member has finished. A batch is open until then, completed
after. errand batch ID shows one.

The table shows each batch's members now: SUCCEEDED, DEAD, CANCELLED and
PENDING (queued, running or retrying), when it was created and completed,
and its callback job (its id once enqueued; the kind it will have while the
batch is open; - for none).

To page, pass the id of the last batch printed as --before.

With --json, prints one JSON array of batches ([] when none match), each as
errand batch ID --json prints it.`,
	setup: func(fs *flag.FlagSet, e *env) func(context.Context, []string) error {
		db := dbFlag(fs)
		state := fs.String("state", "", "only batches in `STATE`: open or completed")
		limit := intFlag(fs, "limit", 100, "at most `N` batches (default 100)")
		before := fs.String("before", "", "only batches listed after batch `ID`, the last of the previous page")
		asJSON := fs.Bool("json", false, "print a JSON array of batches")

		return func(ctx context.Context, pos []string) error {
			if len(pos) > 0 {
				return usagef("unexpected argument %q; errand batch ID shows one batch", pos[0])
			}
			if *limit < 1 {
				return usagef("--limit must be at least 1")
			}
			p := &errandstore.BatchListParams{Limit: *limit}
			if *state != "" {
				st, err := errand.ParseBatchState(*state)
				if err != nil {
					return usagef("--state: %q is not a batch state; use open or completed", *state)
				}
				p.State = st
			}
			c, closeDB, err := openClient(ctx, *db, mustExist, &errand.Config{})
			if err != nil {
				return err
			}
			defer closeDB()
			if p.Before, err = beforeCursor(ctx, "batch", *before, func(ctx context.Context, id string) (time.Time, error) {
				b, err := c.Batch(ctx, id)
				if err != nil {
					return time.Time{}, err
				}
				return b.CreatedAt, nil
			}); err != nil {
				return err
			}
			bs, err := c.Batches(ctx, p)
			if err != nil {
				return err
			}
			if err := printList(ctx, e, c.Store(), bs, *asJSON, "batches", writeBatchesTable); err != nil || *asJSON {
				return err
			}
			if len(bs) == *limit {
				e.logger.Info("more batches may match; for the next page pass --before with the last id", "limit", *limit, "before", bs[len(bs)-1].ID)
			}
			return nil
		}
	},
}

// writeBatchesTable prints one line a batch.
func writeBatchesTable(w io.Writer, bs []*errandstore.Batch, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tTOTAL\tSUCCEEDED\tDEAD\tCANCELLED\tPENDING\tCREATED\tCOMPLETED\tCALLBACK JOB")
	for _, b := range bs {
		completed := "-"
		if b.CompletedAt != nil {
			completed = relative(now, *b.CompletedAt)
		}
		callback := "-"
		switch {
		case b.CallbackJobID != nil:
			callback = *b.CallbackJobID
		case b.Callback != nil:
			callback = b.Callback.Kind + " (when completed)"
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t%s\n", printable(b.ID), b.Total,
			b.Counts[errandtype.StateSucceeded], b.Counts[errandtype.StateDead], b.Counts[errandtype.StateCancelled], b.Pending(),
			relative(now, b.CreatedAt), completed, printable(callback))
	}
	return tw.Flush()
}

var batchCommand = &command{
	name:    "batch",
	args:    "ID [--json] | enqueue --file FILE.json [--json]",
	summary: "show a batch: its members' states, its completion and its callback job; or enqueue one from JSON",
	detail: `
A batch is jobs enqueued together (errand.Client.EnqueueBatch) whose
callback job is enqueued once, when every member has finished: succeeded,
dead or cancelled. The callback's args carry the final counts in their
field "batch". A batch completes once: a member replayed afterwards is
counted in its new state under "now" but changes neither the final counts
nor the callback.

With --json, prints the batch record: {"id", "total", "counts": {STATE: N},
"callback": {"kind", "queue", "args", "args_version", "priority",
"max_attempts", "backoff_base", "backoff_max", "max_age", "delay",
"ordering_key", "ordering_hold", "fairness_key", "tags"} or null,
"callback_job_id", "created_at", "completed_at", "final": {"id", "total",
"succeeded", "dead", "cancelled", "completed_at"} or null}, times RFC 3339
in UTC, durations in Go syntax, unset fields null. errand batches lists
them.

errand batch enqueue --file FILE.json enqueues a batch (FILE - reads
standard input), written as POST /api/v1/batches takes it:

  {"id": "import-7", "jobs": [
    {"kind": "import_row", "args": {"row": 1}},
    {"kind": "import_row", "args": {"row": 2}, "queue": "imports"}],
   "callback": {"kind": "import_done", "args": {"import": 7}}}

A job takes the fields of errand enqueue's JSON (POST /api/v1/jobs): id,
kind, args, queue, priority, run_at, delay, max_attempts, max_age,
unique_key, unique_scope, unique_window, ordering_key, ordering_on_dead,
fairness_key and tags; the callback the same but id, run_at and the unique
fields, and its args must be a JSON object. A batch whose id exists is not
enqueued again: errand prints its id and exits 0. It prints the batch's id,
or with --json {"batch", "jobs", "duplicate"}.`,
	setup: func(fs *flag.FlagSet, e *env) func(context.Context, []string) error {
		db := dbFlag(fs)
		asJSON := fs.Bool("json", false, "print the batch record as one JSON object")
		file := fs.String("file", "", "with enqueue: the batch to enqueue, a JSON `FILE` (- for standard input)")

		return func(ctx context.Context, pos []string) error {
			if len(pos) > 0 && pos[0] == "enqueue" {
				return enqueueBatch(ctx, e, *db, pos[1:], *file, *asJSON)
			}
			if *file != "" {
				return usagef("--file goes with enqueue: errand batch enqueue --file FILE.json")
			}
			id, err := onePositional(pos, "id", "batch")
			if err != nil {
				return err
			}
			return showByID(ctx, e, *db, id, "batch", *asJSON, (*errand.Client[*sql.Tx]).Batch,
				func(b *errandstore.Batch) any { return b },
				func(b *errandstore.Batch, now time.Time) error { return writeBatch(e, b, now) })
		}
	},
}

// enqueueBatch is errand batch enqueue --file FILE.
func enqueueBatch(ctx context.Context, e *env, db string, pos []string, file string, asJSON bool) error {
	var req errandhttp.BatchRequest
	var params []errand.EnqueueParams
	var opts *errand.BatchOpts
	var res *errandstore.BatchInsertResult
	err := enqueueFile(ctx, db, pos, file, "batch", "/api/v1/batches", &req,
		func() (err error) {
			if params, opts, err = req.Batch(); err != nil {
				return err
			}
			return errand.CheckEnqueueBatch(params, opts)
		},
		func(c *errand.Client[*sql.Tx]) (err error) {
			res, err = c.EnqueueBatch(ctx, params, opts)
			return err
		})
	if err != nil {
		return err
	}
	if res.Duplicate {
		e.logger.Info("batch already exists; not enqueued again", "id", res.Batch.ID, "total", res.Batch.Total)
	}
	if asJSON {
		return writeJSON(e.stdout, struct {
			Batch     *errandstore.Batch `json:"batch"`
			Jobs      []*errandtype.Job  `json:"jobs"`
			Duplicate bool               `json:"duplicate"`
		}{res.Batch, orEmpty(res.Jobs), res.Duplicate})
	}
	_, err = fmt.Fprintln(e.stdout, printable(res.Batch.ID))
	return err
}

func writeBatch(e *env, b *errandstore.Batch, now time.Time) error {
	w := e.stdout
	fmt.Fprintf(w, "batch %s\n", printable(b.ID))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	field := func(name, value string) { fmt.Fprintf(tw, "  %s\t%s\n", name, printable(value)) }
	field("jobs", fmt.Sprint(b.Total))
	field("created", formatTime(b.CreatedAt)+" ("+relative(now, b.CreatedAt)+")")
	nowCounts := ""
	for _, st := range errandtype.JobStates {
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
		field("callback", fmt.Sprintf("%s in %s, enqueued as %s when the batch completes", b.Callback.Kind, b.Callback.Queue, errandstore.BatchCallbackJobID(b.ID)))
	}
	return tw.Flush()
}
