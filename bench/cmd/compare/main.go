// Command compare runs errand, River and, on PostgreSQL, Graphile Worker on
// the same kind of fresh database, interleaved, and prints each measure for
// each and errand's ratio to each.
//
//	go run ./cmd/compare -store both -jobs 20000 -reps 3 -markdown results.md
//
// Graphile Worker runs under node from bench/graphile (graphile.go), after
// `npm ci` there; without node it is left out, with a note. -systems picks
// the systems, errand always among them.
//
// With -scaling it measures instead only work throughput, at each worker
// concurrency of -concurrency, and with -svg draws it:
//
//	go run ./cmd/compare -scaling -svg scaling.svg
//
// On PostgreSQL two more rows run errand's work with its jobs deleted as
// they succeed (KindOpts.DeleteOnSuccess), as Graphile Worker always does:
// against Graphile Worker, and against a bare-SQL ceiling that deletes. Two
// more run the work on tables analyzed after the enqueue, as autovacuum
// analyzes a table that changed: keeping jobs, against both, and deleting
// them, against Graphile Worker.
//
// With -cost it counts instead where each job's cost goes on the
// PostgreSQL server (WAL, row versions, index entries, statements, the
// server's CPU and the client's), per phase, for errand, the bare-SQL
// ceiling and River, on a private server of its own (see cost.go):
//
//	go run ./cmd/compare -cost -jobs 20000 -markdown cost.md
//
// Every measure of every repetition gets a fresh database (a SQLite file in a
// temporary directory, or a PostgreSQL schema that is dropped afterwards),
// and within a repetition the systems take turns going first, so that
// whatever else the machine is doing falls on all of them.
package main

import (
	"context"
	"database/sql"
	"errors"
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

	"github.com/errandhq/errand"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

type (
	sqlTx = *sql.Tx
	pgxTx = pgx.Tx
)

const (
	batchSize = 1000 // jobs per EnqueueMany / InsertMany / addJobs call
	// bigBatchSize is the batch of the second set of bulk rows
	// (PostgreSQL).
	bigBatchSize = 5000
	// workers is the comparison's concurrency: errand's one queue runs
	// this many jobs at once, and it is River's MaxWorkers. -scaling
	// varies it.
	workers     = 1000
	workTimeout = 5 * time.Minute

	defaultPostgresURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
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
	if err := o.pickSystems(); err != nil {
		return err
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
	// systems are the table's systems (errand, river, graphile), as
	// -systems gave them; pickSystems settles the default.
	systems     []string
	systemsSet  bool
	graphileDir string
}

// systemNames are the systems the table can compare, in column order.
var systemNames = []string{"errand", "river", "graphile"}

// has reports whether the table runs system sys.
func (o *options) has(sys string) bool { return slices.Contains(o.systems, sys) }

// pickSystems settles which systems the table runs: those of -systems, or
// by default all that can run here. Graphile Worker runs on PostgreSQL
// only, and needs node and its packages: without node it is left out of
// the default with a note; without its packages compare stops and says
// how to install them.
func (o *options) pickSystems() error {
	if !o.systemsSet {
		o.systems = systemNames
		if !slices.Contains(o.stores, "postgres") {
			o.systems = []string{"errand", "river"}
		}
	}
	if !o.has("graphile") {
		return nil
	}
	if !slices.Contains(o.stores, "postgres") {
		return fmt.Errorf("-systems graphile: Graphile Worker runs on PostgreSQL only (-store postgres or both)")
	}
	err := graphileReady(o.graphileDir)
	if errors.Is(err, errNoNode) && !o.systemsSet {
		fmt.Fprintln(os.Stderr, "note: node is not installed, so Graphile Worker is left out; errand and River still run")
		o.systems = []string{"errand", "river"}
		return nil
	}
	if err != nil {
		return fmt.Errorf("Graphile Worker: %w", err)
	}
	return nil
}

// parseFlags reads compare's flags from args, and checks them.
func parseFlags(args []string) (*options, error) {
	fs := flag.NewFlagSet("compare", flag.ContinueOnError)
	jobs := fs.Int("jobs", 20000, "jobs per throughput measure")
	store := fs.String("store", "both", "sqlite, postgres or both")
	reps := fs.Int("reps", 3, "repetitions of every measure")
	scaling := fs.Bool("scaling", false, "instead of the table, measure work throughput at each -concurrency")
	cost := fs.Bool("cost", false, "instead of the table, count each job's cost on the PostgreSQL server (WAL, row versions, index entries, statements, CPU) per phase, on a private server unless -postgres is given")
	concurrency := fs.String("concurrency", "1,10,50,100,500,1000", "with -scaling: the worker counts to measure, comma-separated")
	svg := fs.String("svg", "", "with -scaling: also draw the plot as SVG to this file")
	samples := fs.Int("samples", 200, "single enqueues per latency measure")
	warmup := fs.Int("warmup", 20, "single enqueues before a latency measure's samples, not counted in them")
	pgURL := fs.String("postgres", defaultPostgresURL, "PostgreSQL database; each run works in fresh schemas and drops them")
	markdown := fs.String("markdown", "", "also write the table as markdown to this file")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	only := fs.String("measures", "", "run only the measures whose name starts with this text, e.g. work")
	systems := fs.String("systems", strings.Join(systemNames, ","), "the table's systems, comma-separated, errand among them: errand, river, graphile (Graphile Worker, PostgreSQL only, run by node from -graphile-dir); by default those that can run here")
	graphileDir := fs.String("graphile-dir", defaultGraphileDir(), "the directory of Graphile Worker's runner (bench/graphile), where npm ci has been run")
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
	var systemList []string
	for f := range strings.SplitSeq(*systems, ",") {
		f = strings.TrimSpace(f)
		if !slices.Contains(systemNames, f) {
			return nil, fmt.Errorf("-systems %q: give some of %s, comma-separated", *systems, strings.Join(systemNames, ","))
		}
		if !slices.Contains(systemList, f) {
			systemList = append(systemList, f)
		}
	}
	if !slices.Contains(systemList, "errand") {
		return nil, fmt.Errorf("-systems %q: the table is errand against the others, so errand must be among them", *systems)
	}
	// -systems errand,river names what -scaling and -cost compare anyway, so
	// beforeafter.sh can pass it to every run.
	if set["systems"] && (*scaling || *cost) && !slices.Equal(slices.Sorted(slices.Values(systemList)), []string{"errand", "river"}) {
		return nil, fmt.Errorf("-systems is for the table: -scaling and -cost compare errand and River")
	}
	return &options{jobs: *jobs, reps: *reps, stores: stores, scaling: *scaling, cost: *cost, concurrency: *concurrency, svg: *svg,
		samples: sampling{*warmup, *samples}, pgURL: *pgURL, pgURLSet: set["postgres"], markdown: *markdown, cpuProfile: *cpuProfile, only: *only,
		ceilingBatch: *ceilingBatch, systems: systemList, systemsSet: set["systems"], graphileDir: *graphileDir}, nil
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
	graphileVersion := ""
	for _, s := range o.stores {
		e := &env{store: s, url: o.pgURL, graphileDir: o.graphileDir}
		e.graphileSeen = func(r graphileResponse) {
			if graphileVersion == "" {
				graphileVersion = r.Version
				fmt.Fprintf(os.Stderr, "Graphile Worker %s, settings %s\n", r.Version, r.Settings)
			}
		}
		fmt.Fprintf(os.Stderr, "%s: %d jobs, %d repetitions, %s\n", s, o.jobs, o.reps, strings.Join(o.systems, ", "))
		list := slices.DeleteFunc(measures(o.jobs, o.samples, o.ceilingBatch), func(m measure) bool {
			return !strings.HasPrefix(m.name, o.only) || (m.store != "" && m.store != s) ||
				(m.vs != "" && !o.has("river")) // the ceiling and floor stand in River's column
		})
		rs, err := measureStore(ctx, e, list, o.reps, o.systems)
		if err != nil {
			return fmt.Errorf("%s: %w", s, err)
		}
		rows = append(rows, rs...)
	}
	cols := tableColumns(o)
	printTable(out, rows, cols)
	if slices.ContainsFunc(rows, func(r row) bool { return r.vs == "ceiling" }) {
		fmt.Fprintln(out, "(in the ceiling row, the River column is the bare-SQL ceiling, measured interleaved with errand)")
	}
	if slices.ContainsFunc(rows, func(r row) bool { return r.vs == "floor" }) {
		fmt.Fprintln(out, "(in the floor rows, the River column is the bare-SQL floor, measured interleaved with errand)")
	}
	if graphileVersion != "" {
		fmt.Fprintf(out, "(Graphile is Graphile Worker %s under node, its settings in bench/graphile/runner.mjs; in the bulk rows it is addJobs at the row's batch size)\n", graphileVersion)
	}
	if o.markdown == "" {
		return nil
	}
	var b strings.Builder
	writeMarkdown(&b, rows, cols)
	return os.WriteFile(o.markdown, []byte(b.String()), 0o644)
}

// tableColumns are the systems the table has a column for beside errand's.
func tableColumns(o *options) []string {
	var cols []string
	for _, sys := range systemNames[1:] {
		if o.has(sys) {
			cols = append(cols, sys)
		}
	}
	return cols
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

// measure is one line of the comparison: how each system does it (nil
// where a system has no part in it). In the ceiling and floor measures,
// river is the bare-SQL ceiling or floor instead.
type measure struct {
	name                    string
	store                   string // only on this store, when not empty
	vs                      string // "ceiling" or "floor": what stands in River's column
	errand, river, graphile func(ctx context.Context, e *env) (result, error)
}

// fn is system sys's side of m, or nil.
func (m measure) fn(sys string) func(ctx context.Context, e *env) (result, error) {
	switch sys {
	case "errand":
		return m.errand
	case "river":
		return m.river
	case "graphile":
		return m.graphile
	}
	return nil
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

// errandWork is errand's side of the work measures: enqueue jobs, then
// time the workers running them; deleting, the kind deletes its jobs as
// they succeed (KindOpts.DeleteOnSuccess); analyzed, the tables are
// analyzed between the two.
func errandWork(jobs int, deleting, analyzed bool) func(ctx context.Context, e *env) (result, error) {
	return func(ctx context.Context, e *env) (result, error) {
		kinds := errandKinds(nil, &errand.KindOpts{DeleteOnSuccess: deleting})
		return withErrandKinds(ctx, e, kinds, func(c errandClient) (result, error) {
			if err := c.enqueueMany(ctx, jobs); err != nil {
				return result{}, err
			}
			if analyzed {
				if err := c.analyze(ctx); err != nil {
					return result{}, err
				}
			}
			d, err := c.work(ctx, jobs)
			return throughput(jobs, d), err
		})
	}
}

// riverWork times River's workers on jobs inserted with InsertMany, its
// tables analyzed first when analyzed.
func riverWork(jobs int, analyzed bool) func(ctx context.Context, e *env) (result, error) {
	return func(ctx context.Context, e *env) (result, error) {
		return withRiver(ctx, e, nil, func(c riverClient) (result, error) {
			if err := c.insertMany(ctx, jobs); err != nil {
				return result{}, err
			}
			if analyzed {
				if err := c.analyze(ctx); err != nil {
					return result{}, err
				}
			}
			d, err := c.work(ctx, jobs)
			return throughput(jobs, d), err
		})
	}
}

// workMeasures time workers running jobs already enqueued: errand against
// River and Graphile Worker, and against the bare-SQL ceiling; then, on
// PostgreSQL, errand deleting its jobs as they succeed, as Graphile Worker
// always does (River cannot), against Graphile Worker and against the
// ceiling that deletes; then both again on tables analyzed after the
// enqueue, as autovacuum analyzes a table that changed: the statistics then
// say that no job runs, which once led errand's writes astray (see
// leaseRows in postgres/jobs.go).
func workMeasures(jobs, ceilingBatch int) []measure {
	graphileWork := graphileThroughput(graphileRequest{Measure: "work", Jobs: jobs, Batch: batchSize})
	graphileAnalyzed := graphileThroughput(graphileRequest{Measure: "work", Jobs: jobs, Batch: batchSize, Analyze: true})
	return []measure{
		{
			name:     "work: claim, run, ack (jobs/s)",
			errand:   errandWork(jobs, false, false),
			river:    riverWork(jobs, false),
			graphile: graphileWork,
		},
		ceilingMeasure("work vs bare-SQL claim+ack ceiling", jobs, ceilingBatch, false),
		{
			name:     "work, succeeded jobs deleted: DeleteOnSuccess vs Graphile Worker (jobs/s)",
			store:    "postgres",
			errand:   errandWork(jobs, true, false),
			graphile: graphileWork,
		},
		ceilingMeasure("work, succeeded jobs deleted, vs bare-SQL ceiling that deletes", jobs, ceilingBatch, true),
		{
			name:     "work, tables analyzed after the enqueue (jobs/s)",
			store:    "postgres",
			errand:   errandWork(jobs, false, true),
			river:    riverWork(jobs, true),
			graphile: graphileAnalyzed,
		},
		{
			name:     "work, tables analyzed, succeeded jobs deleted: DeleteOnSuccess vs Graphile Worker (jobs/s)",
			store:    "postgres",
			errand:   errandWork(jobs, true, true),
			graphile: graphileAnalyzed,
		},
	}
}

// ceilingMeasure is errand's work against the bare-SQL ceiling at batch
// (see ceilingWork), both keeping their jobs or both deleting them.
func ceilingMeasure(name string, jobs, batch int, deleting bool) measure {
	return measure{
		name:   fmt.Sprintf("%s, batch %d (jobs/s)", name, batch),
		store:  "postgres",
		vs:     "ceiling",
		errand: errandWork(jobs, deleting, false),
		river: func(ctx context.Context, e *env) (result, error) {
			return ceilingWork(ctx, e, jobs, batch, deleting)
		},
	}
}

// bulkMeasures time enqueueing jobs in batches: EnqueueMany against River's
// InsertMany and InsertManyFast, and Graphile Worker's addJobs beside each;
// at batchSize jobs a call, and on PostgreSQL at bigBatchSize too.
func bulkMeasures(jobs int) []measure {
	var list []measure
	for _, batch := range []int{batchSize, bigBatchSize} {
		errandBulk := func(ctx context.Context, e *env) (result, error) {
			return withErrand(ctx, e, nil, func(c errandClient) (result, error) {
				return timed(jobs, func(ctx context.Context) error { return c.enqueueBatches(ctx, jobs, batch) })(ctx)
			})
		}
		riverBulk := func(fast bool) func(ctx context.Context, e *env) (result, error) {
			return func(ctx context.Context, e *env) (result, error) {
				return withRiver(ctx, e, nil, func(c riverClient) (result, error) {
					return timed(jobs, func(ctx context.Context) error { return c.insertBatches(ctx, jobs, batch, fast) })(ctx)
				})
			}
		}
		graphileBulk := graphileThroughput(graphileRequest{Measure: "bulk", Jobs: jobs, Batch: batch})
		prefix, store := "bulk enqueue: ", ""
		if batch != batchSize {
			prefix, store = fmt.Sprintf("bulk enqueue, %d a call: ", batch), "postgres"
		}
		list = append(list,
			measure{name: prefix + "EnqueueMany vs InsertMany (jobs/s)", store: store,
				errand: errandBulk, river: riverBulk(false), graphile: graphileBulk},
			measure{name: prefix + "EnqueueMany vs InsertManyFast (jobs/s)", store: store,
				errand: errandBulk, river: riverBulk(true), graphile: graphileBulk})
	}
	return list
}

// latencyMeasures time single jobs from enqueue to start on an idle
// worker: errand against the bare-SQL floor, and against River and
// Graphile Worker.
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
			vs:     "floor",
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
			graphile: graphileLatency(samples),
		},
		{
			// Graphile Worker's runner adds its jobs through the database's
			// NOTIFY, as another process would: its row above is that.
			name: "latency: enqueue from another client, idle worker (ms)",
			errand: func(ctx context.Context, e *env) (result, error) {
				started := make(chan time.Duration, 1)
				return withErrand(ctx, e, started, func(c errandClient) (result, error) {
					return fromAnother(ctx, samples, started, c.idleWorker, c.another)
				})
			},
			river: func(ctx context.Context, e *env) (result, error) {
				started := make(chan time.Duration, 1)
				return withRiver(ctx, e, started, func(c riverClient) (result, error) {
					return fromAnother(ctx, samples, started, c.idleWorker, c.another)
				})
			},
		},
	}
}

// fromAnother is latency with the jobs enqueued by another client of the
// worker's database, on a pool or handle of its own, as a web process
// beside the worker's would enqueue them: no wake-up within the process.
func fromAnother(ctx context.Context, samples sampling, started <-chan time.Duration, start func(context.Context) (func(), error), another func(context.Context) (func(context.Context) error, func(), error)) (result, error) {
	enqueue, closeIt, err := another(ctx)
	if err != nil {
		return result{}, err
	}
	defer closeIt()
	return latency(ctx, samples, started, start, enqueue)
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
	vs             string            // the measure's vs
	errand         string            // errand's figure
	other, ratio   map[string]string // each other system's figure, and errand ÷ it
	better         string            // which way is better
}

// runs are the results of one measure's repetitions, for each system.
type runs map[string][]result

// participants are the systems of systems that take part in m on e's
// store, in column order.
func participants(e *env, m measure, systems []string) []string {
	var out []string
	for _, sys := range systemNames {
		if slices.Contains(systems, sys) && m.fn(sys) != nil && (sys != "graphile" || e.store == "postgres") {
			out = append(out, sys)
		}
	}
	return out
}

// measureStore runs every measure of list reps times on e's store, each
// repetition's runs of the systems adjacent and taking turns going first,
// and returns the table's rows of the store.
func measureStore(ctx context.Context, e *env, list []measure, reps int, systems []string) ([]row, error) {
	got := make([]runs, len(list))
	for i := range got {
		got[i] = runs{}
	}
	for rep := range reps {
		for i, m := range list {
			order := participants(e, m, systems)
			k := (rep + i) % len(order)
			order = slices.Concat(order[k:], order[:k])
			if err := measureRep(ctx, e, m, rep, order, got[i]); err != nil {
				return nil, err
			}
		}
	}
	var rows []row
	for i, m := range list {
		if got[i]["errand"][0].latencies == nil {
			rows = append(rows, throughputRow(e.store, m, got[i]))
			continue
		}
		rows = append(rows, latencyRows(e.store, m, got[i])...)
	}
	return rows, nil
}

// measureRep runs repetition rep of m, the systems in order, and adds
// their results to got.
func measureRep(ctx context.Context, e *env, m measure, rep int, order []string, got runs) error {
	for _, sys := range order {
		r, err := m.fn(sys)(ctx, e)
		if err != nil {
			return fmt.Errorf("%s, %s: %w", m.name, sys, err)
		}
		got[sys] = append(got[sys], r)
		if sys == "river" && m.vs != "" {
			sys = m.vs
		}
		fmt.Fprintf(os.Stderr, "  rep %d  %-58s %-8s %s\n", rep+1, m.name, sys, r)
	}
	return nil
}

// throughputRow is the row of throughput measure m on store: the median
// of each system's rates, and the median of each repetition's ratio.
func throughputRow(store string, m measure, p runs) row {
	ev := median(rates(p["errand"]))
	r := row{store: store, measure: m.name, vs: m.vs, errand: fmt.Sprintf("%.0f", ev),
		other: map[string]string{}, ratio: map[string]string{}, better: "higher"}
	for sys, rs := range p {
		if sys == "errand" {
			continue
		}
		// The ratio is the median of each repetition's ratio: the
		// runs of a repetition are adjacent, so they share whatever
		// load the machine had then.
		ratios := make([]float64, len(rs))
		for j := range ratios {
			ratios[j] = p["errand"][j].perSec / rs[j].perSec
		}
		r.other[sys] = fmt.Sprintf("%.0f", median(rates(rs)))
		r.ratio[sys] = fmt.Sprintf("%.2f×", median(ratios))
	}
	return r
}

// latencyRows are the rows of latency measure m on store: p50 and p99 of
// every repetition's samples pooled, and the median first job.
func latencyRows(store string, m measure, p runs) []row {
	newRow := func(name string, ev float64) row {
		return row{store: store, measure: strings.Replace(m.name, "(ms)", name+" (ms)", 1), vs: m.vs,
			errand: fmt.Sprintf("%.2f", ev), other: map[string]string{}, ratio: map[string]string{}, better: "lower"}
	}
	var rows []row
	el := pooled(p["errand"])
	for _, q := range []struct {
		name string
		p    float64
	}{{"p50", 0.50}, {"p99", 0.99}} {
		ev := ms(percentile(el, q.p))
		r := newRow(q.name, ev)
		for sys, rs := range p {
			if sys != "errand" {
				v := ms(percentile(pooled(rs), q.p))
				r.other[sys], r.ratio[sys] = fmt.Sprintf("%.2f", v), fmt.Sprintf("%.2f×", ev/v)
			}
		}
		rows = append(rows, r)
	}
	// The first job of each repetition, before the warm-up ends: the
	// median over the repetitions.
	ev := ms(time.Duration(median(firsts(p["errand"]))))
	r := newRow("first job, median", ev)
	for sys, rs := range p {
		if sys != "errand" {
			v := ms(time.Duration(median(firsts(rs))))
			r.other[sys], r.ratio[sys] = fmt.Sprintf("%.2f", v), fmt.Sprintf("%.2f×", ev/v)
		}
	}
	return append(rows, r)
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

// columnNames are the systems' names in the table's headers.
var columnNames = map[string]string{"river": "River", "graphile": "Graphile"}

// cells is the line of r: store, measure, errand, each of cols, errand ÷
// each of cols, better; "–" where a system had no part.
func (r row) cells(cols []string) []string {
	c := []string{r.store, r.measure, r.errand}
	for _, m := range []map[string]string{r.other, r.ratio} {
		for _, sys := range cols {
			v, ok := m[sys]
			if !ok {
				v = "–"
			}
			c = append(c, v)
		}
	}
	return append(c, r.better)
}

// header is the table's first line for cols.
func header(cols []string) []string {
	h := []string{"store", "measure", "errand"}
	for _, sys := range cols {
		h = append(h, columnNames[sys])
	}
	for _, sys := range cols {
		h = append(h, "errand ÷ "+columnNames[sys])
	}
	return append(h, "better")
}

func printTable(out io.Writer, rows []row, cols []string) {
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(header(cols), "\t"))
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r.cells(cols), "\t"))
	}
	tw.Flush()
}

func writeMarkdown(b *strings.Builder, rows []row, cols []string) {
	line := func(c []string) { fmt.Fprintf(b, "| %s |\n", strings.Join(c, " | ")) }
	line(header(cols))
	align := []string{"---", "---"}
	for range 1 + 2*len(cols) {
		align = append(align, "---:")
	}
	line(append(align, "---"))
	for _, r := range rows {
		line(r.cells(cols))
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
	// graphileDir is Graphile Worker's runner; graphileSeen, when set,
	// is told each of its results.
	graphileDir  string
	graphileSeen func(graphileResponse)
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
// analyzeSchema has PostgreSQL take the statistics of every table of
// schema, as autovacuum does of a table that changed by a tenth.
func analyzeSchema(ctx context.Context, pool *pgxpool.Pool, schema string) error {
	rows, err := pool.Query(ctx, `SELECT tablename FROM pg_tables WHERE schemaname = $1`, schema)
	if err != nil {
		return err
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return err
	}
	for _, t := range tables {
		if _, err := pool.Exec(ctx, "ANALYZE "+pgx.Identifier{schema, t}.Sanitize()); err != nil {
			return err
		}
	}
	return nil
}

// analyzeUnsupported is the analyze of a SQLite store: the measures that
// analyze run on PostgreSQL alone.
func analyzeUnsupported(context.Context) error { return errors.New("analyze: PostgreSQL only") }

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
