package main

import (
	"context"
	"encoding/json"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandstore"
)

// TestWorkerRateLimitAcrossProcesses: two errand work processes on one
// database share one rate limit of 20 starts a second. 100 jobs then start
// over at least 4.9s (a burst of 2, then 98 at 20/s), not the 2.5s two
// separate limits would allow, and no second of the run sees much more
// than 20 starts plus the burst. Both processes run jobs, so the rate is
// shared and not one process's alone. The bounds follow from the limit,
// whatever the machine's speed; the upper bound on the whole run is only a
// generous liveness bound.
func TestWorkerRateLimitAcrossProcesses(t *testing.T) {
	eachStore(t, false, func(t *testing.T, store string) {
		db := workerDB(t, store)
		job := script(t, "exit 0")
		args := []string{"--exec", "k=" + job, "--rate-limit", "queue:default=20/s", "--poll", "200ms"}
		w1 := startWorker(t, db, args...).ready()
		w2 := startWorker(t, db, args...).ready()
		ids := enqueueN(t, db, "k", errand.DefaultQueue, 100, errand.EnqueueOpts{})
		waitUntil(t, 90*time.Second, "all 100 jobs to succeed", func() bool {
			js := jobsByID(t, db)
			for _, id := range ids {
				if js[id].State != "succeeded" {
					return false
				}
			}
			return true
		})
		c := openTestClient(t, db)
		js, err := c.Store().JobList(context.Background(), &errandstore.JobListParams{Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		var starts []time.Time
		owners := map[string]int{}
		for _, j := range js {
			if j.Attempt != 1 || j.AttemptedAt == nil || j.LeaseOwner == nil {
				t.Fatalf("job %s: attempt %d, attempted_at %v, owner %v; want one recorded attempt", j.ID, j.Attempt, j.AttemptedAt, j.LeaseOwner)
			}
			starts = append(starts, *j.AttemptedAt)
			owners[*j.LeaseOwner]++
		}
		sort.Slice(starts, func(a, b int) bool { return starts[a].Before(starts[b]) })
		span := starts[len(starts)-1].Sub(starts[0])
		t.Logf("%s: 100 starts over %s, by worker %v", store, span, owners)
		if span < 4500*time.Millisecond {
			t.Errorf("100 jobs at 20/s started over %s; want at least 4.9s (2.5s would mean each process had its own rate)", span)
		}
		// A rate bucket of 20/s with a burst of 2 allows at most 22 takes
		// in any second. A claim's attempted_at follows its take by the
		// claim's own delay, which a loaded machine stretches, so the
		// bound on starts leaves room for 8 more; two separate limits
		// would start 40 a second.
		for i := range starts {
			n := 0
			for _, s := range starts[i:] {
				if s.Sub(starts[i]) < time.Second {
					n++
				}
			}
			if n > 30 {
				t.Fatalf("%d jobs started in the second from %s; the limit allows 22, 30 with claim delays", n, starts[i].Format(time.RFC3339Nano))
			}
		}
		if len(owners) != 2 {
			t.Errorf("jobs ran on %d workers, want both: %v", len(owners), owners)
		}
		limits := ok(t, cli(t, "limits", "--db", db, "--json"))
		var rs []struct {
			Name string `json:"name"`
			Spec struct {
				Mode  string  `json:"mode"`
				Rate  float64 `json:"rate"`
				Burst float64 `json:"burst"`
			} `json:"spec"`
			Denied int64 `json:"denied"`
		}
		if err := json.Unmarshal([]byte(limits.stdout), &rs); err != nil {
			t.Fatalf("errand limits --json: %v\n%s", err, limits.stdout)
		}
		if len(rs) != 1 || rs[0].Name != "queue:default" || rs[0].Spec.Mode != "rate" || rs[0].Spec.Rate != 20 || rs[0].Spec.Burst != 2 || rs[0].Denied == 0 {
			t.Errorf("errand limits --json = %s; want queue:default at 20/s, burst 2, with claims held back", limits.stdout)
		}
		if table := ok(t, cli(t, "limits", "--db", db)).stdout; !strings.Contains(table, "queue:default") || !strings.Contains(table, "20/s, burst 2") {
			t.Errorf("errand limits lacks the limit:\n%s", table)
		}
		for _, w := range []*workerProc{w1, w2} {
			w.signal(syscall.SIGTERM)
			if code := w.wait(30 * time.Second); code != 0 {
				t.Errorf("worker exited %d after SIGTERM, want 0", code)
			}
		}
	})
}

// TestWorkerLimitFlags: bad limits are usage errors that say what to
// change, before anything runs.
func TestWorkerLimitFlags(t *testing.T) {
	db := tempDB(t)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--rate-limit", "default=20/s"}, "--rate-limit"},
		{[]string{"--rate-limit", "queue:default=0/s"}, "N at least 1"},
		{[]string{"--rate-limit", "queue:default=5/fortnight"}, "PER"},
		{[]string{"--rate-limit", "queue:other=5/s"}, "does not work"},
		{[]string{"--rate-limit", "kind:nope=5/s"}, "no handler"},
		{[]string{"--rate-limit", "queue:default=5/s", "--rate-limit", "queue:default=6/s"}, "twice"},
		{[]string{"--retry-budget", "k=lots"}, "RATIO"},
		{[]string{"--retry-budget", "k=0.1/1ms"}, "window"},
		{[]string{"--retry-budget", "nope=0.1"}, "no handler"},
		{[]string{"--once", "--rate-limit", "queue:other=5/s"}, "does not work"},
		{[]string{"--once", "--retry-budget", "nope=0.1"}, "no handler"},
		{[]string{"serve", "--rate-limit", "queue:default=5/s"}, "--rate-limit"},
		{[]string{"serve", "--exec", "k=/bin/true", "--rate-limit", "kind:nope=5/s"}, "no handler"},
	} {
		args := append([]string{"work", "--db", db, "--exec", "k=/bin/true"}, c.args...)
		if c.args[0] == "serve" {
			args = append([]string{"serve", "--db", db, "--addr", "127.0.0.1:0"}, c.args[1:]...)
		}
		r := cli(t, args...)
		stderr := strings.TrimSpace(r.stderr)
		if c.args[0] == "serve" {
			// errand serve logs that it serves before its worker starts.
			stderr = stderr[strings.LastIndex(stderr, "\n")+1:]
		}
		if r.code != 2 || !strings.Contains(stderr, c.want) || strings.Count(stderr, "\n") != 0 || !strings.HasPrefix(stderr, "errand: ") {
			t.Errorf("errand %s = exit %d, stderr %q; want exit 2 and one line with %q", strings.Join(c.args, " "), r.code, r.stderr, c.want)
		}
	}
}

// TestWorkOnceRecordsLimits: errand work --once --rate-limit records the
// limit, as a long-running worker does, and claims within it: a second run
// within the period finds nothing it may start.
func TestWorkOnceRecordsLimits(t *testing.T) {
	db := tempDB(t)
	ok(t, cli(t, "migrate", "--db", db))
	first := enqueue(t, db, "k")
	second := enqueue(t, db, "k")
	once := []string{"work", "--once", "--db", db, "--exec", "k=true", "--rate-limit", "queue:default=1/h", "--retry-budget", "k=0.1"}
	if r := parseWork(t, ok(t, cli(t, once...))); r.Result != "succeeded" || r.JobID == nil || *r.JobID != first {
		t.Fatalf("first work --once = %+v; want %s run", r, first)
	}
	if r := parseWork(t, ok(t, cli(t, once...))); r.Result != "idle" {
		t.Fatalf("second work --once within the hour = %+v; want idle", r)
	}
	if j := jobsByID(t, db)[second]; j.State != "queued" || j.Attempt != 0 {
		t.Fatalf("second job is %s at attempt %d; want queued, untouched", j.State, j.Attempt)
	}
	r := ok(t, cli(t, "limits", "--db", db))
	for _, want := range []string{"queue:default", "0.0002778/s, burst 1", "retry:k", "0.1 per first attempt"} {
		if !strings.Contains(r.stdout, want) {
			t.Fatalf("errand limits lacks %q:\n%s", want, r.stdout)
		}
	}
}
