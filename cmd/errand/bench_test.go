//go:build unix

package main

import (
	"encoding/json"
	"errors"
	"io"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestBench runs errand bench on each store: one JSON object whose
// measures are all there and positive, its jobs all succeeded in a queue of
// their own, and a job already in the database left as it was. It checks
// no timings: the machines are shared.
func TestBench(t *testing.T) {
	eachStore(t, true, func(t *testing.T, store string) {
		db := workerDB(t, store)
		other := enqueue(t, db, "other_kind", "--id", "bystander")

		r := ok(t, bin(t, "bench", "--db", db, "--jobs", "200", "--workers", "10", "--samples", "20", "--json"))
		dec := json.NewDecoder(strings.NewReader(r.stdout))
		var got map[string]any
		if err := dec.Decode(&got); err != nil {
			t.Fatalf("bench --json: %v\n%s", err, r.stdout)
		}
		if _, err := dec.Token(); !errors.Is(err, io.EOF) {
			t.Errorf("bench --json printed more than one JSON object:\n%s", r.stdout)
		}
		for _, field := range []string{"enqueue_per_sec", "work_per_sec", "latency_p50_ms", "latency_p99_ms", "peak_rss_bytes"} {
			v, ok := got[field].(float64)
			if !ok || v <= 0 {
				t.Errorf("%s = %#v, want a positive number", field, got[field])
			}
		}
		if got["latency_p99_ms"].(float64) < got["latency_p50_ms"].(float64) {
			t.Errorf("latency_p99_ms %v < latency_p50_ms %v", got["latency_p99_ms"], got["latency_p50_ms"])
		}
		want := map[string]any{"store": store, "jobs": 200.0, "workers": 10.0, "samples": 20.0, "dropped_events": 0.0}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("%s = %#v, want %#v", k, got[k], v)
			}
		}
		queue, _ := got["queue"].(string)
		if !strings.HasPrefix(queue, "errand_bench_") {
			t.Fatalf("queue = %#v, want errand_bench_...", got["queue"])
		}

		if j := inspect(t, db, other); j.State != "queued" || j.Queue != "default" {
			t.Errorf("bystander job is %s in queue %s, want queued in default", j.State, j.Queue)
		}
		var stats struct {
			Queues []struct {
				Queue  string         `json:"queue"`
				Counts map[string]int `json:"counts"`
			} `json:"queues"`
		}
		sr := ok(t, cli(t, "stats", "--db", db, "--json"))
		if err := json.Unmarshal([]byte(sr.stdout), &stats); err != nil {
			t.Fatalf("stats --json: %v\n%s", err, sr.stdout)
		}
		wantCounts := map[string]map[string]int{"default": {"queued": 1}, queue: {"succeeded": 220}}
		if len(stats.Queues) != len(wantCounts) {
			t.Errorf("stats shows queues %+v, want default and %s", stats.Queues, queue)
		}
		gotCounts := map[string]map[string]int{}
		for _, q := range stats.Queues {
			gotCounts[q.Queue] = map[string]int{}
			for state, n := range q.Counts {
				if n != 0 {
					gotCounts[q.Queue][state] = n
				}
			}
		}
		if !reflect.DeepEqual(gotCounts, wantCounts) {
			t.Errorf("jobs per queue and state %v, want %v (200 jobs + 20 samples in the bench queue)", gotCounts, wantCounts)
		}
	})
}

// TestBenchDeleteOnSuccess: with --delete-on-success the benchmark's jobs
// are gone once it ends, and its JSON says so.
func TestBenchDeleteOnSuccess(t *testing.T) {
	eachStore(t, true, func(t *testing.T, store string) {
		db := workerDB(t, store)
		r := ok(t, bin(t, "bench", "--db", db, "--jobs", "100", "--workers", "10", "--samples", "5", "--delete-on-success", "--json"))
		var got struct {
			Queue           string  `json:"queue"`
			DeleteOnSuccess bool    `json:"delete_on_success"`
			WorkPerSec      float64 `json:"work_per_sec"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
			t.Fatalf("bench --json: %v\n%s", err, r.stdout)
		}
		if !got.DeleteOnSuccess || got.WorkPerSec <= 0 {
			t.Errorf("bench --delete-on-success --json = %+v", got)
		}
		if left := ok(t, cli(t, "jobs", "--db", db, "--queue", got.Queue, "--json")).stdout; strings.TrimSpace(left) != "[]" {
			t.Errorf("the bench queue %s after --delete-on-success holds %s; want no job", got.Queue, left)
		}
	})
}

// TestBenchTable: without --json, a table on stdout, logs on stderr.
func TestBenchTable(t *testing.T) {
	t.Parallel()
	r := ok(t, bin(t, "bench", "--db", tempDB(t), "--jobs", "50", "--workers", "5", "--samples", "0"))
	for _, want := range []string{"store        sqlite", "jobs         50", "work", "jobs/s", "latency p50  -", "peak rss"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, r.stdout)
		}
	}
	if strings.Contains(r.stdout, "level=") || !strings.Contains(r.stderr, "msg=working") {
		t.Errorf("logs belong on stderr:\n%s", r)
	}
	if strings.Contains(r.stderr, `msg="job succeeded"`) {
		t.Errorf("bench logs every job's outcome:\n%s", r.stderr)
	}
}

// TestBenchNoSamples: --samples 0 skips the latency measure, whose fields
// are then null.
func TestBenchNoSamples(t *testing.T) {
	t.Parallel()
	r := ok(t, bin(t, "bench", "--db", tempDB(t), "--jobs", "20", "--workers", "2", "--samples", "0", "--json"))
	var got map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
		t.Fatalf("bench --json: %v\n%s", err, r.stdout)
	}
	for _, field := range []string{"latency_p50_ms", "latency_p99_ms"} {
		if v, ok := got[field]; !ok || v != nil {
			t.Errorf("%s = %#v (present %v), want null", field, v, ok)
		}
	}
	if v, _ := got["work_per_sec"].(float64); v <= 0 {
		t.Errorf("work_per_sec = %#v, want a positive number", got["work_per_sec"])
	}
}

// TestBenchUsage: bad flags exit 2 with one line that says what to change,
// before any database is created.
func TestBenchUsage(t *testing.T) {
	t.Parallel()
	db := tempDB(t)
	tests := []struct {
		args []string
		line string
	}{
		{[]string{"--jobs", "0"}, "--jobs 0: give at least 1"},
		{[]string{"--workers", "0"}, "--workers 0: give 1 to 1000000"},
		{[]string{"--samples", "-1"}, "--samples -1: give 0 to skip"},
		{[]string{"--jobs", "many"}, "whole number"},
		{[]string{"extra"}, `unexpected argument "extra"`},
	}
	for _, tt := range tests {
		r := bin(t, append([]string{"bench", "--db", db}, tt.args...)...)
		if r.code != 2 || r.stdout != "" || strings.Count(r.stderr, "\n") != 1 || !strings.Contains(r.stderr, tt.line) {
			t.Errorf("bench %q: want exit 2 and one line containing %q; got %s", tt.args, tt.line, r)
		}
	}
	if _, err := os.Stat(db); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused bench left a database at %s (%v)", db, err)
	}
}

func TestParseVmHWM(t *testing.T) {
	tests := []struct {
		status string
		want   int64 // -1: nil
	}{
		{"Name:\terrand\nVmPeak:\t  900 kB\nVmHWM:\t   21640 kB\nVmRSS:\t 100 kB\n", 21640 * 1024},
		{"VmHWM: 1 kB", 1024},
		{"Name:\terrand\n", -1},
		{"VmHWM:\t12 MB\n", -1},
		{"VmHWM:\tlots kB\n", -1},
	}
	for _, tt := range tests {
		got := parseVmHWM([]byte(tt.status))
		switch {
		case tt.want < 0 && got != nil:
			t.Errorf("parseVmHWM(%q) = %d, want nil", tt.status, *got)
		case tt.want >= 0 && (got == nil || *got != tt.want):
			t.Errorf("parseVmHWM(%q) = %v, want %d", tt.status, got, tt.want)
		}
	}
}

func TestPercentileMS(t *testing.T) {
	var ds []time.Duration
	for i := 100; i >= 1; i-- { // unsorted on purpose
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	for _, tt := range []struct {
		ds   []time.Duration
		p    int
		want float64
	}{
		{ds, 50, 50},
		{ds, 99, 99},
		{ds, 100, 100},
		{ds[:1], 99, 100},
		{[]time.Duration{3 * time.Millisecond, time.Millisecond / 2}, 50, 0.5},
		{[]time.Duration{3 * time.Millisecond, time.Millisecond / 2}, 99, 3},
	} {
		if got := percentileMS(tt.ds, tt.p); got != tt.want {
			t.Errorf("percentileMS(%d samples, %d) = %v, want %v", len(tt.ds), tt.p, got, tt.want)
		}
	}
}

// TestBenchArgs: --args gives every job its fields (the latency samples
// theirs beside enqueued_at); args that are not a JSON object are refused
// before anything is written.
func TestBenchArgs(t *testing.T) {
	db := workerDB(t, "sqlite")
	r := ok(t, bin(t, "bench", "--db", db, "--jobs", "20", "--workers", "5", "--samples", "2", "--args", `{"user_id":42,"tags":["a"]}`, "--json"))
	var got struct {
		Queue string `json:"queue"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
		t.Fatalf("bench --json: %v\n%s", err, r.stdout)
	}
	var jobs []struct {
		Args map[string]any `json:"args"`
	}
	if err := json.Unmarshal([]byte(ok(t, cli(t, "jobs", "--db", db, "--queue", got.Queue, "--limit", "100", "--json")).stdout), &jobs); err != nil {
		t.Fatal(err)
	}
	sampled := 0
	for _, j := range jobs {
		if j.Args["user_id"] != 42.0 || len(j.Args["tags"].([]any)) != 1 {
			t.Fatalf("a bench job's args %v; want --args' fields", j.Args)
		}
		if _, ok := j.Args["enqueued_at"]; ok {
			sampled++
		}
	}
	if len(jobs) != 22 || sampled != 2 {
		t.Fatalf("%d jobs, %d latency samples; want 22 and 2", len(jobs), sampled)
	}
	for _, bad := range []string{"[1]", "null", "{", `"x"`} {
		r := bin(t, "bench", "--db", db, "--jobs", "1", "--args", bad)
		if r.code != 2 || !strings.Contains(r.stderr, "not a JSON object") {
			t.Errorf("bench --args %s = exit %d, %q; want exit 2 saying it is not a JSON object", bad, r.code, r.stderr)
		}
	}
}
