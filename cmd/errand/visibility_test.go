//go:build unix

package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

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
