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
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/sqlite"
)

// bin is the fieldnotes binary, built once for the tests that need a real
// process: a SIGKILL, competing workers, a server restart.
var bin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "fieldnotes-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bin = filepath.Join(dir, "fieldnotes")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "build fieldnotes: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// fieldnotes runs the binary in dir and returns its stdout, its stderr and
// the error of its exit (an *exec.ExitError for a non-zero exit or a signal).
func fieldnotes(t *testing.T, dir string, args ...string) (string, string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return stdout.String(), stderr.String(), err
}

// mustRun runs the binary and fails the test unless it exits 0.
func mustRun(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, errOut, err := fieldnotes(t, dir, args...)
	if err != nil {
		t.Fatalf("fieldnotes %s: %v\nstdout: %s\nstderr: %s", strings.Join(args, " "), err, out, errOut)
	}
	return out
}

// work runs "fieldnotes work" and decodes its one JSON line.
func work(t *testing.T, dir string, args ...string) workLine {
	t.Helper()
	out := mustRun(t, dir, append([]string{"work"}, args...)...)
	return decodeWorkLine(t, out)
}

func decodeWorkLine(t *testing.T, out string) workLine {
	t.Helper()
	if strings.Count(out, "\n") != 1 || !strings.HasSuffix(out, "\n") {
		t.Fatalf("work printed %q; want exactly one line", out)
	}
	var l workLine
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&l); err != nil {
		t.Fatalf("work printed %q: %v", out, err)
	}
	return l
}

// checkWork checks a work line; attempt 0 means null, as job_id "<null>".
func checkWork(t *testing.T, got workLine, result errand.Result, jobID string, attempt int) {
	t.Helper()
	gotID, gotAttempt, wantAttempt := "<null>", "<null>", "<null>"
	if got.JobID != nil {
		gotID = *got.JobID
	}
	if got.Attempt != nil {
		gotAttempt = strconv.Itoa(*got.Attempt)
	}
	if attempt != 0 {
		wantAttempt = strconv.Itoa(attempt)
	}
	if got.Result != result || gotID != jobID || gotAttempt != wantAttempt || got.Acknowledged != (result == errand.ResultSucceeded) {
		t.Fatalf("work = {result %s, job_id %s, attempt %s, acknowledged %v}; want {%s, %s, %s, %v}",
			got.Result, gotID, gotAttempt, got.Acknowledged, result, jobID, wantAttempt, result == errand.ResultSucceeded)
	}
}

func listJobs(t *testing.T, dir, db string) []jobView {
	t.Helper()
	var js []jobView
	if err := json.Unmarshal([]byte(mustRun(t, dir, "jobs", db, "--json")), &js); err != nil {
		t.Fatal(err)
	}
	return js
}

func listReceipts(t *testing.T, dir, db string) []receipt {
	t.Helper()
	var rs []receipt
	if err := json.Unmarshal([]byte(mustRun(t, dir, "receipts", db, "--json")), &rs); err != nil {
		t.Fatal(err)
	}
	return rs
}

// onlyJob returns the one receipt job, failing unless there is exactly one.
func onlyJob(t *testing.T, dir, db string) jobView {
	t.Helper()
	js := listJobs(t, dir, db)
	if len(js) != 1 {
		t.Fatalf("jobs = %+v; want exactly one", js)
	}
	return js[0]
}

// checkKilled fails unless err says the process died of SIGKILL.
func checkKilled(t *testing.T, err error) {
	t.Helper()
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("work --crash-after-effect: err = %v; want the process killed by SIGKILL", err)
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("work --crash-after-effect: exit status %v; want killed by SIGKILL", ee)
	}
}

// exitCode returns the exit code of a finished command's error.
func exitCode(t *testing.T, err error) int {
	t.Helper()
	if err == nil {
		return 0
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("run: %v", err)
	}
	return ee.ExitCode()
}

// runInProcess runs a command through Run, as main does.
func runInProcess(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	err := Run(context.Background(), args, &stdout, &stderr)
	return stdout.String(), err
}

// testClock is a store clock the test moves.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func newTestClock() *testClock {
	return &testClock{now: time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)}
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

func (c *testClock) Add(d time.Duration) { c.Set(c.Now().Add(d)) }

// openTestApp opens (and initialises) a Field Notes database in process,
// on clk when it is not nil.
func openTestApp(t *testing.T, path string, clk errand.Clock) *app {
	t.Helper()
	var opts *sqlite.Options
	if clk != nil {
		opts = &sqlite.Options{Clock: clk}
	}
	a, err := openApp(context.Background(), path, opts, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.close() })
	if err := a.migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	return a
}

// receiptWorker returns a worker client over a's store with deliverer d.
func receiptWorker(t *testing.T, a *app, d *deliverer) *errand.Client[*sql.Tx] {
	t.Helper()
	d.db = a.db
	c, err := newReceiptClient(a.store, d)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// count returns the result of a count(*) query on a's database.
func count(t *testing.T, a *app, query string, args ...any) int {
	t.Helper()
	var n int
	if err := a.db.QueryRow(query, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
