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
	"github.com/errandhq/errand/errandstore"
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
func openTestApp(t *testing.T, path string, clk errandstore.Clock) *app {
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

// TestCommandLine: a usage error exits 2 and a runtime error 1, each with
// one line on stderr and nothing on stdout; help goes to stdout and exits 0.
func TestCommandLine(t *testing.T) {
	dir := t.TempDir()
	const db = "./cli.sqlite"
	mustRun(t, dir, "init", db)
	tests := []struct {
		args   []string
		code   int
		stderr string // a part of the one line on stderr; "" for none
		stdout string // a part of stdout; "" for none
	}{
		{args: nil, code: 2, stderr: "give a command"},
		{args: []string{"frobnicate"}, code: 2, stderr: `unknown command "frobnicate"`},
		{args: []string{"init"}, code: 2, stderr: "missing DB"},
		{args: []string{"init", db, "extra"}, code: 2, stderr: `unexpected argument "extra"`},
		{args: []string{"jobs", db, "--nope"}, code: 2, stderr: "unknown flag --nope"},
		{args: []string{"serve", db, "--addr"}, code: 2, stderr: "flag --addr needs a value"},
		{args: []string{"jobs", db, "--json=maybe"}, code: 2, stderr: `invalid boolean value "maybe" for --json`},
		{args: []string{"pay", db, "--document", "nope"}, code: 1, stderr: `no document "nope"`},
		{args: []string{"jobs", "./missing.sqlite"}, code: 1, stderr: "fieldnotes init"},
		{args: []string{"help"}, code: 0, stdout: "usage: fieldnotes COMMAND DB"},
		{args: []string{"jobs", "-h"}, code: 0, stdout: "usage: fieldnotes jobs DB"},
		{args: []string{"replay", "--reason", "x", db, "pay_nosuchjob"}, code: 1, stderr: "no such job"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			out, errOut, err := fieldnotes(t, dir, tt.args...)
			if code := exitCode(t, err); code != tt.code {
				t.Errorf("exit %d, want %d\nstdout: %s\nstderr: %s", code, tt.code, out, errOut)
			}
			if tt.stderr == "" {
				if errOut != "" {
					t.Errorf("stderr %q, want none", errOut)
				}
			} else if !strings.HasPrefix(errOut, "fieldnotes: ") || strings.Count(errOut, "\n") != 1 || !strings.HasSuffix(errOut, "\n") || !strings.Contains(errOut, tt.stderr) {
				t.Errorf("stderr %q, want one line starting fieldnotes: and containing %q", errOut, tt.stderr)
			}
			if tt.stdout == "" {
				if out != "" {
					t.Errorf("stdout %q, want none", out)
				}
			} else if !strings.Contains(out, tt.stdout) {
				t.Errorf("stdout %q, want it to contain %q", out, tt.stdout)
			}
		})
	}
}
