// Command flows compares durable three-step flows: errand's durable
// handlers (errand.Step) against DBOS Transact for Go v1.9.0's workflows
// (dbos.RunAsStep), on PostgreSQL (a fresh schema of one database per
// measure) and on SQLite (a fresh file per measure), interleaved.
//
//	cd bench && go run ./cmd/flows -reps 3 [-store postgres|sqlite|both]
//	cd bench && go run ./cmd/flows -recovery [-store postgres|sqlite|both]
//
// Each repetition measures, per store and system, the throughput of flows
// started at once and the time from start to durable result of flows run
// one at a time (p50, p99; of 20 samples the p99 is the slowest). Every step
// is a no-op: what is measured is the durable execution around it.
//
//   - errand: -flows jobs enqueued, then worked by a Worker of concurrency
//     -concurrency; a flow counts once its success is recorded (the client's
//     Observer reports it after the commit), and a sample ends when
//     Client.Result reads the job succeeded.
//   - errand-eager: the same, its samples enqueued with Eager, so that the
//     idle worker's queue takes each in the enqueue's transaction, as
//     DBOS's RunWorkflow starts a workflow in the calling process.
//   - dbos: -flows workflows started at once with RunWorkflow; each ends at
//     GetResult, which returns once the outcome is recorded.
//   - dbos-queue: -queue-flows workflows enqueued on a queue of worker
//     concurrency 100, which polls once a second; a flow counts once the
//     database says SUCCESS, and -queue-samples samples end at GetResult
//     polling every 10 ms (its default is a second).
//
// -recovery measures a crash across a deploy instead: a worker process
// starts -recover-flows flows whose step 2 blocks, and is SIGKILLed once the
// database holds every flow's step 1. A second process, whose code's step 2
// returns, then takes over: errand's once the first one's leases (-lease)
// expire; DBOS's in three cases, each after a kill of its own: the same
// executor id and application version, another executor id (a new host),
// and the same executor id with a new application version (new code). The
// parent reads from the database how many flows succeeded and when the last
// did, up to -recover-timeout, and counts step 1's runs in a log it appends
// to.
package main

import (
	"context"
	"database/sql"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dbos-inc/dbos-transact-golang/dbos"
	_ "github.com/dbos-inc/dbos-transact-golang/dbos/driver/sqlite" // DBOS on SQLite, through modernc.org/sqlite ("sqlite")
	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
	"github.com/errandhq/errand/postgres"
	"github.com/errandhq/errand/sqlite"
	"github.com/jackc/pgx/v5"
)

func main() {
	var err error
	if len(os.Args) > 2 && os.Args[1] == childFlag {
		err = childMain(os.Args[2], os.Args[3:])
	} else {
		err = run(os.Args[1:], os.Stdout)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "flows:", err)
		os.Exit(1)
	}
}

type options struct {
	url, store, sqliteSync   string
	flows, samples, reps     int
	concurrency              int
	queueFlows, queueSamples int
	recovery                 bool
	recoverFlows             int
	recoverTimeout, lease    time.Duration
	stores                   []string
	phases                   bool
}

func parseFlags(args []string) (*options, error) {
	fs := flag.NewFlagSet("flows", flag.ContinueOnError)
	o := &options{}
	fs.StringVar(&o.url, "postgres", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable", "the PostgreSQL database; each measure works in a fresh schema and drops it")
	fs.StringVar(&o.store, "store", "postgres", "postgres, sqlite (a fresh file in a temporary directory per measure) or both")
	fs.StringVar(&o.sqliteSync, "sqlite-sync", "FULL", "errand's SQLite synchronous setting, FULL or NORMAL (DBOS sets NORMAL on its own)")
	fs.IntVar(&o.flows, "flows", 2000, "flows per throughput measure")
	fs.IntVar(&o.samples, "samples", 200, "flows per latency measure, one at a time")
	fs.IntVar(&o.reps, "reps", 3, "repetitions, each store and system in turn")
	fs.IntVar(&o.concurrency, "concurrency", 100, "errand's worker concurrency")
	fs.IntVar(&o.queueFlows, "queue-flows", 300, "flows per throughput measure of dbos-queue, which starts about 100 a second")
	fs.IntVar(&o.queueSamples, "queue-samples", 20, "flows per latency measure of dbos-queue, each waiting up to a second for the queue's poll")
	fs.BoolVar(&o.recovery, "recovery", false, "measure recovery after SIGKILL across a deploy instead of throughput and latency")
	fs.IntVar(&o.recoverFlows, "recover-flows", 200, "flows under way when the first process is killed")
	fs.DurationVar(&o.recoverTimeout, "recover-timeout", 30*time.Second, "how long the second process is given to finish the flows")
	fs.DurationVar(&o.lease, "lease", 2*time.Second, "errand's lease in the recovery measure, in both processes")
	fs.BoolVar(&o.phases, "phases", false, "also print where errand's lone flows spend their time: the p50 from the enqueue to the handler, of each step, and from the last step to the result")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q: every setting is a flag (see -h)", fs.Arg(0))
	}
	switch o.store {
	case "postgres", "sqlite":
		o.stores = []string{o.store}
	case "both":
		o.stores = []string{"postgres", "sqlite"}
	default:
		return nil, fmt.Errorf("-store %q: give postgres, sqlite or both", o.store)
	}
	o.sqliteSync = strings.ToUpper(o.sqliteSync)
	if o.sqliteSync != "FULL" && o.sqliteSync != "NORMAL" {
		return nil, fmt.Errorf("-sqlite-sync %q: give FULL or NORMAL", o.sqliteSync)
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"flows", o.flows}, {"samples", o.samples}, {"reps", o.reps}, {"concurrency", o.concurrency},
		{"queue-flows", o.queueFlows}, {"queue-samples", o.queueSamples}, {"recover-flows", o.recoverFlows}} {
		if f.v < 1 {
			return nil, fmt.Errorf("-%s %d: give at least 1", f.name, f.v)
		}
	}
	if o.recoverTimeout <= 0 {
		return nil, fmt.Errorf("-recover-timeout %s: give a positive duration such as 30s", o.recoverTimeout)
	}
	if o.lease < errand.MinLease || o.lease > errand.MaxLease {
		return nil, fmt.Errorf("-lease %s: give between %s and %s", o.lease, errand.MinLease, errand.MaxLease)
	}
	return o, nil
}

func run(args []string, out io.Writer) error {
	o, err := parseFlags(args)
	if err != nil {
		return err
	}
	ctx := context.Background()
	if o.recovery {
		return runRecovery(ctx, o, out)
	}
	return runBench(ctx, o, out)
}

// result is one measure of one system.
type result struct {
	flows  int
	perSec float64
	lat    []time.Duration
	phases [][phaseCount]time.Duration // with -phases, errand's: each sample's
}

// A lone flow's phases: from the enqueue to its handler, each of its three
// steps, and from the last step to the result read.
const phaseCount = 5

var phaseNames = [phaseCount]string{"to handler", "step 1", "step 2", "step 3", "to result"}

// phaseMarks are the times a sampled flow's handler reached each of its
// points, the handler's start then each step's end; flows of other ids
// are not sampled.
type phaseMarks struct {
	mu sync.Mutex
	id string
	at [phaseCount - 1]time.Time
}

// mark records point i of the handler of job id, if it is the flow sampled.
func (m *phaseMarks) mark(id string, i int) {
	if m == nil {
		return
	}
	m.mu.Lock()
	if m.id == id {
		m.at[i] = time.Now()
	}
	m.mu.Unlock()
}

// phases are a sample's phases, from its start to its result at end.
func (m *phaseMarks) phases(start, end time.Time) [phaseCount]time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	var ps [phaseCount]time.Duration
	prev := start
	for i, at := range m.at {
		ps[i], prev = at.Sub(prev), at
	}
	ps[phaseCount-1] = end.Sub(prev)
	return ps
}

// systems are the rows of each repetition and store.
var systems = []struct {
	name string
	fn   func(context.Context, *options, target) (result, error)
}{
	{"errand", func(ctx context.Context, o *options, t target) (result, error) { return errandFlows(ctx, o, t, false) }},
	{"errand-eager", func(ctx context.Context, o *options, t target) (result, error) { return errandFlows(ctx, o, t, true) }},
	{"dbos", func(ctx context.Context, o *options, t target) (result, error) { return dbosFlows(ctx, o, t, false) }},
	{"dbos-queue", func(ctx context.Context, o *options, t target) (result, error) { return dbosFlows(ctx, o, t, true) }},
}

func runBench(ctx context.Context, o *options, out io.Writer) error {
	fmt.Fprintf(out, "three-step flows, start to durable result: %d per throughput measure (dbos-queue %d), %d one at a time (dbos-queue %d), %d repetitions\n",
		o.flows, o.queueFlows, o.samples, o.queueSamples, o.reps)
	if slices.Contains(o.stores, "sqlite") {
		fmt.Fprintf(out, "sqlite: errand synchronous=%s, DBOS synchronous=NORMAL (its setting)\n", o.sqliteSync)
	}
	fmt.Fprintf(out, "%-4s %-9s %-12s %6s %9s %8s %9s %9s\n", "rep", "store", "system", "flows", "flows/s", "samples", "p50 ms", "p99 ms")
	for rep := 1; rep <= o.reps; rep++ {
		for _, store := range o.stores {
			for _, sys := range systems {
				t, cleanup, err := newTarget(o, store, sys.name)
				if err != nil {
					return err
				}
				r, err := sys.fn(ctx, o, t)
				cleanup()
				if err != nil {
					return fmt.Errorf("%s on %s: %w", sys.name, store, err)
				}
				slices.Sort(r.lat)
				fmt.Fprintf(out, "%-4d %-9s %-12s %6d %9.0f %8d %9.2f %9.2f\n", rep, store, sys.name, r.flows, r.perSec,
					len(r.lat), ms(r.lat[len(r.lat)/2]), ms(r.lat[len(r.lat)*99/100]))
				if len(r.phases) > 0 {
					fmt.Fprintln(out, "     p50 ms of each phase: "+phaseMedians(r.phases))
				}
			}
		}
	}
	return nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1e3 }

// phaseMedians formats the p50 of each phase over samples.
func phaseMedians(samples [][phaseCount]time.Duration) string {
	parts := make([]string, phaseCount)
	for i := range phaseCount {
		ds := make([]time.Duration, len(samples))
		for k, s := range samples {
			ds[k] = s[i]
		}
		slices.Sort(ds)
		parts[i] = fmt.Sprintf("%s %.2f", phaseNames[i], ms(ds[len(ds)/2]))
	}
	return strings.Join(parts, ", ")
}

// target is where one measure keeps its state: a fresh schema of the
// PostgreSQL database, or a fresh SQLite file.
type target struct {
	store  string // "postgres" or "sqlite"
	url    string // the PostgreSQL database
	schema string
	path   string // the SQLite file
}

// dbosURL is DBOS's DatabaseURL for t.
func (t target) dbosURL() string {
	if t.store == "sqlite" {
		return "sqlite:" + t.path
	}
	return t.url
}

var targetSeq atomic.Int64

// newTarget names a schema or a file that does not exist yet; cleanup
// removes it and everything in it.
func newTarget(o *options, store, prefix string) (target, func(), error) {
	name := fmt.Sprintf("flows_%s_%d_%d", strings.ReplaceAll(prefix, "-", "_"), os.Getpid(), targetSeq.Add(1))
	if store == "sqlite" {
		dir, err := os.MkdirTemp("", "flows-")
		if err != nil {
			return target{}, nil, err
		}
		return target{store: store, path: filepath.Join(dir, name+".db")}, func() { os.RemoveAll(dir) }, nil
	}
	return target{store: store, url: o.url, schema: name}, func() {
		conn, err := pgx.Connect(context.Background(), o.url)
		if err != nil {
			return
		}
		defer conn.Close(context.Background())
		conn.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+name+" CASCADE")
	}, nil
}

// flowArgs start an errand flow.
type flowArgs struct{}

func (flowArgs) Kind() string { return "flow" }

// noSteps runs a flow's three no-op steps with step, errand's or DBOS's.
func noSteps(step func(name string, fn func(context.Context) (int, error)) (int, error)) (int, error) {
	sum := 0
	for i := range 3 {
		v, err := step(fmt.Sprintf("step%d", i+1), func(context.Context) (int, error) { return i, nil })
		if err != nil {
			return 0, err
		}
		sum += v
	}
	return sum, nil
}

// stuck bounds every wait of a measure, so that a flow that never finishes
// fails the run instead of hanging it.
const stuck = 2 * time.Minute

// acks counts recorded successes: the Observer is told after the outcome's
// commit. It never blocks, as an Observer must not.
type acks struct{ n chan struct{} }

func (acks) JobsEnqueued([]*errandtype.Job) {}
func (acks) JobStarted(*errandtype.Job)     {}
func (a acks) JobFinished(_ *errandtype.Job, r *errand.WorkResult) {
	if r.Result == errand.ResultSucceeded {
		select {
		case a.n <- struct{}{}:
		default:
		}
	}
}

// errandFlows measures errand on t's store, its latency samples enqueued
// with Eager when eager.
func errandFlows(ctx context.Context, o *options, t target, eager bool) (result, error) {
	if t.store == "sqlite" {
		st, err := sqlite.Open(ctx, t.path, &sqlite.Options{Synchronous: o.sqliteSync})
		if err != nil {
			return result{}, err
		}
		defer st.Close()
		return errandMeasure(ctx, o, st, eager)
	}
	st, err := postgres.Open(ctx, t.url, &postgres.Options{Schema: t.schema, MaxConns: 10})
	if err != nil {
		return result{}, err
	}
	defer st.Close()
	return errandMeasure(ctx, o, st, eager)
}

// errandMeasure enqueues -flows flows at once and works them, then runs
// -samples one at a time, each to its result.
func errandMeasure[TTx any](ctx context.Context, o *options, store errandstore.TxStore[TTx], eager bool) (result, error) {
	done := acks{make(chan struct{}, o.flows)}
	var marks *phaseMarks
	if o.phases {
		marks = &phaseMarks{}
	}
	kinds := errand.NewKinds()
	errand.Handle(kinds, func(ctx context.Context, job *errandtype.Job, _ flowArgs) error {
		marks.mark(job.ID, 0)
		i := 0
		_, err := noSteps(func(name string, fn func(context.Context) (int, error)) (int, error) {
			v, err := errand.Step(ctx, name, fn)
			i++
			marks.mark(job.ID, i)
			return v, err
		})
		return err
	}, nil)
	c, err := errand.NewClient(store, &errand.Config{Kinds: kinds, Observer: done})
	if err != nil {
		return result{}, err
	}
	defer c.Close()
	w, err := c.NewWorker(&errand.WorkerConfig{Queues: map[string]int{errand.DefaultQueue: o.concurrency}})
	if err != nil {
		return result{}, err
	}
	ps := make([]errand.EnqueueParams, o.flows)
	for i := range ps {
		ps[i] = errand.EnqueueParams{Args: flowArgs{}}
	}
	start := time.Now()
	for i := 0; i < len(ps); i += 1000 {
		if _, err := c.EnqueueMany(ctx, ps[i:min(i+1000, len(ps))]); err != nil {
			return result{}, err
		}
	}
	if err := w.Start(ctx); err != nil {
		return result{}, err
	}
	defer w.Stop(context.Background())
	bound := time.After(stuck)
	for i := range o.flows {
		select {
		case <-done.n:
		case <-bound:
			return result{}, fmt.Errorf("%d of %d flows succeeded in %s", i, o.flows, stuck)
		}
	}
	r := result{flows: o.flows, perSec: float64(o.flows) / time.Since(start).Seconds()}
	time.Sleep(200 * time.Millisecond) // idle before the latency samples
	for i := range o.samples {
		opts := &errand.EnqueueOpts{Eager: eager}
		if marks != nil {
			opts.ID = fmt.Sprintf("sample-%d", i)
			marks.mu.Lock()
			marks.id = opts.ID
			marks.mu.Unlock()
		}
		t := time.Now()
		e, err := c.Enqueue(ctx, flowArgs{}, opts)
		if err != nil {
			return result{}, err
		}
		res, err := c.Result(ctx, e.Job.ID, 10*time.Second)
		if err != nil {
			return result{}, err
		}
		if res.State != errandtype.StateSucceeded {
			return result{}, fmt.Errorf("flow %s ended %s, not succeeded", e.Job.ID, res.State)
		}
		end := time.Now()
		r.lat = append(r.lat, end.Sub(t))
		if marks != nil {
			r.phases = append(r.phases, marks.phases(t, end))
		}
	}
	return r, nil
}

var discard = slog.New(slog.DiscardHandler)

// dbosFlows measures DBOS Transact v1.9.0 at its defaults on t's store:
// workflows started directly, or through a queue of worker concurrency 100.
func dbosFlows(ctx context.Context, o *options, t target, queued bool) (result, error) {
	dctx, err := dbos.NewContext(ctx, dbos.Config{AppName: "flows", DatabaseURL: t.dbosURL(), DatabaseSchema: t.schema, Logger: discard})
	if err != nil {
		return result{}, err
	}
	flow := func(ctx dbos.Context, _ string) (int, error) {
		return noSteps(func(name string, fn func(context.Context) (int, error)) (int, error) {
			return dbos.RunAsStep(ctx, fn, dbos.WithStepName(name))
		})
	}
	dbos.RegisterWorkflow(dctx, flow)
	if err := dbos.Launch(dctx); err != nil {
		return result{}, err
	}
	defer dbos.Shutdown(dctx, 10*time.Second)
	n, samples := o.flows, o.samples
	var opts []dbos.WorkflowOption
	var finished *dbReader
	if queued {
		q, err := dbos.RegisterQueue(dctx, "flows", dbos.WithWorkerConcurrency(100))
		if err != nil {
			return result{}, err
		}
		opts = append(opts, dbos.WithQueue(q))
		n, samples = o.queueFlows, o.queueSamples
		if finished, err = openReader(ctx, "dbos", t); err != nil {
			return result{}, err
		}
		defer finished.close()
		// The queue runner picks a new queue up at its next reconcile, within
		// a second: the measure starts once it polls.
		time.Sleep(1500 * time.Millisecond)
	}
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		wg.Go(func() {
			h, err := dbos.RunWorkflow(dctx, flow, "", opts...)
			if err == nil && !queued {
				_, err = h.GetResult()
			}
			if err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return result{}, err
	}
	if queued {
		// One reader for all the flows: a GetResult each would poll the
		// database n times every 10 ms, or once a second at its default.
		if err := waitCount(ctx, finished, "finished", n, stuck); err != nil {
			return result{}, err
		}
	}
	r := result{flows: n, perSec: float64(n) / time.Since(start).Seconds()}
	for range samples {
		t := time.Now()
		h, err := dbos.RunWorkflow(dctx, flow, "", opts...)
		if err != nil {
			return result{}, err
		}
		if _, err := h.GetResult(dbos.WithHandlePollingInterval(10 * time.Millisecond)); err != nil {
			return result{}, err
		}
		r.lat = append(r.lat, time.Since(t))
	}
	return r, nil
}

// dbReader counts a system's flows from its tables, from outside the
// process that runs them, so that no child's clock or report is trusted.
type dbReader struct {
	pg     *pgx.Conn
	lite   *sql.DB
	schema string
	sys    string
	close  func()
}

// openReader opens a reader of sys's tables in t. On SQLite the file must
// exist: errand's is created by the reader, DBOS's by DBOS.
func openReader(ctx context.Context, sys string, t target) (*dbReader, error) {
	r := &dbReader{schema: t.schema, sys: sys}
	switch {
	case t.store == "postgres":
		conn, err := pgx.Connect(ctx, t.url)
		if err != nil {
			return nil, err
		}
		r.pg, r.close = conn, func() { conn.Close(context.Background()) }
	case sys == "errand":
		// errand's own store reads the file, with the SQLite its writers use.
		st, err := sqlite.Open(ctx, t.path, nil)
		if err != nil {
			return nil, err
		}
		r.lite, r.close = st.ReadDB(), func() { st.Close() }
	default:
		db, err := sql.Open("sqlite", t.path+"?_pragma=busy_timeout(5000)")
		if err != nil {
			return nil, err
		}
		r.lite, r.close = db, func() { db.Close() }
	}
	return r, nil
}

// count returns how many of the flows have recorded step 1 (what
// "step1") or have succeeded (what "finished").
func (r *dbReader) count(ctx context.Context, what string) (int, error) {
	var table, where string
	switch r.sys + " " + what {
	case "errand step1":
		table, where = "errand_steps", "name = 'step1'"
	case "errand finished":
		table, where = "errand_jobs", "state = 'succeeded'"
	case "dbos step1":
		table, where = "operation_outputs", "function_name = 'step1'"
	case "dbos finished":
		table, where = "workflow_status", "status = 'SUCCESS'"
	default:
		return 0, fmt.Errorf("count %s %s: unknown", r.sys, what)
	}
	var n int
	if r.pg != nil {
		err := r.pg.QueryRow(ctx, "SELECT count(*) FROM "+pgx.Identifier{r.schema, table}.Sanitize()+" WHERE "+where).Scan(&n)
		return n, err
	}
	err := r.lite.QueryRowContext(ctx, "SELECT count(*) FROM "+table+" WHERE "+where).Scan(&n)
	return n, err
}

// countPoll is how often the parent reads the database while it waits.
const countPoll = 10 * time.Millisecond

// waitCount waits until count(what) reaches n, up to within.
func waitCount(ctx context.Context, r *dbReader, what string, n int, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		got, err := r.count(ctx, what)
		if err != nil {
			return err
		}
		if got >= n {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d flows %s in %s", got, n, map[string]string{"step1": "recorded step 1", "finished": "finished"}[what], within)
		}
		time.Sleep(countPoll)
	}
}
