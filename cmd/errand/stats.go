package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandtype"
)

var statsCommand = &command{
	name:    "stats",
	args:    "[flags]",
	summary: "summarise each queue and kind: depth, throughput, failures, retries, dead letters, run and wait times",
	detail: `
A job held back by its ordering key, or by the open circuit breaker of its
kind's dependency, is not ready: it does not count in the oldest ready age.
Below the table, a line names each kind whose jobs wait in a queue that no
live worker handles (no alive worker runs the queue with a handler for the
kind): they will not run until one does, and a misspelt kind never will;
and a line each kind whose jobs a breaker holds back.

A second table has a row per queue and kind: jobs ready, scheduled,
retrying, held (by an ordering key or a breaker) and running; jobs finished (succeeded or
dead) per minute over the last 5 minutes; the failure rate and the retries
of the last hour; the dead letters and how many died in the last hour and
day; p50 and p99 run and wait times of the last hour's successes.

With --json, prints {"queues": [{"queue", "counts": {STATE: N},
"oldest_ready_age_seconds", "dead", "waiting_by_kind": {KIND: N},
"unhandled_kinds": [{"kind", "waiting"}], "breaker_held_kinds": [{"kind",
"dependency", "waiting"}], "kinds": [KIND_INSIGHTS]}]}, where KIND_INSIGHTS
is errand.KindInsights: {"queue", "kind", "ready", "scheduled", "retrying",
"held", "running", "held_by_breaker", "breaker", "oldest_ready_age_seconds",
"throughput_per_minute": {"last_1m", "last_5m", "last_1h"},
"succeeded_last_hour", "failed_last_hour", "failure_rate",
"failures_by_class": [{"class", "failures", "rate"}], "retries_last_hour",
"dead", "dead_last_hour", "dead_last_day", "run_time" and "wait_time":
{"samples", "p50_seconds", "p99_seconds"}}.`,
	setup: func(fs *flag.FlagSet, e *env) func(context.Context, []string) error {
		db := dbFlag(fs)
		asJSON := fs.Bool("json", false, "print the summary as one JSON object")

		return func(ctx context.Context, pos []string) error {
			if len(pos) > 0 {
				return usagef("unexpected argument %q; stats takes only flags", pos[0])
			}
			c, closeDB, err := openClient(ctx, *db, mustExist, &errand.Config{})
			if err != nil {
				return err
			}
			defer closeDB()
			stats, err := c.Stats(ctx)
			if err != nil {
				return err
			}
			if stats == nil {
				stats = []errandtype.QueueStats{}
			}
			ins, err := c.Insights(ctx, nil)
			if err != nil {
				return err
			}
			if *asJSON {
				// The oldest ready age is null, not 0, when no job
				// is ready (the table's "-").
				type kind struct {
					errand.KindInsights
					OldestReadyAgeSeconds *float64 `json:"oldest_ready_age_seconds"`
				}
				type queue struct {
					errandtype.QueueStats
					OldestReadyAgeSeconds *float64 `json:"oldest_ready_age_seconds"`
					Kinds                 []kind   `json:"kinds"`
				}
				age := func(s float64) *float64 {
					if s <= 0 {
						return nil
					}
					return &s
				}
				qs := make([]queue, len(stats))
				for i, q := range stats {
					qs[i] = queue{QueueStats: q, OldestReadyAgeSeconds: age(q.OldestReadyAgeSeconds), Kinds: []kind{}}
					for _, k := range ins.Kinds {
						if k.Queue == q.Queue {
							qs[i].Kinds = append(qs[i].Kinds, kind{KindInsights: k, OldestReadyAgeSeconds: age(k.OldestReadyAgeSeconds)})
						}
					}
				}
				return writeJSON(e.stdout, struct {
					Queues []queue `json:"queues"`
				}{qs})
			}
			if err := writeStatsTable(e.stdout, stats); err != nil {
				return err
			}
			return writeInsightsTable(e.stdout, ins)
		}
	},
}

func writeStatsTable(w io.Writer, stats []errandtype.QueueStats) error {
	if len(stats) == 0 {
		_, err := fmt.Fprintln(w, "no jobs")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprint(tw, "QUEUE")
	for _, st := range errandtype.JobStates {
		fmt.Fprintf(tw, "\t%s", strings.ToUpper(string(st)))
	}
	fmt.Fprintln(tw, "\tOLDEST READY")
	for _, q := range stats {
		fmt.Fprint(tw, printable(q.Queue))
		for _, st := range errandtype.JobStates {
			fmt.Fprintf(tw, "\t%d", q.Counts[st])
		}
		oldest := "-"
		if q.OldestReadyAgeSeconds > 0 {
			oldest = approx(time.Duration(q.OldestReadyAgeSeconds * float64(time.Second)))
		}
		fmt.Fprintf(tw, "\t%s\n", oldest)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, q := range stats {
		for _, k := range q.UnhandledKinds {
			jobs := "jobs"
			if k.Waiting == 1 {
				jobs = "job"
			}
			if _, err := fmt.Fprintf(w, "%d %s of kind %s in queue %s: no live worker handles this kind\n",
				k.Waiting, jobs, printable(k.Kind), printable(q.Queue)); err != nil {
				return err
			}
		}
		if p := q.Paused; p != nil {
			if _, err := fmt.Fprintf(w, "queue %s paused since %s by %s: %s\n",
				printable(q.Queue), formatTime(p.PausedAt), printable(p.Operator), printable(p.Reason)); err != nil {
				return err
			}
		}
		for _, k := range q.PausedKinds {
			jobs := "jobs"
			if k.Waiting == 1 {
				jobs = "job"
			}
			if _, err := fmt.Fprintf(w, "%d %s of kind %s in queue %s: the kind is paused\n",
				k.Waiting, jobs, printable(k.Kind), printable(q.Queue)); err != nil {
				return err
			}
		}
		for _, k := range q.BreakerHeldKinds {
			jobs := "jobs"
			if k.Waiting == 1 {
				jobs = "job"
			}
			if _, err := fmt.Fprintf(w, "%d %s of kind %s in queue %s: held by breaker %s\n",
				k.Waiting, jobs, printable(k.Kind), printable(q.Queue), printable(k.Dependency)); err != nil {
				return err
			}
		}
	}
	return nil
}

// writeInsightsTable prints a row of figures per queue and kind.
func writeInsightsTable(w io.Writer, ins *errand.Insights) error {
	if len(ins.Kinds) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "QUEUE\tKIND\tREADY\tSCHEDULED\tRETRYING\tHELD\tRUNNING\tDONE/MIN(5M)\tFAILED(1H)\tRETRIES(1H)\tDEAD\t+1H\t+1D\tRUN P50/P99\tWAIT P50/P99")
	for _, k := range ins.Kinds {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%.1f\t%s\t%d\t%d\t%d\t%d\t%s\t%s\n",
			printable(k.Queue), printable(k.Kind), k.Ready, k.Scheduled, k.Retrying, k.Held+k.HeldByBreaker, k.Running,
			k.Throughput.Last5m, failedCell(k), k.RetriesLastHour, k.Dead, k.DeadLastHour, k.DeadLastDay,
			percentileCell(k.RunTime), percentileCell(k.WaitTime))
	}
	return tw.Flush()
}

// failedCell is the failed attempts of the last hour, their rate, and the
// most frequent class.
func failedCell(k errand.KindInsights) string {
	if k.FailedLastHour == 0 {
		return "0"
	}
	return fmt.Sprintf("%d (%.0f%%, %s)", k.FailedLastHour, k.FailureRate*100, printable(k.FailuresByClass[0].Class))
}

func percentileCell(p errand.Percentiles) string {
	if p.Samples == 0 {
		return "-"
	}
	d := func(s float64) string { return approx(time.Duration(s * float64(time.Second))) }
	return d(p.P50Seconds) + "/" + d(p.P99Seconds)
}
