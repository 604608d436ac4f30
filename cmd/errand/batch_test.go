//go:build unix

package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/errandhq/errand"
)

func TestBatchCommand(t *testing.T) {
	db := tempDB(t)
	ok(t, cli(t, "migrate", "--db", db))
	if r := cli(t, "batch", "nope", "--db", db); r.code != 1 || !strings.Contains(r.stderr, "no batch with id nope") {
		t.Fatalf("batch of an unknown id: %s", r)
	}
	if r := cli(t, "batch", "--db", db); r.code != 2 {
		t.Fatalf("batch without an id: %s", r)
	}
	c := openTestClient(t, db)
	ctx := context.Background()
	_, err := c.EnqueueBatch(ctx, []errand.EnqueueParams{
		{Args: errand.RawArgs{KindName: "row"}, Opts: &errand.EnqueueOpts{ID: "r1"}},
		{Args: errand.RawArgs{KindName: "row"}, Opts: &errand.EnqueueOpts{ID: "r2"}},
	}, &errand.BatchOpts{ID: "import-7", Callback: errand.RawArgs{KindName: "import_done", JSON: json.RawMessage(`{"import":7}`)}})
	if err != nil {
		t.Fatal(err)
	}
	r := ok(t, cli(t, "batch", "--db", db, "import-7"))
	for _, want := range []string{"batch import-7", "2 queued", "no: 2 of 2 members unfinished", "import_done in default, enqueued as import-7.callback"} {
		if !strings.Contains(r.stdout, want) {
			t.Fatalf("batch printed\n%s\nwant %q", r.stdout, want)
		}
	}
	if r := ok(t, cli(t, "inspect", "r1", "--db", db)); !strings.Contains(r.stdout, "import-7 (errand batch import-7)") {
		t.Fatalf("inspect of a member does not name its batch:\n%s", r.stdout)
	}
	ok(t, cli(t, "cancel", "r1", "--reason", "dup", "--db", db))
	ok(t, cli(t, "cancel", "r2", "--reason", "dup", "--db", db))
	var b errand.Batch
	if err := json.Unmarshal([]byte(ok(t, cli(t, "batch", "import-7", "--json", "--db", db)).stdout), &b); err != nil {
		t.Fatal(err)
	}
	if b.Final == nil || b.Final.Cancelled != 2 || b.CallbackJobID == nil || *b.CallbackJobID != "import-7.callback" {
		t.Fatalf("batch --json after cancelling every member = %+v", b)
	}
	if r := ok(t, cli(t, "batch", "import-7", "--db", db)); !strings.Contains(r.stdout, "0 succeeded, 0 dead, 2 cancelled") ||
		!strings.Contains(r.stdout, "job import-7.callback") {
		t.Fatalf("completed batch printed\n%s", r.stdout)
	}
}

func TestSchedulesDelete(t *testing.T) {
	db := tempDB(t)
	ok(t, cli(t, "migrate", "--db", db))
	c := openTestClient(t, db)
	st := c.Store().(errand.ScheduleStore)
	if _, err := st.ScheduleUpsert(context.Background(), &errand.ScheduleUpsertParams{Name: "nightly",
		Spec: "@daily", Kind: "cleanup", Queue: "maint", Missed: errand.MissedSkip, NextFireAt: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		args []string
		code int
		line string
	}{
		{[]string{"schedules", "delete", "nightly"}, 2, "--reason"},
		{[]string{"schedules", "delete", "--reason", "x"}, 2, "give the name"},
		{[]string{"schedules", "--reason", "x"}, 2, "--reason and --operator go with delete"},
		{[]string{"schedules", "delete", "nope", "--reason", "x"}, 1, "no schedule named nope"},
	} {
		r := cli(t, append(tt.args, "--db", db)...)
		if r.code != tt.code || !strings.Contains(r.stderr, tt.line) || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
			t.Errorf("%v: %s; want exit %d with one line containing %q", tt.args, r, tt.code, tt.line)
		}
	}
	r := ok(t, cli(t, "schedules", "--reason", "retired", "delete", "nightly", "--db", db, "--operator", "ana"))
	if !strings.HasPrefix(r.stdout, "deleted schedule nightly (@daily)") {
		t.Fatalf("delete printed %q", r.stdout)
	}
	if r := ok(t, cli(t, "schedules", "--db", db)); r.stdout != "no schedules\n" {
		t.Fatalf("schedules after delete printed %q", r.stdout)
	}
	var recs []errand.AuditRecord
	if err := json.Unmarshal([]byte(ok(t, cli(t, "audit", "--json", "--db", db)).stdout), &recs); err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 || recs[0].Action != errand.AuditScheduleDelete || recs[0].Operator != "ana" || recs[0].Reason != "retired" {
		t.Fatalf("audit = %+v", recs)
	}
}
