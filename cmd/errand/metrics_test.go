package main

import (
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/errandhq/errand"
)

// errand work --metrics-addr serves the worker's counters and the queue
// gauges on /metrics, and /healthz and /readyz, while it runs.
func TestWorkerMetrics(t *testing.T) {
	t.Parallel()
	eachStore(t, true, func(t *testing.T, store string) {
		db := workerDB(t, store)
		enqueueN(t, db, "ok", "default", 2, errand.EnqueueOpts{})
		ids := enqueueN(t, db, "bad", "default", 1, errand.EnqueueOpts{})
		w := startWorker(t, db, "--metrics-addr", "127.0.0.1:0", "--ready-max-oldest-age", "1h",
			"--exec", "ok="+script(t, "exit 0"), "--exec", "bad="+script(t, "exit 65")).ready()
		line := w.waitLog(20*time.Second, `msg="serving metrics"`)
		addr := regexp.MustCompile(`addr=(\S+)`).FindStringSubmatch(line)
		if addr == nil || !strings.HasPrefix(addr[1], "127.0.0.1:") {
			t.Fatalf("no loopback addr in %q", line)
		}
		base := "http://" + addr[1]
		waitUntil(t, 30*time.Second, "the jobs to finish", func() bool {
			return jobsByID(t, db)[ids[0]].State == "dead"
		})
		waitUntil(t, 30*time.Second, "the worker to count the jobs", func() bool {
			_, body := get(t, base+"/metrics")
			return strings.Contains(body, `errand_jobs_finished_total{kind="ok",outcome="succeeded",queue="default"} 2`)
		})
		_, body := get(t, base+"/metrics")
		for _, want := range []string{
			`errand_jobs_started_total{kind="bad",queue="default"} 1`,
			`errand_jobs_finished_total{kind="bad",outcome="dead",queue="default"} 1`,
			`errand_job_failures_total{class="permanent",kind="bad",outcome="dead",queue="default"} 1`,
			`errand_queue_jobs{queue="default",state="dead"} 1`,
			`errand_store_up 1`,
			`errand_job_run_seconds_count{kind="ok",queue="default"} 2`,
		} {
			if !strings.Contains(body, want) {
				t.Errorf("/metrics lacks %s", want)
			}
		}
		if code, body := get(t, base+"/healthz"); code != http.StatusOK {
			t.Errorf("/healthz: %d %s", code, body)
		}
		code, body := get(t, base+"/readyz")
		var ready struct{ Status string }
		if err := json.Unmarshal([]byte(body), &ready); err != nil || code != http.StatusOK || ready.Status != "ready" {
			t.Errorf("/readyz: %d %s", code, body)
		}
		w.signal(syscall.SIGTERM)
		if code := w.wait(20 * time.Second); code != 0 {
			t.Errorf("worker exited %d, want 0", code)
		}
	})
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// Bad metrics and readiness flags are usage errors that say what to write.
func TestWorkerMetricsFlags(t *testing.T) {
	db := tempDB(t)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--ready-max-oldest-age", "5m"}, "only --metrics-addr serves"},
		{[]string{"--metrics-addr", "9464", "--ready-max-dead-growth", "100"}, "write N/PERIOD"},
		{[]string{"--metrics-addr", "9464", "--ready-max-oldest-age", "0s"}, "must be positive"},
		{[]string{"--metrics-addr", "localhost"}, "give HOST:PORT or a port alone"},
		{[]string{"--metrics-addr", "9464", "--once"}, "--metrics-addr applies to the long-running worker"},
	} {
		args := append([]string{"work", "--db", db, "--exec", "ok=true"}, c.args...)
		r := cli(t, args...)
		if r.code != exitUsage || !strings.Contains(r.stderr, c.want) {
			t.Errorf("errand %s: %s\nwant exit 2 with %q", strings.Join(args, " "), r, c.want)
		}
	}
}
