//go:build unix

package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandtype"
)

// breakersJSON reads errand breakers --json.
func breakersJSON(t *testing.T, db string) []errandtype.BreakerRecord {
	t.Helper()
	r := ok(t, cli(t, "breakers", "--db", db, "--json"))
	var bs []errandtype.BreakerRecord
	if err := json.Unmarshal([]byte(r.stdout), &bs); err != nil {
		t.Fatalf("breakers --json: %v\n%s", err, r.stdout)
	}
	return bs
}

// TestWorkerBreaker: an errand work process whose command's dependency is
// down stops attempting its jobs after the breaker's threshold, while the
// jobs keep their attempts; an operator's errand breakers reset (another
// process) lets them run again once the dependency is back.
func TestWorkerBreaker(t *testing.T) {
	t.Parallel()
	eachStore(t, true, func(t *testing.T, store string) {
		db := workerDB(t, store)
		dir := t.TempDir()
		marks, up := filepath.Join(dir, "marks"), filepath.Join(dir, "up")
		s := script(t, `if [ -e `+up+` ]; then echo "ok" >> `+marks+`; exit 0; fi; echo "fail" >> `+marks+`; echo "smtp refused" >&2; exit 75`)
		ids := enqueueN(t, db, "send", errand.DefaultQueue, 5, errand.EnqueueOpts{MaxAttempts: 10, BackoffBase: 100 * time.Millisecond, BackoffMax: 200 * time.Millisecond})
		w := startWorker(t, db, "--poll", "100ms", "--queue", "default=1", "--exec", "send="+s,
			"--dependency", "send=smtp", "--breaker", "smtp=2/1m/1h").ready()
		waitUntil(t, 30*time.Second, "the breaker to open", func() bool {
			bs := breakersJSON(t, db)
			return len(bs) == 1 && bs[0].State == errandtype.BreakerOpen
		})
		// Retries come due within 200ms and the worker polls every 100ms:
		// a worker that ignored the breaker would attempt many more.
		time.Sleep(2 * time.Second)
		if n := countPrefix(t, marks, "fail"); n != 2 {
			t.Fatalf("%d failed attempts with the breaker open, want 2 (its threshold)", n)
		}
		for _, id := range ids {
			if j := jobsByID(t, db)[id]; j.State == "dead" || j.Attempt > 1 {
				t.Errorf("job %s is %s at attempt %d; want waiting with its attempts", id, j.State, j.Attempt)
			}
		}
		r := ok(t, cli(t, "breakers", "--db", db))
		if !strings.Contains(r.stdout, "smtp") || !strings.Contains(r.stdout, "open") || !strings.Contains(r.stdout, "smtp refused") {
			t.Errorf("errand breakers:\n%s", r.stdout)
		}
		checkHeldBySMTP(t, db, ids)

		if err := os.WriteFile(up, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		r = ok(t, cli(t, "breakers", "reset", "smtp", "--db", db, "--reason", "relay fixed", "--operator", "ana"))
		if r.stdout != "reset smtp: closed\n" {
			t.Errorf("reset printed %q", r.stdout)
		}
		waitUntil(t, 30*time.Second, "every job to succeed", func() bool {
			js := jobsByID(t, db)
			for _, id := range ids {
				if js[id].State != "succeeded" {
					return false
				}
			}
			return true
		})
		for _, id := range ids {
			if j := jobsByID(t, db)[id]; j.Attempt > 2 {
				t.Errorf("job %s succeeded at attempt %d, want at most 2", id, j.Attempt)
			}
		}
		audit := ok(t, cli(t, "audit", "--db", db, "--json"))
		if !strings.Contains(audit.stdout, `"breaker_reset"`) || !strings.Contains(audit.stdout, `"relay fixed"`) {
			t.Errorf("audit lacks the reset:\n%s", audit.stdout)
		}
		w.signal(syscall.SIGTERM)
		if code := w.wait(20 * time.Second); code != 0 {
			t.Errorf("worker exited %d, want 0", code)
		}
	})
}

func TestBreakersCommandErrors(t *testing.T) {
	db := tempDB(t)
	ok(t, cli(t, "migrate", "--db", db))
	if r := ok(t, cli(t, "breakers", "--db", db, "--json")); r.stdout != "[]\n" {
		t.Errorf("breakers --json on a fresh database printed %q", r.stdout)
	}
	if r := ok(t, cli(t, "breakers", "--db", db)); r.stdout != "no circuit breakers\n" {
		t.Errorf("breakers on a fresh database printed %q", r.stdout)
	}
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"breakers", "reset", "--db", db}, 2, "give one dependency"},
		{[]string{"breakers", "reset", "smtp", "--db", db}, 2, "--reason"},
		{[]string{"breakers", "open", "--db", db}, 2, "unexpected argument"},
		{[]string{"breakers", "--reason", "x", "--db", db}, 2, "go with reset"},
		{[]string{"breakers", "reset", "smpt", "--reason", "typo", "--db", db}, 1, "no circuit breaker for dependency \"smpt\""},
		{[]string{"work", "--db", db, "--exec", "send=true", "--breaker", "smtp=5/1m/30s"}, 2, "no --dependency"},
		{[]string{"work", "--db", db, "--exec", "send=true", "--dependency", "mail=smtp"}, 2, "which no --exec or --http maps"},
		{[]string{"work", "--db", db, "--exec", "send=true", "--dependency", "send=smtp", "--breaker", "smtp=5/1m"}, 2, "DEP=N/WINDOW/COOLDOWN"},
		{[]string{"work", "--db", db, "--exec", "send=true", "--dependency", "send=smtp", "--breaker", "smtp=0/1m/30s"}, 2, "at least 1"},
		{[]string{"serve", "--db", db, "--breaker", "smtp=5/1m/30s"}, 2, "no --dependency"},
	} {
		r := cli(t, c.args...)
		if r.code != c.code || !strings.Contains(r.stderr, c.want) || strings.Count(strings.TrimSpace(r.stderr), "\n") > 0 || r.stdout != "" {
			t.Errorf("errand %v: %s\nwant exit %d and one line with %q", c.args, r, c.code, c.want)
		}
	}
}

// TestWorkOnceBreaker: errand work --once counts its command's failures
// toward its kind's dependency and, with the breaker open, claims none of
// the kind's jobs (idle) while they wait.
func TestWorkOnceBreaker(t *testing.T) {
	t.Parallel()
	db := tempDB(t)
	s := script(t, `echo "smtp refused" >&2; exit 75`)
	enqueueN(t, db, "send", errand.DefaultQueue, 2, errand.EnqueueOpts{MaxAttempts: 10})
	once := func() string {
		t.Helper()
		return parseWork(t, cli(t, "work", "--once", "--db", db, "--exec", "send="+s,
			"--dependency", "send=smtp", "--breaker", "smtp=1/1m/1h")).Result
	}
	if r := once(); r != "retrying" {
		t.Fatalf("first --once: %s; want retrying", r)
	}
	if bs := breakersJSON(t, db); len(bs) != 1 || bs[0].State != errandtype.BreakerOpen {
		t.Fatalf("breakers after one failure at threshold 1: %+v; want smtp open", bs)
	}
	if r := once(); r != "idle" {
		t.Fatalf("--once with the breaker open: %s; want idle, the other job waiting", r)
	}
}

// checkHeldBySMTP checks that processes which declare no kinds (errand
// inspect, errand stats) report the jobs of ids, whose kind send's
// dependency smtp a worker declared and whose breaker is open, as held by
// it, not ready.
func checkHeldBySMTP(t *testing.T, db string, ids []string) {
	t.Helper()
	for _, id := range ids {
		r := ok(t, cli(t, "inspect", id, "--db", db, "--json"))
		var j struct {
			HeldByBreaker *string `json:"held_by_breaker"`
			Next          string  `json:"next"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &j); err != nil {
			t.Fatal(err)
		}
		if j.HeldByBreaker == nil || *j.HeldByBreaker != "smtp" || !strings.Contains(j.Next, "held by breaker smtp (open until") {
			t.Errorf("inspect %s: held_by_breaker %v, next %q; want held by breaker smtp", id, j.HeldByBreaker, j.Next)
		}
	}
	r := ok(t, cli(t, "stats", "--db", db, "--json"))
	var st struct {
		Queues []struct {
			OldestReadyAge   *float64                     `json:"oldest_ready_age_seconds"`
			BreakerHeldKinds []errandtype.BreakerHeldKind `json:"breaker_held_kinds"`
			Kinds            []errand.KindInsights        `json:"kinds"`
		} `json:"queues"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil {
		t.Fatal(err)
	}
	q := st.Queues[0]
	wantHeld := []errandtype.BreakerHeldKind{{Kind: "send", Dependency: "smtp", Waiting: len(ids)}}
	if q.OldestReadyAge != nil || !reflect.DeepEqual(q.BreakerHeldKinds, wantHeld) || q.Kinds[0].Ready != 0 {
		t.Errorf("stats --json: oldest ready %v, breaker-held %+v, ready %d; want null, %+v, 0\n%s",
			q.OldestReadyAge, q.BreakerHeldKinds, q.Kinds[0].Ready, wantHeld, r.stdout)
	}
	r = ok(t, cli(t, "stats", "--db", db))
	if want := fmt.Sprintf("%d jobs of kind send in queue default: held by breaker smtp\n", len(ids)); !strings.Contains(r.stdout, want) {
		t.Errorf("stats lacks %q:\n%s", want, r.stdout)
	}
}
