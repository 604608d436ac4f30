//go:build unix

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestEnqueueWorkList is the operator's main path, through the binary:
// enqueue, work one job with a command, list it as succeeded.
func TestEnqueueWorkList(t *testing.T) {
	db := tempDB(t)
	out := filepath.Join(t.TempDir(), "out")
	s := script(t, `cat > `+out+`; echo " $ERRAND_JOB_ID $ERRAND_ATTEMPT" >> `+out+`; echo "sent receipt"`)

	enq := ok(t, bin(t, "enqueue", "send_receipt", `{"payment": "p-1"}`, "--db", db))
	id := strings.TrimSpace(enq.stdout)
	r := bin(t, "work", "--once", "--db", db, "--exec", "send_receipt="+s)
	w := parseWork(t, r)
	if w.Result != "succeeded" || w.JobID == nil || *w.JobID != id || w.Attempt != 1 {
		t.Errorf("work = %+v, want succeeded %s attempt 1", w, id)
	}
	if want := `,"kind":"send_receipt","class":null,"error":null,"available_at":null}`; !strings.HasSuffix(strings.TrimSpace(r.stdout), want) {
		t.Errorf("work printed %s; want every field, unset ones null, ending %s", r.stdout, want)
	}
	got, _ := os.ReadFile(out)
	if want := `{"payment": "p-1"} ` + id + " 1\n"; string(got) != want {
		t.Errorf("the command saw %q, want %q", got, want)
	}
	js := listJobs(t, db)
	if len(js) != 1 || js[0].ID != id || js[0].State != "succeeded" {
		t.Errorf("jobs = %+v, want %s succeeded", js, id)
	}
	if r := ok(t, bin(t, "jobs", "--db", db)); !strings.Contains(r.stdout, id) || !strings.Contains(r.stdout, "succeeded") {
		t.Errorf("jobs table:\n%s", r.stdout)
	}
	// Nothing left: idle, still exit 0.
	r = bin(t, "work", "--once", "--db", db, "--exec", "send_receipt="+s)
	if w := parseWork(t, r); w.Result != "idle" || w.JobID != nil {
		t.Errorf("second work = %+v, want idle", w)
	}
	if want := `{"result":"idle","job_id":null,"attempt":null,"kind":null,"class":null,"error":null,"available_at":null}`; strings.TrimSpace(r.stdout) != want {
		t.Errorf("idle work printed %s, want %s", r.stdout, want)
	}
}

func TestExitStatusMapping(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "no-such-script.sh")
	tests := []struct {
		name    string
		command string
		result  string
		state   string
		class   string
		next    string
	}{
		{"exit 0", script(t, "exit 0"), "succeeded", "succeeded", "", "succeeded at "},
		{"exit 75", script(t, "echo provider busy >&2; exit 75"), "retrying", "retrying", "tempfail", "retrying: attempt 1 of 5 failed with class tempfail; runs again at "},
		{"exit 65", script(t, "echo bad payload >&2; exit 65"), "dead", "dead", "permanent", "will not run again unless replayed: errand replay "},
		{"missing executable", missing, "dead", "dead", "permanent", "will not run again unless replayed"},
		{"exit 3", script(t, "exit 3"), "retrying", "retrying", "exit_3", "failed with class exit_3"},
		{"signal", script(t, "kill -9 $$"), "retrying", "retrying", "signal", "failed with class signal"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db := tempDB(t)
			id := enqueue(t, db, "k", "--max-attempts", "5", "--backoff-base", "1m")
			w := parseWork(t, bin(t, "work", "--once", "--db", db, "--exec", "k="+tt.command))
			if w.Result != tt.result || w.Attempt != 1 || w.Class != tt.class {
				t.Errorf("work = %+v, want result %s class %q", w, tt.result, tt.class)
			}
			j := inspect(t, db, id)
			if j.State != tt.state {
				t.Errorf("state %s, want %s", j.State, tt.state)
			}
			if tt.class != "" && (j.LastError == nil || j.LastError.Class != tt.class || len(j.Errors) != 1) {
				t.Errorf("last error %+v, errors %+v, want class %s", j.LastError, j.Errors, tt.class)
			}
			if !strings.Contains(j.Next, tt.next) {
				t.Errorf("next = %q, want it to contain %q", j.Next, tt.next)
			}
		})
	}
	t.Run("stderr becomes the message", func(t *testing.T) {
		db := tempDB(t)
		id := enqueue(t, db, "k")
		parseWork(t, bin(t, "work", "--once", "--db", db, "--exec", "k="+script(t, "echo one >&2; echo two >&2; exit 75")))
		if j := inspect(t, db, id); j.LastError == nil || !strings.HasSuffix(j.LastError.Message, "one\ntwo") {
			t.Errorf("last error %+v, want the stderr lines", j.LastError)
		}
	})
}

func TestUnmappedKindIsNeverClaimed(t *testing.T) {
	db := tempDB(t)
	id := enqueue(t, db, "resize_image")
	w := parseWork(t, cli(t, "work", "--once", "--db", db, "--exec", "send_receipt="+script(t, "exit 0")))
	if w.Result != "idle" {
		t.Errorf("work = %+v, want idle", w)
	}
	if j := inspect(t, db, id); j.State != "queued" || j.Attempt != 0 {
		t.Errorf("unmapped job %+v was touched", j)
	}
	w = parseWork(t, cli(t, "work", "--once", "--db", db, "--queue", "other", "--exec", "resize_image="+script(t, "exit 0")))
	if w.Result != "idle" {
		t.Errorf("work on another queue = %+v, want idle", w)
	}
}

func TestReplayFlow(t *testing.T) {
	db := tempDB(t)
	s := filepath.Join(t.TempDir(), "job.sh")
	writeScript(t, s, "echo receipt service down >&2; exit 3")
	id := enqueue(t, db, "send", "--max-attempts", "1")

	if w := parseWork(t, bin(t, "work", "--once", "--db", db, "--exec", "send="+s)); w.Result != "dead" || w.Class != "exit_3" {
		t.Fatalf("work = %+v, want dead on its only attempt", w)
	}
	r := ok(t, bin(t, "replay", id, "--reason", "receipt service fixed", "--operator", "alice", "--db", db))
	if !strings.Contains(r.stdout, "replayed "+id) {
		t.Errorf("replay printed %q", r.stdout)
	}
	j := inspect(t, db, id)
	if j.State != "queued" || j.Attempt != 0 || j.Replays != 1 {
		t.Errorf("after replay: %+v", j)
	}
	// A queued job cannot be replayed again.
	r = bin(t, "replay", id, "--reason", "again", "--db", db)
	if r.code != 1 || r.stderr != "errand: replay: job "+id+" is queued; only dead or cancelled jobs can be replayed\n" {
		t.Errorf("second replay: %s", r)
	}

	writeScript(t, s, "exit 0")
	if w := parseWork(t, bin(t, "work", "--once", "--db", db, "--exec", "send="+s)); w.Result != "succeeded" || w.Attempt != 1 {
		t.Fatalf("work after replay = %+v, want succeeded on attempt 1 of the new cycle", w)
	}
	j = inspect(t, db, id)
	if j.State != "succeeded" || j.Replays != 1 {
		t.Errorf("after work: %+v", j)
	}
	if len(j.Errors) != 1 || j.Errors[0].Class != "exit_3" || j.Errors[0].Replay != 0 || j.Errors[0].Attempt != 1 {
		t.Errorf("error history %+v, want the first cycle's exit_3", j.Errors)
	}
	if len(j.ReplaysAudit) != 1 || j.ReplaysAudit[0].Operator != "alice" || j.ReplaysAudit[0].Reason != "receipt service fixed" || j.ReplaysAudit[0].PriorState != "dead" {
		t.Errorf("replay audit %+v", j.ReplaysAudit)
	}
	text := ok(t, bin(t, "inspect", id, "--db", db)).stdout
	for _, want := range []string{"attempt 1, replay 0", "receipt service down", "replay 1", "by alice, from dead: receipt service fixed", "next: succeeded at "} {
		if !strings.Contains(text, want) {
			t.Errorf("inspect lacks %q:\n%s", want, text)
		}
	}
}

// TestTimeoutKillsTheProcessGroup runs a command that outlives its timeout
// and leaves a grandchild: the attempt fails with class timeout and no
// process of the command's group survives.
func TestTimeoutKillsTheProcessGroup(t *testing.T) {
	db := tempDB(t)
	pidFile := filepath.Join(t.TempDir(), "pids")
	s := script(t, `sleep 30 &
echo "$$ $!" > `+pidFile+`
sleep 30`)
	id := enqueue(t, db, "slow")
	start := time.Now()
	// The timeout leaves a busy machine time to start the script and let
	// it write its pids before the kill.
	w := parseWork(t, bin(t, "work", "--once", "--db", db, "--exec", "slow="+s, "--timeout", "slow=2s"))
	if took := time.Since(start); took > 20*time.Second {
		t.Errorf("work took %s with a 2s timeout", took)
	}
	if w.Result != "retrying" || w.Class != "timeout" {
		t.Errorf("work = %+v, want retrying with class timeout", w)
	}
	if j := inspect(t, db, id); j.LastError == nil || j.LastError.Class != "timeout" {
		t.Errorf("last error %+v, want class timeout", j.LastError)
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, f := range strings.Fields(string(b)) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			t.Fatal(err)
		}
		pids = append(pids, pid)
	}
	if len(pids) != 2 {
		t.Fatalf("pid file %q", b)
	}
	waitGone(t, pids...)
}

// TestExecStderrIsTheMessage: the last 20 lines of a command's stderr are
// the attempt's error message, as they were written; a command that wrote
// none gets a message naming how it ended.
func TestExecStderrIsTheMessage(t *testing.T) {
	var lines []string
	for i := 1; i <= 25; i++ {
		lines = append(lines, fmt.Sprintf("stderr line %02d", i))
	}
	tests := []struct {
		name    string
		body    string
		class   string
		message string
	}{
		{"exit 75", "echo provider busy >&2; exit 75", "tempfail", "provider busy"},
		{"exit 65", "echo bad payload >&2; echo 'field amount' >&2; exit 65", "permanent", "bad payload\nfield amount"},
		{"exit 3", "echo boom >&2; exit 3", "exit_3", "boom"},
		{"signal", "echo dying >&2; kill -9 $$", "signal", "dying"},
		{"last 20 of 25 lines", `i=1; while [ $i -le 25 ]; do printf 'stderr line %02d\n' $i >&2; i=$((i+1)); done; exit 75`, "tempfail", strings.Join(lines[5:], "\n")},
		{"no stderr", "exit 3", "exit_3", "exited with status 3"},
		{"no stderr, signal", "kill -9 $$", "signal", "was killed by signal 9 (killed)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db := tempDB(t)
			id := enqueue(t, db, "k", "--max-attempts", "5", "--backoff-base", "1m")
			s := script(t, tt.body)
			w := parseWork(t, bin(t, "work", "--once", "--db", db, "--exec", "k="+s))
			if w.Class != tt.class {
				t.Errorf("class %q, want %q", w.Class, tt.class)
			}
			j := inspect(t, db, id)
			if j.LastError == nil {
				t.Fatalf("no last error; want class %s", tt.class)
			}
			want := tt.message
			if strings.HasPrefix(tt.name, "no stderr") {
				want = s + " " + tt.message
			}
			if j.LastError.Message != want {
				t.Errorf("message %q, want %q", j.LastError.Message, want)
			}
		})
	}
}
