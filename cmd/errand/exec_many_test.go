//go:build unix

package main

import (
	"context"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/errandhq/errand"
)

// enqueueIDs enqueues a job of kind for each id, in one transaction, with
// backoffs of an hour, so that no failed job comes back during a test.
func enqueueIDs(t *testing.T, db, kind string, ids ...string) {
	t.Helper()
	c := openTestClient(t, db)
	ps := make([]errand.EnqueueParams, len(ids))
	for i, id := range ids {
		ps[i] = errand.EnqueueParams{Args: errand.RawArgs{KindName: kind, JSON: []byte(`{"n":` + string(rune('0'+i)) + `}`)},
			Opts: &errand.EnqueueOpts{ID: id, BackoffBase: time.Hour, BackoffMax: time.Hour}}
	}
	if _, err := c.EnqueueMany(context.Background(), ps); err != nil {
		t.Fatal(err)
	}
}

// waitSettled waits until no job of db is queued or running: every job
// has an outcome.
func waitSettled(t *testing.T, db string) {
	t.Helper()
	waitUntil(t, 30*time.Second, "every job's outcome", func() bool {
		for _, j := range jobsByID(t, db) {
			if j.State == "running" || j.State == "queued" {
				return false
			}
		}
		return true
	})
}

// outcomesScript prints, for each job on its stdin among cases (id, then
// its outcome's JSON), that outcome, in a JSON array, and appends the call
// to marks; then it exits with exit.
func outcomesScript(t *testing.T, marks, exit string, cases ...string) string {
	t.Helper()
	body := `in=$(cat)
echo "call $ERRAND_JOB_KIND $ERRAND_JOB_COUNT" >> ` + marks + `
case "$in" in *'"args":{"n":0}'*) ;; *) echo "no args on stdin: $in" >> ` + marks + `;; esac
sep=''
emit() { case "$in" in *"\"id\":\"$1\""*) printf '%s%s' "$sep" "$2"; sep=',';; esac; }
printf '['
`
	for i := 0; i < len(cases); i += 2 {
		body += "emit " + cases[i] + " '" + cases[i+1] + "'\n"
	}
	body += "printf ']'\necho 'the last words' >&2\nexit " + exit
	return script(t, body)
}

// TestWorkExecMany: --exec-many runs one command for the jobs one claim
// returned, their envelopes on stdin, and records the outcome it prints
// for each: success, a classified failure with its retry_after, a
// permanent failure; a job it names no outcome for fails with class
// bad_output, on both stores.
func TestWorkExecMany(t *testing.T) {
	eachStore(t, false, func(t *testing.T, store string) {
		db := workerDB(t, store)
		marks := filepath.Join(t.TempDir(), "marks")
		s := outcomesScript(t, marks, "0",
			"ok-1", `{"id":"ok-1","ok":true}`,
			"ok-2", `{"id":"ok-2","ok":true}`,
			"fail-1", `{"id":"fail-1","message":"upstream said 503","class":"upstream_down","retry_after":"2h"}`,
			"perm-1", `{"id":"perm-1","message":"no such customer","permanent":true}`)
		ids := []string{"ok-1", "ok-2", "fail-1", "perm-1", "missing-1"}
		enqueueIDs(t, db, "k", ids...)
		w := startWorker(t, db, "--poll", "200ms", "--exec-many", "k="+s, "--many-max", "k=10").ready()
		waitSettled(t, db)
		w.signal(syscall.SIGTERM)
		if code := w.wait(20 * time.Second); code != 0 {
			t.Errorf("worker exited %d, want 0", code)
		}
		if got := lines(t, marks); len(got) != 1 || got[0] != "call_k_5" {
			t.Errorf("calls %q; want one call of kind k with 5 jobs and their args", got)
		}
		js := jobsByID(t, db)
		if js["ok-1"].State != "succeeded" || js["ok-2"].State != "succeeded" {
			t.Errorf("ok jobs: %s, %s; want succeeded", js["ok-1"].State, js["ok-2"].State)
		}
		f := inspect(t, db, "fail-1")
		if f.State != "retrying" || f.LastError == nil || f.LastError.Class != "upstream_down" || f.LastError.Message != "upstream said 503" {
			t.Errorf("fail-1: %s, last error %+v; want retrying with class upstream_down", f.State, f.LastError)
		}
		if j, err := openTestClient(t, db).Get(context.Background(), "fail-1"); err != nil || time.Until(j.AvailableAt) < 119*time.Minute {
			t.Errorf("fail-1 runs next at %v (%v); want in 2h, its retry_after, not the 1h backoff", j.AvailableAt, err)
		}
		if p := js["perm-1"]; p.State != "dead" || p.LastError == nil || p.LastError.Class != "permanent" || p.LastError.Message != "no such customer" {
			t.Errorf("perm-1: %s, last error %+v; want dead, permanent", p.State, p.LastError)
		}
		m := js["missing-1"]
		if m.State != "retrying" || m.LastError == nil || m.LastError.Class != "bad_output" || !strings.Contains(m.LastError.Message, "without an outcome for job missing-1") {
			t.Errorf("missing-1: %s, last error %+v; want retrying with class bad_output, naming the job", m.State, m.LastError)
		}
	})
}

// TestWorkExecManyBadOutputOrExit: output that is no array of outcomes
// fails every job of the call with class bad_output, saying so; a command
// that exits 75 keeps the outcomes it printed, and its other jobs retry
// with class tempfail and its stderr as the message.
func TestWorkExecManyBadOutputOrExit(t *testing.T) {
	db := tempDB(t)
	marks := filepath.Join(t.TempDir(), "marks")
	garbage := script(t, `cat > /dev/null; echo "call garbage $ERRAND_JOB_COUNT" >> `+marks+`; echo 'done!'`)
	partial := outcomesScript(t, marks, "75", "p-1", `{"id":"p-1","ok":true}`)
	enqueueIDs(t, db, "garbage", "g-1", "g-2")
	enqueueIDs(t, db, "partial", "p-1", "p-2")
	w := startWorker(t, db, "--poll", "200ms", "--exec-many", "garbage="+garbage, "--exec-many", "partial="+partial).ready()
	waitSettled(t, db)
	w.signal(syscall.SIGTERM)
	if code := w.wait(20 * time.Second); code != 0 {
		t.Errorf("worker exited %d, want 0", code)
	}
	js := jobsByID(t, db)
	for _, id := range []string{"g-1", "g-2"} {
		if j := js[id]; j.State != "retrying" || j.LastError == nil || j.LastError.Class != "bad_output" || !strings.Contains(j.LastError.Message, "not a JSON array of outcomes") {
			t.Errorf("%s: %s, last error %+v; want retrying with class bad_output", id, j.State, j.LastError)
		}
	}
	if j := js["p-1"]; j.State != "succeeded" {
		t.Errorf("p-1, whose outcome the command printed before exit 75: %s, want succeeded", j.State)
	}
	if j := js["p-2"]; j.State != "retrying" || j.LastError == nil || j.LastError.Class != "tempfail" || j.LastError.Message != "the last words" {
		t.Errorf("p-2: %s, last error %+v; want retrying with class tempfail and the command's stderr", j.State, j.LastError)
	}
	if n := countPrefix(t, marks, "call_"); n != 2 {
		t.Errorf("%d calls, want one per kind: %q", n, lines(t, marks))
	}
}

// TestWorkExecManyMax: --many-max N gives each run of the command at most
// N jobs.
func TestWorkExecManyMax(t *testing.T) {
	db := tempDB(t)
	marks := filepath.Join(t.TempDir(), "marks")
	s := script(t, `cat > /dev/null; echo "call $ERRAND_JOB_COUNT" >> `+marks+`; exit 75`)
	ids := []string{"a", "b", "c", "d", "e"}
	enqueueIDs(t, db, "k", ids...)
	w := startWorker(t, db, "--poll", "200ms", "--exec-many", "k="+s, "--many-max", "k=2").ready()
	waitSettled(t, db)
	w.signal(syscall.SIGTERM)
	if code := w.wait(20 * time.Second); code != 0 {
		t.Errorf("worker exited %d, want 0", code)
	}
	got := strings.Join(lines(t, marks), " ")
	if n := countPrefix(t, marks, "call"); n != 3 || strings.Count(got, "call_2") != 2 || strings.Count(got, "call_1") != 1 {
		t.Errorf("calls %q; want calls of 2, 2 and 1 jobs", got)
	}
}
