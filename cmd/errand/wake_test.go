//go:build unix

package main

import (
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestSQLiteWakesAcrossProcesses: a worker that polls only hourly starts a
// job that another process (the CLI) enqueues within seconds: its listener
// sees the other process's commit to the file.
func TestSQLiteWakesAcrossProcesses(t *testing.T) {
	t.Parallel()
	db := tempDB(t)
	w := startWorker(t, db, "--poll", "1h", "--exec", "k="+script(t, "exit 0")).ready()
	// Let the first (idle) claim and the startup writes pass: from here on
	// only a wake-up can make the worker look again within the hour.
	time.Sleep(500 * time.Millisecond)
	enqueued := time.Now()
	id := strings.TrimSpace(ok(t, bin(t, "enqueue", "k", "--db", db)).stdout)
	waitUntil(t, 10*time.Second, "the job to succeed", func() bool { return inspect(t, db, id).State == "succeeded" })
	t.Logf("a cross-process enqueue succeeded %s later", time.Since(enqueued).Round(time.Millisecond))
	w.signal(syscall.SIGTERM)
	if code := w.wait(20 * time.Second); code != 0 {
		t.Errorf("worker exited %d, want 0", code)
	}
}
