//go:build unix

package main

import (
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestCancelRunningCommand: errand cancel of a job that errand work runs
// stops its command at once (its process group is killed, long before a
// lease renewal, every minute here, could carry the request) and the job
// ends cancelled; with --wait the command says so.
func TestCancelRunningCommand(t *testing.T) {
	eachStore(t, false, func(t *testing.T, store string) {
		db := workerDB(t, store)
		pidFile := t.TempDir() + "/pid"
		s := script(t, `echo $$ > `+pidFile+`; sleep 60`)
		id := enqueue(t, db, "k")
		w := startWorker(t, db, "--lease", "3m", "--poll", "1m", "--exec", "k="+s).ready()
		var pid int
		waitUntil(t, 30*time.Second, "the command to start", func() bool {
			l := lines(t, pidFile)
			if len(l) == 0 {
				return false
			}
			pid, _ = strconv.Atoi(strings.TrimSpace(l[0]))
			return pid > 0
		})
		r := ok(t, cli(t, "cancel", id, "--reason", "runaway", "--wait", "20s", "--db", db))
		if r.stdout != "cancelled "+id+"\n" {
			t.Errorf("cancel --wait printed %q", r.stdout)
		}
		j := inspect(t, db, id)
		if j.State != "cancelled" || j.LastError == nil || j.LastError.Class != "cancelled" {
			t.Errorf("job %s, last error %+v; want cancelled with class cancelled", j.State, j.LastError)
		}
		waitGone(t, pid)
		w.signal(syscall.SIGTERM)
		if code := w.wait(20 * time.Second); code != 0 {
			t.Errorf("worker exited %d, want 0", code)
		}
		if l := findLine(w.stderr.String(), `msg="job cancelled"`, id); l == "" {
			t.Errorf("the worker logged no cancelled outcome for %s", id)
		}
	})
}
