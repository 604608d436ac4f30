package errand_test

// Crash behaviour is tested with real processes: the test binary re-executes
// itself as a worker (see TestMain), several workers share one database
// file, and a worker that must crash sends itself SIGKILL, which no deferred
// call or recover can soften.

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
	"github.com/errandhq/errand/internal/pgschemas"
	"github.com/errandhq/errand/sqlite"
)

// Environment of a worker process.
const (
	envWorker = "ERRAND_TEST_WORKER" // "1" runs workerMain instead of the tests
	envDB     = "ERRAND_TEST_DB"
	envMode   = "ERRAND_TEST_MODE"
	envLease  = "ERRAND_TEST_LEASE"
)

// Worker modes: what the handler of kind "effect" does.
const (
	// modeEffect records the job's effect through Once and succeeds.
	modeEffect = "effect"
	// modeKillAfterEffect records the effect, commits it, then SIGKILLs
	// its own process before the acknowledgment.
	modeKillAfterEffect = "kill_after_effect"
	// modeKill SIGKILLs its own process at once: a poison job.
	modeKill = "kill"
)

const createProcessSink = `CREATE TABLE sink (job_id TEXT NOT NULL, pid INTEGER NOT NULL)`

func TestMain(m *testing.M) {
	if os.Getenv(envWorker) == "1" {
		os.Exit(workerMain())
	}
	if os.Getenv(envChunkWorker) == "1" {
		os.Exit(chunkWorkerMain())
	}
	if os.Getenv(envStepWorker) == "1" {
		os.Exit(stepWorkerMain())
	}
	code := m.Run()
	pgschemas.Close()
	os.Exit(code)
}

// workerMain is the worker process: it opens the database, says "ready",
// waits for the parent to close its stdin (the start barrier), runs WorkOne
// until there is nothing to claim, prints how many jobs it ran and exits.
func workerMain() int {
	ctx := context.Background()
	mode := os.Getenv(envMode)
	lease, err := time.ParseDuration(os.Getenv(envLease))
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker: bad lease:", err)
		return 2
	}
	st, err := sqlite.Open(ctx, os.Getenv(envDB), nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		return 1
	}
	defer st.Close()
	db := st.DB()
	var c *errand.Client[*sql.Tx]
	handler := func(ctx context.Context, job *errandtype.Job) error {
		if mode == modeKill {
			killSelf()
		}
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback() // a no-op after Commit
		_, err = errand.Once(ctx, tx, job, "", func() error {
			_, err := tx.ExecContext(ctx, `INSERT INTO sink (job_id, pid) VALUES (?, ?)`, job.ID, os.Getpid())
			return err
		})
		if err != nil {
			return err
		}
		if err := tx.Commit(); err != nil {
			return err
		}
		if mode == modeKillAfterEffect {
			killSelf()
		}
		// Work that holds no lock, as a real handler's would: it leaves the
		// other workers gaps to claim in. SQLite's busy handler polls, so a
		// worker that commits back to back can starve the rest.
		time.Sleep(10 * time.Millisecond)
		return nil
	}
	c, err = errand.NewClient(st, &errand.Config{Kinds: kindsOf([]testKind{{Name: "effect", Handler: errand.HandlerFunc(handler)}})})
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		return 1
	}

	fmt.Println("ready")
	_, _ = os.Stdin.Read(make([]byte, 1)) // returns when the parent closes the pipe

	ran := 0
	var slowest time.Duration
	owner := fmt.Sprintf("worker-%d", os.Getpid())
	for {
		start := time.Now()
		r, err := c.WorkOne(ctx, &errand.WorkOneOpts{Lease: lease, Owner: owner})
		slowest = max(slowest, time.Since(start))
		if err != nil {
			fmt.Fprintln(os.Stderr, "worker:", err)
			return 1
		}
		if r.Result == errand.ResultIdle {
			break
		}
		if r.Result != errand.ResultSucceeded {
			fmt.Fprintf(os.Stderr, "worker: job %s: %s %s %s\n", *r.JobID, r.Result, r.Class, r.Error)
			return 1
		}
		ran++
	}
	fmt.Fprintf(os.Stderr, "worker: slowest WorkOne took %v\n", slowest)
	fmt.Println(ran)
	return 0
}

func killSelf() {
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	time.Sleep(time.Hour) // never reached: SIGKILL cannot be caught
}

// worker is a running worker process.
type worker struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout *bufio.Reader
	stderr bytes.Buffer
}

// startWorker starts a worker process and waits until it has opened the
// database and waits at the barrier.
func startWorker(t *testing.T, path, mode string, lease time.Duration) *worker {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	w := &worker{cmd: exec.CommandContext(ctx, os.Args[0])}
	w.cmd.Env = append(os.Environ(), envWorker+"=1", envDB+"="+path, envMode+"="+mode, envLease+"="+lease.String())
	w.cmd.Stderr = &w.stderr
	var err error
	if w.stdin, err = w.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	out, err := w.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	w.stdout = bufio.NewReader(out)
	if err := w.cmd.Start(); err != nil {
		t.Fatalf("start worker: %v", err)
	}
	if line, err := w.stdout.ReadString('\n'); err != nil || line != "ready\n" {
		w.stdin.Close()
		_ = w.cmd.Wait()
		t.Fatalf("worker did not get ready: %q, %v; stderr:\n%s", line, err, w.stderr.String())
	}
	return w
}

// release lets the worker past the barrier.
func (w *worker) release() { w.stdin.Close() }

// wait waits for the worker to exit and returns how many jobs it reported
// running (-1 when it printed nothing, as a killed worker does).
func (w *worker) wait(t *testing.T) (ran int, state *os.ProcessState) {
	t.Helper()
	rest, err := io.ReadAll(w.stdout)
	if err != nil {
		t.Fatalf("read worker output: %v", err)
	}
	err = w.cmd.Wait()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("wait for worker: %v", err)
	}
	ran = -1
	if s := strings.TrimSpace(string(rest)); s != "" {
		if ran, err = strconv.Atoi(s); err != nil {
			t.Fatalf("worker printed %q; stderr:\n%s", s, w.stderr.String())
		}
	}
	return ran, w.cmd.ProcessState
}

// waitClean waits for a worker that must exit 0.
func (w *worker) waitClean(t *testing.T) int {
	t.Helper()
	ran, state := w.wait(t)
	if !state.Success() {
		t.Fatalf("worker %d exited with %v; stderr:\n%s", state.Pid(), state, w.stderr.String())
	}
	return ran
}

// waitKilled waits for a worker that must die by SIGKILL.
func (w *worker) waitKilled(t *testing.T) {
	t.Helper()
	_, state := w.wait(t)
	ws, ok := state.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("worker %d ended with %v, want death by SIGKILL; stderr:\n%s", state.Pid(), state, w.stderr.String())
	}
}

// runWorker runs one worker process to its end.
func runWorker(t *testing.T, path, mode string, lease time.Duration) *worker {
	t.Helper()
	w := startWorker(t, path, mode, lease)
	w.release()
	return w
}

// processStore opens, for the parent, the database the workers share. It
// runs on the real clock: so do the workers.
func processStore(t *testing.T) (string, *sqlite.Store, *errand.Client[*sql.Tx]) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "shared.db")
	st := openStoreAt(t, path, nil)
	mustExec(t, st.DB(), createProcessSink)
	return path, st, newClient(t, st, &errand.Config{})
}

// waitPastLease sleeps until the job's lease has expired on the real clock.
func waitPastLease(t *testing.T, c *errand.Client[*sql.Tx], id string) {
	t.Helper()
	j := getJob(t, c, id)
	if j.State != errandtype.StateRunning || j.LeaseUntil == nil {
		t.Fatalf("job %s is %s with lease %v, want running under the dead worker's lease", id, j.State, j.LeaseUntil)
	}
	time.Sleep(time.Until(*j.LeaseUntil) + 20*time.Millisecond)
}

func TestProcessesShareOneDatabase(t *testing.T) {
	t.Parallel()
	const jobs, workers = 60, 4
	path, st, c := processStore(t)
	var ps []errand.EnqueueParams
	for range jobs {
		ps = append(ps, errand.EnqueueParams{Args: errand.RawArgs{KindName: "effect"}})
	}
	if _, err := c.EnqueueMany(context.Background(), ps); err != nil {
		t.Fatal(err)
	}

	var ws []*worker
	for range workers {
		ws = append(ws, startWorker(t, path, modeEffect, 30*time.Second))
	}
	for _, w := range ws { // every worker is at the barrier: go
		w.release()
	}
	total := 0
	var perWorker []int
	for _, w := range ws {
		n := w.waitClean(t)
		perWorker = append(perWorker, n)
		total += n
	}
	t.Logf("jobs run per worker process: %v", perWorker)
	for _, w := range ws {
		t.Logf("worker %d: %s", w.cmd.ProcessState.Pid(), strings.TrimSpace(w.stderr.String()))
	}

	if total != jobs {
		t.Errorf("workers ran %d jobs in total, want %d", total, jobs)
	}
	if n := count(t, st.DB(), `SELECT coalesce(sum(attempt), 0) FROM errand_jobs`); n != jobs {
		t.Errorf("%d attempts in total, want %d", n, jobs)
	}
	if n := count(t, st.DB(), `SELECT count(*) FROM errand_jobs WHERE state = 'succeeded' AND attempt = 1 AND errors = '[]'`); n != jobs {
		t.Errorf("%d jobs succeeded cleanly on attempt 1, want %d", n, jobs)
	}
	if n := count(t, st.DB(), `SELECT count(*) FROM sink`); n != jobs {
		t.Errorf("%d effects in the sink, want %d", n, jobs)
	}
	if n := count(t, st.DB(), `SELECT count(DISTINCT s.job_id) FROM sink s JOIN errand_jobs j ON j.id = s.job_id`); n != jobs {
		t.Errorf("the sink holds effects of %d distinct jobs, want %d", n, jobs)
	}
	if n := count(t, st.DB(), `SELECT count(*) FROM errand_effects`); n != jobs {
		t.Errorf("%d ledger entries, want %d", n, jobs)
	}
	// The effect was made by the worker that holds the job's lease record.
	if n := count(t, st.DB(), `SELECT count(*) FROM sink s JOIN errand_jobs j ON j.id = s.job_id
		WHERE j.lease_owner = 'worker-' || s.pid`); n != jobs {
		t.Errorf("%d effects made by the job's lease owner, want %d", n, jobs)
	}
}

func TestProcessKilledAfterItsEffectIsRerunOnce(t *testing.T) {
	t.Parallel()
	path, st, c := processStore(t)
	job := enqueue(t, c, "effect", &errand.EnqueueOpts{ID: "pay_1"})

	// The lease must outlast the claim-to-commit of a worker process on a
	// busy machine (Once is fenced by it); waitPastLease waits it out.
	doomed := runWorker(t, path, modeKillAfterEffect, 2*time.Second)
	doomed.waitKilled(t)
	pid := doomed.cmd.ProcessState.Pid()
	// The effect committed, the acknowledgment never came.
	if n := count(t, st.DB(), `SELECT count(*) FROM sink WHERE job_id = ? AND pid = ?`, job.ID, pid); n != 1 {
		t.Fatalf("%d effects from the killed worker, want 1", n)
	}
	if j := getJob(t, c, job.ID); j.State != errandtype.StateRunning || j.Attempt != 1 {
		t.Fatalf("after the kill the job is %s on attempt %d, want running on attempt 1", j.State, j.Attempt)
	}

	waitPastLease(t, c, job.ID)
	if n := runWorker(t, path, modeEffect, 30*time.Second).waitClean(t); n != 1 {
		t.Fatalf("second worker ran %d jobs, want 1", n)
	}

	j := getJob(t, c, job.ID)
	if j.State != errandtype.StateSucceeded || j.Attempt != 2 {
		t.Fatalf("job %s on attempt %d, want succeeded on attempt 2", j.State, j.Attempt)
	}
	if len(j.Errors) != 1 || j.Errors[0].Class != errandstore.ClassLeaseExpired || j.Errors[0].Attempt != 1 {
		t.Fatalf("history %+v, want one lease_expired entry for attempt 1", j.Errors)
	}
	if n := count(t, st.DB(), `SELECT count(*) FROM sink`); n != 1 {
		t.Fatalf("%d effects in the sink, want exactly 1", n)
	}
	if n := count(t, st.DB(), `SELECT count(*) FROM sink WHERE pid = ?`, pid); n != 1 {
		t.Fatalf("the effect is not the killed worker's")
	}
}

func TestProcessPoisonJobDiesAfterItsAttempts(t *testing.T) {
	t.Parallel()
	path, _, c := processStore(t)
	job := enqueue(t, c, "effect", &errand.EnqueueOpts{MaxAttempts: 3})
	const lease = errand.MinLease

	for attempt := 1; attempt <= 3; attempt++ {
		runWorker(t, path, modeKill, lease).waitKilled(t)
		if j := getJob(t, c, job.ID); j.Attempt != attempt {
			t.Fatalf("worker %d: job on attempt %d, want %d", attempt, j.Attempt, attempt)
		}
		waitPastLease(t, c, job.ID)
	}
	// The fourth worker's claim sweeps the expired final attempt to dead and
	// finds nothing to run.
	if n := runWorker(t, path, modeKill, lease).waitClean(t); n != 0 {
		t.Fatalf("fourth worker ran %d jobs, want 0", n)
	}
	j := getJob(t, c, job.ID)
	if j.State != errandtype.StateDead || j.Attempt != 3 || j.LastError == nil || j.LastError.Class != errandstore.ClassLeaseExpired {
		t.Fatalf("job %s attempt %d last error %+v, want dead after attempt 3 with class lease_expired", j.State, j.Attempt, j.LastError)
	}
	if len(j.Errors) != 3 {
		t.Fatalf("history %+v, want three entries", j.Errors)
	}
	for i, e := range j.Errors {
		if e.Attempt != i+1 || e.Class != errandstore.ClassLeaseExpired {
			t.Errorf("entry %d = attempt %d class %s, want attempt %d class lease_expired", i, e.Attempt, e.Class, i+1)
		}
	}
}
