//go:build unix

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandtype"
	"github.com/errandhq/errand/sqlite"
)

func TestParseArgs(t *testing.T) {
	tests := []struct {
		args    []string
		pos     []string
		reason  string
		asJSON  bool
		wantErr string
	}{
		{args: []string{"ID", "--reason", "x"}, pos: []string{"ID"}, reason: "x"},
		{args: []string{"--reason", "x", "ID"}, pos: []string{"ID"}, reason: "x"},
		{args: []string{"--reason=x", "ID", "--json"}, pos: []string{"ID"}, reason: "x", asJSON: true},
		{args: []string{"--json", "ID", "-reason", "x y"}, pos: []string{"ID"}, reason: "x y", asJSON: true},
		{args: []string{"a", "--", "--json", "-5"}, pos: []string{"a", "--json", "-5"}},
		{args: []string{"--reason", "--", "ID"}, pos: []string{"ID"}, reason: "--"},
		{args: []string{"ID", "--nope"}, wantErr: "unknown flag --nope; see errand help replay"},
		{args: []string{"ID", "--reason"}, wantErr: "flag --reason needs a value"},
		{args: []string{"--json=maybe"}, wantErr: `invalid boolean value "maybe" for --json: want true or false`},
	}
	for _, tt := range tests {
		fs := newFlagSet("replay")
		reason := fs.String("reason", "", "")
		asJSON := fs.Bool("json", false, "")
		pos, err := parseArgs(fs, tt.args)
		if tt.wantErr != "" {
			var ue *usageError
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !errors.As(err, &ue) {
				t.Errorf("parseArgs(%q) = %v, want a usage error containing %q", tt.args, err, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("parseArgs(%q): %v", tt.args, err)
			continue
		}
		if !reflect.DeepEqual(pos, tt.pos) && !(len(pos) == 0 && len(tt.pos) == 0) {
			t.Errorf("parseArgs(%q) positionals %q, want %q", tt.args, pos, tt.pos)
		}
		if *reason != tt.reason || *asJSON != tt.asJSON {
			t.Errorf("parseArgs(%q) reason %q json %v, want %q %v", tt.args, *reason, *asJSON, tt.reason, tt.asJSON)
		}
	}
}

// TestBadInputChangesNothing runs the binary on bad input: each exits
// non-zero with one line on stderr, nothing on stdout, and the jobs as
// they were.
func TestBadInputChangesNothing(t *testing.T) {
	db := tempDB(t)
	enqueue(t, db, "seed", `{"n": 1}`, "--id", "seed-1")
	enqueue(t, db, "seed", "--id", "seed-2")
	ok(t, cli(t, "cancel", "seed-2", "--reason", "not needed", "--db", db))
	before := ok(t, cli(t, "jobs", "--db", db, "--json")).stdout

	missingDB := filepath.Join(t.TempDir(), "missing.db")
	tests := []struct {
		args []string
		code int
		line string // a part of the one stderr line
		noDB bool   // do not add --db
	}{
		{args: nil, code: 2, line: "give a subcommand", noDB: true},
		{args: []string{"frobnicate"}, code: 2, line: `unknown subcommand "frobnicate"`, noDB: true},
		{args: []string{"--db", "x", "jobs"}, code: 2, line: "subcommand first", noDB: true},
		{args: []string{"help", "frobnicate"}, code: 2, line: "unknown subcommand", noDB: true},
		{args: []string{"enqueue"}, code: 2, line: "give the job's kind"},
		{args: []string{"enqueue", "k", "{bad"}, code: 2, line: "not valid JSON"},
		{args: []string{"enqueue", "k", "{}", "extra"}, code: 2, line: `unexpected argument "extra"`},
		{args: []string{"enqueue", "k", "--bogus"}, code: 2, line: "unknown flag --bogus; see errand help enqueue"},
		{args: []string{"enqueue", "k", "--delay", "1s", "--run-at", "2030-01-01T00:00:00Z"}, code: 2, line: "not both"},
		{args: []string{"enqueue", "k", "--delay", "5x"}, code: 2, line: "Go duration"},
		{args: []string{"enqueue", "k", "--delay", "5"}, code: 2, line: `invalid value "5" for --delay: want a Go duration`},
		{args: []string{"cancel", "seed-1", "--reason", "r", "--wait", "5"}, code: 2, line: `invalid value "5" for --wait: want a Go duration`},
		{args: []string{"serve", "--max-body", "x"}, code: 2, line: `invalid value "x" for --max-body: want a whole number`},
		{args: []string{"jobs", "--limit", "3000000000"}, code: 2, line: "want a whole number up to 2147483647"},
		{args: []string{"enqueue", "k", "--priority", "-3000000000"}, code: 2, line: "want a whole number down to -2147483648"},
		{args: []string{"work", "--exec", "k=/bin/true", "--queue", "default=3000000000"}, code: 2, line: "at most 1000000"},
		{args: []string{"work", "--exec", "k=/bin/true", "--max-workers", "3000000000"}, code: 2, line: "--max-workers: want a whole number up to 2147483647"},
		{args: []string{"work", "--exec", "k=/bin/true", "--max-workers", "2", "--weight", "default=3000000000"}, code: 2, line: "--weight"},
		{args: []string{"enqueue", "k", "--delay", "-5s"}, code: 2, line: "negative"},
		{args: []string{"enqueue", "k", "--run-at", "tomorrow"}, code: 2, line: "RFC 3339"},
		{args: []string{"enqueue", "k", "--max-attempts", "0"}, code: 2, line: "--max-attempts 0 is out of range; give 1 to 2147483647"},
		{args: []string{"enqueue", "k", "--max-attempts", "4294967297"}, code: 2, line: `invalid value "4294967297" for --max-attempts: want a whole number up to 2147483647`},
		{args: []string{"enqueue", "k", "--priority", "2147483648"}, code: 2, line: `invalid value "2147483648" for --priority: want a whole number up to 2147483647`},
		{args: []string{"enqueue", "k", "--max-age", "500ns"}, code: 2, line: "--max-age: 500ns is too short; give at least 1ms"},
		{args: []string{"enqueue", "k", "--id", "pay\x1b[2J"}, code: 2, line: "--id:"},
		{args: []string{"enqueue", "k", "--key", "k\xff"}, code: 2, line: "--unique-key:"},
		{args: []string{"enqueue", "k", "--unique-key", "k", "--unique-scope", "queued"}, code: 2, line: "--unique-scope:"},
		{args: []string{"enqueue", "k", "--unique-window", "1h"}, code: 2, line: "--unique-scope and --unique-window need --unique-key"},
		{args: []string{"enqueue", "k", "--unique-key", "k", "--key", "k"}, code: 2, line: "not both"},
		{args: []string{"enqueue", "k", "--ordering-key", "o", "--ordering-on-dead", "maybe"}, code: 2, line: "--ordering-on-dead:"},
		{args: []string{"enqueue", "k\x07"}, code: 2, line: "KIND:"},
		{args: []string{"enqueue", "k", `{"a": "\u0000"}`}, code: 2, line: "JSON_ARGS:"},
		{args: []string{"work", "--exec", "k=/bin/true", "--lease", "1ms"}, code: 2, line: "--lease 1ms is too short; give at least 1s"},
		{args: []string{"work", "--once", "--exec", "k=/bin/true", "--lease", "999ms"}, code: 2, line: "--lease 999ms is too short"},
		{args: []string{"work", "--exec", "k=/bin/true", "--lease", "25h"}, code: 2, line: "--lease 25h0m0s is longer than 24h0m0s"},
		{args: []string{"serve", "--exec", "k=/bin/true", "--lease", "100h"}, code: 2, line: "--lease 100h0m0s is longer than 24h0m0s"},
		{args: []string{"enqueue", "k", "--priority", "high"}, code: 2, line: "whole number"},
		{args: []string{"enqueue", "k", "--backoff-base", "1h", "--backoff-max", "1s"}, code: 2, line: "backoff base"},
		{args: []string{"enqueue", "bad kind"}, code: 2, line: "kind"},
		{args: []string{"enqueue", "k", "--id", ""}, code: 2, line: "--id is empty"},
		{args: []string{"work", "--exec", "k=/bin/true", "--queue", "default=0"}, code: 2, line: "N at least 1"},
		{args: []string{"work", "--exec", "k=/bin/true", "--queue", "a=2", "--queue", "a=3"}, code: 2, line: "twice"},
		{args: []string{"work", "--exec", "k=/bin/true", "--poll", "0s"}, code: 2, line: "--poll 0s is too short; give at least 1ms"},
		{args: []string{"work", "--once", "--exec", "k=/bin/true", "--grace", "1s"}, code: 2, line: "--grace applies to the long-running worker"},
		{args: []string{"work", "--once", "--exec", "k=/bin/true", "--poll-only"}, code: 2, line: "--poll-only applies to the long-running worker"},
		{args: []string{"work", "--exec", "k=/bin/true", "--leader-ttl", "10ms"}, code: 2, line: "--leader-ttl must be at least 30ms"},
		{args: []string{"work"}, code: 2, line: "--exec"},
		{args: []string{"work", "--once"}, code: 2, line: "--exec"},
		{args: []string{"work", "--once", "--exec", "k"}, code: 2, line: "KIND=COMMAND"},
		{args: []string{"work", "--once", "--exec", "k=x", "--exec", "k=y"}, code: 2, line: "twice"},
		{args: []string{"work", "--once", "--exec", "k=x", "--exec-many", "k=y"}, code: 2, line: `--exec-many maps kind "k" twice`},
		{args: []string{"work", "--once", "--exec-many", "k"}, code: 2, line: "--exec-many \"k\": write KIND=COMMAND"},
		{args: []string{"work", "--once", "--exec", "k=x", "--many-max", "k=5"}, code: 2, line: "for a kind of --exec-many"},
		{args: []string{"work", "--once", "--exec-many", "k=x", "--many-max", "k=0"}, code: 2, line: "give N from 1 to"},
		{args: []string{"work", "--once", "--exec", "k=x", "--timeout", "other=1s"}, code: 2, line: `kind "other"`},
		{args: []string{"work", "--once", "--exec", "k=x", "--timeout", "k=soon"}, code: 2, line: "duration"},
		{args: []string{"work", "--once", "--exec", "k=x", "--delete-on-success", "other"}, code: 2, line: `--delete-on-success names kind "other"`},
		{args: []string{"serve", "--delete-on-success", "k"}, code: 2, line: "--delete-on-success"},
		{args: []string{"work", "--once", "--http", "k=http://127.0.0.1:1/", "--exec-env", "AWS_REGION"}, code: 2, line: "--exec-env passes variables to the commands of --exec"},
		{args: []string{"serve", "--exec-env", "AWS_REGION"}, code: 2, line: "--exec-env passes variables to the commands of --exec"},
		{args: []string{"work", "--once", "--exec", "k=x", "--exec-env", "AWS_REGION=eu"}, code: 2, line: "--exec-env: \"AWS_REGION=eu\" is not a variable name"},
		{args: []string{"jobs", "--state", "finished"}, code: 2, line: "unknown state"},
		{args: []string{"jobs", "--limit", "0"}, code: 2, line: "--limit"},
		{args: []string{"jobs", "extra"}, code: 2, line: "unexpected argument"},
		{args: []string{"jobs", "--queue", "a b"}, code: 2, line: "--queue:"},
		{args: []string{"cancel", "seed-1", "--reason", "r\xff"}, code: 2, line: "--reason:"},
		{args: []string{"jobs", "--kind", "k\xff"}, code: 2, line: "--kind:"},
		{args: []string{"jobs", "--db", "postgres://u:secret@127.0.0.1:1/errand?connect_timeout=2"}, code: 1, line: "database postgres://u:xxxxx@127.0.0.1:1/errand"},
		{args: []string{"jobs", "--db", "postgres://u:secret@127.0.0.1:1/errand?connect_timeout=2"}, code: 1, line: "cannot connect to 127.0.0.1:1 (connection refused); check that the server runs there"},
		{args: []string{"jobs", "--db", "mysql://localhost/errand"}, code: 2, line: "neither a postgres:// URL nor a file path"},
		{args: []string{"jobs", "--db", "postgres://%zz"}, code: 2, line: "the database URL in --db or ERRAND_DB does not parse"},
		{args: []string{"demo", "--db", "postgres://localhost/errand"}, code: 2, line: "the demo runs on SQLite only", noDB: true},
		{args: []string{"serve", "--addr", "127.0.0.1:99999"}, code: 2, line: "give a port from 0 to 65535"},
		{args: []string{"jobs", "--db", missingDB}, code: 1, line: "no database at"},
		{args: []string{"inspect"}, code: 2, line: "give the id"},
		{args: []string{"inspect", "a", "b"}, code: 2, line: "unexpected argument"},
		{args: []string{"inspect", "no-such-id"}, code: 1, line: "no job with id no-such-id"},
		{args: []string{"replay", "seed-1"}, code: 2, line: "--reason"},
		{args: []string{"replay", "seed-1", "--reason", "  "}, code: 2, line: "--reason"},
		{args: []string{"replay", "seed-1", "--reason", "x"}, code: 1, line: "replay: job seed-1 is queued; only dead or cancelled jobs can be replayed"},
		{args: []string{"replay", "no-such-id", "--reason", "x"}, code: 1, line: "no job with id no-such-id"},
		{args: []string{"cancel", "seed-1"}, code: 2, line: "--reason"},
		{args: []string{"cancel", "seed-1", "--reason", "x", "--operator", " "}, code: 2, line: "--operator is empty"},
		{args: []string{"replay", "seed-1", "--reason", "x", "--args", "{bad"}, code: 2, line: "--args is not valid JSON"},
		{args: []string{"replay", "seed-1", "--reason", "x", "--args", "@/no/such/file"}, code: 2, line: "--args @/no/such/file"},
		{args: []string{"cancel", "no-such-id", "--reason", "x"}, code: 1, line: "no job with id no-such-id"},
		{args: []string{"cancel", "seed-2", "--reason", "x"}, code: 1, line: "job seed-2 is cancelled; only queued, running or retrying jobs can be cancelled"},
		{args: []string{"stats", "--bogus"}, code: 2, line: "unknown flag --bogus"},
		{args: []string{"migrate", "extra"}, code: 2, line: "unexpected argument"},
		{args: []string{"demo", "--db", db}, code: 1, line: "not a database an earlier demo made"},
	}
	for _, tt := range tests {
		args := tt.args
		if !tt.noDB && len(args) > 0 {
			args = append([]string{args[0], "--db", db}, args[1:]...)
		}
		r := bin(t, args...)
		if r.code != tt.code {
			t.Errorf("errand %q: exit %d, want %d\n%s", args, r.code, tt.code, r)
		}
		if r.stdout != "" {
			t.Errorf("errand %q printed to stdout: %q", args, r.stdout)
		}
		if !strings.HasPrefix(r.stderr, "errand: ") || strings.Count(r.stderr, "\n") != 1 || !strings.HasSuffix(r.stderr, "\n") {
			t.Errorf("errand %q: stderr %q, want exactly one line starting errand:", args, r.stderr)
		}
		if !strings.Contains(r.stderr, tt.line) {
			t.Errorf("errand %q: stderr %q lacks %q", args, r.stderr, tt.line)
		}
		if after := ok(t, cli(t, "jobs", "--db", db, "--json")).stdout; after != before {
			t.Fatalf("errand %q changed the jobs:\nbefore %s\nafter %s", args, before, after)
		}
	}
	if _, err := os.Stat(missingDB); !os.IsNotExist(err) {
		t.Errorf("jobs on a missing database created %s", missingDB)
	}
}

// TestUsageErrorsCreateNoDatabase: the subcommands that may create a
// database refuse bad input before they open one, so a mistake leaves no
// empty database behind, at the path given or at a mistyped one. Each of
// these was once refused only after the file had been created and
// migrated.
func TestUsageErrorsCreateNoDatabase(t *testing.T) {
	for _, tt := range []struct {
		args []string
		line string
	}{
		{[]string{"enqueue", "bad kind"}, "KIND:"},
		{[]string{"enqueue", "k", `{"a": "\u0000"}`}, "JSON_ARGS:"},
		{[]string{"enqueue", "k", `{"a": "\ud800"}`}, "JSON_ARGS:"},
		{[]string{"enqueue", "k", "--queue", "a b"}, "--queue:"},
		{[]string{"enqueue", "k", "--id", " x"}, "--id:"},
		{[]string{"enqueue", "k", "--unique-key", " x"}, "--unique-key:"},
		{[]string{"enqueue", "k", "--fairness-key", "x\x07"}, "--fairness-key:"},
		{[]string{"enqueue", "k", "--backoff-base", "1h", "--backoff-max", "1s"}, "--backoff-max:"},
		{[]string{"enqueue", "k", "--max-age", "1us"}, "--max-age:"},
		{[]string{"work", "--exec", "k=/bin/true", "--queue", "a b=1"}, "--queue:"},
		{[]string{"work", "--once", "--exec", "k=/bin/true", "--queue", "a b=1"}, "--queue:"},
		{[]string{"work", "--exec", "bad kind=/bin/true"}, "--exec:"},
		{[]string{"work", "--http", "bad kind=http://127.0.0.1:1/"}, "--http:"},
		{[]string{"work", "--exec", "k=/bin/true", "--dependency", "k=bad dep"}, "--dependency:"},
		{[]string{"work", "--exec", "k=/bin/true", "--poll", "1ns"}, "--poll 1ns is too short; give at least 1ms"},
		{[]string{"work", "--exec", "k=/bin/true", "--heartbeat", "999us"}, "--heartbeat 999µs is too short; give at least 1ms"},
		{[]string{"serve", "--exec", "bad kind=/bin/true"}, "--exec:"},
		{[]string{"work", "--exec", "k=/bin/true", "--retain-succeeded", "720h", "--retain-dead", "1h"}, "--retain-dead:"},
		{[]string{"work", "--exec", "k=/bin/true", "--retry-budget", "nok=1"}, "--retry-budget:"},
		{[]string{"work", "--exec", "k=/bin/true", "--rate-limit", "queue:zzz=1/s"}, "work it with --queue NAME=N"},
		{[]string{"work", "--exec", "k=/bin/true", "--rate-limit", "dependency:smtp=1/s"}, "declare it on the kinds that call it with --dependency KIND=DEP"},
		{[]string{"work", "--once", "--exec", "k=/bin/true", "--retry-budget", "zz=0.1"}, "--retry-budget:"},
		{[]string{"work", "--once", "--exec", "k=/bin/true", "--retain-succeeded", "1h"}, "--retain-succeeded applies to the long-running worker"},
		{[]string{"work", "--once", "--exec", "k=/bin/true", "--retain-kind", "k=1h"}, "--retain-kind applies to the long-running worker"},
		{[]string{"serve", "--retain-succeeded", "720h", "--retain-dead", "1h"}, "--retain-dead:"},
		{[]string{"work", "--exec", "k=/bin/true", "--retain-every", "1m"}, "--retain-every sets how often the retention policy prunes"},
		{[]string{"serve", "--retain-every", "1m"}, "--retain-every sets how often the retention policy prunes"},
		{[]string{"work", "--exec", "k=/bin/true", "--retain-dead", "1h", "--retain-every", "1us"}, "--retain-every: 1µs is too short"},
		{[]string{"work", "--exec", "k=/bin/true", "--retain-dead", "24h", "--retain-kind", "k=48h"}, "--retain-kind: dead jobs of k would go after 24h0m0s"},
		{[]string{"work", "--exec", "k=/bin/true", "--retain-kind", "k=1h:bad"}, `--retain-kind "k=1h:bad": "bad" is not an age`},
		{[]string{"serve", "--addr", "127.0.0.1:abc"}, "give a port from 0 to 65535"},
		{[]string{"bench", "--workers", "2000000", "--jobs", "1"}, "--workers 2000000: give 1 to 1000000"},
		{[]string{"bench", "--samples", "2000000000"}, "--samples 2000000000: give 0"},
		{[]string{"batch", "enqueue", "--file", writeFile(t, `{"jobs": [{"kind": "bad kind"}]}`)}, "kind:"},
		{[]string{"batch", "enqueue", "--file", writeFile(t, `{"jobs": [{"kind": "k", "args": {"a": "\u0000"}}]}`)}, "args:"},
		{[]string{"batch", "enqueue", "--file", writeFile(t, `{"jobs": [{"kind": "k"}], "callback": {"kind": "do ne"}}`)}, "callback"},
		{[]string{"workflow", "enqueue", "--file", writeFile(t, `{"steps": [{"name": "a b", "kind": "k"}]}`)}, "name"},
		{[]string{"workflow", "enqueue", "--file", writeFile(t, `{"steps": [{"name": "a", "kind": "k", "args": {"x": "\ud800"}}]}`)}, "args:"},
	} {
		dir := t.TempDir()
		db := filepath.Join(dir, "errand.db")
		args := append([]string{tt.args[0], "--db", db}, tt.args[1:]...)
		r := bin(t, args...)
		if r.code != 2 || !strings.Contains(r.stderr, tt.line) {
			t.Errorf("errand %q: %s; want exit 2 with %q", args, r, tt.line)
		}
		if entries, err := os.ReadDir(dir); err != nil || len(entries) != 0 {
			t.Errorf("errand %q left %v in the database's directory (%v), want nothing", args, entries, err)
		}
	}
}

func TestReadOnlyCommandsDoNotCreateTheDatabase(t *testing.T) {
	for _, args := range [][]string{
		{"jobs"}, {"stats"}, {"workers"}, {"inspect", "x"}, {"replay", "x", "--reason", "r"}, {"cancel", "x", "--reason", "r"},
	} {
		db := tempDB(t)
		r := cli(t, append(args, "--db", db)...)
		if r.code != 1 || !strings.Contains(r.stderr, "no database at "+db) {
			t.Errorf("errand %q on a missing database: %s", args, r)
		}
		if _, err := os.Stat(db); !os.IsNotExist(err) {
			t.Errorf("errand %q created %s", args, db)
		}
	}
}

func TestDatabaseFromEnvironment(t *testing.T) {
	db := tempDB(t)
	t.Setenv("ERRAND_DB", db)
	id := strings.TrimSpace(ok(t, cli(t, "enqueue", "k")).stdout)
	if js := listJobs(t, db); len(js) != 1 || js[0].ID != id {
		t.Fatalf("ERRAND_DB not used: jobs %+v, enqueued %s", js, id)
	}
	t.Setenv("ERRAND_DB", "postgres://127.0.0.1:1/errand?connect_timeout=2")
	if r := cli(t, "stats"); r.code != 1 || !strings.Contains(r.stderr, "database postgres://127.0.0.1:1/errand") {
		t.Errorf("stats with an unreachable postgres ERRAND_DB: %s", r)
	}
}

func TestFlagsAfterPositionals(t *testing.T) {
	db := tempDB(t)
	ok(t, cli(t, "enqueue", "send", `{"a": 1}`, "--id", "x1", "--queue", "mail", "--priority", "3", "--db", db))
	ok(t, cli(t, "enqueue", "--db", db, "--id", "x2", "send", "--max-attempts", "4"))
	ok(t, cli(t, "enqueue", "--db", db, "--id", "x3", "--", "neg", "-5"))
	js := listJobs(t, db)
	if len(js) != 3 {
		t.Fatalf("got %d jobs, want 3", len(js))
	}
	if j := js[0]; j.ID != "x1" || j.Queue != "mail" || j.Priority != 3 || compact(j.Args) != `{"a":1}` {
		t.Errorf("job x1 = %+v", j)
	}
	if j := js[1]; j.ID != "x2" || j.Queue != "default" || j.MaxAttempts != 4 || compact(j.Args) != `{}` {
		t.Errorf("job x2 = %+v", j)
	}
	if j := js[2]; j.Kind != "neg" || compact(j.Args) != "-5" {
		t.Errorf("job after --: %+v, want kind neg with args -5", j)
	}
	if got := inspect(t, db, "x1"); got.ID != "x1" {
		t.Errorf("inspect x1 = %+v", got)
	}
	if r := ok(t, cli(t, "inspect", "--json", "x2", "--db", db)); !strings.Contains(r.stdout, `"id": "x2"`) {
		t.Errorf("inspect --json before the id: %s", r.stdout)
	}
	if js := listJobs(t, db); len(js) != 3 {
		t.Fatal("listing changed the jobs")
	}
	r := ok(t, cli(t, "jobs", "--queue", "mail", "--db", db, "--json"))
	if !strings.Contains(r.stdout, `"x1"`) || strings.Contains(r.stdout, `"x2"`) {
		t.Errorf("jobs --queue mail: %s", r.stdout)
	}
}

func TestDuplicateEnqueuePrintsTheExistingID(t *testing.T) {
	db := tempDB(t)
	first := ok(t, cli(t, "enqueue", "pay", `{"amount": 5}`, "--id", "pay-1", "--db", db))
	second := ok(t, cli(t, "enqueue", "pay", `{"amount":5.0}`, "--id", "pay-1", "--db", db))
	if first.stdout != "pay-1\n" || second.stdout != "pay-1\n" {
		t.Errorf("enqueue printed %q then %q, want pay-1 both times", first.stdout, second.stdout)
	}
	// Another job under the id: an error naming what differs and the
	// flag that takes the existing job instead.
	other := cli(t, "enqueue", "pay", `{"amount": 6}`, "--id", "pay-1", "--queue", "q", "--db", db)
	if other.code != 1 || other.stdout != "" || strings.Count(other.stderr, "\n") != 1 ||
		!strings.Contains(other.stderr, `job id "pay-1" is taken by a different job (queue, args differ)`) || !strings.Contains(other.stderr, "--first-wins") {
		t.Errorf("a different job under the id: %s; want exit 1 and one line naming queue, args and --first-wins", other)
	}
	r := ok(t, cli(t, "enqueue", "pay", "--id", "pay-1", "--first-wins", "--db", db, "--json"))
	var out struct {
		ID        string  `json:"id"`
		Duplicate bool    `json:"duplicate"`
		Job       jobJSON `json:"job"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		t.Fatal(err)
	}
	if out.ID != "pay-1" || !out.Duplicate || compact(out.Job.Args) != `{"amount":5}` {
		t.Errorf("duplicate --json = %+v", out)
	}

	byKey := enqueue(t, db, "digest", "--key", "digest:2026-11-29")
	again := enqueue(t, db, "digest", "--key", "digest:2026-11-29")
	if byKey != again {
		t.Errorf("duplicate --key printed %s then %s", byKey, again)
	}
	if js := listJobs(t, db); len(js) != 2 {
		t.Errorf("got %d jobs, want 2", len(js))
	}
	r = ok(t, cli(t, "enqueue", "fresh", "--db", db, "--json"))
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil || out.Duplicate || out.Job.State != "queued" {
		t.Errorf("new job --json = %s (%v)", r.stdout, err)
	}
}

func TestJSONOutputs(t *testing.T) {
	db := tempDB(t)
	ok(t, cli(t, "migrate", "--db", db))
	if r := ok(t, cli(t, "jobs", "--db", db, "--json")); strings.TrimSpace(r.stdout) != "[]" {
		t.Errorf("jobs --json on no jobs = %q, want []", r.stdout)
	}
	if r := ok(t, cli(t, "jobs", "--db", db)); r.stdout != "no jobs\n" {
		t.Errorf("jobs on no jobs = %q", r.stdout)
	}
	var empty map[string][]any
	r := ok(t, cli(t, "stats", "--db", db, "--json"))
	if err := json.Unmarshal([]byte(r.stdout), &empty); err != nil || empty["queues"] == nil || len(empty["queues"]) != 0 {
		t.Errorf("stats --json on no jobs = %q, want {\"queues\": []}", r.stdout)
	}

	id := enqueue(t, db, "send", `{"id": 7}`, "--queue", "mail")
	r = ok(t, cli(t, "jobs", "--db", db, "--json"))
	var jobs []map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &jobs); err != nil || len(jobs) != 1 {
		t.Fatalf("jobs --json = %s (%v)", r.stdout, err)
	}
	// Field names are the job record's: errandtype.Job's JSON tags.
	want, _ := json.Marshal(&errandtype.Job{})
	var wantKeys map[string]any
	_ = json.Unmarshal(want, &wantKeys)
	if got, want := keys(jobs[0]), keys(wantKeys); !reflect.DeepEqual(got, want) {
		t.Errorf("job record fields %v, want %v", got, want)
	}
	if jobs[0]["lease_token"] != nil || jobs[0]["finished_at"] != nil {
		t.Errorf("unset fields are not null: %v", jobs[0])
	}
	if at, _ := jobs[0]["created_at"].(string); !strings.HasSuffix(at, "Z") {
		t.Errorf("created_at %q is not RFC 3339 UTC", at)
	}

	r = ok(t, cli(t, "stats", "--db", db, "--json"))
	var stats struct {
		Queues []map[string]any `json:"queues"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &stats); err != nil || len(stats.Queues) != 1 {
		t.Fatalf("stats --json = %s (%v)", r.stdout, err)
	}
	q := stats.Queues[0]
	if got := keys(q); !reflect.DeepEqual(got, []string{"breaker_held_kinds", "counts", "dead", "kinds", "oldest_ready_age_seconds", "paused", "paused_kinds", "queue", "unhandled_kinds", "waiting_by_kind"}) {
		t.Errorf("stats queue fields %v", got)
	}
	counts, _ := q["counts"].(map[string]any)
	if q["queue"] != "mail" || counts["queued"] != 1.0 || len(counts) != len(errandtype.JobStates) {
		t.Errorf("stats queue = %v", q)
	}

	r = ok(t, cli(t, "inspect", id, "--db", db, "--json"))
	var in map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &in); err != nil {
		t.Fatal(err)
	}
	for _, k := range append(keys(wantKeys), "replays_audit", "next") {
		if _, ok := in[k]; !ok {
			t.Errorf("inspect --json lacks top-level %q", k)
		}
	}
	if audit, ok := in["replays_audit"].([]any); !ok || len(audit) != 0 {
		t.Errorf("replays_audit = %v, want []", in["replays_audit"])
	}
	if steps, ok := in["steps"].([]any); !ok || len(steps) != 0 {
		t.Errorf("steps = %v, want []", in["steps"])
	}
}

// TestInspectShowsSteps: errand inspect lists the steps a durable handler
// recorded, in text and in --json.
func TestInspectShowsSteps(t *testing.T) {
	db := filepath.Join(t.TempDir(), "errand.db")
	ctx := context.Background()
	st, err := sqlite.Open(ctx, db, nil)
	if err != nil {
		t.Fatal(err)
	}
	kinds := errand.NewKinds()
	kinds.HandleRaw("order", errand.HandlerFunc(func(ctx context.Context, j *errandtype.Job) error {
		if _, err := errand.Step(ctx, "charge", func(context.Context) (string, error) { return "ch_1", nil }); err != nil {
			return err
		}
		return errand.Sleep(ctx, time.Hour)
	}), nil)
	c, err := errand.NewClient(st, &errand.Config{Kinds: kinds})
	if err != nil {
		t.Fatal(err)
	}
	r, err := c.Enqueue(ctx, errand.RawArgs{KindName: "order"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if w, err := c.WorkOne(ctx, nil); err != nil || w.Result != errand.ResultSnoozed {
		t.Fatalf("work one: %+v, %v", w, err)
	}
	st.Close()
	out := ok(t, cli(t, "inspect", r.Job.ID, "--db", db)).stdout
	for _, want := range []string{"steps (2):", `0 charge, attempt 1, at `, `: "ch_1"`, "1 errand.sleep, attempt 1", "; its handler sleeps until "} {
		if !strings.Contains(out, want) {
			t.Errorf("inspect lacks %q:\n%s", want, out)
		}
	}
	var in struct {
		Steps []errandtype.Step `json:"steps"`
	}
	if err := json.Unmarshal([]byte(ok(t, cli(t, "inspect", r.Job.ID, "--db", db, "--json")).stdout), &in); err != nil ||
		len(in.Steps) != 2 || string(in.Steps[0].Result) != `"ch_1"` {
		t.Errorf("inspect --json steps: %+v, %v", in.Steps, err)
	}
}

func keys(m map[string]any) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

func TestHelp(t *testing.T) {
	r := ok(t, cli(t, "help"))
	for _, c := range commands {
		if !strings.Contains(r.stdout, "  "+c.name+" ") {
			t.Errorf("help does not list %s:\n%s", c.name, r.stdout)
		}
	}
	for _, args := range [][]string{{"-h"}, {"--help"}} {
		if r := ok(t, cli(t, args...)); !strings.Contains(r.stdout, "subcommands:") {
			t.Errorf("errand %v = %s", args, r)
		}
	}
	for _, args := range [][]string{{"help", "enqueue"}, {"enqueue", "-h"}, {"enqueue", "k", "--help"}} {
		r := ok(t, cli(t, args...))
		if !strings.Contains(r.stdout, "usage: errand enqueue KIND") || !strings.Contains(r.stdout, "--backoff-base") {
			t.Errorf("errand %v = %s", args, r)
		}
	}
	// Every flag's value has a placeholder that says what to give, never
	// the flag package's type name; errand work's usage line names every
	// flag but --db.
	typeName := regexp.MustCompile(`(?m)^  --\S+ (string|value|int|duration|float)\b`)
	for _, c := range commands {
		r := ok(t, cli(t, "help", c.name))
		for _, m := range typeName.FindAllString(r.stdout, -1) {
			t.Errorf("errand help %s shows %q", c.name, m)
		}
	}
	work := ok(t, cli(t, "help", "work")).stdout
	usage, _, _ := strings.Cut(work, "\n")
	for _, m := range regexp.MustCompile(`(?m)^  (--[a-z-]+)`).FindAllStringSubmatch(work, -1) {
		if m[1] != "--db" && !strings.Contains(usage+" ", m[1]+" ") && !strings.Contains(usage, m[1]+"]") {
			t.Errorf("errand work's usage line lacks %s: %s", m[1], usage)
		}
	}
}

func TestCancelAndReplayCancelled(t *testing.T) {
	db := tempDB(t)
	id := enqueue(t, db, "send", "--delay", "1h")
	if r := ok(t, cli(t, "cancel", id, "--reason", "not needed", "--db", db)); r.stdout != "cancelled "+id+"\n" {
		t.Errorf("cancel printed %q", r.stdout)
	}
	if j := inspect(t, db, id); j.State != "cancelled" || !strings.Contains(j.Next, "replay "+id) {
		t.Errorf("after cancel: %+v", j)
	}
	ok(t, cli(t, "replay", id, "--reason", "customer asked again", "--db", db))
	j := inspect(t, db, id)
	if j.State != "queued" || j.Replays != 1 || len(j.ReplaysAudit) != 1 || j.ReplaysAudit[0].PriorState != "cancelled" {
		t.Errorf("after replay: %+v", j)
	}
	if j.ReplaysAudit[0].Operator == "" {
		t.Error("replay recorded no operator")
	}
}

// TestMigratePrintsSchemaVersion: migrate prints the number of the newest
// migration, the highest-numbered file of sqlite/migrations (numbers may
// have gaps).
func TestMigratePrintsSchemaVersion(t *testing.T) {
	files, err := filepath.Glob("../../sqlite/migrations/*.sql")
	if err != nil || len(files) == 0 {
		t.Fatalf("list migrations: %v (%d files)", err, len(files))
	}
	sort.Strings(files)
	newest, _, _ := strings.Cut(filepath.Base(files[len(files)-1]), "_")
	db := tempDB(t)
	r := ok(t, cli(t, "migrate", "--db", db))
	n, err := strconv.Atoi(newest)
	if err != nil {
		t.Fatalf("migration %s: %v", files[len(files)-1], err)
	}
	if want := fmt.Sprintf("schema version %d\n", n); r.stdout != want {
		t.Errorf("migrate printed %q, want %q", r.stdout, want)
	}
}

func TestDemo(t *testing.T) {
	db := filepath.Join(t.TempDir(), "demo.db")
	for run := range 2 { // the second run recreates the database
		r := ok(t, cli(t, "demo", "--db", db))
		for _, want := range []string{"flaky   attempt 2  succeeded", "card_declined", "queues:", "inspect "} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("run %d: demo output lacks %q:\n%s", run, want, r.stdout)
			}
		}
		js := listJobs(t, db)
		states := map[string]string{}
		for _, j := range js {
			states[j.Kind] = j.State
		}
		if len(js) != 3 || states["greet"] != "succeeded" || states["flaky"] != "succeeded" || states["charge"] != "dead" {
			t.Errorf("run %d: demo jobs %+v", run, js)
		}
	}

	notes := filepath.Join(t.TempDir(), "notes.txt")
	if err := os.WriteFile(notes, []byte("keep me"), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := cli(t, "demo", "--db", notes); r.code != 1 {
		t.Errorf("demo on a file it did not make: %s", r)
	}
	if b, _ := os.ReadFile(notes); string(b) != "keep me" {
		t.Errorf("demo changed %s", notes)
	}

	// An empty --db is refused: it would fall back to $ERRAND_DB (or
	// ./errand.db), whose jobs a later demo there would delete.
	real := filepath.Join(t.TempDir(), "real.db")
	enqueue(t, real, "payment", "--id", "pay-1")
	t.Setenv("ERRAND_DB", real)
	if r := cli(t, "demo", "--db", ""); r.code != 2 || !strings.Contains(r.stderr, "--db is empty") {
		t.Errorf("demo --db \"\" with ERRAND_DB set: %s; want exit 2", r)
	}
	if js := listJobs(t, real); len(js) != 1 || js[0].ID != "pay-1" {
		t.Errorf("the real database after demo --db \"\": %+v, want pay-1 alone", js)
	}
}

func compact(raw json.RawMessage) string {
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return "invalid JSON: " + string(raw)
	}
	return b.String()
}

// TestSignalCommand: errand signal wakes a job waiting for the signal, and
// its handler gets the value; bad input and a finished job are refused.
func TestSignalCommand(t *testing.T) {
	db := filepath.Join(t.TempDir(), "errand.db")
	ctx := context.Background()
	st, err := sqlite.Open(ctx, db, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var got map[string]bool
	kinds := errand.NewKinds()
	kinds.HandleRaw("order", errand.HandlerFunc(func(ctx context.Context, j *errandtype.Job) error {
		v, err := errand.WaitFor[map[string]bool](ctx, "approval", time.Hour)
		got = v
		return err
	}), nil)
	c, err := errand.NewClient(st, &errand.Config{Kinds: kinds})
	if err != nil {
		t.Fatal(err)
	}
	r, err := c.Enqueue(ctx, errand.RawArgs{KindName: "order"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	id := r.Job.ID
	if w, err := c.WorkOne(ctx, nil); err != nil || w.Result != errand.ResultSnoozed {
		t.Fatalf("work one: %+v, %v", w, err)
	}
	for _, bad := range []struct {
		args []string
		code int
		line string
	}{
		{[]string{"signal", id}, 2, "give the job's id and the signal's name"},
		{[]string{"signal", id, "approval", "--value", "{"}, 2, "is not JSON"},
		{[]string{"signal", "nope", "approval"}, 1, "no job with id nope"},
	} {
		res := cli(t, append(bad.args, "--db", db)...)
		if res.code != bad.code || !strings.Contains(res.stderr, bad.line) {
			t.Errorf("errand %v: %d %q, want %d %q", bad.args, res.code, res.stderr, bad.code, bad.line)
		}
	}
	if out := ok(t, cli(t, "inspect", id, "--db", db)).stdout; !strings.Contains(out, `its handler waits for signal "approval" until `) {
		t.Errorf("inspect of a waiting job does not say what it waits for:\n%s", out)
	}
	if out := ok(t, cli(t, "signal", id, "approval", "--value", `{"ok":true}`, "--db", db)).stdout; out != "signalled "+id+": approval\n" {
		t.Errorf("errand signal: %q", out)
	}
	if w, err := c.WorkOne(ctx, nil); err != nil || w.Result != errand.ResultSucceeded || !got["ok"] {
		t.Fatalf("after the signal: %+v, %v, got %v", w, err, got)
	}
	if res := cli(t, "signal", id, "approval", "--db", db); res.code != 1 || !strings.Contains(res.stderr, "never reads a signal") {
		t.Errorf("a signal to a finished job: %d %q", res.code, res.stderr)
	}
	// --from-step replays one job from a step; it is refused in bulk or
	// beside --restart.
	if res := cli(t, "replay", "--state", "dead", "--from-step", "1", "--reason", "r", "--db", db); res.code != 2 || !strings.Contains(res.stderr, "give an ID") {
		t.Errorf("--from-step in bulk: %d %q", res.code, res.stderr)
	}
	if res := cli(t, "replay", id, "--restart", "--from-step", "1", "--reason", "r", "--db", db); res.code == 0 || !strings.Contains(res.stderr, "from_step") {
		t.Errorf("--from-step with --restart: %d %q", res.code, res.stderr)
	}
}
