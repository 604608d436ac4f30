package main

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/dbos-inc/dbos-transact-golang/dbos"
	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
	"github.com/errandhq/errand/postgres"
	"github.com/errandhq/errand/sqlite"
)

// childFlag, first on the command line, runs a worker process of the
// recovery measure: flows -child errand|dbos FLAGS.
const childFlag = "-child"

// recoveryCase is one row of the recovery table: the flags of the first
// process, whose step 2 blocks, and of the second, whose step 2 returns.
type recoveryCase struct {
	sys, label    string
	first, second []string
}

func recoveryCases(o *options) []recoveryCase {
	dbosArgs := func(executor, version, code string) []string {
		return []string{"-executor", executor, "-app-version", version, "-code", code}
	}
	first := dbosArgs("host-a", "v1", "v1")
	return []recoveryCase{
		{"errand", "new process, lease " + o.lease.String(), []string{"-code", "v1"}, []string{"-code", "v2"}},
		{"dbos", "same executor id, same app version", first, dbosArgs("host-a", "v1", "v2")},
		{"dbos", "new executor id (another host)", first, dbosArgs("host-b", "v1", "v2")},
		{"dbos", "same executor id, new app version", first, dbosArgs("host-a", "v2", "v2")},
	}
}

func runRecovery(ctx context.Context, o *options, out io.Writer) error {
	fmt.Fprintf(out, "recovery after SIGKILL across a deploy: %d flows whose step 2 blocks in a first process, killed once the database holds every flow's step 1;\n", o.recoverFlows)
	fmt.Fprintf(out, "then a second process whose step 2 returns, given %s, the database read every %s (errand lease %s in both processes)\n", o.recoverTimeout, countPoll, o.lease)
	fmt.Fprintf(out, "%-9s %-7s %-35s %-38s %s\n", "store", "system", "second process", "finished, from its start", "step 1 ran")
	for _, store := range o.stores {
		for _, rc := range recoveryCases(o) {
			row, err := recoverOnce(ctx, o, store, rc)
			if err != nil {
				return fmt.Errorf("recovery of %s on %s, %s: %w", rc.sys, store, rc.label, err)
			}
			fmt.Fprintf(out, "%-9s %-7s %-35s %-38s %s\n", store, rc.sys, rc.label, row.finished, row.step1)
		}
	}
	return nil
}

type recoveryRow struct{ finished, step1 string }

// recoverOnce runs one case from a fresh schema or file: the first process
// until every flow has recorded step 1, its SIGKILL, and the second
// process until every flow has finished or -recover-timeout has passed.
func recoverOnce(ctx context.Context, o *options, store string, rc recoveryCase) (recoveryRow, error) {
	n := o.recoverFlows
	t, cleanup, err := newTarget(o, store, "rec_"+rc.sys)
	if err != nil {
		return recoveryRow{}, err
	}
	defer cleanup()
	dir, err := os.MkdirTemp("", "flows-log-")
	if err != nil {
		return recoveryRow{}, err
	}
	defer os.RemoveAll(dir)
	logPath := filepath.Join(dir, "step1.log")
	common := []string{"-store", store, "-postgres", o.url, "-schema", t.schema, "-path", t.path,
		"-flows", strconv.Itoa(n), "-log", logPath, "-lease", o.lease.String(), "-sqlite-sync", o.sqliteSync}

	var r *dbReader
	defer func() {
		if r != nil {
			r.close()
		}
	}()
	if store == "postgres" || rc.sys == "errand" { // DBOS creates its SQLite file itself
		if r, err = openReader(ctx, rc.sys, t); err != nil {
			return recoveryRow{}, err
		}
	}
	first, err := startChild(rc.sys, slices.Concat(common, rc.first, []string{"-start"}))
	if err != nil {
		return recoveryRow{}, err
	}
	defer first.kill()
	if err := first.waitReady(stuck); err != nil {
		return recoveryRow{}, err
	}
	if r == nil {
		if r, err = openReader(ctx, rc.sys, t); err != nil {
			return recoveryRow{}, err
		}
	}
	if err := waitCount(ctx, r, "step1", n, stuck); err != nil {
		return recoveryRow{}, fmt.Errorf("first process: %w", err)
	}
	first.kill()
	if done, err := r.count(ctx, "finished"); err != nil || done > 0 {
		return recoveryRow{}, fmt.Errorf("%d flows finished in the first process, whose step 2 blocks (%v)", done, err)
	}

	start := time.Now()
	second, err := startChild(rc.sys, slices.Concat(common, rc.second))
	if err != nil {
		return recoveryRow{}, err
	}
	defer second.kill()
	finished, last := 0, time.Duration(0)
	for finished < n && time.Since(start) < o.recoverTimeout {
		got, err := r.count(ctx, "finished")
		if err != nil {
			return recoveryRow{}, err
		}
		if got > finished {
			finished, last = got, time.Since(start)
		}
		select {
		case <-second.exited:
			return recoveryRow{}, second.failure()
		case <-time.After(countPoll):
		}
	}
	second.kill()

	row := recoveryRow{step1: stepRuns(logPath, n)}
	switch {
	case finished == n:
		row.finished = fmt.Sprintf("%d of %d, the last at %.2f s", n, n, last.Seconds())
	case finished > 0:
		row.finished = fmt.Sprintf("%d of %d finished in %s (last %.2f s)", finished, n, o.recoverTimeout, last.Seconds())
	default:
		row.finished = fmt.Sprintf("0 of %d finished in %s", n, o.recoverTimeout)
	}
	return row, nil
}

// stepRuns tells how often step 1 ran, from the log every run appends the
// flow's id to.
func stepRuns(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "unknown: " + err.Error()
	}
	ids := strings.Fields(string(b))
	runs := map[string]int{}
	again := 0
	for _, id := range ids {
		if runs[id]++; runs[id] == 2 {
			again++
		}
	}
	switch {
	case again > 0:
		return fmt.Sprintf("%d runs, more than once for %d flows", len(ids), again)
	case len(runs) != n:
		return fmt.Sprintf("%d runs for %d flows", len(ids), n)
	}
	return fmt.Sprintf("once each (%d runs)", len(ids))
}

// child is a worker process of the recovery measure.
type child struct {
	sys    string
	cmd    *exec.Cmd
	ready  chan struct{} // closed when it prints "ready"
	exited chan struct{} // closed once it has exited; then err and stderr are set
	err    error
	stderr bytes.Buffer
}

func startChild(sys string, args []string) (*child, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	c := &child{sys: sys, ready: make(chan struct{}), exited: make(chan struct{})}
	c.cmd = exec.Command(exe, append([]string{childFlag, sys}, args...)...)
	// The environment would override the executor id and version each case sets.
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "DBOS__VMID=") && !strings.HasPrefix(kv, "DBOS__APPVERSION=") {
			c.cmd.Env = append(c.cmd.Env, kv)
		}
	}
	c.cmd.Stderr = &c.stderr
	stdout, err := c.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	// The child exits when its stdin closes: it does not outlive the parent.
	if _, err := c.cmd.StdinPipe(); err != nil {
		return nil, err
	}
	if err := c.cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if sc.Text() == "ready" {
				close(c.ready)
			}
		}
		c.err = c.cmd.Wait()
		close(c.exited)
	}()
	return c, nil
}

func (c *child) waitReady(within time.Duration) error {
	select {
	case <-c.ready:
		return nil
	case <-c.exited:
		return c.failure()
	case <-time.After(within):
		return fmt.Errorf("the %s process was not ready in %s", c.sys, within)
	}
}

// failure describes the exit of a child that was not killed.
func (c *child) failure() error {
	return fmt.Errorf("the %s process exited (%v): %s", c.sys, c.err, strings.TrimSpace(c.stderr.String()))
}

// kill SIGKILLs the child, if it still runs, and waits for its exit.
func (c *child) kill() {
	select {
	case <-c.exited:
		return
	default:
	}
	c.cmd.Process.Kill()
	<-c.exited
}

// childOpts configure a worker process of the recovery measure.
type childOpts struct {
	t                    target
	flows                int
	start                bool   // start the flows, as the first process does
	code                 string // v1: step 2 blocks until the process dies; v2: it returns
	log                  string // step 1 appends the flow's id here
	lease                time.Duration
	sqliteSync           string
	executor, appVersion string
}

func childMain(sys string, args []string) error {
	fs := flag.NewFlagSet("flows "+childFlag+" "+sys, flag.ContinueOnError)
	c := &childOpts{}
	fs.StringVar(&c.t.store, "store", "postgres", "postgres or sqlite")
	fs.StringVar(&c.t.url, "postgres", "", "the PostgreSQL database")
	fs.StringVar(&c.t.schema, "schema", "", "the schema in it")
	fs.StringVar(&c.t.path, "path", "", "the SQLite file")
	fs.IntVar(&c.flows, "flows", 0, "the flows of the measure")
	fs.BoolVar(&c.start, "start", false, "start the flows")
	fs.StringVar(&c.code, "code", "v1", "v1 (step 2 blocks) or v2")
	fs.StringVar(&c.log, "log", "", "step 1's log")
	fs.DurationVar(&c.lease, "lease", 2*time.Second, "errand's lease")
	fs.StringVar(&c.sqliteSync, "sqlite-sync", "FULL", "errand's SQLite synchronous setting")
	fs.StringVar(&c.executor, "executor", "", "DBOS's executor id")
	fs.StringVar(&c.appVersion, "app-version", "", "DBOS's application version")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if sys != "errand" && sys != "dbos" {
		return fmt.Errorf("%s %q: give errand or dbos", childFlag, sys)
	}
	if c.flows < 1 || c.log == "" || (c.code != "v1" && c.code != "v2") {
		return fmt.Errorf("%s %s: give -flows, -log and -code v1 or v2", childFlag, sys)
	}
	go func() {
		io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	}()
	ctx := context.Background()
	switch sys {
	case "errand":
		if c.t.store == "sqlite" {
			st, err := sqlite.Open(ctx, c.t.path, &sqlite.Options{Synchronous: c.sqliteSync})
			if err != nil {
				return err
			}
			return errandChild(ctx, c, st)
		}
		st, err := postgres.Open(ctx, c.t.url, &postgres.Options{Schema: c.t.schema, MaxConns: 10})
		if err != nil {
			return err
		}
		return errandChild(ctx, c, st)
	default:
		return dbosChild(ctx, c)
	}
}

// recoverySteps are the recovery measure's flow: step 1 logs each run of
// its function, step 2 blocks in code v1 and returns in v2.
func recoverySteps(c *childOpts, id string, step func(name string, fn func(context.Context) (int, error)) (int, error)) (int, error) {
	if _, err := step("step1", func(context.Context) (int, error) { return 1, appendLine(c.log, id) }); err != nil {
		return 0, err
	}
	if _, err := step("step2", func(ctx context.Context) (int, error) {
		if c.code == "v1" {
			<-ctx.Done()
			return 0, ctx.Err()
		}
		return 2, nil
	}); err != nil {
		return 0, err
	}
	return step("step3", func(context.Context) (int, error) { return 3, nil })
}

// appendLine appends line to path; one small O_APPEND write is atomic, and
// the page cache keeps it through a SIGKILL.
func appendLine(path, line string) error {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(line + "\n"); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// idle reports the child ready and waits to be killed.
func idle() error {
	fmt.Println("ready")
	for {
		time.Sleep(time.Hour)
	}
}

// errandChild works the flows with a worker whose slots hold them all at
// once, after enqueuing them with -start.
func errandChild[TTx any](ctx context.Context, c *childOpts, store errandstore.TxStore[TTx]) error {
	kinds := errand.NewKinds()
	errand.Handle(kinds, func(ctx context.Context, job *errandtype.Job, _ flowArgs) error {
		_, err := recoverySteps(c, job.ID, func(name string, fn func(context.Context) (int, error)) (int, error) {
			return errand.Step(ctx, name, fn)
		})
		return err
	}, nil)
	client, err := errand.NewClient(store, &errand.Config{Kinds: kinds,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))})
	if err != nil {
		return err
	}
	w, err := client.NewWorker(&errand.WorkerConfig{Queues: map[string]int{errand.DefaultQueue: c.flows}, Lease: c.lease})
	if err != nil {
		return err
	}
	if c.start {
		ps := make([]errand.EnqueueParams, c.flows)
		for i := range ps {
			ps[i] = errand.EnqueueParams{Args: flowArgs{}}
		}
		if _, err := client.EnqueueMany(ctx, ps); err != nil {
			return err
		}
	}
	if err := w.Start(ctx); err != nil {
		return err
	}
	return idle()
}

// dbosChild launches DBOS, which recovers what its executor id and
// application version allow, and starts the flows with -start.
func dbosChild(ctx context.Context, c *childOpts) error {
	dctx, err := dbos.NewContext(ctx, dbos.Config{AppName: "flows", DatabaseURL: c.t.dbosURL(), DatabaseSchema: c.t.schema,
		ExecutorID: c.executor, ApplicationVersion: c.appVersion,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))})
	if err != nil {
		return err
	}
	flow := func(ctx dbos.Context, _ string) (int, error) {
		id, err := dbos.GetWorkflowID(ctx)
		if err != nil {
			return 0, err
		}
		return recoverySteps(c, id, func(name string, fn func(context.Context) (int, error)) (int, error) {
			return dbos.RunAsStep(ctx, fn, dbos.WithStepName(name))
		})
	}
	// Named, so that both processes' registrations match whatever the binary.
	dbos.RegisterWorkflow(dctx, flow, dbos.WithWorkflowName("flow"))
	if err := dbos.Launch(dctx); err != nil {
		return err
	}
	if c.start {
		for range c.flows {
			if _, err := dbos.RunWorkflow(dctx, flow, ""); err != nil {
				return err
			}
		}
	}
	return idle()
}
