//go:build unix

package exechandler

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// Environment of the test binary run as a worker process (see TestMain).
const (
	// testWorkerCommand makes the test binary run one attempt of this
	// command with a Handler, as errand work does, instead of the tests.
	testWorkerCommand = "EXECHANDLER_TEST_WORKER_COMMAND"
	// testWorkerNoGuard takes the guard's shell away from that worker.
	testWorkerNoGuard = "EXECHANDLER_TEST_WORKER_NO_GUARD"
	// testWorkerStall stalls that worker as soon as its command starts.
	testWorkerStall = "EXECHANDLER_TEST_WORKER_STALL"
)

func TestMain(m *testing.M) {
	if command := os.Getenv(testWorkerCommand); command != "" {
		os.Exit(runTestWorker(command))
	}
	os.Exit(m.Run())
}

// runTestWorker runs one attempt of command, which the test kills.
func runTestWorker(command string) int {
	if os.Getenv(testWorkerNoGuard) != "" {
		guardShell = "/nonexistent/sh"
	}
	if os.Getenv(testWorkerStall) != "" {
		commandStarted = func() { time.Sleep(time.Hour) }
	}
	h, err := New(command, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := h.Work(context.Background(), testJob()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// startTestWorker runs command in a worker process of its own and returns
// that process, for the test to kill.
func startTestWorker(t *testing.T, command string, env ...string) *os.Process {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(append(os.Environ(), testWorkerCommand+"="+command), env...)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
	})
	return cmd.Process
}

// killLeftovers kills, when the test ends, whatever is left of the process
// group of pid, a running command, so that a failing run leaves nothing
// behind. (The group is its guard's, not named after the command.)
func killLeftovers(t *testing.T, pid int) {
	t.Helper()
	pgid, err := syscall.Getpgid(pid)
	if err != nil {
		t.Fatalf("process group of %d: %v", pid, err)
	}
	t.Cleanup(func() { _ = syscall.Kill(-pgid, syscall.SIGKILL) })
}

// TestWorkerDeathKillsTheGroup: a worker killed with SIGKILL takes its
// command with it, and the command's child in its group too.
func TestWorkerDeathKillsTheGroup(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "pids")
	worker := startTestWorker(t, groupScript(t, pidFile, "sleep 300"))
	pids := readPids(t, pidFile)
	killLeftovers(t, pids[0])
	if err := worker.Kill(); err != nil {
		t.Fatal(err)
	}
	waitGone(t, pids...)
}

// TestWorkerDeathRightAfterStart: a worker that dies the moment its command
// has started, before it does anything more, still takes the command's
// child with it: the command never runs without its guard.
func TestWorkerDeathRightAfterStart(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "pids")
	worker := startTestWorker(t, groupScript(t, pidFile, "sleep 300"), testWorkerStall+"=1")
	pids := readPids(t, pidFile)
	killLeftovers(t, pids[0])
	if err := worker.Kill(); err != nil {
		t.Fatal(err)
	}
	waitGone(t, pids...)
}
