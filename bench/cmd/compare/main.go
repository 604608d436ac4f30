// Command compare runs errand and River on the same kind of fresh database,
// interleaved, and prints each measure for both and their ratio.
//
//	go run ./cmd/compare -store both -jobs 20000 -reps 3 -markdown results.md
//
// With -scaling it measures instead only work throughput, at each worker
// concurrency of -concurrency, and with -svg draws it:
//
//	go run ./cmd/compare -scaling -svg scaling.svg
//
// With -cost it counts instead where each job's cost goes on the
// PostgreSQL server (WAL, row versions, index entries, statements), per
// phase, on a private server of its own (see cost.go):
//
//	go run ./cmd/compare -cost -jobs 20000 -markdown cost.md
//
// Every measure of every repetition gets a fresh database (a SQLite file in a
// temporary directory, or a PostgreSQL schema that is dropped afterwards),
// and within a repetition the two systems alternate which goes first, so
// that whatever else the machine is doing falls on both.
package main

import (
	"context"
	"database/sql"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/pprof"
	"slices"
	"strings"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

type (
	sqlTx = *sql.Tx
	pgxTx = pgx.Tx
)

const (
	batchSize = 1000 // jobs per EnqueueMany / InsertMany call
	// workers is the comparison's concurrency: errand's one queue runs
	// this many jobs at once, and it is River's MaxWorkers. -scaling
	// varies it.
	workers     = 1000
	workTimeout = 5 * time.Minute
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "compare:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, out io.Writer) error {
	o, err := parseFlags(args)
	if err != nil {
		return err
	}
	if o.cpuProfile != "" {
		stop, err := startCPUProfile(o.cpuProfile)
		if err != nil {
			return err
		}
		defer stop()
	}
	if o.cost {
		return runCost(ctx, out, o)
	}
	if o.scaling {
		return runScaling(ctx, out, o.stores, o.pgURL, o.jobs, o.reps, o.concurrency, o.svg, o.markdown)
	}
	return runTable(ctx, out, o)
}

// options are compare's flags, checked.
type options struct {
	jobs, reps       int
	stores           []string
	scaling, cost    bool
	concurrency, svg string
	samples          sampling
	pgURL, markdown  string
	pgURLSet         bool // -postgres was given
	cpuProfile, only string
	ceilingBatch     int
}

// parseFlags reads compare's flags from args, and checks them.
func parseFlags(args []string) (*options, error) {
	fs := flag.NewFlagSet("compare", flag.ContinueOnError)
	jobs := fs.Int("jobs", 20000, "jobs per throughput measure")
	store := fs.String("store", "both", "sqlite, postgres or both")
	reps := fs.Int("reps", 3, "repetitions of every measure")
	scaling := fs.Bool("scaling", false, "instead of the table, measure work throughput at each -concurrency")
	cost := fs.Bool("cost", false, "instead of the table, count each job's cost on the PostgreSQL server (WAL, row versions, index entries, statements) per phase, on a private server unless -postgres is given")
	concurrency := fs.String("concurrency", "1,10,50,100,500,1000", "with -scaling: the worker counts to measure, comma-separated")
	svg := fs.String("svg", "", "with -scaling: also draw the plot as SVG to this file")
	samples := fs.Int("samples", 200, "single enqueues per latency measure")
	warmup := fs.Int("warmup", 20, "single enqueues before a latency measure's samples, not counted in them")
	pgURL := fs.String("postgres", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable", "PostgreSQL database; each run works in fresh schemas and drops them")
	markdown := fs.String("markdown", "", "also write the table as markdown to this file")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	only := fs.String("measures", "", "run only the measures whose name starts with this text, e.g. work")
	ceilingBatch := fs.Int("ceiling-batch", 500, "jobs per claim and per acknowledgment of the bare-SQL ceiling (PostgreSQL); the default is the most outcomes an errand worker records at once")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if *scaling && !set["jobs"] {
		*jobs = defaultScalingJobs
	}
	if *cost {
		if *scaling {
			return nil, fmt.Errorf("-cost and -scaling are separate modes: give one")
		}
		if set["store"] && *store != "postgres" {
			return nil, fmt.Errorf("-cost measures PostgreSQL only: leave -store out")
		}
		*store = "postgres"
		if !set["reps"] {
			*reps = defaultCostReps
		}
	}
	var stores []string
	switch *store {
	case "sqlite", "postgres":
		stores = []string{*store}
	case "both":
		stores = []string{"sqlite", "postgres"}
	default:
		return nil, fmt.Errorf("-store %q: use sqlite, postgres or both", *store)
	}
	if *jobs < 1 || *reps < 1 || *samples < 1 || *ceilingBatch < 1 {
		return nil, fmt.Errorf("-jobs, -reps, -samples and -ceiling-batch must be at least 1")
	}
	if *warmup < 0 {
		return nil, fmt.Errorf("-warmup must be at least 0")
	}
	return &options{jobs: *jobs, reps: *reps, stores: stores, scaling: *scaling, cost: *cost, concurrency: *concurrency, svg: *svg,
		samples: sampling{*warmup, *samples}, pgURL: *pgURL, pgURLSet: set["postgres"], markdown: *markdown, cpuProfile: *cpuProfile, only: *only,
		ceilingBatch: *ceilingBatch}, nil
}

// startCPUProfile profiles the process's CPU into the file at path until
// stop.
func startCPUProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}

// runTable measures every store of o, and prints the table of the
// measures to out (and as markdown, with -markdown).
func runTable(ctx context.Context, out io.Writer, o *options) error {
	var rows []row
	for _, s := range o.stores {
		e := &env{store: s, url: o.pgURL}
		fmt.Fprintf(os.Stderr, "%s: %d jobs, %d repetitions\n", s, o.jobs, o.reps)
		list := slices.DeleteFunc(measures(o.jobs, o.samples, o.ceilingBatch), func(m measure) bool {
			return !strings.HasPrefix(m.name, o.only) || (m.store != "" && m.store != s)
		})
		rs, err := measureStore(ctx, e, list, o.reps)
		if err != nil {
			return fmt.Errorf("%s: %w", s, err)
		}
		rows = append(rows, rs...)
	}
	printTable(out, rows)
	if slices.ContainsFunc(rows, func(r row) bool { return strings.Contains(r.measure, "ceiling") }) {
		fmt.Fprintln(out, "(in the ceiling row, the River column is the bare-SQL ceiling, measured interleaved with errand)")
	}
	if slices.ContainsFunc(rows, func(r row) bool { return strings.Contains(r.measure, "floor") }) {
		fmt.Fprintln(out, "(in the floor rows, the River column is the bare-SQL floor, measured interleaved with errand)")
	}
	if o.markdown == "" {
		return nil
	}
	var b strings.Builder
	writeMarkdown(&b, rows)
	return os.WriteFile(o.markdown, []byte(b.String()), 0o644)
}

// result is one run of one measure by one system.
type result struct {
	perSec    float64         // throughput measures
	latencies []time.Duration // latency measures, after the warm-up
	first     time.Duration   // latency measures: the first job's, on a fresh database and pool
}

// sampling is how a latency measure samples: warmup single enqueues whose
// latency is not counted (but for the first's, reported apart), then
// samples that are.
type sampling struct{ warmup, samples int }

// add records the latency of the i-th job of a latency measure.
func (r *result) add(i int, s sampling, d time.Duration) {
	if i == 0 {
		r.first = d
	}
	if i >= s.warmup {
		r.latencies = append(r.latencies, d)
	}
}

// measure is one line of the comparison: how errand and River each do it.
// In the ceiling measure, river is the bare-SQL ceiling instead.
type measure struct {
	name          string
	store         string // only on this store, when not empty
	errand, river func(ctx context.Context, e *env) (result, error)
}

// measures are the comparison's lines: work, bulk enqueue, latency.
func measures(jobs int, samples sampling, ceilingBatch int) []measure {
	return slices.Concat(workMeasures(jobs, ceilingBatch), bulkMeasures(jobs), latencyMeasures(samples))
}

// throughput is the result of n jobs in d.
func throughput(n int, d time.Duration) result { return result{perSec: float64(n) / d.Seconds()} }

// timed is f as a throughput measure of n jobs.
func timed(n int, f func(ctx context.Context) error) func(ctx context.Context) (result, error) {
	return func(ctx context.Context) (result, error) {
		start := time.Now()
		if err := f(ctx); err != nil {
			return result{}, err
		}
		return throughput(n, time.Since(start)), nil
	}
}

// errandWork is errand's side of both work measures: enqueue jobs, then
// time the workers running them.
func errandWork(jobs int) func(ctx context.Context, e *env) (result, error) {
	return func(ctx context.Context, e *env) (result, error) {
		return withErrand(ctx, e, nil, func(c errandClient) (result, error) {
			if err := c.enqueueMany(ctx, jobs); err != nil {
				return result{}, err
			}
			d, err := c.work(ctx, jobs)
			return throughput(jobs, d), err
		})
	}
}

// workMeasures time workers running jobs already enqueued: errand against
// River, and against the bare-SQL ceiling.
func workMeasures(jobs, ceilingBatch int) []measure {
	return []measure{
		{
			name:   "work: claim, run, ack (jobs/s)",
			errand: errandWork(jobs),
			river: func(ctx context.Context, e *env) (result, error) {
				return withRiver(ctx, e, nil, func(c riverClient) (result, error) {
					if err := c.insertMany(ctx, jobs); err != nil {
						return result{}, err
					}
					d, err := c.work(ctx, jobs)
					return throughput(jobs, d), err
				})
			},
		},
		{
			name:   fmt.Sprintf("work vs bare-SQL claim+ack ceiling, batch %d (jobs/s)", ceilingBatch),
			store:  "postgres",
			errand: errandWork(jobs),
			river: func(ctx context.Context, e *env) (result, error) {
				return ceilingWork(ctx, e, jobs, ceilingBatch)
			},
		},
	}
}

// bulkMeasures time enqueueing jobs in batches: EnqueueMany against River's
// InsertMany and InsertManyFast.
func bulkMeasures(jobs int) []measure {
	errandBulk := func(ctx context.Context, e *env) (result, error) {
		return withErrand(ctx, e, nil, func(c errandClient) (result, error) {
			return timed(jobs, func(ctx context.Context) error { return c.enqueueMany(ctx, jobs) })(ctx)
		})
	}
	return []measure{
		{
			name:   "bulk enqueue: EnqueueMany vs InsertMany (jobs/s)",
			errand: errandBulk,
			river: func(ctx context.Context, e *env) (result, error) {
				return withRiver(ctx, e, nil, func(c riverClient) (result, error) {
					return timed(jobs, func(ctx context.Context) error { return c.insertMany(ctx, jobs) })(ctx)
				})
			},
		},
		{
			name:   "bulk enqueue: EnqueueMany vs InsertManyFast (jobs/s)",
			errand: errandBulk,
			river: func(ctx context.Context, e *env) (result, error) {
				return withRiver(ctx, e, nil, func(c riverClient) (result, error) {
					return timed(jobs, func(ctx context.Context) error { return c.insertManyFast(ctx, jobs) })(ctx)
				})
			},
		},
	}
}

// latencyMeasures time single jobs from enqueue to start on an idle
// worker: errand against the bare-SQL floor, and against River.
func latencyMeasures(samples sampling) []measure {
	// errandLatency is errand's side of both latency measures.
	errandLatency := func(ctx context.Context, e *env) (result, error) {
		started := make(chan time.Duration, 1)
		return withErrand(ctx, e, started, func(c errandClient) (result, error) {
			return latency(ctx, samples, started, c.idleWorker, c.enqueueOne)
		})
	}
	return []measure{
		{
			name:   "latency vs bare-SQL floor: insert commit, then claim commit (ms)",
			store:  "postgres",
			errand: errandLatency,
			river: func(ctx context.Context, e *env) (result, error) {
				return floorLatency(ctx, e, samples)
			},
		},
		{
			name:   "latency: enqueue to start, idle worker (ms)",
			errand: errandLatency,
			river: func(ctx context.Context, e *env) (result, error) {
				started := make(chan time.Duration, 1)
				return withRiver(ctx, e, started, func(c riverClient) (result, error) {
					return latency(ctx, samples, started, c.idleWorker, c.insertOne)
				})
			},
		},
	}
}

// latency starts an idle worker, then enqueues one job at a time, waiting
// for each to start (the handler reports the delay from just before the
// enqueue call) and pausing so the worker is idle again. The first
// samples.warmup jobs are not counted: each runs statements on a pool
// connection that has not run them yet, in a server backend that has not
// read the fresh schema's tables yet, which costs an enqueue or a claim
// 3 to 7 ms the first time (bench/RESULTS.md), and a fresh pool has four
// such connections. That is a start-up cost, reported apart as the first
// job's latency, not the latency of a queue that runs.
func latency(ctx context.Context, samples sampling, started <-chan time.Duration, start func(context.Context) (func(), error), enqueue func(context.Context) error) (result, error) {
	stop, err := start(ctx)
	if err != nil {
		return result{}, err
	}
	defer stop()
	time.Sleep(200 * time.Millisecond) // let the worker settle into idling
	var r result
	for i := range samples.warmup + samples.samples {
		if err := enqueue(ctx); err != nil {
			return result{}, err
		}
		select {
		case d := <-started:
			r.add(i, samples, d)
		case <-time.After(10 * time.Second):
			return result{}, fmt.Errorf("a job did not start within 10s")
		case <-ctx.Done():
			return result{}, ctx.Err()
		}
		time.Sleep(5 * time.Millisecond)
	}
	return r, nil
}

// row is one line of the table.
type row struct {
	store, measure string
	errand, river  string
	ratio          string // errand ÷ River
	better         string // which way is better
}

// runs are the results of one measure's repetitions, for each system.
type runs struct{ errand, river []result }

// measureStore runs every measure of list reps times on e's store, each
// repetition's errand and River runs adjacent and alternating which goes
// first, and returns the table's rows of the store.
func measureStore(ctx context.Context, e *env, list []measure, reps int) ([]row, error) {
	got := make([]runs, len(list))
	for rep := range reps {
		for i, m := range list {
			if err := measureRep(ctx, e, m, rep, (rep+i)%2 == 1, &got[i]); err != nil {
				return nil, err
			}
		}
	}
	var rows []row
	for i, m := range list {
		if got[i].errand[0].latencies == nil {
			rows = append(rows, throughputRow(e.store, m, got[i]))
			continue
		}
		rows = append(rows, latencyRows(e.store, m, got[i])...)
	}
	return rows, nil
}

// measureRep runs repetition rep of m, errand then River or, if
// riverFirst, River then errand, and adds their results to got.
func measureRep(ctx context.Context, e *env, m measure, rep int, riverFirst bool, got *runs) error {
	order := []string{"errand", "river"}
	if riverFirst {
		order = []string{"river", "errand"}
	}
	for _, sys := range order {
		f, into := m.errand, &got.errand
		if sys == "river" {
			f, into = m.river, &got.river
		}
		r, err := f(ctx, e)
		if err != nil {
			return fmt.Errorf("%s, %s: %w", m.name, sys, err)
		}
		*into = append(*into, r)
		if sys == "river" && strings.Contains(m.name, "ceiling") {
			sys = "ceiling"
		}
		if sys == "river" && strings.Contains(m.name, "floor") {
			sys = "floor"
		}
		fmt.Fprintf(os.Stderr, "  rep %d  %-58s %-7s %s\n", rep+1, m.name, sys, r)
	}
	return nil
}

// throughputRow is the row of throughput measure m on store: the median
// of each system's rates, and the median of each repetition's ratio.
func throughputRow(store string, m measure, p runs) row {
	// The ratio is the median of each repetition's ratio: the two
	// runs of a repetition are adjacent, so they share whatever
	// load the machine had then.
	ratios := make([]float64, len(p.errand))
	for j := range ratios {
		ratios[j] = p.errand[j].perSec / p.river[j].perSec
	}
	ev, rv, ratio := median(rates(p.errand)), median(rates(p.river)), median(ratios)
	return row{store: store, measure: m.name,
		errand: fmt.Sprintf("%.0f", ev), river: fmt.Sprintf("%.0f", rv),
		ratio: fmt.Sprintf("%.2f×", ratio), better: "higher"}
}

// latencyRows are the rows of latency measure m on store: p50 and p99 of
// every repetition's samples pooled, and the median first job.
func latencyRows(store string, m measure, p runs) []row {
	var rows []row
	el, rl := pooled(p.errand), pooled(p.river)
	for _, q := range []struct {
		name string
		p    float64
	}{{"p50", 0.50}, {"p99", 0.99}} {
		ev, rv := ms(percentile(el, q.p)), ms(percentile(rl, q.p))
		rows = append(rows, row{store: store, measure: strings.Replace(m.name, "(ms)", q.name+" (ms)", 1),
			errand: fmt.Sprintf("%.2f", ev), river: fmt.Sprintf("%.2f", rv),
			ratio: fmt.Sprintf("%.2f×", ev/rv), better: "lower"})
	}
	// The first job of each repetition, before the warm-up ends: the
	// median over the repetitions.
	ev, rv := ms(time.Duration(median(firsts(p.errand)))), ms(time.Duration(median(firsts(p.river))))
	return append(rows, row{store: store, measure: strings.Replace(m.name, "(ms)", "first job, median (ms)", 1),
		errand: fmt.Sprintf("%.2f", ev), river: fmt.Sprintf("%.2f", rv),
		ratio: fmt.Sprintf("%.2f×", ev/rv), better: "lower"})
}

func (r result) String() string {
	if r.latencies == nil {
		return fmt.Sprintf("%.0f jobs/s", r.perSec)
	}
	l := slices.Clone(r.latencies)
	slices.Sort(l)
	return fmt.Sprintf("p50 %.2f ms, p99 %.2f ms, first %.2f ms", ms(percentile(l, 0.5)), ms(percentile(l, 0.99)), ms(r.first))
}

func rates(rs []result) []float64 {
	v := make([]float64, len(rs))
	for i, r := range rs {
		v[i] = r.perSec
	}
	return v
}

func firsts(rs []result) []float64 {
	v := make([]float64, len(rs))
	for i, r := range rs {
		v[i] = float64(r.first)
	}
	return v
}

func median(v []float64) float64 {
	v = slices.Clone(v)
	slices.Sort(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

func pooled(rs []result) []time.Duration {
	var all []time.Duration
	for _, r := range rs {
		all = append(all, r.latencies...)
	}
	slices.Sort(all)
	return all
}

// percentile of sorted, nearest rank.
func percentile(sorted []time.Duration, p float64) time.Duration {
	i := int(p*float64(len(sorted))+0.5) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func printTable(out io.Writer, rows []row) {
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "store\tmeasure\terrand\tRiver\terrand ÷ River\tbetter")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.store, r.measure, r.errand, r.river, r.ratio, r.better)
	}
	tw.Flush()
}

func writeMarkdown(b *strings.Builder, rows []row) {
	b.WriteString("| store | measure | errand | River | errand ÷ River | better |\n")
	b.WriteString("| --- | --- | ---: | ---: | ---: | --- |\n")
	for _, r := range rows {
		fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %s |\n", r.store, r.measure, r.errand, r.river, r.ratio, r.better)
	}
}

// env makes fresh databases of one store.
type env struct {
	store   string // sqlite or postgres
	url     string
	workers int // jobs each system runs at once; 0 means the comparison's workers
	// tracer, when set, traces every connection of the PostgreSQL pools
	// (the cost measure counts the client's calls with it).
	tracer pgx.QueryTracer
	// created, when set, is told the name of each fresh PostgreSQL schema
	// (the cost measure reads that schema's statistics).
	created func(schema string)
}

// concurrency is how many jobs each system runs at once.
func (e *env) concurrency() int {
	if e.workers > 0 {
		return e.workers
	}
	return workers
}

var schemaSeq atomic.Int64

func (e *env) freshDir() (string, func(), error) {
	dir, err := os.MkdirTemp("", "errand-bench-")
	if err != nil {
		return "", nil, err
	}
	return dir, func() { os.RemoveAll(dir) }, nil
}

// pool is a PostgreSQL pool of 4 connections, as the comparison uses.
func (e *env) pool(ctx context.Context) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(e.url)
	if err != nil {
		return nil, err
	}
	cfg.MaxConns = 4
	if e.tracer != nil {
		cfg.ConnConfig.Tracer = e.tracer
	}
	return pgxpool.NewWithConfig(ctx, cfg)
}

// freshSchema creates an empty schema; drop removes it and everything in it.
func (e *env) freshSchema(ctx context.Context, prefix string) (string, func(), error) {
	name := fmt.Sprintf("bench_%s_%d_%d", prefix, os.Getpid(), schemaSeq.Add(1))
	conn, err := pgx.Connect(ctx, e.url)
	if err != nil {
		return "", nil, err
	}
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+name); err != nil {
		conn.Close(ctx)
		return "", nil, err
	}
	if e.created != nil {
		e.created(name)
	}
	return name, func() {
		defer conn.Close(context.Background())
		conn.Exec(context.Background(), "DROP SCHEMA "+name+" CASCADE")
	}, nil
}
