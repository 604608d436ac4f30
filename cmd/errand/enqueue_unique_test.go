//go:build unix

package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestEnqueueUniqueScope runs the binary: a key with --unique-scope
// until_finished returns its job while the job waits, and enqueues a new
// one once a worker ran it to success; --ordering-on-dead hold is kept.
func TestEnqueueUniqueScope(t *testing.T) {
	db := tempDB(t)
	args := []string{"digest", "--unique-key", "digest:acct-7", "--unique-scope", "until-finished", "--unique-window", "24h"}
	r := ok(t, cli(t, append([]string{"enqueue", "--db", db, "--json"}, args...)...))
	var out struct {
		ID        string `json:"id"`
		Duplicate bool   `json:"duplicate"`
		Job       struct {
			UniqueKey         string  `json:"unique_key"`
			UniqueScope       string  `json:"unique_scope"`
			UniqueWindowStart *string `json:"unique_window_start"`
		} `json:"job"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		t.Fatal(err)
	}
	if out.Duplicate || out.Job.UniqueKey != "digest:acct-7" || out.Job.UniqueScope != "until_finished" || out.Job.UniqueWindowStart == nil {
		t.Fatalf("enqueue --json = %s", r.stdout)
	}
	first := out.ID
	if r := ok(t, cli(t, "inspect", first, "--db", db)); !strings.Contains(r.stdout, "until_finished") || !strings.Contains(r.stdout, "unique window") {
		t.Errorf("inspect lacks the unique scope and window:\n%s", r.stdout)
	}
	if again := enqueue(t, db, args...); again != first {
		t.Fatalf("a second enqueue while %s waits printed %s", first, again)
	}
	ok(t, cli(t, "work", "--once", "--exec", "digest=/bin/true", "--db", db))
	fresh := enqueue(t, db, args...)
	if fresh == first {
		t.Fatalf("after %s succeeded the key still returned it", first)
	}

	held := enqueue(t, db, "ledger", "--ordering-key", "acct-7", "--ordering-on-dead", "hold", "--json")
	var h struct {
		Job struct {
			OrderingHold bool `json:"ordering_hold"`
		} `json:"job"`
	}
	if err := json.Unmarshal([]byte(held), &h); err != nil || !h.Job.OrderingHold {
		t.Fatalf("enqueue --ordering-on-dead hold --json = %s (%v)", held, err)
	}
}
