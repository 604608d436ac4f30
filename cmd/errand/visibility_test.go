//go:build unix

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/errandhq/errand"
)

// TestHeldJobsShowWhatHoldsThem: a job waiting behind another of its
// ordering key is shown as held by that job in jobs, jobs --json and
// inspect, not as running now or waiting for a worker.
func TestHeldJobsShowWhatHoldsThem(t *testing.T) {
	eachStore(t, true, func(t *testing.T, store string) {
		db := workerDB(t, store)
		c := openTestClient(t, db)
		for _, id := range []string{"first", "second"} {
			if _, err := c.Enqueue(context.Background(), "sync", nil, &errand.EnqueueOpts{ID: id, OrderingKey: "acct-1"}); err != nil {
				t.Fatal(err)
			}
		}

		table := ok(t, cli(t, "jobs", "--db", db)).stdout
		if line := findLine(table, "second "); !strings.Contains(line, "held by first") {
			t.Errorf("jobs: the held job's line does not say what holds it:\n%s", table)
		}
		if line := findLine(table, "first "); !strings.Contains(line, " now ") || strings.Contains(line, "held") {
			t.Errorf("jobs: the first job of the key is not shown runnable now:\n%s", table)
		}

		var jobs []struct {
			ID     string  `json:"id"`
			HeldBy *string `json:"held_by"`
		}
		r := ok(t, cli(t, "jobs", "--db", db, "--json"))
		if err := json.Unmarshal([]byte(r.stdout), &jobs); err != nil || len(jobs) != 2 {
			t.Fatalf("jobs --json: %v\n%s", err, r.stdout)
		}
		if jobs[0].ID != "first" || jobs[0].HeldBy != nil || jobs[1].HeldBy == nil || *jobs[1].HeldBy != "first" {
			t.Errorf("jobs --json held_by: %s", r.stdout)
		}

		next := inspect(t, db, "second").Next
		if !strings.Contains(next, "held by job first of ordering key acct-1") || strings.Contains(next, "waiting for a worker") {
			t.Errorf("inspect second: next = %q, want it held by first", next)
		}
		if next := inspect(t, db, "first").Next; !strings.Contains(next, "waiting for a worker") {
			t.Errorf("inspect first: next = %q, want it waiting for a worker", next)
		}
		text := ok(t, cli(t, "inspect", "second", "--db", db)).stdout
		if !strings.Contains(findLine(text, "held by"), "first") {
			t.Errorf("inspect second lacks a held by field:\n%s", text)
		}
	})
}

// TestWorkersShowsDraining: a worker told to stop while a job runs is shown
// draining by errand workers and --json until the job ends and it stops.
// Its heartbeat is an hour: only the beat sent as the drain begins can
// explain the status.
func TestWorkersShowsDraining(t *testing.T) {
	eachStore(t, true, func(t *testing.T, store string) {
		db := workerDB(t, store)
		dir := t.TempDir()
		started, release := filepath.Join(dir, "started"), filepath.Join(dir, "release")
		s := script(t, `touch `+started+`; while [ ! -e `+release+` ]; do sleep 0.05; done`)
		w := startWorker(t, db, "--heartbeat", "1h", "--grace", "60s", "--exec", "hold="+s).ready()
		enqueueN(t, db, "hold", "default", 1, errand.EnqueueOpts{})
		waitUntil(t, 20*time.Second, "the job to start", func() bool { _, err := os.Stat(started); return err == nil })

		type workerRow struct {
			PID        int     `json:"pid"`
			Status     string  `json:"status"`
			DrainingAt *string `json:"draining_at"`
		}
		row := func() workerRow {
			r := ok(t, cli(t, "workers", "--db", db, "--json"))
			var rows []workerRow
			if err := json.Unmarshal([]byte(r.stdout), &rows); err != nil || len(rows) != 1 {
				t.Fatalf("workers --json: %v\n%s", err, r.stdout)
			}
			return rows[0]
		}
		if r := row(); r.Status != "alive" || r.DrainingAt != nil {
			t.Fatalf("running a job: %+v, want alive and no draining_at", r)
		}
		w.signal(syscall.SIGTERM)
		waitUntil(t, 20*time.Second, "the worker to be shown draining", func() bool { return row().Status == "draining" })
		if r := row(); r.DrainingAt == nil || r.PID != w.pid() {
			t.Errorf("draining worker: %+v, want its pid and a draining_at", r)
		}
		if line := findLine(ok(t, cli(t, "workers", "--db", db)).stdout, fmt.Sprint(w.pid())); !strings.Contains(line, "draining") {
			t.Errorf("workers table does not show the worker draining: %q", line)
		}
		if err := os.WriteFile(release, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if code := w.wait(20 * time.Second); code != 0 {
			t.Fatalf("worker exited %d, want 0", code)
		}
		if r := row(); r.Status != "stopped" {
			t.Errorf("after the drain: status %s, want stopped", r.Status)
		}
	})
}
