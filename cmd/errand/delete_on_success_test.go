package main

import (
	"context"
	"strings"
	"testing"

	"github.com/errandhq/errand"
)

// TestWorkDeleteOnSuccess: errand work --delete-on-success KIND deletes a
// job of KIND once its command succeeds, and keeps the jobs of other kinds.
func TestWorkDeleteOnSuccess(t *testing.T) {
	db := tempDB(t)
	ok(t, cli(t, "migrate", "--db", db))
	c := openTestClient(t, db)
	for id, kind := range map[string]string{"gone": "ping", "kept": "pong"} {
		if _, err := c.Enqueue(context.Background(), errand.RawArgs{KindName: kind}, &errand.EnqueueOpts{ID: id}); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 {
		if r := parseWork(t, cli(t, "work", "--once", "--db", db, "--exec", "ping=true", "--exec", "pong=true", "--delete-on-success", "ping")); r.Result != "succeeded" {
			t.Fatalf("work --once: %+v; want succeeded", r)
		}
	}
	if r := cli(t, "inspect", "gone", "--db", db); r.code != 1 || !strings.Contains(r.stderr, "gone") {
		t.Errorf("inspect of the deleted job: %s; want not found", r)
	}
	if r := ok(t, cli(t, "inspect", "kept", "--db", db)); !strings.Contains(r.stdout, "succeeded") {
		t.Errorf("inspect of the kept job:\n%s", r.stdout)
	}
}
