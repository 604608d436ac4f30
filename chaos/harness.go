// Package chaos is errand's fault harness: it runs real worker processes,
// remote API workers and a seeded load against a store while a seeded
// nemesis kills, pauses, disconnects and starves them, then checks, once
// quiet, what errand promises (docs/guarantees.md) against a durable log of
// acknowledged enqueues and an idempotent sink of effects.
//
// It is a test tool: the library never imports it. See chaos/README.md.
package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/chaos/history"
	"github.com/errandhq/errand/chaos/pgtopology"
)

// Config is one run.
type Config struct {
	// Store is "sqlite" or "postgres".
	Store string
	// PostgresURL is the server for Store "postgres"; the run makes a
	// schema of its own there and drops it afterwards. With PGPrivate the
	// run instead starts a cluster of its own (initdb, pg_ctl), which the
	// nemesis may restart.
	PostgresURL string
	PGPrivate   bool
	// Seed decides the load, the poison and failing jobs, and the
	// nemesis's schedule.
	Seed uint64
	// Duration is how long the load and the nemesis run, before the
	// harness heals everything and drains.
	Duration time.Duration
	// Workers is the number of errand work processes; RemoteWorkers of
	// API workers. Defaults 3 and 2.
	Workers       int
	RemoteWorkers int
	// Rate is enqueues per second. Default 8.
	Rate float64
	// Lease of every worker. Default 3s.
	Lease time.Duration
	// Faults lists the fault kinds the nemesis may inject; nil means all
	// (see FaultKinds).
	Faults []string
	// Dir holds the run's files; empty means a new temporary directory,
	// removed after a clean run.
	Dir string
	// ErrandBin is a built errand binary; empty means go build.
	ErrandBin string
	// Self is the command that runs this harness's own roles (RunRole):
	// the errand-chaos executable, or a test binary. Empty leaves the
	// clock-skew fault out.
	Self []string
	// DrainTimeout bounds the wait for quiet. Default 90s.
	DrainTimeout time.Duration
	// Logf hears progress; nil discards.
	Logf func(format string, args ...any)
}

// FaultKinds are the faults the nemesis knows, in the report's order.
var FaultKinds = []string{
	"kill_worker", "stop_worker", "kill_server", "stall_remote", "sink_outage",
	"db_restart", "db_terminate", "conn_cut", "disk_full", "clock_skew",
	"replay_race", "cancel_race", "duplicate_enqueue", "poison",
}

// kinds the jobs use; every one is delivered to the sink.
var jobKinds = []string{"chaos_ok", "chaos_flaky", "chaos_slow", "chaos_batch_done", "chaos_step", "chaos_undo", "chaos_tick"}

type run struct {
	cfg    Config
	rng    *rand.Rand
	target Target
	client Client
	sink   *sink
	log    *enqueueLog
	logp   string
	api    *api
	errand string

	workers []*proc
	server  *proc
	skew    *proc
	remotes []*remoteWorker
	lin     linear

	mu       sync.Mutex
	counts   map[string]int
	faults   map[string]int
	skipped  map[string]string
	early    []Violation // seen during the run (a duplicate that made a new job)
	batches  []string
	flows    []string
	cancels  map[string]bool // jobs whose cancel the store acknowledged
	replays  map[string]int  // jobs whose replay the store acknowledged
	serveURL string
}

func (r *run) logf(format string, args ...any) {
	if r.cfg.Logf != nil {
		r.cfg.Logf(format, args...)
	}
}

func (r *run) count(name string) {
	r.mu.Lock()
	r.counts[name]++
	r.mu.Unlock()
}

func (r *run) violate(inv, id, detail string) {
	r.mu.Lock()
	r.early = append(r.early, Violation{Invariant: inv, JobID: id, Detail: detail})
	r.mu.Unlock()
}

// UsageError is a Config that cannot run: it says what to change.
type UsageError struct{ Err error }

func (e *UsageError) Error() string { return e.Err.Error() }
func (e *UsageError) Unwrap() error { return e.Err }

func (c *Config) defaults() error {
	if err := c.check(); err != nil {
		return &UsageError{err}
	}
	return nil
}

func (c *Config) check() error {
	if c.Store == "" {
		c.Store = "sqlite"
	}
	if c.Store != "sqlite" && c.Store != "postgres" {
		return fmt.Errorf("store %q: use sqlite or postgres", c.Store)
	}
	if c.Store == "postgres" && c.PostgresURL == "" && !c.PGPrivate {
		return errors.New("store postgres needs a server URL (-pg-url or ERRAND_TEST_POSTGRES_URL) or -pg-private")
	}
	if c.Duration <= 0 {
		return fmt.Errorf("duration %v: give a positive duration, e.g. 1m", c.Duration)
	}
	if c.Workers == 0 {
		c.Workers = 3
	}
	if c.RemoteWorkers == 0 {
		c.RemoteWorkers = 2
	}
	if c.Workers < 1 || c.RemoteWorkers < 0 {
		return errors.New("workers: at least 1 worker process, and 0 or more remote workers")
	}
	if c.Rate == 0 {
		c.Rate = 8
	}
	if c.Lease == 0 {
		c.Lease = 3 * time.Second
	}
	if c.Lease < time.Second {
		return fmt.Errorf("lease %v: at least 1s", c.Lease)
	}
	if c.DrainTimeout == 0 {
		c.DrainTimeout = 90 * time.Second
	}
	for _, f := range c.Faults {
		if !contains(FaultKinds, f) {
			return fmt.Errorf("fault %q: use some of %s", f, strings.Join(FaultKinds, ", "))
		}
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// Run runs the harness and returns its report. An error is a harness
// failure (a process that would not start); violations are in the report.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	r := &run{cfg: cfg, rng: rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15)),
		counts: map[string]int{}, faults: map[string]int{}, skipped: map[string]string{},
		cancels: map[string]bool{}, replays: map[string]int{}, lin: linear{rec: history.NewRecorder()}}
	dir := cfg.Dir
	if dir == "" {
		d, err := os.MkdirTemp("", "errand-chaos-")
		if err != nil {
			return nil, err
		}
		dir = d
	} else if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	start := time.Now()
	rep, err := r.run(ctx, dir)
	if r.target != nil {
		if cerr := r.target.Close(); cerr != nil {
			r.logf("close the target: %v", cerr)
		}
	}
	if rep != nil {
		rep.Dir = &dir
		rep.Elapsed = time.Since(start).Round(time.Second).String()
		if cfg.Dir == "" && err == nil && rep.OK() {
			os.RemoveAll(dir)
			rep.Dir = nil
		}
	} else if cfg.Dir == "" {
		os.RemoveAll(dir)
	}
	return rep, err
}

func (r *run) run(ctx context.Context, dir string) (*Report, error) {
	cfg := r.cfg
	if err := r.setupTarget(ctx, dir); err != nil {
		return nil, err
	}
	bin := cfg.ErrandBin
	if bin == "" {
		bin = filepath.Join(dir, "errand")
		r.logf("building errand into %s", bin)
		out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/errandhq/errand/cmd/errand").CombinedOutput()
		if err != nil {
			return nil, fmt.Errorf("go build ./cmd/errand: %v: %s", err, out)
		}
	}
	r.errand = bin
	var err error
	if r.sink, err = openSink(filepath.Join(dir, "sink.db")); err != nil {
		return nil, err
	}
	defer r.sink.close()
	if err := r.sink.serve(); err != nil {
		return nil, err
	}
	r.logp = filepath.Join(dir, "enqueued.log")
	if r.log, err = createLog(r.logp); err != nil {
		return nil, err
	}
	defer r.log.close()
	// The harness's own client opens the store first, which migrates it.
	if r.client, err = r.target.Open(ctx, nil, &errand.Config{}); err != nil {
		return nil, fmt.Errorf("open the %s store: %w", r.target.Name(), err)
	}
	defer func() { r.client.Close() }()

	if err := r.startProcesses(dir); err != nil {
		r.stopAll()
		return nil, err
	}
	r.logf("seed %d: %d worker processes, %d remote workers, errand serve at %s", cfg.Seed, len(r.workers), len(r.remotes), r.serveURL)

	// The load, the operators and the nemesis, for Duration.
	loadCtx, stopLoad := context.WithTimeout(ctx, cfg.Duration)
	defer stopLoad()
	remCtx, stopRemotes := context.WithCancel(ctx)
	var wg, rwg sync.WaitGroup
	for _, w := range r.remotes {
		rwg.Add(1)
		go func() { defer rwg.Done(); w.loop(remCtx) }()
	}
	for i := range 3 {
		rwg.Add(1)
		go func() { defer rwg.Done(); r.linearWorker(remCtx, fmt.Sprintf("linear-%d", i)) }()
	}
	plan := r.plan()
	wg.Add(5)
	go func() { defer wg.Done(); r.linearLoad(loadCtx) }()
	go func() { defer wg.Done(); r.supervise(loadCtx) }()
	go func() { defer wg.Done(); r.load(loadCtx) }()
	go func() { defer wg.Done(); r.operators(loadCtx) }()
	go func() { defer wg.Done(); r.nemesis(loadCtx, plan) }()
	wg.Wait()

	r.logf("healing and draining")
	r.heal(ctx)
	quiet := r.drain(ctx)
	stopRemotes()
	rwg.Wait()
	r.stopAll()

	rep := r.check(ctx, dir)
	rep.Quiet = quiet
	return rep, nil
}

// diskSize is the size of the SQLite run's tmpfs: room for everything the
// run writes (about 3.6 KiB of database and WAL a logged enqueue, counted
// twice over), so that only the disk_full fault fills it. A 64 MiB disk
// filled up for good 25 minutes into a run of 8 enqueues a second.
func diskSize(c Config) int64 {
	enqueues := c.Rate * c.Duration.Seconds()
	return 64<<20 + int64(enqueues)*8<<10
}

func (r *run) setupTarget(ctx context.Context, dir string) error {
	switch r.cfg.Store {
	case "sqlite":
		t := &sqliteTarget{}
		disk := filepath.Join(dir, "disk")
		if err := mountTmpfs(disk, diskSize(r.cfg)); err != nil {
			r.skipped["disk_full"] = "mounting a tmpfs failed (" + err.Error() + "); the database is on the ordinary disk"
			os.MkdirAll(disk, 0o700)
		} else {
			t.disk = disk
		}
		t.path = filepath.Join(disk, "errand.db")
		r.target = t
	case "postgres":
		base := r.cfg.PostgresURL
		var topo *pgtopology.Topology
		if r.cfg.PGPrivate {
			var err error
			if topo, err = pgtopology.Start(ctx, pgtopology.Single); err != nil {
				return err
			}
			base = topo.URL
		}
		schema := fmt.Sprintf("chaos_%d_%d", r.cfg.Seed, time.Now().UnixNano()%1e9)
		t, err := newPostgresTarget(ctx, base, schema)
		if err != nil {
			if topo != nil {
				topo.Stop(context.WithoutCancel(ctx))
			}
			return err
		}
		t.topo = topo
		r.target = t
		r.skipped["disk_full"] = "PostgreSQL's data directory is not the run's to fill; the fault runs on SQLite"
	}
	return nil
}

func (r *run) env() []string {
	return append([]string{"ERRAND_DB=" + r.target.URL()}, r.target.Env()...)
}

func (r *run) startProcesses(dir string) error {
	cfg := r.cfg
	port, err := freePort()
	if err != nil {
		return err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	r.serveURL = "http://" + addr
	r.server = &proc{name: "serve", argv: []string{r.errand, "serve", "--addr", addr, "--no-auth"},
		env: r.env(), log: filepath.Join(dir, "serve.log")}
	if err := r.server.start(); err != nil {
		return err
	}
	r.api = &api{base: r.serveURL + "/api/v1", hc: &http.Client{Timeout: 15 * time.Second}}
	if err := r.waitServe(); err != nil {
		return err
	}
	for i := range cfg.Workers {
		argv := []string{r.errand, "work", "--lease", cfg.Lease.String(), "--poll", "500ms", "--leader-ttl", "3s",
			"--grace", "5s", "--queue", "default=4", "--timeout", "chaos_slow=20s",
			"--cron", "tick=@every 1s chaos_tick {}"}
		for _, k := range jobKinds {
			argv = append(argv, "--http", k+"="+r.sink.url+"/deliver?via=webhook")
		}
		w := &proc{name: fmt.Sprintf("worker-%d", i), argv: argv, env: r.env(), log: filepath.Join(dir, fmt.Sprintf("worker-%d.log", i))}
		if err := w.start(); err != nil {
			return err
		}
		r.workers = append(r.workers, w)
	}
	if len(cfg.Self) > 0 {
		r.skew = &proc{name: "skew-worker", argv: cfg.Self, log: filepath.Join(dir, "skew-worker.log"),
			env: append(r.env(), RoleEnv+"=skew-worker", "CHAOS_SKEW=1h", "CHAOS_LEASE="+cfg.Lease.String(),
				"CHAOS_SINK="+r.sink.url, "CHAOS_KINDS="+strings.Join(jobKinds, ","))}
	} else {
		r.skipped["clock_skew"] = "no command to start the harness's own skewed worker"
	}
	for i := range cfg.RemoteWorkers {
		r.remotes = append(r.remotes, &remoteWorker{name: fmt.Sprintf("remote-%d", i), api: r.api, sink: r.sink,
			kinds: jobKinds, lease: cfg.Lease, run: r})
	}
	return nil
}

// waitServe waits for errand serve to answer.
func (r *run) waitServe() error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(r.serveURL + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) || !r.server.alive() {
			b, _ := os.ReadFile(r.server.log)
			return fmt.Errorf("errand serve did not start: %v: %s", err, tail(string(b), 600))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// heal undoes every fault still in force and restarts what is down.
func (r *run) heal(ctx context.Context) {
	r.sink.outage.Store(false)
	fillerRemove(r)
	for _, w := range r.remotes {
		w.stall.Store(0)
	}
	for _, p := range append(append([]*proc{}, r.workers...), r.server) {
		p.mu.Lock()
		stopped := p.stopped
		p.mu.Unlock()
		if stopped {
			p.signal(sigcont)
		}
		if !p.alive() {
			if err := p.start(); err != nil {
				r.logf("restart %s: %v", p.name, err)
			}
		}
	}
	if r.skew != nil && r.skew.alive() {
		r.skew.stop(10 * time.Second)
	}
	if err := r.waitServe(); err != nil {
		r.logf("%v", err)
	}
}

// supervise restarts a worker or server process that exited on its own (an
// errand work that cannot reach the database at start exits 1), as a
// service manager would.
func (r *run) supervise(ctx context.Context) {
	for ctx.Err() == nil {
		sleepCtx(ctx, time.Second)
		for _, p := range append(append([]*proc{}, r.workers...), r.server) {
			if p.crashed() && ctx.Err() == nil {
				r.logf("%s exited on its own; restarting it", p.name)
				if err := p.start(); err != nil {
					r.logf("restart %s: %v", p.name, err)
				}
			}
		}
	}
}

func (r *run) stopAll() {
	var wg sync.WaitGroup
	for _, p := range append(append([]*proc{}, r.workers...), r.server, r.skew) {
		if p == nil {
			continue
		}
		wg.Add(1)
		go func() { defer wg.Done(); p.stop(15 * time.Second) }()
	}
	wg.Wait()
}

// sortedKeys returns m's keys in order, for reports.
func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
