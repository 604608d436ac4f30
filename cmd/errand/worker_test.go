//go:build unix

package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/errandhq/errand"
)

// Tests of the long-running worker as operators run it: the errand binary,
// real commands, real signals. Timings are generous: the machines are
// shared and slow, and the tests assert the order of events rather than
// how long they took.

// workerStores are the stores every test here runs on.
var workerStores = []string{"sqlite", "postgres"}

// eachStore runs body as a subtest per store, in parallel with each other
// when parallel is set. The postgres subtest skips, naming
// ERRAND_TEST_POSTGRES_URL, when that is unset.
func eachStore(t *testing.T, parallel bool, body func(t *testing.T, store string)) {
	for _, store := range workerStores {
		t.Run(store, func(t *testing.T) {
			if parallel {
				t.Parallel()
			}
			body(t, store)
		})
	}
}

// workerDB returns the --db value of a fresh database of store: a SQLite
// file, or a PostgreSQL URL whose schema is the test's own. Every test here
// gets its database from this one helper, and the helpers that start errand
// processes set ERRAND_SCHEMA for it (see dbEnv).
func workerDB(t *testing.T, store string) string {
	t.Helper()
	switch store {
	case "sqlite":
		return tempDB(t)
	case "postgres":
		db, _ := pgDB(t)
		return db
	}
	t.Fatalf("unknown store %q", store)
	return ""
}

// openTestClient opens db with errand's library, the way the CLI does.
func openTestClient(t *testing.T, db string) *errand.Client[*sql.Tx] {
	t.Helper()
	if _, ok := pgSchemaOf(db); ok {
		c, err := errand.NewClient(openPGStore(t, db).SQL(nil), &errand.Config{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	c, closeDB, err := openClient(context.Background(), db, mayCreate, &errand.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(closeDB)
	return c
}

// enqueueN enqueues n jobs of kind into queue in one transaction and
// returns their ids.
func enqueueN(t *testing.T, db, kind, queue string, n int, opts errand.EnqueueOpts) []string {
	t.Helper()
	c := openTestClient(t, db)
	opts.Queue = queue
	ps := make([]errand.EnqueueParams, n)
	for i := range ps {
		ps[i] = errand.EnqueueParams{Args: errand.RawArgs{KindName: kind}, Opts: &opts}
	}
	rs, err := c.EnqueueMany(context.Background(), ps)
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]string, n)
	for i, r := range rs {
		ids[i] = r.Job.ID
	}
	return ids
}

// workerProc is a running `errand work`.
type workerProc struct {
	t      *testing.T
	cmd    *exec.Cmd
	stderr *syncBuffer
	exited chan struct{}
	state  *os.ProcessState // set when exited is closed
}

// startWorker starts `errand work --db db args...`. It does not wait for
// the worker to be ready; call ready before signalling it.
func startWorker(t *testing.T, db string, args ...string) *workerProc {
	t.Helper()
	cmd := exec.Command(errandBin, append([]string{"work", "--db", db}, args...)...)
	cmd.Env = append(append(os.Environ(), "ERRAND_DB="), dbEnv(cmd.Args)...)
	w := &workerProc{t: t, cmd: cmd, stderr: &syncBuffer{}, exited: make(chan struct{})}
	var stdout syncBuffer
	cmd.Stdout, cmd.Stderr = &stdout, w.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		_ = cmd.Wait()
		w.state = cmd.ProcessState
		close(w.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-w.exited:
		default:
			_ = cmd.Process.Kill()
			<-w.exited
		}
		if stdout.String() != "" {
			t.Errorf("errand work printed to stdout: %q", stdout.String())
		}
		if t.Failed() {
			t.Logf("worker %d stderr:\n%s", cmd.Process.Pid, w.stderr.String())
		}
	})
	return w
}

// ready waits until the worker has started and handles signals.
func (w *workerProc) ready() *workerProc {
	w.t.Helper()
	w.waitLog(20*time.Second, `msg="worker started"`)
	return w
}

func (w *workerProc) pid() int { return w.cmd.Process.Pid }

func (w *workerProc) signal(sig syscall.Signal) {
	w.t.Helper()
	if err := w.cmd.Process.Signal(sig); err != nil {
		w.t.Fatalf("signal %v to worker: %v", sig, err)
	}
}

// wait waits for the worker to exit and returns its exit code, or -1 when a
// signal killed it.
func (w *workerProc) wait(limit time.Duration) int {
	w.t.Helper()
	select {
	case <-w.exited:
		return w.state.ExitCode()
	case <-time.After(limit):
		w.t.Fatalf("worker still running after %s\nstderr:\n%s", limit, w.stderr.String())
		return 0
	}
}

func (w *workerProc) running() bool {
	select {
	case <-w.exited:
		return false
	default:
		return true
	}
}

// waitLog waits for a line of the worker's stderr that contains every part.
func (w *workerProc) waitLog(limit time.Duration, parts ...string) string {
	w.t.Helper()
	var line string
	waitUntil(w.t, limit, fmt.Sprintf("worker logging a line with %q", parts), func() bool {
		line = findLine(w.stderr.String(), parts...)
		return line != ""
	})
	return line
}

func findLine(text string, parts ...string) string {
	for line := range strings.Lines(text) {
		all := true
		for _, p := range parts {
			if !strings.Contains(line, p) {
				all = false
				break
			}
		}
		if all {
			return line
		}
	}
	return ""
}

// syncBuffer is a bytes.Buffer that a process writes while a test reads.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func waitUntil(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", limit, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// lines returns the lines of a file the jobs' scripts append to.
func lines(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Fields(strings.ReplaceAll(string(b), " ", "_"))
}

// countPrefix counts the lines of path that start with prefix.
func countPrefix(t *testing.T, path, prefix string) int {
	n := 0
	for _, l := range lines(t, path) {
		if strings.HasPrefix(l, prefix) {
			n++
		}
	}
	return n
}

// jobsByID lists the jobs of db by id.
func jobsByID(t *testing.T, db string) map[string]jobJSON {
	t.Helper()
	m := map[string]jobJSON{}
	for _, j := range listJobs(t, db) {
		m[j.ID] = j
	}
	return m
}

// scriptGroup is the process group id of the script that expands it, for
// the script to write to its marks (unquoted: ps pads it). A command's group
// is not named after its pid (it is its guard's, see cmd/errand/internal/exechandler),
// so the scripts report it.
const scriptGroup = `$(ps -o pgid= -p $$)`

// atoiPositive parses a pid or a process group id a script wrote. It never
// returns 0 or less, which kill would take as this process's own group.
func atoiPositive(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 {
		t.Fatalf("a script wrote %q, want a pid", s)
	}
	return n
}

// groupGone reports whether no live process is left in process group pgid.
// Zombies count as gone: they run nothing, and a container's init may never
// reap them.
func groupGone(t *testing.T, pgid int) bool {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Skipf("no /proc to inspect process groups: %v", err)
	}
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:]) // state ppid pgrp ...
		if len(f) < 3 || f[0] == "Z" || f[0] == "X" {
			continue
		}
		if g, _ := strconv.Atoi(f[2]); g == pgid {
			return false
		}
	}
	return true
}

// TestWorkerDrain: SIGTERM during eight running jobs. With ten seconds of
// grace all eight two-second jobs finish; with one second the thirty-second
// jobs are given back: queued, attempt 0, an interrupted entry, none
// running, and their commands' process groups killed. Either way the worker
// exits 0. (The jobs' lengths leave a busy machine several seconds of
// margin either way; the drain ends as soon as the jobs do.)
func TestWorkerDrain(t *testing.T) {
	eachStore(t, false, func(t *testing.T, store string) {
		for _, tt := range []struct {
			grace        string
			sleep        string
			wantFinished bool
		}{
			{"10s", "2", true},
			{"1s", "30", false},
		} {
			t.Run("grace="+tt.grace, func(t *testing.T) {
				db := workerDB(t, store)
				marks := filepath.Join(t.TempDir(), "marks")
				s := script(t, `echo "start" `+scriptGroup+` >> `+marks+`; sleep `+tt.sleep+`; echo "done $ERRAND_JOB_ID" >> `+marks)
				ids := enqueueN(t, db, "slow", "default", 8, errand.EnqueueOpts{})
				w := startWorker(t, db, "--queue", "default=8", "--grace", tt.grace, "--poll", "200ms", "--exec", "slow="+s).ready()
				waitUntil(t, 20*time.Second, "eight jobs running", func() bool { return countPrefix(t, marks, "start") == 8 })
				w.signal(syscall.SIGTERM)
				if code := w.wait(20 * time.Second); code != 0 {
					t.Fatalf("worker exited %d after SIGTERM, want 0\n%s", code, w.stderr.String())
				}
				w.waitLog(time.Second, `msg="worker stopped"`)

				jobs := jobsByID(t, db)
				queued := 0
				for _, id := range ids {
					j := jobs[id]
					switch {
					case j.State == "succeeded" && j.Attempt == 1 && len(j.Errors) == 0:
					case !tt.wantFinished && j.State == "queued" && j.Attempt == 0 &&
						len(j.Errors) == 1 && j.Errors[0].Class == "interrupted":
						queued++
					default:
						t.Errorf("job %s: %s attempt %d errors %+v", id, j.State, j.Attempt, j.Errors)
					}
				}
				if !tt.wantFinished {
					if queued == 0 {
						t.Errorf("no job was given back; with 1s of grace thirty-second jobs cannot all finish")
					}
					// A killed process may take a moment to be scheduled
					// and die; the commands would run for thirty seconds.
					for _, l := range lines(t, marks) {
						if g, ok := strings.CutPrefix(l, "start_"); ok {
							pgid := atoiPositive(t, g)
							waitUntil(t, 10*time.Second, fmt.Sprintf("process group %d of an interrupted command to be gone", pgid),
								func() bool { return groupGone(t, pgid) })
						}
					}
				}
			})
		}
	})
}

// TestWorkerForcedStop: a second signal during the drain exits at once with
// status 1 and kills the running commands; nothing is given back, so the
// jobs stay running until their leases expire.
func TestWorkerForcedStop(t *testing.T) {
	eachStore(t, false, func(t *testing.T, store string) {
		db := workerDB(t, store)
		marks := filepath.Join(t.TempDir(), "marks")
		s := script(t, `echo "start" `+scriptGroup+` >> `+marks+`; sleep 30`)
		ids := enqueueN(t, db, "stuck", "default", 2, errand.EnqueueOpts{})
		w := startWorker(t, db, "--queue", "default=2", "--grace", "1m", "--exec", "stuck="+s).ready()
		waitUntil(t, 20*time.Second, "two jobs running", func() bool { return countPrefix(t, marks, "start") == 2 })
		w.signal(syscall.SIGTERM)
		w.waitLog(10*time.Second, "draining")
		w.signal(syscall.SIGTERM)
		if code := w.wait(10 * time.Second); code != 1 {
			t.Fatalf("worker exited %d after a second signal, want 1", code)
		}
		if !strings.Contains(w.stderr.String(), "errand: work: second signal") {
			t.Errorf("stderr lacks the error line:\n%s", w.stderr.String())
		}
		jobs := jobsByID(t, db)
		for _, id := range ids {
			if j := jobs[id]; j.State != "running" || j.Attempt != 1 {
				t.Errorf("job %s: %s attempt %d, want still running (its lease expires later)", id, j.State, j.Attempt)
			}
		}
		for _, l := range lines(t, marks) {
			pgid := atoiPositive(t, strings.TrimPrefix(l, "start_"))
			waitUntil(t, 15*time.Second, fmt.Sprintf("process group %d killed", pgid), func() bool { return groupGone(t, pgid) })
		}
	})
}

// TestWorkerKilledTakesItsCommands: a worker killed with SIGKILL, which can
// clean up nothing, still leaves no command running, nor a command's child
// in its process group: the job's rerun elsewhere is the only one.
func TestWorkerKilledTakesItsCommands(t *testing.T) {
	eachStore(t, false, func(t *testing.T, store string) {
		db := workerDB(t, store)
		pids := filepath.Join(t.TempDir(), "pids")
		s := script(t, `sleep 300 & echo "grandchild $!" >> `+pids+`; echo "group" `+scriptGroup+` >> `+pids+`; echo "script $$" >> `+pids+`; sleep 300`)
		enqueueN(t, db, "k", "default", 2, errand.EnqueueOpts{})
		w := startWorker(t, db, "--queue", "default=2", "--exec", "k="+s).ready()
		// Each script writes its child's pid and its group before its pid.
		waitUntil(t, 20*time.Second, "both commands to start", func() bool { return countPrefix(t, pids, "script") == 2 })
		var all, groups []int
		for _, l := range lines(t, pids) {
			name, p, _ := strings.Cut(l, "_")
			id := atoiPositive(t, p)
			if name != "group" {
				all = append(all, id)
				continue
			}
			groups = append(groups, id)
			// A failing run leaves nothing behind.
			t.Cleanup(func() { _ = syscall.Kill(-id, syscall.SIGKILL) })
		}

		w.signal(syscall.SIGKILL)
		w.wait(10 * time.Second)
		waitGone(t, all...)
		for _, pgid := range groups {
			waitUntil(t, 10*time.Second, fmt.Sprintf("process group %d to be gone", pgid), func() bool { return groupGone(t, pgid) })
		}
	})
}

// TestWorkerHeartbeat: a job that runs three times its lease completes with
// one attempt, because the worker renews the lease while it runs. (A lease
// of 2s, renewed every third of it, survives a renewal delayed by a busy
// machine.)
func TestWorkerHeartbeat(t *testing.T) {
	t.Parallel()
	eachStore(t, true, func(t *testing.T, store string) {
		db := workerDB(t, store)
		ids := enqueueN(t, db, "long", "default", 1, errand.EnqueueOpts{})
		w := startWorker(t, db, "--lease", "2s", "--poll", "200ms", "--exec", "long="+script(t, "sleep 6")).ready()
		waitUntil(t, 30*time.Second, "the job to finish", func() bool {
			s := jobsByID(t, db)[ids[0]].State
			return s == "succeeded" || s == "retrying" || s == "dead"
		})
		j := inspect(t, db, ids[0])
		if j.State != "succeeded" || j.Attempt != 1 || len(j.Errors) != 0 {
			t.Errorf("job %s attempt %d errors %+v, want succeeded on attempt 1", j.State, j.Attempt, j.Errors)
		}
		w.signal(syscall.SIGTERM)
		if code := w.wait(20 * time.Second); code != 0 {
			t.Errorf("worker exited %d, want 0", code)
		}
	})
}

// TestWorkerLeaseLost: a worker frozen (SIGSTOP) past its lease loses the
// job to a second worker, which completes it. Thawed, the first worker
// writes nothing about the job and logs "lease lost" with its id.
func TestWorkerLeaseLost(t *testing.T) {
	t.Parallel()
	eachStore(t, true, func(t *testing.T, store string) {
		db := workerDB(t, store)
		marks := filepath.Join(t.TempDir(), "marks")
		// The first attempt outlasts the freeze; the second finishes at once.
		s := script(t, `echo "start $ERRAND_ATTEMPT" >> `+marks+`; if [ "$ERRAND_ATTEMPT" = 1 ]; then sleep 4; fi`)
		ids := enqueueN(t, db, "k", "default", 1, errand.EnqueueOpts{})
		id := ids[0]
		// One slot: while its job runs the worker does not poll for more, so
		// the stop below rarely lands inside one of its write transactions
		// (a SQLite writer frozen mid-transaction would lock the second
		// worker out; that is SQLite's one-writer rule, not what this tests).
		a := startWorker(t, db, "--lease", "1s", "--poll", "200ms", "--queue", "default=1", "--exec", "k="+s).ready()
		waitUntil(t, 20*time.Second, "the first attempt to start", func() bool { return countPrefix(t, marks, "start_1") == 1 })
		a.signal(syscall.SIGSTOP)
		time.Sleep(2 * time.Second) // past the lease: no heartbeat renews it

		b := parseWork(t, bin(t, "work", "--once", "--db", db, "--exec", "k="+s))
		if b.Result != "succeeded" || b.JobID == nil || *b.JobID != id || b.Attempt != 2 {
			t.Fatalf("second worker: %+v, want job %s succeeded on attempt 2", b, id)
		}
		before := ok(t, cli(t, "jobs", "--db", db, "--json")).stdout

		a.signal(syscall.SIGCONT)
		a.waitLog(20*time.Second, "lease lost", id)
		after := inspect(t, db, id)
		if after.State != "succeeded" || after.Attempt != 2 {
			t.Errorf("after the first worker thawed: %s attempt %d, want succeeded attempt 2", after.State, after.Attempt)
		}
		if len(after.Errors) != 1 || after.Errors[0].Class != "lease_expired" || after.Errors[0].Attempt != 1 {
			t.Errorf("history %+v, want one lease_expired entry for attempt 1", after.Errors)
		}
		if now := ok(t, cli(t, "jobs", "--db", db, "--json")).stdout; now != before {
			t.Errorf("the job changed after the first worker thawed:\nbefore %s\nafter  %s", before, now)
		}
		a.signal(syscall.SIGTERM)
		if code := a.wait(20 * time.Second); code != 0 {
			t.Errorf("first worker exited %d after SIGTERM, want 0", code)
		}
		if l := findLine(a.stderr.String(), `msg="job succeeded"`, id); l != "" {
			t.Errorf("the first worker claims it succeeded: %s", l)
		}
	})
}

// TestWorkerTimeout: past --timeout the command's whole process group is
// killed, a grandchild included, and the job retries with class timeout.
func TestWorkerTimeout(t *testing.T) {
	eachStore(t, false, func(t *testing.T, store string) {
		db := workerDB(t, store)
		dir := t.TempDir()
		pids := filepath.Join(dir, "pids")
		s := script(t, `sleep 30 & echo "grandchild $!" >> `+pids+`; echo "group" `+scriptGroup+` >> `+pids+`; echo "script $$" >> `+pids+`; sleep 30`)
		id := enqueue(t, db, "k", "--backoff-base", "1h")
		// The timeout leaves a busy machine time to start the script and
		// let it write its pids and group before the kill.
		w := startWorker(t, db, "--timeout", "k=2s", "--poll", "200ms", "--exec", "k="+s).ready()
		waitUntil(t, 20*time.Second, "the job to time out", func() bool { return jobsByID(t, db)[id].State == "retrying" })
		j := inspect(t, db, id)
		if j.Attempt != 1 || j.LastError == nil || j.LastError.Class != "timeout" {
			t.Errorf("job attempt %d last error %+v, want retrying after attempt 1 with class timeout", j.Attempt, j.LastError)
		}
		got := map[string]int{}
		for _, l := range lines(t, pids) {
			name, pid, _ := strings.Cut(l, "_")
			got[name] = atoiPositive(t, pid)
		}
		if got["script"] == 0 || got["grandchild"] == 0 || got["group"] == 0 {
			t.Fatalf("pids file: %v", lines(t, pids))
		}
		waitUntil(t, 15*time.Second, "the command's process group to be gone", func() bool { return groupGone(t, got["group"]) })
		waitGone(t, got["script"], got["grandchild"])
		w.signal(syscall.SIGTERM)
		if code := w.wait(20 * time.Second); code != 0 {
			t.Errorf("worker exited %d, want 0", code)
		}
	})
}

// TestWorkerQueueIsolation: a backlog of slow jobs in one queue does not
// delay another queue. Judged by the order of events: every otp job starts
// before the last reports job does.
func TestWorkerQueueIsolation(t *testing.T) {
	eachStore(t, false, func(t *testing.T, store string) {
		db := workerDB(t, store)
		marks := filepath.Join(t.TempDir(), "marks")
		s := script(t, `echo "start $ERRAND_JOB_KIND $ERRAND_JOB_ID" >> `+marks+`; if [ "$ERRAND_JOB_KIND" = report ]; then sleep 0.2; fi`)
		reports := enqueueN(t, db, "report", "reports", 200, errand.EnqueueOpts{})
		w := startWorker(t, db, "--queue", "reports=2", "--queue", "otp=2", "--poll", "200ms", "--grace", "10s",
			"--exec", "report="+s, "--exec", "otp="+s).ready()
		waitUntil(t, 20*time.Second, "the reports backlog to be running", func() bool { return countPrefix(t, marks, "start_report") >= 4 })
		var otps []string
		for range 4 {
			// From other processes: the worker sees them at its next poll.
			otps = append(otps, strings.TrimSpace(ok(t, bin(t, "enqueue", "otp", "--queue", "otp", "--db", db)).stdout))
		}
		waitUntil(t, 60*time.Second, "every otp job to start", func() bool { return countPrefix(t, marks, "start_otp") == len(otps) })
		w.signal(syscall.SIGTERM)
		if code := w.wait(20 * time.Second); code != 0 {
			t.Errorf("worker exited %d, want 0", code)
		}

		order := map[string]int{}
		for i, l := range lines(t, marks) {
			f := strings.Split(l, "_")
			if len(f) == 3 {
				order[f[2]] = i
			}
		}
		last := len(lines(t, marks)) // the last reports job never started: after everything
		if i, ok := order[reports[len(reports)-1]]; ok {
			last = i
		}
		for _, id := range otps {
			i, ok := order[id]
			if !ok || i > last {
				t.Errorf("otp job %s started at event %d, after the reports backlog drained (event %d)", id, i, last)
			}
		}
	})
}

// TestWorkerPoisonJob: a job whose command kills its worker on every attempt
// uses up its attempts (they are counted at claim time) while a supervisor
// restarts the worker, and is dead-lettered with class lease_expired by the
// next worker's claim. That worker then stays up, idle: no restart loop.
func TestWorkerPoisonJob(t *testing.T) {
	t.Parallel()
	eachStore(t, true, func(t *testing.T, store string) {
		db := workerDB(t, store)
		marks := filepath.Join(t.TempDir(), "marks")
		s := script(t, `echo "start $ERRAND_ATTEMPT" >> `+marks+`; kill -9 $PPID`)
		id := enqueue(t, db, "poison", "--max-attempts", "3")
		// A lease long enough that a claim slowed by a loaded machine
		// still starts its attempt inside it (the lease counts from the
		// claim's sending), and short enough to expire three times.
		args := []string{"--lease", "3s", "--poll", "200ms", "--exec", "poison=" + s}
		for attempt := 1; attempt <= 3; attempt++ {
			// The supervisor restarts the worker at once; it idles until the
			// killed attempt's lease expires, then claims the job again.
			w := startWorker(t, db, args...)
			if code := w.wait(30 * time.Second); code != -1 || w.state.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
				t.Fatalf("worker %d: exit %v, want killed by SIGKILL\n%s", attempt, w.state, w.stderr.String())
			}
			if n := countPrefix(t, marks, "start"); n != attempt {
				t.Fatalf("after worker %d died: %d attempts started, want %d", attempt, n, attempt)
			}
		}
		w := startWorker(t, db, args...).ready()
		waitUntil(t, 30*time.Second, "the job to be dead", func() bool { return jobsByID(t, db)[id].State == "dead" })
		time.Sleep(2 * time.Second)
		if !w.running() {
			t.Fatalf("the worker exited after dead-lettering the job: %v\n%s", w.state, w.stderr.String())
		}
		j := inspect(t, db, id)
		if j.State != "dead" || j.Attempt != 3 || j.LastError == nil || j.LastError.Class != "lease_expired" || len(j.Errors) != 3 {
			t.Errorf("job %s attempt %d, last error %+v, %d errors: want dead after attempt 3, three lease_expired entries", j.State, j.Attempt, j.LastError, len(j.Errors))
		}
		if n := countPrefix(t, marks, "start"); n != 3 {
			t.Errorf("%d attempts started, want 3", n)
		}
		w.signal(syscall.SIGTERM)
		if code := w.wait(20 * time.Second); code != 0 {
			t.Errorf("last worker exited %d, want 0", code)
		}
	})
}

// TestWorkerPollsForOtherProcesses: a job enqueued by another process is
// picked up at the worker's next poll (an enqueue in the worker's own
// process wakes it at once; see TestWorkerWakesOnEnqueue). The summary at
// exit reports the idle query rate.
func TestWorkerPollsForOtherProcesses(t *testing.T) {
	eachStore(t, false, func(t *testing.T, store string) {
		db := workerDB(t, store)
		w := startWorker(t, db, "--poll", "200ms", "--exec", "k="+script(t, "exit 0")).ready()
		if l := w.waitLog(time.Second, `msg="worker started"`); !strings.Contains(l, "poll=200ms") || !strings.Contains(l, `queues="default=10"`) {
			t.Errorf("startup line lacks the poll interval or the queues: %s", l)
		}
		time.Sleep(500 * time.Millisecond) // idle for a few polls
		id := enqueue(t, db, "k")
		waitUntil(t, 10*time.Second, "the job to succeed", func() bool { return jobsByID(t, db)[id].State == "succeeded" })
		// The worker logs the outcome after writing it: the job may show
		// succeeded a moment before the line.
		line := w.waitLog(10*time.Second, `msg="job succeeded"`, "job_id="+id)
		for _, part := range []string{"kind=k", "attempt=1", "duration="} {
			if !strings.Contains(line, part) {
				t.Errorf("outcome line lacks %q: %s", part, line)
			}
		}
		w.signal(syscall.SIGINT)
		if code := w.wait(20 * time.Second); code != 0 {
			t.Errorf("worker exited %d after SIGINT, want 0", code)
		}
		summary := w.waitLog(time.Second, `msg="worker stopped"`)
		for _, part := range []string{"jobs_run=1", "idle_claims_per_second="} {
			if !strings.Contains(summary, part) {
				t.Errorf("summary lacks %q: %s", part, summary)
			}
		}
		if strings.Contains(summary, "idle_claims=0 ") {
			t.Errorf("summary counts no idle claims after idling through several polls: %s", summary)
		}
	})
}

// TestWorkersRegistry: two running workers are listed alive with their
// queues; after one is SIGKILLed it is shown as gone, and after the other
// drains it is shown as stopped.
func TestWorkersRegistry(t *testing.T) {
	eachStore(t, false, func(t *testing.T, store string) {
		db := workerDB(t, store)
		s := script(t, "exit 0")
		// A worker is shown gone after three missed heartbeats: at 1s, a
		// live worker delayed by a busy machine is not.
		a := startWorker(t, db, "--heartbeat", "1s", "--queue", "a=2", "--exec", "k="+s).ready()
		b := startWorker(t, db, "--heartbeat", "1s", "--queue", "b=3", "--queue", "c=1", "--exec", "k="+s).ready()

		type workerRow struct {
			ID     string `json:"id"`
			PID    int    `json:"pid"`
			Status string `json:"status"`
			Queues []struct {
				Name        string `json:"name"`
				Concurrency int    `json:"concurrency"`
			} `json:"queues"`
		}
		status := func() map[int]workerRow {
			r := ok(t, cli(t, "workers", "--db", db, "--json"))
			var rows []workerRow
			if err := json.Unmarshal([]byte(r.stdout), &rows); err != nil {
				t.Fatalf("workers --json: %v\n%s", err, r.stdout)
			}
			m := map[int]workerRow{}
			for _, w := range rows {
				m[w.PID] = w
			}
			return m
		}
		ws := status()
		if len(ws) != 2 || ws[a.pid()].Status != "alive" || ws[b.pid()].Status != "alive" {
			t.Fatalf("workers %+v, want both alive", ws)
		}
		if q := ws[b.pid()].Queues; len(q) != 2 || q[0].Name != "b" || q[0].Concurrency != 3 || q[1].Name != "c" {
			t.Errorf("worker b queues %+v, want b=3, c=1", q)
		}
		if r := ok(t, cli(t, "workers", "--db", db)); !strings.Contains(r.stdout, "a=2") || !strings.Contains(r.stdout, "alive") {
			t.Errorf("workers table:\n%s", r.stdout)
		}

		a.signal(syscall.SIGKILL)
		a.wait(10 * time.Second)
		waitUntil(t, 20*time.Second, "the killed worker to be shown gone", func() bool { return status()[a.pid()].Status == "gone" })
		if st := status()[b.pid()].Status; st != "alive" {
			t.Errorf("the other worker is %s, want alive", st)
		}
		b.signal(syscall.SIGTERM)
		if code := b.wait(20 * time.Second); code != 0 {
			t.Errorf("worker exited %d, want 0", code)
		}
		if st := status()[b.pid()].Status; st != "stopped" {
			t.Errorf("the drained worker is %s, want stopped", st)
		}
	})
}

// smallSkew matches the SKEW column of a worker on the database's host:
// 0s on SQLite (one clock), a few milliseconds of transit on PostgreSQL
// (seconds when a busy machine delays a heartbeat; never an hour).
var smallSkew = regexp.MustCompile(` (0s|[+-][0-9]{1,3}ms|[+-][0-9]s) `)

// TestWorkersShowsLeader: of two workers one leads, errand workers marks it
// in the table and in --json, and when it drains the other takes over.
func TestWorkersShowsLeader(t *testing.T) {
	eachStore(t, false, func(t *testing.T, store string) {
		db := workerDB(t, store)
		s := script(t, "exit 0")
		// A TTL long enough that leadership does not move while the test
		// looks, when a busy machine delays a renewal.
		a := startWorker(t, db, "--leader-ttl", "3s", "--exec", "k="+s).ready()
		b := startWorker(t, db, "--leader-ttl", "3s", "--poll-only", "--exec", "k="+s).ready()
		if l := b.waitLog(time.Second, `msg="worker started"`); !strings.Contains(l, "poll_only=true") {
			t.Errorf("startup line lacks poll_only=true: %s", l)
		}

		type workerRow struct {
			PID         int    `json:"pid"`
			Status      string `json:"status"`
			Leader      *bool  `json:"leader"`
			ClockSkewMS *int64 `json:"clock_skew_ms"`
		}
		leaderPID := func() int {
			r := ok(t, cli(t, "workers", "--db", db, "--json"))
			var rows []workerRow
			if err := json.Unmarshal([]byte(r.stdout), &rows); err != nil {
				t.Fatalf("workers --json: %v\n%s", err, r.stdout)
			}
			pid := 0
			for _, w := range rows {
				if w.Leader == nil || w.ClockSkewMS == nil {
					t.Fatalf("workers --json lacks leader or clock_skew_ms:\n%s", r.stdout)
				}
				if *w.Leader {
					if pid != 0 {
						t.Fatalf("two leaders:\n%s", r.stdout)
					}
					pid = w.PID
				}
			}
			return pid
		}
		var first int
		waitUntil(t, 10*time.Second, "a leader", func() bool { first = leaderPID(); return first != 0 })
		leader, other := a, b
		if first == b.pid() {
			leader, other = b, a
		}
		if first != leader.pid() {
			t.Fatalf("leader pid %d is neither worker", first)
		}
		leader.waitLog(10*time.Second, `msg=leading`)

		table := ok(t, cli(t, "workers", "--db", db)).stdout
		for _, want := range []string{"SKEW", "LEADER"} {
			if !strings.Contains(table, want) {
				t.Errorf("workers table lacks %s:\n%s", want, table)
			}
		}
		if line := findLine(table, fmt.Sprintf(" %d ", leader.pid())); !strings.Contains(line, " yes ") {
			t.Errorf("leader's row not marked:\n%s", table)
		}
		if line := findLine(table, fmt.Sprintf(" %d ", other.pid())); strings.Contains(line, " yes ") || !smallSkew.MatchString(line) {
			t.Errorf("other worker's row marked leader or lacks its skew:\n%s", table)
		}

		leader.signal(syscall.SIGTERM)
		if code := leader.wait(20 * time.Second); code != 0 {
			t.Errorf("leader exited %d, want 0", code)
		}
		waitUntil(t, 10*time.Second, "the other worker to lead", func() bool { return leaderPID() == other.pid() })
		other.waitLog(10*time.Second, `msg=leading`)
	})
}
