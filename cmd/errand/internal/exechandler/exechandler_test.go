//go:build unix

package exechandler

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandtype"
	"go.opentelemetry.io/otel/trace"
)

// script writes an executable /bin/sh script into a temporary directory and
// returns its path. errand runs it without a shell; the script itself may
// use one.
func script(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "job.sh")
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

func testJob() *errandtype.Job {
	token := "token-abc"
	return &errandtype.Job{
		ID:          "job-1",
		Kind:        "send",
		Args:        json.RawMessage(`{"id": 7}`),
		Attempt:     2,
		MaxAttempts: 5,
		LeaseToken:  &token,
	}
}

// syncBuffer is a log sink safe for the handler's reader goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func newHandler(t *testing.T, command string, logs *syncBuffer) *Handler {
	t.Helper()
	opts := &Options{}
	if logs != nil {
		opts.Logger = slog.New(slog.NewJSONHandler(logs, nil))
	}
	h, err := New(command, opts)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func TestNewRejectsEmptyCommand(t *testing.T) {
	for _, c := range []string{"", "   "} {
		if _, err := New(c, nil); err == nil {
			t.Errorf("New(%q) succeeded, want an error", c)
		}
	}
}

func TestArgvSplitOnSpacesWithoutShell(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "argv")
	s := script(t, `for a in "$@"; do echo "$a" >> `+out+`; done`)
	// Quotes and $HOME mean nothing without a shell: they arrive as is.
	h := newHandler(t, s+"   one  'two three' $HOME", nil)
	if err := h.Work(context.Background(), testJob()); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(out)
	want := "one\n'two\nthree'\n$HOME\n"
	if string(got) != want {
		t.Errorf("argv = %q, want %q", got, want)
	}
}

func TestStdinAndEnvironment(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	s := script(t, `cat > `+out+`.stdin
echo "$ERRAND_JOB_ID $ERRAND_JOB_KIND $ERRAND_ATTEMPT $ERRAND_MAX_ATTEMPTS $ERRAND_LEASE_TOKEN $FROM_WORKER" > `+out+`.env`)
	t.Setenv("FROM_WORKER", "inherited")
	h, err := New(s, &Options{Env: []string{"FROM_WORKER"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Work(context.Background(), testJob()); err != nil {
		t.Fatal(err)
	}
	stdin, _ := os.ReadFile(out + ".stdin")
	if string(stdin) != `{"id": 7}` {
		t.Errorf("stdin = %q, want the job's args", stdin)
	}
	env, _ := os.ReadFile(out + ".env")
	if got, want := strings.TrimSpace(string(env)), "job-1 send 2 5 token-abc inherited"; got != want {
		t.Errorf("environment = %q, want %q", got, want)
	}
}

// TestEnvironmentIsAllowlisted: the worker's secrets do not reach a
// command; the allowlist, the names the worker passes and the job's own
// values do.
func TestEnvironmentIsAllowlisted(t *testing.T) {
	out := filepath.Join(t.TempDir(), "env")
	s := script(t, `env > `+out)
	for k, v := range map[string]string{
		"ERRAND_TOKEN": "operator-secret", "ERRAND_READ_TOKEN": "reader-secret",
		"ERRAND_DB": "postgres://errand:hunter2@db/errand", "CLOUD_SECRET": "s3cr3t",
		"PASSED_ONE": "one", "AWS_REGION": "eu-west-1", "LC_TIME": "C", "TZ": "UTC",
		"ERRAND_JOB_ID": "a stale value the job's own replaces",
	} {
		t.Setenv(k, v)
	}
	h, err := New(s, &Options{Env: []string{"PASSED_ONE", "AWS_*"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Work(context.Background(), testJob()); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for line := range strings.Lines(string(b)) {
		k, v, _ := strings.Cut(strings.TrimSuffix(line, "\n"), "=")
		got[k] = v
	}
	for _, secret := range []string{"ERRAND_TOKEN", "ERRAND_READ_TOKEN", "ERRAND_DB", "CLOUD_SECRET"} {
		if v, ok := got[secret]; ok {
			t.Errorf("the command saw %s=%q; want it left out", secret, v)
		}
	}
	for k, want := range map[string]string{"PASSED_ONE": "one", "AWS_REGION": "eu-west-1", "LC_TIME": "C", "TZ": "UTC",
		"PATH": os.Getenv("PATH"), "HOME": os.Getenv("HOME"), "ERRAND_JOB_ID": "job-1", "ERRAND_LEASE_TOKEN": "token-abc"} {
		if got[k] != want {
			t.Errorf("the command saw %s=%q, want %q", k, got[k], want)
		}
	}
}

func TestNewRejectsBadEnvName(t *testing.T) {
	for _, name := range []string{"", "A=B", "A B"} {
		if _, err := New("true", &Options{Env: []string{name}}); err == nil {
			t.Errorf("New with Env %q succeeded, want an error", name)
		}
	}
}

func TestOutputGoesToTheLogWithJobID(t *testing.T) {
	var logs syncBuffer
	s := script(t, `echo "to stdout"; echo "to stderr" >&2`)
	if err := newHandler(t, s, &logs).Work(context.Background(), testJob()); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if rec["job_id"] != "job-1" {
			t.Errorf("log line %q has no job_id job-1", line)
		}
		seen[fmt.Sprint(rec["msg"], ":", rec["line"])] = true
	}
	for _, want := range []string{"exec stdout:to stdout", "exec stderr:to stderr"} {
		if !seen[want] {
			t.Errorf("log lacks %q; got:\n%s", want, logs.String())
		}
	}
}

func TestExitClassification(t *testing.T) {
	notExecutable := filepath.Join(t.TempDir(), "plain.sh")
	if err := os.WriteFile(notExecutable, []byte("#!/bin/sh\nexit 0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		command   string
		wantNil   bool
		class     string
		permanent bool
		message   string
	}{
		{name: "exit 0", command: script(t, "exit 0"), wantNil: true},
		{name: "exit 75 retries", command: script(t, "echo busy >&2; exit 75"), class: "tempfail", message: "busy"},
		{name: "exit 65 is permanent", command: script(t, "echo bad data >&2; exit 65"), class: "permanent", permanent: true, message: "bad data"},
		{name: "exit 3", command: script(t, "exit 3"), class: "exit_3", message: "exited with status 3"},
		{name: "exit 1", command: script(t, "exit 1"), class: "exit_1"},
		{name: "signal", command: script(t, "kill -9 $$"), class: "signal", message: "killed by signal 9"},
		{name: "missing executable", command: filepath.Join(t.TempDir(), "nope.sh"), class: "permanent", permanent: true, message: "not found"},
		{name: "missing from PATH", command: "errand-no-such-program-anywhere", class: "permanent", permanent: true, message: "not found"},
		{name: "not executable", command: notExecutable, class: "permanent", permanent: true, message: "not executable"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := newHandler(t, tt.command, nil).Work(context.Background(), testJob())
			if tt.wantNil {
				if err != nil {
					t.Fatalf("Work = %v, want nil", err)
				}
				return
			}
			var je *errand.JobError
			if !errors.As(err, &je) {
				t.Fatalf("Work = %v (%T), want a classified *errand.JobError", err, err)
			}
			if je.Class() != tt.class || je.IsPermanent() != tt.permanent {
				t.Errorf("class %q permanent %v, want %q %v (err %v)", je.Class(), je.IsPermanent(), tt.class, tt.permanent, err)
			}
			if !strings.Contains(err.Error(), tt.message) {
				t.Errorf("message %q lacks %q", err.Error(), tt.message)
			}
		})
	}
}

func TestErrorMessageKeepsLastTwentyStderrLines(t *testing.T) {
	s := script(t, `i=1; while [ $i -le 30 ]; do echo "line $i" >&2; i=$((i+1)); done; exit 2`)
	err := newHandler(t, s, nil).Work(context.Background(), testJob())
	if err == nil {
		t.Fatal("Work succeeded, want exit_2")
	}
	msg := err.Error()
	if !strings.Contains(msg, "line 11\n") || !strings.HasSuffix(msg, "line 30") {
		t.Errorf("message lacks lines 11..30:\n%s", msg)
	}
	if strings.Contains(msg, "line 10\n") {
		t.Errorf("message keeps more than 20 lines:\n%s", msg)
	}
}

func TestLongLinesAreCut(t *testing.T) {
	var logs syncBuffer
	s := script(t, `head -c 20000 /dev/zero | tr '\0' x >&2; echo >&2; echo after >&2; exit 1`)
	err := newHandler(t, s, &logs).Work(context.Background(), testJob())
	if err == nil {
		t.Fatal("Work succeeded, want exit_1")
	}
	if !strings.Contains(err.Error(), strings.Repeat("x", maxLine)+" [line cut]\nafter") {
		t.Errorf("long line not cut at %d bytes, or the next line lost: %.200s...", maxLine, err.Error())
	}
}

// readPids waits for the script to write its pids to path.
func readPids(t *testing.T, path string) []int {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		b, _ := os.ReadFile(path)
		if fields := strings.Fields(string(b)); len(fields) == 2 {
			var pids []int
			for _, f := range fields {
				p, err := strconv.Atoi(f)
				if err != nil {
					t.Fatal(err)
				}
				pids = append(pids, p)
			}
			return pids
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("script never wrote its pids to %s", path)
	return nil
}

// gone reports whether pid has exited. A zombie counts as gone: it runs no
// code, and in a container the init process may never reap it.
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

// groupScript starts a grandchild in the background, records both pids,
// then runs a command in the foreground.
func groupScript(t *testing.T, pidFile, then string) string {
	return script(t, `sleep 30 &
echo "$$ $!" > `+pidFile+`
`+then)
}

func TestCancelKillsTheWholeProcessGroup(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "pids")
	h := newHandler(t, groupScript(t, pidFile, "sleep 30"), nil)
	ctx, cancel := context.WithCancelCause(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- h.Work(ctx, testJob()) }()
	pids := readPids(t, pidFile)
	cause := errors.New("lease lost in test")
	cancel(cause)
	select {
	case err := <-errc:
		if !errors.Is(err, cause) {
			t.Errorf("Work = %v, want it to wrap the context's cause", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("Work did not return after its context was cancelled")
	}
	waitGone(t, pids...)
}

func TestExitKillsLeftoverChildren(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "pids")
	// A wait delay far beyond what a busy machine takes to start and kill
	// the command, so that only waiting it out can reach it.
	const waitDelay = 20 * time.Second
	h, err := New(groupScript(t, pidFile, "exit 0"), &Options{WaitDelay: waitDelay})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := h.Work(context.Background(), testJob()); err != nil {
		t.Fatal(err)
	}
	// The leftover sleep held stdout open; killing the group ends it at
	// once instead of waiting out the wait delay.
	if took := time.Since(start); took >= waitDelay/2 {
		t.Errorf("Work took %s, want far less than the wait delay %s", took, waitDelay)
	}
	waitGone(t, readPids(t, pidFile)...)
}

func TestEscapedChildDoesNotHangTheAttempt(t *testing.T) {
	// A child that leaves the group (setsid) is beyond the group kill; the
	// handler still returns once the wait delay passes.
	s := script(t, `setsid sleep 8 &
exit 0`)
	h, err := New(s, &Options{WaitDelay: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := h.Work(context.Background(), testJob()); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("Work took %s with a 200ms wait delay", took)
	}
}

// TestTraceEnvironment: the command gets the attempt's trace context as
// TRACEPARENT and TRACESTATE: the attempt's span when there is one, else
// the context stored in the job's metadata; a malformed stored one, and a
// job with none, set nothing.
func TestTraceEnvironment(t *testing.T) {
	out := filepath.Join(t.TempDir(), "trace")
	s := script(t, `echo "[$TRACEPARENT] [$TRACESTATE] [${TRACEPARENT+set}]" > `+out)
	h := newHandler(t, s, nil)
	const stored = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	spanCtx := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{1, 2, 3}, SpanID: trace.SpanID{4, 5, 6}, TraceFlags: trace.FlagsSampled, Remote: true})
	for _, tt := range []struct {
		name     string
		ctx      context.Context
		metadata string
		want     string
	}{
		{"stored", context.Background(), `{"traceparent": "` + stored + `", "tracestate": "a=1", "x": 2}`, "[" + stored + "] [a=1] [set]"},
		{"the attempt's span first", trace.ContextWithSpanContext(context.Background(), spanCtx), `{"traceparent": "` + stored + `"}`,
			"[00-01020300000000000000000000000000-0405060000000000-01] [] [set]"},
		{"malformed", context.Background(), `{"traceparent": "00-zz\nINJECTED=1"}`, "[] [] []"},
		{"none", context.Background(), ``, "[] [] []"},
	} {
		j := testJob()
		j.Metadata = json.RawMessage(tt.metadata)
		if err := h.Work(tt.ctx, j); err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		got, _ := os.ReadFile(out)
		if strings.TrimSpace(string(got)) != tt.want {
			t.Errorf("%s: the command saw %q, want %q", tt.name, strings.TrimSpace(string(got)), tt.want)
		}
	}
}
