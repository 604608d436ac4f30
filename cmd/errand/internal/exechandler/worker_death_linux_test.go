package exechandler

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestWorkerDeathKillsCommandWithoutGuard: on Linux the kernel kills the
// command when its worker dies even where the guard cannot run (no
// /bin/sh): the parent-death signal.
func TestWorkerDeathKillsCommandWithoutGuard(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "pid")
	// exec: one process, which the parent-death signal reaches.
	worker := startTestWorker(t, script(t, `echo $$ > `+pidFile+`; exec sleep 300`), testWorkerNoGuard+"=1")
	pid := readPid(t, pidFile)
	killLeftovers(t, pid)
	if err := worker.Kill(); err != nil {
		t.Fatal(err)
	}
	waitGone(t, pid)
}

// TestThreadExitDoesNotKillCommand: the parent-death signal follows the
// thread that started the command, not the process. Threads of a Go
// program end when a goroutine locked to one exits; none of those may
// end the thread that started a running command.
func TestThreadExitDoesNotKillCommand(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "pid")
	h := newHandler(t, script(t, `echo $$ > `+pidFile+`; exec sleep 300`), nil)
	retireMainThread(t)
	// Holding the handler's lock parks Work between starting the command
	// and waiting for it, which frees the thread it started the command
	// on unless Work keeps it.
	h.mu.Lock()
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	errc := make(chan error, 1)
	go func() { errc <- h.Work(ctx, testJob()) }()
	pid := readPid(t, pidFile)
	killLeftovers(t, pid)
	waitParked(t, "exechandler.(*Handler).Work")

	// A thread may sit out a while waiting for network events or timers:
	// keep ending threads until each has had its turn many times over.
	for start := time.Now(); time.Since(start) < 2*time.Second && !gone(pid); {
		endThread()
		time.Sleep(time.Millisecond)
	}
	h.mu.Unlock()
	// A thread's end signals its children as it exits, which can be a
	// moment after the goroutine's end.
	time.Sleep(500 * time.Millisecond)
	if gone(pid) {
		t.Fatal("the command died when a thread of its worker exited")
	}
	cause := errors.New("end of test")
	cancel(cause)
	select {
	case err := <-errc:
		if !errors.Is(err, cause) {
			t.Errorf("Work = %v, want the command killed by the cancellation", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("Work did not return after its context was cancelled")
	}
}

// waitParked waits until a goroutine running fn is blocked on a mutex.
func waitParked(t *testing.T, fn string) {
	t.Helper()
	buf := make([]byte, 1<<20)
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		stacks := string(buf[:runtime.Stack(buf, true)])
		for _, g := range strings.Split(stacks, "\n\n") {
			if strings.Contains(g, "[sync.Mutex.Lock") && strings.Contains(g, fn) {
				return
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("no goroutine in %s waits for a mutex", fn)
}

// endThread runs a goroutine that ends the thread it runs on: one of the
// idle threads, or a new one. It returns true when that thread was the
// main thread, which the runtime parks for good instead.
func endThread() (main bool) {
	done := make(chan bool)
	go func() {
		runtime.LockOSThread()
		done <- syscall.Gettid() == syscall.Getpid()
	}()
	return <-done
}

// retireMainThread takes the main thread out of use for the rest of the
// test binary. The runtime never ends it, so a command started there is
// safe by luck, and TestThreadExitDoesNotKillCommand could not fail.
func retireMainThread(t *testing.T) {
	t.Helper()
	// The main thread takes its turn once it is idle; a pause lets it be.
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		if endThread() {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Skip("the main thread was never idle to be retired")
}

// readPid waits for the script to write its pid to path.
func readPid(t *testing.T, path string) int {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		b, _ := os.ReadFile(path)
		if s := string(b); strings.HasSuffix(s, "\n") {
			pid, err := strconv.Atoi(strings.TrimSpace(s))
			if err != nil {
				t.Fatal(err)
			}
			return pid
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("script never wrote its pid to %s", path)
	return 0
}
