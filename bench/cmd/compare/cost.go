package main

// compare -cost: where a job's cost goes on the PostgreSQL server.
//
// For each system (errand with EnqueueMany; River with InsertMany, and
// again with InsertManyFast) it enqueues -jobs jobs in batches of
// batchSize and then works them exactly as the work measure does (claim,
// run a no-op, acknowledge), in a fresh schema, and counts each phase on
// the server: a CHECKPOINT, then the server's cumulative statistics before
// and after the phase, and their difference per job.
//
//   - pg_stat_wal: WAL records, full-page images, bytes, writes and syncs,
//     of the whole server (the phase's own backends, and autovacuum and the
//     WAL writer if they ran);
//   - pg_stat_user_tables of the system's schema: rows inserted, updated
//     (HOT or not) and deleted, and the autovacuum and autoanalyze runs;
//   - pg_stat_statements: calls of each statement;
//   - the WAL itself, read back with pg_walinspect between the phase's
//     two positions: records, bytes and full-page images per relation and
//     record type, the index entries written (B-tree leaf inserts and
//     splits, GIN pending-list inserts), and for each update of a job row
//     the indexes it wrote;
//   - the size of every table and index of the schema (pg_relation_size);
//   - the client's calls, counted by a pgx tracer on the systems' pools.
//
// The counts do not depend on the machine's speed, but a few depend on
// timing: whether autovacuum ran inside the phase (reported), and how the
// commits were grouped into WAL writes and syncs.
//
// By default it runs on a private PostgreSQL server of its own
// (chaos/pgtopology, PostgreSQL's defaults, autovacuum on), with
// shared_preload_libraries = 'pg_stat_statements' set and the server
// restarted. -postgres names a server to use instead: it must be
// PostgreSQL 15 or later with pg_stat_statements loaded, and the user a
// superuser (CHECKPOINT, pg_walinspect, pg_stat_statements.track).

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/chaos/pgtopology"
	"github.com/jackc/pgx/v5"
)

// defaultCostReps is -reps with -cost unless given.
const defaultCostReps = 2

// costProbeMark is in the text of every statement the probe runs, so that
// pg_stat_statements' figures leave them out even where the probe cannot
// turn its own tracking off.
const costProbeMark = "cost-probe"

// costVariant is one system with one way of enqueueing.
type costVariant struct {
	name    string // the column's title
	river   bool
	table   string // the job table
	enqueue string // the enqueue call
	// deleting: errand's kind deletes its jobs as they succeed
	// (KindOpts.DeleteOnSuccess).
	deleting bool
	// ceiling: errand enqueues, and the bare-SQL ceiling that deletes (see
	// ceilingWork) works the jobs, ceilingCostBatch a statement.
	ceiling bool
}

// ceilingCostBatch is the ceiling variant's batch: compare's default
// -ceiling-batch.
const ceilingCostBatch = 500

var costVariants = []costVariant{
	{name: "errand", table: "errand_jobs", enqueue: "EnqueueMany"},
	{name: "errand, deleting", table: "errand_jobs", enqueue: "EnqueueMany", deleting: true},
	{name: "bare-SQL ceiling, deleting", table: "errand_jobs", enqueue: "EnqueueMany", deleting: true, ceiling: true},
	{name: "River", river: true, table: "river_job", enqueue: "InsertMany"},
	{name: "River, fast", river: true, table: "river_job", enqueue: "InsertManyFast"},
}

var costPhases = []string{"enqueue", "work"}

// phaseFigures are one phase's counts, by name (see costProbe.phase): the
// differences of the server's counters over the phase, and sizes at its
// end.
type phaseFigures map[string]float64

// costRun is one variant's run: the figures of each phase, and what the
// schema held.
type costRun struct {
	phases  []phaseFigures // by costPhases
	indexes []indexInfo    // the job table's
	states  map[string]int // the job table's rows by state after the work
}

// indexInfo describes an index of a job table.
type indexInfo struct {
	name, method, def string // def: columns and predicate
}

// runCost is compare -cost.
func runCost(ctx context.Context, out io.Writer, o *options) error {
	rep, err := measureCost(ctx, o)
	if err != nil {
		return err
	}
	tables := rep.tables()
	printCostTables(out, rep.heading(), tables)
	if o.markdown == "" {
		return nil
	}
	var b strings.Builder
	writeCostMarkdown(&b, rep.heading(), tables)
	return os.WriteFile(o.markdown, []byte(b.String()), 0o644)
}

// measureCost runs every variant o.reps times, alternating their order.
func measureCost(ctx context.Context, o *options) (*costReport, error) {
	srv, err := openCostServer(ctx, o.pgURL, o.pgURLSet)
	if err != nil {
		return nil, err
	}
	defer srv.close()
	fmt.Fprintf(os.Stderr, "cost: %s; %d jobs, %d repetitions\n", srv.describe, o.jobs, o.reps)
	runs := make([][]*costRun, len(costVariants))
	for rep := range o.reps {
		for i := range costVariants {
			v := i
			if rep%2 == 1 {
				v = len(costVariants) - 1 - i
			}
			r, err := srv.run(ctx, costVariants[v], o.jobs)
			if err != nil {
				return nil, fmt.Errorf("%s (%s): %w", costVariants[v].name, costVariants[v].enqueue, err)
			}
			runs[v] = append(runs[v], r)
			fmt.Fprintf(os.Stderr, "  rep %d  %-12s WAL bytes/job: enqueue %.0f, work %.0f\n", rep+1, costVariants[v].name,
				r.phases[0]["wal.bytes"]/float64(o.jobs), r.phases[1]["wal.bytes"]/float64(o.jobs))
		}
	}
	rep := &costReport{jobs: o.jobs, reps: o.reps, server: srv.describe, settings: srv.settings, walinspect: srv.walinspect, runs: runs}
	// A phase whose WAL could not be read back would mix its zeros into
	// the medians: the figures read from the WAL are left out altogether.
	for _, vr := range runs {
		for _, r := range vr {
			for _, f := range r.phases {
				if f["walinspect.failed"] != 0 && rep.walinspect {
					rep.walinspect, rep.walFailed = false, true
				}
			}
		}
	}
	return rep, nil
}

// costServer is the server the cost measure runs on, and the probe's own
// connection to it.
type costServer struct {
	url        string
	top        *pgtopology.Topology // nil for a server named by -postgres
	probe      *pgx.Conn
	walinspect bool   // pg_walinspect is there: the WAL is read back
	describe   string // for the report
	settings   string // the settings that bear on the counts
}

// openCostServer starts a private server, or checks the one at url if
// given is set.
func openCostServer(ctx context.Context, url string, given bool) (*costServer, error) {
	s := &costServer{url: url}
	if !given {
		if err := pgtopology.Available(); err != nil {
			return nil, fmt.Errorf("-cost runs a private PostgreSQL server, and cannot here: %w (or give -postgres URL of a server with pg_stat_statements loaded)", err)
		}
		fmt.Fprintln(os.Stderr, "cost: starting a private PostgreSQL server")
		top, err := pgtopology.Start(ctx, pgtopology.Single)
		if err != nil {
			return nil, err
		}
		s.top, s.url = top, top.URL
		if err := s.preload(ctx); err != nil {
			s.close()
			return nil, err
		}
	}
	if err := s.connect(ctx); err != nil {
		s.close()
		return nil, err
	}
	return s, nil
}

// preload loads pg_stat_statements into the private server, which takes a
// restart.
func (s *costServer) preload(ctx context.Context) error {
	conn, err := pgx.Connect(ctx, s.url)
	if err != nil {
		return err
	}
	_, err = conn.Exec(ctx, "ALTER SYSTEM SET shared_preload_libraries = 'pg_stat_statements'")
	conn.Close(ctx)
	if err != nil {
		return err
	}
	if err := s.top.RestartPrimary(ctx); err != nil {
		return fmt.Errorf("restart the private server to load pg_stat_statements: %w", err)
	}
	return nil
}

// connect opens the probe's connection and checks that the server has
// what the measure reads.
func (s *costServer) connect(ctx context.Context) error {
	conn, err := pgx.Connect(ctx, s.url)
	if err != nil {
		return err
	}
	s.probe = conn
	var version int
	var preload, fullVersion string
	if err := conn.QueryRow(ctx, `SELECT /* cost-probe */ current_setting('server_version_num')::int,
		current_setting('shared_preload_libraries'), version()`).Scan(&version, &preload, &fullVersion); err != nil {
		return err
	}
	if version < 150000 {
		return fmt.Errorf("the server is PostgreSQL %d; -cost needs 15 or later (pg_stat_force_next_flush, pg_walinspect)", version/10000)
	}
	if !slices.Contains(strings.Split(strings.ReplaceAll(preload, " ", ""), ","), "pg_stat_statements") {
		return errors.New("the server has not loaded pg_stat_statements: set shared_preload_libraries = 'pg_stat_statements' " +
			"(postgresql.conf or ALTER SYSTEM), restart it, and run CREATE EXTENSION pg_stat_statements in the database; " +
			"or leave -postgres out, and -cost starts a private server set up so")
	}
	if _, err := conn.Exec(ctx, "CREATE EXTENSION IF NOT EXISTS pg_stat_statements"); err != nil {
		return fmt.Errorf("CREATE EXTENSION pg_stat_statements: %w", err)
	}
	if _, err := conn.Exec(ctx, "CREATE EXTENSION IF NOT EXISTS pg_walinspect"); err != nil {
		fmt.Fprintf(os.Stderr, "cost: no pg_walinspect (%v): the figures read from the WAL are left out\n", err)
	} else {
		s.walinspect = true
	}
	// The probe's own statements stay out of pg_stat_statements where the
	// server lets it (a superuser); elsewhere costProbeMark filters them.
	if _, err := conn.Exec(ctx, "SET pg_stat_statements.track = 'none'"); err != nil {
		fmt.Fprintf(os.Stderr, "cost: the probe's statements are tracked (%v); they are left out by their text\n", err)
	}
	s.describe = strings.Fields(fullVersion)[0] + " " + strings.Fields(fullVersion)[1]
	if s.top != nil {
		s.describe = "private " + s.describe + " server (chaos/pgtopology, PostgreSQL's defaults)"
	} else {
		s.describe += " server at -postgres"
	}
	var settings []string
	for _, name := range []string{"shared_buffers", "wal_level", "full_page_writes", "wal_compression", "synchronous_commit",
		"autovacuum", "checkpoint_timeout", "max_wal_size"} {
		var v string
		if err := conn.QueryRow(ctx, "SELECT /* cost-probe */ current_setting($1)", name).Scan(&v); err != nil {
			return err
		}
		settings = append(settings, name+"="+v)
	}
	s.settings = strings.Join(settings, ", ")
	return nil
}

func (s *costServer) close() {
	if s.probe != nil {
		s.probe.Close(context.Background())
	}
	if s.top != nil {
		if err := s.top.Stop(context.Background()); err != nil {
			fmt.Fprintln(os.Stderr, "cost: stop the private server:", err)
		}
	}
}

// run measures one variant: a fresh schema, its enqueue phase, then its
// work phase.
func (s *costServer) run(ctx context.Context, v costVariant, jobs int) (*costRun, error) {
	calls := &callCounter{}
	var schema string
	e := &env{store: "postgres", url: s.url, tracer: calls, created: func(name string) { schema = name }}
	p := &costProbe{conn: s.probe, walinspect: s.walinspect, calls: calls, table: v.table}
	r := &costRun{}
	// phases runs both phases once the system's schema is migrated and
	// its client made.
	phases := func(enqueue, work func(context.Context) error) (result, error) {
		p.schema = schema
		// The statements that made the schema are counted before the
		// first phase begins.
		if err := p.settle(ctx, true); err != nil {
			return result{}, err
		}
		for i, f := range []func(context.Context) error{enqueue, work} {
			fig, err := p.phase(ctx, f)
			if err != nil {
				return result{}, fmt.Errorf("%s: %w", costPhases[i], err)
			}
			r.phases = append(r.phases, fig)
		}
		var err error
		if r.indexes, err = p.indexes(ctx); err != nil {
			return result{}, err
		}
		r.states, err = p.states(ctx)
		return result{}, err
	}
	var err error
	if v.ceiling {
		var b *bareSchema
		if b, err = newBareSchema(ctx, e, "ceiling"); err != nil {
			return nil, err
		}
		defer b.close()
		var client *errand.Client[pgx.Tx]
		if client, err = errand.NewClient(b.store, &errand.Config{Kinds: errandKinds(nil, nil)}); err != nil {
			return nil, err
		}
		defer client.Close()
		_, err = phases(func(ctx context.Context) error { return (errandOps[pgxTx]{c: client}).enqueueMany(ctx, jobs) },
			func(ctx context.Context) error {
				_, err := ceilingLoops(ctx, b.pool, b.table, ceilingDeleteSQL, jobs, ceilingCostBatch)
				return err
			})
	} else if v.river {
		_, err = withRiver(ctx, e, nil, func(c riverClient) (result, error) {
			enqueue := c.insertMany
			if v.enqueue == "InsertManyFast" {
				enqueue = c.insertManyFast
			}
			return phases(func(ctx context.Context) error { return enqueue(ctx, jobs) },
				func(ctx context.Context) error { _, err := c.work(ctx, jobs); return err })
		})
	} else {
		kinds := errandKinds(nil, &errand.KindOpts{DeleteOnSuccess: v.deleting})
		_, err = withErrandKinds(ctx, e, kinds, func(c errandClient) (result, error) {
			return phases(func(ctx context.Context) error { return c.enqueueMany(ctx, jobs) },
				func(ctx context.Context) error { _, err := c.work(ctx, jobs); return err })
		})
	}
	if err != nil {
		return nil, err
	}
	done := r.states["succeeded"] + r.states["completed"]
	switch {
	case v.deleting && len(r.states) != 0:
		return nil, fmt.Errorf("after the work the job table holds %v; want no job", r.states)
	case !v.deleting && (done != jobs || len(r.states) != 1):
		return nil, fmt.Errorf("after the work the job table holds %v; want %d finished jobs", r.states, jobs)
	}
	return r, nil
}

// costProbe reads the server's statistics around a phase, on a connection
// of its own.
type costProbe struct {
	conn          *pgx.Conn
	walinspect    bool
	calls         *callCounter
	schema, table string
}

// costSnapshot is the server's counters at one moment.
type costSnapshot struct {
	lsn   string
	f     phaseFigures // counters, summed over a phase as after minus before
	stmts map[string]stmtCounters
}

type stmtCounters struct{ calls, ms, rows, walBytes float64 }

// phase runs one phase and returns its figures: after minus before of
// every counter, sizes at the end, and what the WAL between holds.
func (p *costProbe) phase(ctx context.Context, run func(context.Context) error) (phaseFigures, error) {
	// Every page's first change after a checkpoint writes its full image:
	// with a checkpoint just before, each phase's count of them is the
	// same whenever it runs (checkpoint_timeout is far longer than a
	// phase).
	if _, err := p.conn.Exec(ctx, "CHECKPOINT /* cost-probe */"); err != nil {
		return nil, fmt.Errorf("CHECKPOINT: %w", err)
	}
	if err := p.settle(ctx, false); err != nil {
		return nil, err
	}
	before, err := p.snapshot(ctx)
	if err != nil {
		return nil, err
	}
	sizesBefore, err := p.sizes(ctx)
	if err != nil {
		return nil, err
	}
	cpuBefore, start := readCPU(), time.Now()
	if err := run(ctx); err != nil {
		return nil, err
	}
	cpuAfter, wall := readCPU(), time.Since(start)
	if err := p.settle(ctx, true); err != nil {
		return nil, err
	}
	after, err := p.snapshot(ctx)
	if err != nil {
		return nil, err
	}
	f := phaseFigures{}
	for k, v := range after.f {
		f[k] = v - before.f[k]
	}
	for q, a := range after.stmts {
		b := before.stmts[q]
		if calls := a.calls - b.calls; calls > 0 {
			f["stmt.calls."+q] = calls
			f["stmt.ms."+q] = a.ms - b.ms
			f["stmt.rows."+q] = a.rows - b.rows
			f["stmt.walbytes."+q] = a.walBytes - b.walBytes
			f["stmt.calls"] += calls
		}
	}
	f["cpu.server"] = cpuAfter.server - cpuBefore.server
	f["cpu.client"] = cpuAfter.client - cpuBefore.client
	f["cpu.wall"] = wall.Seconds()
	sizes, err := p.sizes(ctx)
	if err != nil {
		return nil, err
	}
	for rel, n := range sizes {
		f["size."+rel] = n
		f["grow."+rel] = n - sizesBefore[rel]
	}
	if p.walinspect {
		if err := p.readWAL(ctx, before.lsn, after.lsn, f); err != nil {
			// The segments may be gone (a checkpoint during a phase
			// longer than max_wal_size recycles them): say so and go on.
			fmt.Fprintf(os.Stderr, "cost: the phase's WAL could not be read back: %v\n", err)
			f["walinspect.failed"] = 1
		}
	}
	return f, nil
}

// settle waits until what backends counted has reached the statistics. A
// backend reports its counts when it goes idle, but if it reported less
// than a second before, it reports PGSTAT_IDLE_INTERVAL (10 s) later; the
// checkpointer reports as a checkpoint ends. So after a phase (long) it
// waits 10.5 s, after a checkpoint a second, and then until two readings
// 300 ms apart agree.
func (p *costProbe) settle(ctx context.Context, long bool) error {
	wait := 1100 * time.Millisecond
	if long {
		wait = 10500 * time.Millisecond
	}
	select {
	case <-time.After(wait):
	case <-ctx.Done():
		return ctx.Err()
	}
	last := ""
	for range 30 {
		var now string
		if err := p.conn.QueryRow(ctx, `SELECT /* cost-probe */ (SELECT wal_records FROM pg_stat_wal)::text || '/' ||
			coalesce((SELECT sum(n_tup_ins + n_tup_upd + n_tup_del) FROM pg_stat_user_tables WHERE schemaname = $1), 0)::text
			FROM pg_stat_clear_snapshot()`, p.schema).Scan(&now); err != nil {
			return err
		}
		if now == last {
			return nil
		}
		last = now
		time.Sleep(300 * time.Millisecond)
	}
	return nil // still moving (autovacuum, most likely): the figures say whether it ran
}

// snapshot reads the counters.
func (p *costProbe) snapshot(ctx context.Context) (*costSnapshot, error) {
	if _, err := p.conn.Exec(ctx, "SELECT /* cost-probe */ pg_stat_force_next_flush(), pg_stat_clear_snapshot()"); err != nil {
		return nil, err
	}
	s := &costSnapshot{f: phaseFigures{}, stmts: map[string]stmtCounters{}}
	var records, fpi, bytes, writes, syncs, checkpoints int64
	if err := p.conn.QueryRow(ctx, `SELECT /* cost-probe */ pg_current_wal_insert_lsn()::text,
			wal_records, wal_fpi, wal_bytes::bigint, wal_write, wal_sync,
			(SELECT checkpoints_timed + checkpoints_req FROM pg_stat_bgwriter)
		FROM pg_stat_wal`).Scan(&s.lsn, &records, &fpi, &bytes, &writes, &syncs, &checkpoints); err != nil {
		return nil, err
	}
	s.f["wal.records"], s.f["wal.fpi"], s.f["wal.bytes"] = float64(records), float64(fpi), float64(bytes)
	s.f["wal.write"], s.f["wal.sync"], s.f["checkpoints"] = float64(writes), float64(syncs), float64(checkpoints)
	rows, err := p.conn.Query(ctx, `SELECT /* cost-probe */ relname, n_tup_ins, n_tup_upd, n_tup_hot_upd, n_tup_del,
			autovacuum_count + vacuum_count, autoanalyze_count + analyze_count
		FROM pg_stat_user_tables WHERE schemaname = $1`, p.schema)
	if err != nil {
		return nil, err
	}
	var rel string
	var ins, upd, hot, del, vacuums, analyzes int64
	_, err = pgx.ForEachRow(rows, []any{&rel, &ins, &upd, &hot, &del, &vacuums, &analyzes}, func() error {
		for k, v := range map[string]int64{"ins": ins, "upd": upd, "hot": hot, "del": del, "vacuum": vacuums, "analyze": analyzes} {
			s.f["tab."+k+"."+rel] = float64(v)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	// Statements of this database, top-level ones (a function's
	// statements are in its caller's), but for the probe's.
	rows, err = p.conn.Query(ctx, `SELECT /* cost-probe */ query, calls, total_exec_time, rows, wal_bytes::float8
		FROM pg_stat_statements
		WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) AND toplevel
			AND query NOT LIKE '%' || $1 || '%'`, costProbeMark)
	if err != nil {
		return nil, err
	}
	var query string
	var c stmtCounters
	var calls, nrows int64
	_, err = pgx.ForEachRow(rows, []any{&query, &calls, &c.ms, &nrows, &c.walBytes}, func() error {
		c.calls, c.rows = float64(calls), float64(nrows)
		q := normalizeStatement(query, p.schema)
		sum := s.stmts[q]
		sum.calls, sum.ms, sum.rows, sum.walBytes = sum.calls+c.calls, sum.ms+c.ms, sum.rows+c.rows, sum.walBytes+c.walBytes
		s.stmts[q] = sum
		return nil
	})
	if err != nil {
		return nil, err
	}
	for k, v := range p.calls.counts() {
		s.f["client."+k] = float64(v)
	}
	return s, nil
}

// normalizeStatement is a statement's text as the report shows it: the
// schema's name (which differs between runs) replaced by <schema>, and its
// white space collapsed.
func normalizeStatement(q, schema string) string {
	q = strings.ReplaceAll(q, `"`+schema+`"`, "<schema>")
	q = strings.ReplaceAll(q, schema, "<schema>")
	return strings.Join(strings.Fields(q), " ")
}

// sizes reads the size of every table and index of the schema, in bytes
// (main fork).
func (p *costProbe) sizes(ctx context.Context) (map[string]float64, error) {
	rows, err := p.conn.Query(ctx, `SELECT /* cost-probe */ c.relname, pg_relation_size(c.oid)
		FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = $1 AND c.relkind IN ('r', 'i')`, p.schema)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	var rel string
	var n int64
	_, err = pgx.ForEachRow(rows, []any{&rel, &n}, func() error {
		out[rel] = float64(n)
		return nil
	})
	return out, err
}

// indexes lists the job table's indexes.
func (p *costProbe) indexes(ctx context.Context) ([]indexInfo, error) {
	rows, err := p.conn.Query(ctx, `SELECT /* cost-probe */ c.relname, am.amname, pg_get_indexdef(c.oid)
		FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_am am ON am.oid = c.relam
		WHERE i.indrelid = $1::regclass ORDER BY c.relname`, pgx.Identifier{p.schema, p.table}.Sanitize())
	if err != nil {
		return nil, err
	}
	var out []indexInfo
	var ix indexInfo
	_, err = pgx.ForEachRow(rows, []any{&ix.name, &ix.method, &ix.def}, func() error {
		// "CREATE [UNIQUE] INDEX name ON schema.table USING btree (cols)
		// WHERE pred": keep what follows USING's method.
		unique := strings.HasPrefix(ix.def, "CREATE UNIQUE")
		if _, rest, ok := strings.Cut(ix.def, " USING "+ix.method+" "); ok {
			ix.def = rest
		}
		if unique {
			ix.def = "UNIQUE " + ix.def
		}
		// One line, and without the schema, which differs between runs.
		ix.def = strings.ReplaceAll(strings.Join(strings.Fields(ix.def), " "), p.schema+".", "")
		out = append(out, ix)
		return nil
	})
	return out, err
}

// states counts the job table's rows by state.
func (p *costProbe) states(ctx context.Context) (map[string]int, error) {
	rows, err := p.conn.Query(ctx, `SELECT /* cost-probe */ state::text, count(*) FROM `+
		pgx.Identifier{p.schema, p.table}.Sanitize()+` GROUP BY 1`)
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	var state string
	var n int
	_, err = pgx.ForEachRow(rows, []any{&state, &n}, func() error {
		out[state] = n
		return nil
	})
	return out, err
}

// callCounter counts the client's calls to the server, on every
// connection of the pools it traces: statements (Query, QueryRow, Exec),
// pipelined batches, COPYs and statement preparations (pgx prepares each
// statement on a connection's first use of it).
type callCounter struct {
	queries, batches, batchQueries, copies, prepares, connects atomic.Int64
}

func (c *callCounter) counts() map[string]int64 {
	return map[string]int64{"queries": c.queries.Load(), "batches": c.batches.Load(), "batchqueries": c.batchQueries.Load(),
		"copies": c.copies.Load(), "prepares": c.prepares.Load(), "connects": c.connects.Load()}
}

func (c *callCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.queries.Add(1)
	return ctx
}

func (c *callCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (c *callCounter) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	c.batches.Add(1)
	return ctx
}

func (c *callCounter) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {
	c.batchQueries.Add(1)
}

func (c *callCounter) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

func (c *callCounter) TraceCopyFromStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceCopyFromStartData) context.Context {
	c.copies.Add(1)
	return ctx
}

func (c *callCounter) TraceCopyFromEnd(context.Context, *pgx.Conn, pgx.TraceCopyFromEndData) {}

func (c *callCounter) TracePrepareStart(ctx context.Context, _ *pgx.Conn, _ pgx.TracePrepareStartData) context.Context {
	return ctx
}

func (c *callCounter) TracePrepareEnd(_ context.Context, _ *pgx.Conn, d pgx.TracePrepareEndData) {
	if !d.AlreadyPrepared {
		c.prepares.Add(1)
	}
}

func (c *callCounter) TraceConnectStart(ctx context.Context, _ pgx.TraceConnectStartData) context.Context {
	c.connects.Add(1)
	return ctx
}

func (c *callCounter) TraceConnectEnd(context.Context, pgx.TraceConnectEndData) {}

// cpuTimes are CPU seconds used so far: by every postgres process of the
// machine (the private server's, and any other server's, idle in a
// measure), and by this process, the systems' client side.
type cpuTimes struct{ server, client float64 }

// readCPU reads the CPU times from /proc; where there is none (not Linux),
// both stay 0 and the report shows them as such.
func readCPU() cpuTimes {
	var t cpuTimes
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		comm, used, ok := procCPU(string(b))
		if !ok {
			continue
		}
		if e.Name() == "self" {
			t.client = used
		} else if strings.HasPrefix(comm, "postgres") {
			t.server += used
		}
	}
	return t
}

// procCPU parses a /proc/PID/stat line: the command's name, and the user
// and system CPU seconds of the process and of its children that have
// ended (clock ticks of 100 a second, as on every Linux Go runs on). The
// children count because a backend that exits during a phase takes its
// time with it, and the postmaster, which waits for it, inherits it.
func procCPU(stat string) (comm string, seconds float64, ok bool) {
	open, end := strings.IndexByte(stat, '('), strings.LastIndexByte(stat, ')')
	if open < 0 || end < open {
		return "", 0, false
	}
	f := strings.Fields(stat[end+1:])
	if len(f) < 15 {
		return "", 0, false
	}
	total := 0.0
	for _, field := range f[11:15] { // utime, stime, cutime, cstime
		var ticks float64
		if _, err := fmt.Sscan(field, &ticks); err != nil {
			return "", 0, false
		}
		total += ticks
	}
	return stat[open+1 : end], total / 100, true
}
