package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandtype"
)

// Defaults of errand bench.
const (
	defaultBenchJobs    = 10000
	defaultBenchWorkers = 100
	defaultBenchSamples = 200
	// maxBenchSamples bounds the latency measure: one enqueue after
	// another, each waited for, and a buffer of a sample each.
	maxBenchSamples = 1000000
	// benchBatch is how many jobs one EnqueueMany call inserts.
	benchBatch = 1000
	// benchStall is how long the work measure waits without a single
	// completion before it gives up.
	benchStall = 30 * time.Second
)

var benchCommand = &command{
	name:    "bench",
	args:    "[--jobs N] [--workers W] [--samples S] [--args JSON] [--delete-on-success] [--json]",
	summary: "measure enqueue and work throughput, start latency and memory on a database",
	detail: `
The benchmark enqueues --jobs no-op jobs in calls of ` + strconv.Itoa(benchBatch) + ` (enqueue_per_sec),
then starts a worker in this process that runs them with --workers at once
and times it until every outcome is recorded (work_per_sec). Then, with the
worker idle, it enqueues --samples jobs one at a time and measures each
from just before the enqueue to the start of its handler (latency_p50_ms,
latency_p99_ms; --samples 0 skips this). peak_rss_bytes is this process's
peak resident memory (Linux only; null elsewhere).

Every job's args are {} or the JSON object --args gives, to measure args
like yours (their size, and what an index on them costs each write).

Its jobs go to a queue of their own, errand_bench_ and a random suffix, of
kind errand_bench_noop, so it never claims other jobs; they stay in the
database as succeeded jobs, or, with --delete-on-success, are deleted as
they succeed (docs/retention.md): the cheaper acknowledgment, measured.
While it runs, its worker is one of the
cluster's like any other (it may lead); afterwards the worker registry
shows it stopped until a leader prunes it a day later. Point --db at a
scratch database, or at a copy of yours to measure it. Like enqueue and
work, it creates and migrates the database.

With --json, prints {"store", "queue", "jobs", "workers", "samples",
"delete_on_success", "enqueue_per_sec", "work_per_sec", "latency_p50_ms", "latency_p99_ms",
"peak_rss_bytes", "dropped_events"}.`,
	setup: func(fs *flag.FlagSet, e *env) func(context.Context, []string) error {
		db := dbFlag(fs)
		jobs := intFlag(fs, "jobs", defaultBenchJobs, "enqueue and work `N` no-op jobs (default "+strconv.Itoa(defaultBenchJobs)+")")
		workers := intFlag(fs, "workers", defaultBenchWorkers, "run at most `W` jobs at once, the queue's concurrency (default "+strconv.Itoa(defaultBenchWorkers)+")")
		samples := intFlag(fs, "samples", defaultBenchSamples, "measure start latency over `S` single enqueues; 0 skips it (default "+strconv.Itoa(defaultBenchSamples)+")")
		argsJSON := fs.String("args", "", "give every job these args, a `JSON` object, e.g. '{\"user_id\":42}' (default {})")
		deleting := fs.Bool("delete-on-success", false, "delete each job as it succeeds instead of keeping it (KindOpts.DeleteOnSuccess)")
		asJSON := fs.Bool("json", false, "print the results as one JSON object")

		return func(ctx context.Context, pos []string) error {
			if len(pos) > 0 {
				return usagef("unexpected argument %q; bench takes only flags", pos[0])
			}
			if *jobs < 1 {
				return usagef("--jobs %d: give at least 1, e.g. --jobs %d", *jobs, defaultBenchJobs)
			}
			if *workers < 1 || *workers > errand.MaxConcurrency {
				return usagef("--workers %d: give 1 to %d, e.g. --workers %d", *workers, errand.MaxConcurrency, defaultBenchWorkers)
			}
			if *samples < 0 || *samples > maxBenchSamples {
				return usagef("--samples %d: give 0 to skip the latency measure, or up to %d, e.g. --samples %d", *samples, maxBenchSamples, defaultBenchSamples)
			}
			var extra map[string]json.RawMessage
			if *argsJSON != "" {
				if err := json.Unmarshal([]byte(*argsJSON), &extra); err != nil || extra == nil {
					return usagef("--args %q is not a JSON object; give one, e.g. --args '{\"user_id\":42}'", *argsJSON)
				}
			}
			b := &benchRun{
				extra:    extra,
				queue:    "errand_bench_" + randomSuffix(),
				jobs:     *jobs,
				workers:  *workers,
				samples:  *samples,
				deleting: *deleting,
				started:  make(chan time.Duration, *samples+1),
				e:        e,
			}
			// The library logs every job's outcome at Info: thousands of
			// lines that would slow what they describe. Warnings still show.
			quiet := slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
			c, closeDB, err := openClient(ctx, *db, mayCreate, &errand.Config{Kinds: b.kinds(), Logger: quiet})
			if err != nil {
				return err
			}
			defer closeDB()
			res, err := b.run(ctx, c)
			if err != nil {
				return err
			}
			res.Store = "sqlite"
			if isPostgres(dbPath(*db)) {
				res.Store = "postgres"
			}
			if *asJSON {
				return writeJSON(e.stdout, res)
			}
			return writeBenchTable(e, res)
		}
	},
}

// benchResult is what errand bench reports.
type benchResult struct {
	Store   string `json:"store"`
	Queue   string `json:"queue"`
	Jobs    int    `json:"jobs"`
	Workers int    `json:"workers"`
	Samples int    `json:"samples"`
	// DeleteOnSuccess: the jobs were deleted as they succeeded.
	DeleteOnSuccess bool     `json:"delete_on_success"`
	EnqueuePerSec   float64  `json:"enqueue_per_sec"`
	WorkPerSec      float64  `json:"work_per_sec"`
	LatencyP50MS    *float64 `json:"latency_p50_ms"`
	LatencyP99MS    *float64 `json:"latency_p99_ms"`
	PeakRSSBytes    *int64   `json:"peak_rss_bytes"`
	// DroppedEvents counts outcome events the measure missed because it
	// fell behind; it counts them as completions all the same.
	DroppedEvents int64 `json:"dropped_events"`
}

// benchArgs is the benchmark's no-op job. EnqueuedAt, set only on the
// latency measure's jobs, is the wall clock just before the enqueue, in
// nanoseconds since the epoch.
type benchArgs struct {
	EnqueuedAt int64 `json:"enqueued_at,omitempty"`
	// extra are --args' fields, written beside EnqueuedAt.
	extra map[string]json.RawMessage
}

func (a benchArgs) MarshalJSON() ([]byte, error) {
	if a.EnqueuedAt == 0 && a.extra == nil {
		return []byte("{}"), nil
	}
	m := make(map[string]any, len(a.extra)+1)
	for k, v := range a.extra {
		m[k] = v
	}
	if a.EnqueuedAt != 0 {
		m["enqueued_at"] = a.EnqueuedAt
	}
	return json.Marshal(m)
}

func (benchArgs) Kind() string { return "errand_bench_noop" }

// benchRun is one run of errand bench.
type benchRun struct {
	queue                  string
	jobs, workers, samples int
	deleting               bool                       // --delete-on-success
	extra                  map[string]json.RawMessage // --args
	// started receives each latency job's delay from enqueue to the start
	// of its handler.
	started chan time.Duration
	e       *env
}

func (b *benchRun) kinds() *errand.Kinds {
	kinds := errand.NewKinds()
	errand.Handle(kinds, func(ctx context.Context, job *errandtype.Job, args benchArgs) error {
		if args.EnqueuedAt != 0 {
			select {
			case b.started <- time.Since(time.Unix(0, args.EnqueuedAt)):
			default: // never block the worker; the measure has given up
			}
		}
		return nil
	}, &errand.KindOpts{DeleteOnSuccess: b.deleting})
	return kinds
}

func (b *benchRun) run(ctx context.Context, c *errand.Client[*sql.Tx]) (*benchResult, error) {
	res := &benchResult{Queue: b.queue, Jobs: b.jobs, Workers: b.workers, Samples: b.samples, DeleteOnSuccess: b.deleting}
	opts := &errand.EnqueueOpts{Queue: b.queue}

	b.e.logger.Info("enqueueing", "jobs", b.jobs, "queue", b.queue)
	start := time.Now()
	for done := 0; done < b.jobs; done += benchBatch {
		params := make([]errand.EnqueueParams, min(benchBatch, b.jobs-done))
		for i := range params {
			params[i] = errand.EnqueueParams{Args: benchArgs{extra: b.extra}, Opts: opts}
		}
		if _, err := c.EnqueueMany(ctx, params); err != nil {
			return nil, err
		}
	}
	res.EnqueuePerSec = perSecond(b.jobs, time.Since(start))

	events, cancel := c.Subscribe()
	defer cancel()
	w, err := c.NewWorker(&errand.WorkerConfig{Queues: map[string]int{b.queue: b.workers}})
	if err != nil {
		return nil, err
	}
	b.e.logger.Info("working", "jobs", b.jobs, "workers", b.workers)
	start = time.Now()
	if err := w.Start(ctx); err != nil {
		return nil, err
	}
	defer w.Stop(context.WithoutCancel(ctx))
	if err := b.awaitOutcomes(ctx, c, events); err != nil {
		return nil, err
	}
	res.WorkPerSec = perSecond(b.jobs, time.Since(start))
	cancel() // the latency measure's outcomes are no one's events
	res.DroppedEvents = c.DroppedEvents()

	if b.samples > 0 {
		b.e.logger.Info("measuring start latency", "samples", b.samples)
		lat, err := b.latencies(ctx, c, opts)
		if err != nil {
			return nil, err
		}
		p50, p99 := percentileMS(lat, 50), percentileMS(lat, 99)
		res.LatencyP50MS, res.LatencyP99MS = &p50, &p99
	}
	res.PeakRSSBytes = peakRSS()
	return res, nil
}

// awaitOutcomes waits until the client has recorded an outcome for every
// job: the events it delivered and the ones it dropped.
func (b *benchRun) awaitOutcomes(ctx context.Context, c *errand.Client[*sql.Tx], events <-chan errand.Event) error {
	seen, last := 0, 0
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	lastProgress := time.Now()
	for {
		done := seen + int(c.DroppedEvents())
		if done >= b.jobs {
			return nil
		}
		if done != last {
			last, lastProgress = done, time.Now()
		}
		if time.Since(lastProgress) > benchStall {
			return fmt.Errorf("%d of %d jobs done, and none for %s; see the log above", done, b.jobs, benchStall)
		}
		select {
		case ev := <-events:
			if ev.Result != errand.ResultSucceeded {
				return fmt.Errorf("job %s ended %s: %s", *ev.JobID, ev.Result, ev.Error)
			}
			seen++
		case <-tick.C:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// latencies enqueues the samples one at a time into the idle worker and
// returns each one's delay from enqueue to the start of its handler.
func (b *benchRun) latencies(ctx context.Context, c *errand.Client[*sql.Tx], opts *errand.EnqueueOpts) ([]time.Duration, error) {
	pause := func(d time.Duration) error {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(d):
			return nil
		}
	}
	if err := pause(200 * time.Millisecond); err != nil { // let the worker settle into idling
		return nil, err
	}
	lat := make([]time.Duration, 0, b.samples)
	for range b.samples {
		if _, err := c.Enqueue(ctx, benchArgs{EnqueuedAt: time.Now().UnixNano(), extra: b.extra}, opts); err != nil {
			return nil, err
		}
		select {
		case d := <-b.started:
			lat = append(lat, d)
		case <-time.After(benchStall):
			return nil, fmt.Errorf("a job did not start within %s of its enqueue; see the log above", benchStall)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		// Let the worker record the outcome and go idle again.
		if err := pause(5 * time.Millisecond); err != nil {
			return nil, err
		}
	}
	return lat, nil
}

func perSecond(n int, d time.Duration) float64 {
	if d <= 0 {
		d = time.Nanosecond
	}
	return float64(n) / d.Seconds()
}

// percentileMS returns the p-th percentile of ds (nearest rank), in
// milliseconds.
func percentileMS(ds []time.Duration, p int) float64 {
	s := slices.Clone(ds)
	slices.Sort(s)
	rank := (p*len(s) + 99) / 100 // ceil(p/100 * n)
	i := min(max(rank-1, 0), len(s)-1)
	return float64(s[i]) / float64(time.Millisecond)
}

// peakRSS returns this process's peak resident set size from
// /proc/self/status (VmHWM), or nil where there is none.
func peakRSS() *int64 {
	if runtime.GOOS != "linux" {
		return nil
	}
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return nil
	}
	return parseVmHWM(b)
}

// parseVmHWM reads the VmHWM line ("VmHWM:     12345 kB") of a
// /proc/PID/status file, in bytes.
func parseVmHWM(status []byte) *int64 {
	sc := bufio.NewScanner(bytes.NewReader(status))
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "VmHWM:")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			return nil
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return nil
		}
		n := kb * 1024
		return &n
	}
	return nil
}

// randomSuffix names one run's queue.
func randomSuffix() string {
	b := make([]byte, 4)
	rand.Read(b) // never fails
	return hex.EncodeToString(b)
}

func writeBenchTable(e *env, r *benchResult) error {
	ms := func(v *float64) string {
		if v == nil {
			return "-"
		}
		return strconv.FormatFloat(*v, 'f', 2, 64) + " ms"
	}
	rss := "-"
	if r.PeakRSSBytes != nil {
		rss = strconv.FormatFloat(float64(*r.PeakRSSBytes)/(1<<20), 'f', 1, 64) + " MiB"
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "store\t%s\n", r.Store)
	fmt.Fprintf(tw, "queue\t%s\n", r.Queue)
	fmt.Fprintf(tw, "jobs\t%d\n", r.Jobs)
	fmt.Fprintf(tw, "workers\t%d\n", r.Workers)
	if r.DeleteOnSuccess {
		fmt.Fprintf(tw, "succeeded\tdeleted\n")
	}
	fmt.Fprintf(tw, "enqueue\t%.0f jobs/s\n", r.EnqueuePerSec)
	fmt.Fprintf(tw, "work\t%.0f jobs/s\n", r.WorkPerSec)
	fmt.Fprintf(tw, "latency p50\t%s\n", ms(r.LatencyP50MS))
	fmt.Fprintf(tw, "latency p99\t%s (%d samples)\n", ms(r.LatencyP99MS), r.Samples)
	fmt.Fprintf(tw, "peak rss\t%s\n", rss)
	if r.DroppedEvents > 0 {
		fmt.Fprintf(tw, "dropped events\t%d\n", r.DroppedEvents)
	}
	return tw.Flush()
}
