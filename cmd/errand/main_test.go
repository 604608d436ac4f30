//go:build unix

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// errandBin is the errand binary, built once, for tests that need a real
// process: its exit status, its children, its signals.
var errandBin string

func TestMain(m *testing.M) {
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "errand-cli-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	// errand serve writes the token it generates under the user's
	// configuration directory: a temporary one here.
	os.Setenv("XDG_CONFIG_HOME", filepath.Join(dir, "config"))
	errandBin = filepath.Join(dir, "errand")
	out, err := exec.Command("go", "build", "-o", errandBin, ".").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "build errand: %v\n%s", err, out)
		return 1
	}
	return m.Run()
}

// result is what one errand invocation printed and how it exited.
type result struct {
	stdout, stderr string
	code           int
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
}

// cli runs errand in this process, exactly as main does. On a PostgreSQL
// test database it runs the binary instead: the schema comes from the
// environment (ERRAND_SCHEMA), which one process cannot set per test.
func cli(t *testing.T, args ...string) result {
	t.Helper()
	if dbEnv(args) != nil {
		return bin(t, args...)
	}
	var stdout, stderr bytes.Buffer
	err := Run(context.Background(), args, &stdout, &stderr)
	code := report(err, &stderr)
	return result{stdout.String(), stderr.String(), code}
}

// bin runs the errand binary, and fails the test if it runs for more than
// binTimeout: a command that should have exited (a worker given bad input,
// say) must not hang the suite.
func bin(t *testing.T, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), binTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, errandBin, args...)
	cmd.Env = append(append(os.Environ(), "ERRAND_DB="), dbEnv(args)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("errand %q was still running after %s; killed it\nstderr: %s", args, binTimeout, stderr.String())
	}
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run errand %v: %v", args, err)
	}
	return result{stdout.String(), stderr.String(), code}
}

const binTimeout = 2 * time.Minute

// ok fails the test unless r exited 0.
func ok(t *testing.T, r result) result {
	t.Helper()
	if r.code != 0 {
		t.Fatalf("errand failed: %s", r)
	}
	return r
}

func tempDB(t *testing.T) string {
	return filepath.Join(t.TempDir(), "errand.db")
}

// script writes an executable shell script and returns its path. errand
// runs it without a shell; the script itself may use /bin/sh.
func script(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "job.sh")
	writeScript(t, path, body)
	return path
}

func writeScript(t *testing.T, path, body string) {
	t.Helper()
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
}

// jobJSON is the part of a job record the tests read.
type jobJSON struct {
	ID          string `json:"id"`
	Kind        string `json:"kind"`
	Queue       string `json:"queue"`
	State       string `json:"state"`
	Attempt     int    `json:"attempt"`
	MaxAttempts int    `json:"max_attempts"`
	Priority    int    `json:"priority"`
	Replays     int    `json:"replays"`
	Args        json.RawMessage
	LastError   *struct {
		Class   string `json:"class"`
		Message string `json:"message"`
	} `json:"last_error"`
	Errors []struct {
		Attempt int    `json:"attempt"`
		Replay  int    `json:"replay"`
		Class   string `json:"class"`
	} `json:"errors"`
}

func listJobs(t *testing.T, db string) []jobJSON {
	t.Helper()
	r := ok(t, cli(t, "jobs", "--db", db, "--json"))
	var js []jobJSON
	if err := json.Unmarshal([]byte(r.stdout), &js); err != nil {
		t.Fatalf("jobs --json: %v\n%s", err, r.stdout)
	}
	return js
}

type inspectJSON struct {
	jobJSON
	ReplaysAudit []struct {
		Replay     int    `json:"replay"`
		PriorState string `json:"prior_state"`
		Operator   string `json:"operator"`
		Reason     string `json:"reason"`
	} `json:"replays_audit"`
	Next string `json:"next"`
}

func inspect(t *testing.T, db, id string) inspectJSON {
	t.Helper()
	r := ok(t, cli(t, "inspect", id, "--db", db, "--json"))
	var j inspectJSON
	if err := json.Unmarshal([]byte(r.stdout), &j); err != nil {
		t.Fatalf("inspect --json: %v\n%s", err, r.stdout)
	}
	return j
}

func enqueue(t *testing.T, db string, args ...string) string {
	t.Helper()
	r := ok(t, cli(t, append([]string{"enqueue", "--db", db}, args...)...))
	return strings.TrimSpace(r.stdout)
}

// workResult is the line errand work --once prints.
type workResult struct {
	Result  string  `json:"result"`
	JobID   *string `json:"job_id"`
	Attempt int     `json:"attempt"`
	Class   string  `json:"class"`
}

func parseWork(t *testing.T, r result) workResult {
	t.Helper()
	if r.code != 0 {
		t.Fatalf("work failed: %s", r)
	}
	if strings.Count(r.stdout, "\n") != 1 {
		t.Fatalf("work printed %q, want one JSON line", r.stdout)
	}
	var w workResult
	if err := json.Unmarshal([]byte(r.stdout), &w); err != nil {
		t.Fatalf("work output %q: %v", r.stdout, err)
	}
	return w
}

// gone reports whether pid has exited. A zombie counts as gone: it runs no
// code, and a container's init may never reap it.
func gone(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err == nil {
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		return i >= 0 && i+2 < len(s) && (s[i+2] == 'Z' || s[i+2] == 'X')
	}
	if os.IsNotExist(err) {
		return true
	}
	return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}

func waitGone(t *testing.T, pids ...int) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for _, pid := range pids {
		for !gone(pid) {
			if time.Now().After(deadline) {
				t.Fatalf("process %d is still running", pid)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}
