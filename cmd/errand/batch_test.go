//go:build unix

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
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
	var b errandstore.Batch
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
	st := c.Store().(errandstore.ScheduleStore)
	if _, err := st.ScheduleUpsert(context.Background(), &errandstore.ScheduleUpsertParams{Name: "nightly",
		Spec: "@daily", Kind: "cleanup", Queue: "maint", Missed: errandtype.MissedSkip, NextFireAt: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}); err != nil {
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
	var recs []errandtype.AuditRecord
	if err := json.Unmarshal([]byte(ok(t, cli(t, "audit", "--json", "--db", db)).stdout), &recs); err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 || recs[0].Action != errandtype.AuditScheduleDelete || recs[0].Operator != "ana" || recs[0].Reason != "retired" {
		t.Fatalf("audit = %+v", recs)
	}
}

// TestBatchCallbackJSON: a batch's callback prints every field, unset ones
// null (tags []), its durations in Go syntax under the names a job and an
// enqueue use.
func TestBatchCallbackJSON(t *testing.T) {
	tests := []struct {
		name     string
		callback string
		want     string
	}{
		{"plain", `{"kind": "import_done", "args": {"import": 7}}`,
			`{"kind":"import_done","queue":"default","args":{"import":7},"args_version":1,"priority":0,"max_attempts":20,` +
				`"backoff_base":null,"backoff_max":null,"max_age":null,"delay":null,"ordering_key":null,"ordering_hold":false,"fairness_key":null,"tags":[],"metadata":null}`},
		{"every option", `{"kind": "import_done", "queue": "q", "priority": 2, "max_attempts": 3, "delay": "5s", "max_age": "1h",
		  "ordering_key": "o", "ordering_on_dead": "hold", "fairness_key": "tenant:1", "tags": ["a"], "metadata": {"traceparent": "t"}}`,
			`{"kind":"import_done","queue":"q","args":{},"args_version":1,"priority":2,"max_attempts":3,` +
				`"backoff_base":null,"backoff_max":null,"max_age":"1h0m0s","delay":"5s","ordering_key":"o","ordering_hold":true,"fairness_key":"tenant:1","tags":["a"],"metadata":{"traceparent":"t"}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db := tempDB(t)
			file := writeFile(t, `{"id": "b1", "jobs": [{"kind": "row"}], "callback": `+tt.callback+`}`)
			ok(t, cli(t, "batch", "enqueue", "--file", file, "--db", db))
			for _, args := range [][]string{{"batch", "b1"}, {"batches"}} {
				out := ok(t, cli(t, append(args, "--json", "--db", db)...)).stdout
				var got struct {
					Callback json.RawMessage `json:"callback"`
				}
				var list []json.RawMessage
				if args[0] == "batches" {
					if err := json.Unmarshal([]byte(out), &list); err != nil || len(list) != 1 {
						t.Fatalf("batches --json: %v\n%s", err, out)
					}
					out = string(list[0])
				}
				if err := json.Unmarshal([]byte(out), &got); err != nil {
					t.Fatalf("%s --json: %v\n%s", args[0], err, out)
				}
				var compact bytes.Buffer
				if err := json.Compact(&compact, got.Callback); err != nil {
					t.Fatal(err)
				}
				if compact.String() != tt.want {
					t.Errorf("%s --json callback\n%s\nwant\n%s", args[0], compact.String(), tt.want)
				}
			}
			// The record reads back as it was written.
			var b errandstore.Batch
			if err := json.Unmarshal([]byte(ok(t, cli(t, "batch", "b1", "--json", "--db", db)).stdout), &b); err != nil {
				t.Fatal(err)
			}
			raw, err := json.Marshal(b)
			if err != nil {
				t.Fatal(err)
			}
			var again struct {
				Callback json.RawMessage `json:"callback"`
			}
			if err := json.Unmarshal(raw, &again); err != nil {
				t.Fatal(err)
			}
			if string(again.Callback) != tt.want {
				t.Errorf("callback read back and written again\n%s\nwant\n%s", again.Callback, tt.want)
			}
		})
	}
}
