package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandtype"
)

// TestWeightFlagsUsage: bad --max-workers and --weight flags are usage
// errors that say what to change.
func TestWeightFlagsUsage(t *testing.T) {
	db := tempDB(t)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"work", "--exec", "k=true", "--weight", "default=2"}, "add --max-workers"},
		{[]string{"work", "--exec", "k=true", "--max-workers", "4", "--weight", "other=2"}, "add --queue other"},
		{[]string{"work", "--exec", "k=true", "--max-workers", "4", "--weight", "default=x"}, "write NAME=W with W at least 1"},
		{[]string{"work", "--exec", "k=true", "--max-workers", "4", "--weight", "default"}, "write NAME=W"},
		{[]string{"work", "--exec", "k=true", "--max-workers", "4", "--weight", "default=1", "--weight", "default=2"}, "twice"},
		{[]string{"work", "--exec", "k=true", "--max-workers", "0"}, "--max-workers must be at least 1"},
		{[]string{"work", "--exec", "k=true", "--once", "--max-workers", "2"}, "--max-workers applies to the long-running worker"},
		{[]string{"serve", "--max-workers", "2"}, "add --exec"},
	} {
		r := cli(t, append(c.args, "--db", db)...)
		if r.code != 2 || !strings.Contains(r.stderr, c.want) || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
			t.Errorf("errand %v: %s\nwant exit 2 and one line with %q", c.args, r, c.want)
		}
	}
}

// TestWorkWeights: errand work --max-workers --weight shares its capacity
// by weight (the exact shares are the library's tests'; here, that the
// flags reach the worker), shows the weights in errand workers, and runs
// every job.
func TestWorkWeights(t *testing.T) {
	eachStore(t, false, func(t *testing.T, store string) {
		db := workerDB(t, store)
		marks := filepath.Join(t.TempDir(), "marks")
		// Jobs of one length: started together, they end together, and
		// each freed slot still goes by weight, also to a queue whose loop
		// is claiming at that moment.
		s := script(t, `echo "$ERRAND_JOB_KIND" >> `+marks+`; sleep 0.15`)
		enqueueN(t, db, "hi", "hi", 90, errand.EnqueueOpts{})
		enqueueN(t, db, "lo", "lo", 30, errand.EnqueueOpts{})
		w := startWorker(t, db, "--queue", "hi=4", "--queue", "lo=4", "--max-workers", "2", "--weight", "hi=4",
			"--exec", "hi="+s, "--exec", "lo="+s, "--heartbeat", "1s").ready()
		w.waitLog(10*time.Second, "max_workers=2", `weights="hi=4"`)

		var rows []struct {
			Queues []errandtype.WorkerQueue `json:"queues"`
		}
		r := ok(t, cli(t, "workers", "--db", db, "--json"))
		if err := json.Unmarshal([]byte(r.stdout), &rows); err != nil {
			t.Fatal(err)
		}
		want := []errandtype.WorkerQueue{{Name: "hi", Concurrency: 4, Weight: 4}, {Name: "lo", Concurrency: 4, Weight: 1}}
		if len(rows) != 1 || len(rows[0].Queues) != 2 || rows[0].Queues[0] != want[0] || rows[0].Queues[1] != want[1] {
			t.Errorf("workers --json queues %+v, want %+v", rows, want)
		}
		if r := ok(t, cli(t, "workers", "--db", db)); !strings.Contains(r.stdout, "hi=4 (weight 4)") {
			t.Errorf("workers table lacks the weight:\n%s", r.stdout)
		}

		waitUntil(t, 60*time.Second, "the first 60 jobs to start", func() bool { return len(lines(t, marks)) >= 60 })
		first := lines(t, marks)[:60]
		hi := 0
		for _, k := range first {
			if k == "hi" {
				hi++
			}
		}
		// Under saturation the starts follow the weights, 4:1, within 10%:
		// 48 of 60, give or take 4.8. A worker that ignored the weights
		// would split them evenly, 30 each. Both queues have work
		// throughout (90 and 30 jobs).
		t.Logf("%d of the first 60 jobs were from queue hi", hi)
		if hi < 44 || hi > 52 {
			t.Errorf("of the first 60 jobs %d were from queue hi (weight 4 of 5), want 48 within 10%%", hi)
		}
		waitUntil(t, 60*time.Second, "every job to start", func() bool { return len(lines(t, marks)) == 120 })
		w.signal(syscall.SIGTERM)
		if code := w.wait(20 * time.Second); code != 0 {
			t.Errorf("worker exited %d, want 0", code)
		}
	})
}

// TestEnqueueFairnessKey: errand enqueue --fairness-key sets the job's key,
// which errand inspect shows.
func TestEnqueueFairnessKey(t *testing.T) {
	db := tempDB(t)
	r := ok(t, cli(t, "enqueue", "k", "--fairness-key", "tenant:42", "--json", "--db", db))
	var out struct {
		Job struct {
			ID          string  `json:"id"`
			FairnessKey *string `json:"fairness_key"`
		} `json:"job"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		t.Fatal(err)
	}
	if out.Job.FairnessKey == nil || *out.Job.FairnessKey != "tenant:42" {
		t.Fatalf("enqueued job's fairness_key %v, want tenant:42", out.Job.FairnessKey)
	}
	if r := ok(t, cli(t, "inspect", out.Job.ID, "--db", db)); !strings.Contains(r.stdout, "tenant:42") {
		t.Errorf("inspect does not show the fairness key:\n%s", r.stdout)
	}
	if r := cli(t, "enqueue", "k", "--fairness-key", "bad\x01key", "--db", db); r.code != 2 || !strings.Contains(r.stderr, "--fairness-key") {
		t.Errorf("a bad fairness key: %s\nwant exit 2 naming --fairness-key", r)
	}
}
