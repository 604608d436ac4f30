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
			if _, err := c.Enqueue(context.Background(), errand.RawArgs{KindName: "sync"}, &errand.EnqueueOpts{ID: id, OrderingKey: "acct-1"}); err != nil {
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
		if next := inspect(t, db, "first").Next; !strings.HasPrefix(next, "queued") || strings.Contains(next, "held") {
			t.Errorf("inspect first: next = %q, want it queued and not held", next)
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

// TestUnhandledKindsAreNamed: with a worker for export_order running, jobs
// of the misspelt kind export_ordr are named by stats (table and --json) and
// by inspect, and workers lists the kinds each worker handles.
func TestUnhandledKindsAreNamed(t *testing.T) {
	eachStore(t, true, func(t *testing.T, store string) {
		db := workerDB(t, store)
		s := script(t, "exit 0")
		w := startWorker(t, db, "--queue", "default=2", "--exec", "export_order="+s, "--exec", "send="+s).ready()
		typo := enqueue(t, db, "export_ordr") // due now, and never claimed
		for range 2 {
			enqueue(t, db, "export_ordr", "--delay", "1h")
		}
		good := enqueue(t, db, "export_order", "--delay", "1h")

		table := ok(t, cli(t, "workers", "--db", db)).stdout
		if !strings.Contains(table, "KINDS") || !strings.Contains(findLine(table, fmt.Sprint(w.pid())), " export_order,send ") {
			t.Errorf("workers table does not list the worker's kinds:\n%s", table)
		}
		var workers []struct {
			Kinds []string `json:"kinds"`
		}
		r := ok(t, cli(t, "workers", "--db", db, "--json"))
		if err := json.Unmarshal([]byte(r.stdout), &workers); err != nil || len(workers) != 1 ||
			strings.Join(workers[0].Kinds, ",") != "export_order,send" {
			t.Errorf("workers --json kinds: %v\n%s", err, r.stdout)
		}

		out := ok(t, cli(t, "stats", "--db", db)).stdout
		want := "3 jobs of kind export_ordr in queue default: no live worker handles this kind"
		if !strings.Contains(out, want) || strings.Contains(out, "kind export_order ") {
			t.Errorf("stats does not name the unhandled kind alone; want %q in:\n%s", want, out)
		}
		var stats struct {
			Queues []struct {
				Queue          string         `json:"queue"`
				WaitingByKind  map[string]int `json:"waiting_by_kind"`
				UnhandledKinds []struct {
					Kind    string `json:"kind"`
					Waiting int    `json:"waiting"`
				} `json:"unhandled_kinds"`
			} `json:"queues"`
		}
		r = ok(t, cli(t, "stats", "--db", db, "--json"))
		if err := json.Unmarshal([]byte(r.stdout), &stats); err != nil || len(stats.Queues) != 1 {
			t.Fatalf("stats --json: %v\n%s", err, r.stdout)
		}
		q := stats.Queues[0]
		if len(q.UnhandledKinds) != 1 || q.UnhandledKinds[0].Kind != "export_ordr" || q.UnhandledKinds[0].Waiting != 3 ||
			q.WaitingByKind["export_ordr"] != 3 || q.WaitingByKind["export_order"] != 1 {
			t.Errorf("stats --json: %s", r.stdout)
		}

		if next := inspect(t, db, typo).Next; !strings.HasPrefix(next, "queued since ") ||
			!strings.Contains(next, "no live worker handles kind export_ordr in queue default") || strings.Contains(next, "waiting for a worker") {
			t.Errorf("inspect of the misspelt job: next = %q", next)
		}
		if next := inspect(t, db, good).Next; strings.Contains(next, "no live worker") {
			t.Errorf("inspect of a handled job: next = %q", next)
		}

		// Once the worker stops, nothing handles either kind.
		w.signal(syscall.SIGTERM)
		if code := w.wait(20 * time.Second); code != 0 {
			t.Fatalf("worker exited %d", code)
		}
		out = ok(t, cli(t, "stats", "--db", db)).stdout
		if !strings.Contains(out, "1 job of kind export_order in queue default: no live worker handles this kind") {
			t.Errorf("stats after the worker stopped:\n%s", out)
		}
		if next := inspect(t, db, good).Next; !strings.Contains(next, "scheduled for") || !strings.Contains(next, "no live worker handles kind export_order") {
			t.Errorf("inspect of the scheduled job after the worker stopped: next = %q", next)
		}
	})
}
