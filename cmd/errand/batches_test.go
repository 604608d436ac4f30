//go:build unix

package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
)

// importJSON is a batch of two with a callback; the first member fails at
// once.
const importJSON = `{"id": "import-7", "jobs": [
  {"id": "row-1", "kind": "bad_row", "max_attempts": 1},
  {"id": "row-2", "kind": "row", "args": {"row": 2}, "queue": "default", "tags": ["bulk"]}],
 "callback": {"kind": "import_done", "args": {"import": 7}}}`

func TestBatchesCommands(t *testing.T) { testBatchesCommands(t, tempDB(t)) }

// TestPostgresBatchesCommands runs the same commands on PostgreSQL.
func TestPostgresBatchesCommands(t *testing.T) {
	db, _ := pgDB(t)
	testBatchesCommands(t, db)
}

// testBatchesCommands enqueues batches from files, runs their members and
// lists them at each stage.
func testBatchesCommands(t *testing.T, db string) {
	ok(t, cli(t, "migrate", "--db", db))
	for _, tt := range []struct {
		args []string
		code int
		line string
	}{
		{[]string{"batches", "--state", "running"}, 2, "not a batch state"},
		{[]string{"batches", "--limit", "0"}, 2, "--limit"},
		{[]string{"batches", "x"}, 2, "unexpected argument"},
		{[]string{"batch", "a", "--file", "x.json"}, 2, "--file goes with enqueue"},
		{[]string{"batch", "enqueue"}, 2, "give --file"},
		{[]string{"batch", "enqueue", "x", "--file", "x.json"}, 2, "unexpected argument"},
		{[]string{"batch", "enqueue", "--file", "/nonexistent/b.json"}, 2, "--file"},
		{[]string{"batch", "enqueue", "--file", writeFile(t, `{"jobs": [{"kind": "k", "steps": 1}]}`)}, 2, "unknown field"},
		{[]string{"batch", "enqueue", "--file", writeFile(t, `{"jobs": [{"kind": "k"}, {"args": {}}]}`)}, 2, "jobs[1].kind"},
		{[]string{"batch", "enqueue", "--file", writeFile(t, `{"jobs": []}`)}, 2, "jobs: are missing"},
		{[]string{"batch", "enqueue", "--file", writeFile(t, `{"jobs": [{"kind": "k"}], "callback": {"kind": "d", "args": [1]}}`)}, 2, "callback.args"},
		{[]string{"batch", "enqueue", "--file", writeFile(t, `{"jobs": [{"kind": "k"}], "callback": {"kind": "d", "id": "x"}}`)}, 2, "unknown field"},
		{[]string{"batch", "enqueue", "--file", writeFile(t, `{"jobs": [{"kind": "k"}]} {}`)}, 2, "more than one JSON value"},
		{[]string{"batch", "enqueue", "--file", writeFile(t, "{\"jobs\": [{\"kind\": \"k\xff\"}]}")}, 2, "is not valid UTF-8"},
		{[]string{"workflow", "enqueue", "--file", writeFile(t, "{\"id\": \"w\xff\", \"steps\": [{\"name\": \"a\", \"kind\": \"k\"}]}")}, 2, "is not valid UTF-8"},
		{[]string{"batch", "enqueue", "--file", writeFile(t, `{"jobs": [{"kind": "k", "delay": 5}]}`)}, 2, "jobs.delay"},
	} {
		r := cli(t, append(tt.args, "--db", db)...)
		if r.code != tt.code || !strings.Contains(r.stderr, tt.line) || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
			t.Errorf("%v: %s; want exit %d with one line containing %q", tt.args, r, tt.code, tt.line)
		}
	}
	if r := ok(t, cli(t, "batches", "--db", db)); r.stdout != "no batches\n" {
		t.Fatalf("batches of an empty store printed %q", r.stdout)
	}
	if r := ok(t, cli(t, "batches", "--json", "--db", db)); strings.TrimSpace(r.stdout) != "[]" {
		t.Fatalf("batches --json of an empty store printed %q", r.stdout)
	}

	file := writeFile(t, importJSON)
	if r := ok(t, cli(t, "batch", "enqueue", "--file", file, "--db", db)); r.stdout != "import-7\n" {
		t.Fatalf("enqueue printed %q", r.stdout)
	}
	var res struct {
		Batch     errandstore.Batch `json:"batch"`
		Jobs      []*errandtype.Job `json:"jobs"`
		Duplicate bool              `json:"duplicate"`
	}
	if err := json.Unmarshal([]byte(ok(t, cli(t, "batch", "enqueue", "--file", file, "--json", "--db", db)).stdout), &res); err != nil {
		t.Fatal(err)
	}
	if !res.Duplicate || res.Batch.ID != "import-7" || res.Batch.Total != 2 || res.Jobs == nil || len(res.Jobs) != 0 {
		t.Fatalf("enqueue again = %+v", res)
	}
	if j := ok(t, cli(t, "inspect", "row-2", "--db", db)); !strings.Contains(j.stdout, "import-7 (errand batch import-7)") {
		t.Fatalf("inspect of a member does not name its batch:\n%s", j.stdout)
	}
	// A second batch from standard input, with --json.
	r := cliStdin(t, `{"id": "export-1", "jobs": [{"kind": "export"}]}`, "batch", "enqueue", "--file", "-", "--json", "--db", db)
	ok(t, r)
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
		t.Fatal(err)
	}
	if res.Duplicate || res.Batch.ID != "export-1" || res.Batch.Callback != nil || len(res.Jobs) != 1 || res.Jobs[0].BatchID == nil {
		t.Fatalf("enqueue from standard input = %+v", res)
	}

	r = ok(t, cli(t, "batches", "--db", db))
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "ID ") || !strings.Contains(lines[0], "CALLBACK JOB") {
		t.Fatalf("batches printed\n%s", r.stdout)
	}
	// Newest first: export-1, then import-7, whose two members wait.
	if f := strings.Fields(lines[1]); f[0] != "export-1" || strings.Join(f[1:6], " ") != "1 0 0 0 1" || f[len(f)-1] != "-" {
		t.Fatalf("export-1's row %q", lines[1])
	}
	if f := strings.Fields(lines[2]); f[0] != "import-7" || strings.Join(f[1:6], " ") != "2 0 0 0 2" || !strings.HasSuffix(lines[2], "import_done (when completed)") {
		t.Fatalf("import-7's row %q", lines[2])
	}

	ok(t, cli(t, "work", "--once", "--exec", "bad_row=false", "--db", db))
	ok(t, cli(t, "work", "--once", "--exec", "row=true", "--db", db))
	var bs []errandstore.Batch
	if err := json.Unmarshal([]byte(ok(t, cli(t, "batches", "--state", "completed", "--json", "--db", db)).stdout), &bs); err != nil {
		t.Fatal(err)
	}
	if len(bs) != 1 || bs[0].ID != "import-7" || bs[0].Final == nil || bs[0].Final.Succeeded != 1 || bs[0].Final.Dead != 1 ||
		bs[0].CallbackJobID == nil || *bs[0].CallbackJobID != "import-7.callback" {
		t.Fatalf("completed batches = %+v", bs)
	}
	r = ok(t, cli(t, "batches", "--state", "completed", "--db", db))
	if f := strings.Fields(strings.Split(r.stdout, "\n")[1]); f[0] != "import-7" || strings.Join(f[1:6], " ") != "2 1 1 0 0" || f[len(f)-1] != "import-7.callback" {
		t.Fatalf("completed batches printed\n%s", r.stdout)
	}
	r = ok(t, cli(t, "batches", "--state", "open", "--db", db))
	if !strings.Contains(r.stdout, "export-1") || strings.Contains(r.stdout, "import-7") {
		t.Fatalf("open batches printed\n%s", r.stdout)
	}
	if r := ok(t, cli(t, "batches", "--limit", "1", "--db", db)); !strings.Contains(r.stdout, "export-1") || strings.Contains(r.stdout, "import-7") ||
		!strings.Contains(r.stderr, "more batches may match") || !strings.Contains(r.stderr, "before=export-1") {
		t.Fatalf("batches --limit 1 printed\n%s\n%s", r.stdout, r.stderr)
	}
	if r := ok(t, cli(t, "batches", "--limit", "1", "--before", "export-1", "--db", db)); !strings.Contains(r.stdout, "import-7") || strings.Contains(r.stdout, "export-1") {
		t.Fatalf("batches --before export-1 printed\n%s\n%s", r.stdout, r.stderr)
	}
	if r := ok(t, cli(t, "batches", "--before", "import-7", "--db", db)); r.stdout != "no batches\n" {
		t.Fatalf("batches --before the oldest printed %q", r.stdout)
	}
	if r := cli(t, "batches", "--before", "gone", "--db", db); r.code != 1 || !strings.Contains(r.stderr, "--before: no batch with id gone") {
		t.Fatalf("batches --before an unknown id: %s", r)
	}
}

// cliStdin runs the errand binary with stdin as its standard input.
func cliStdin(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	cmd := exec.Command(errandBin, args...)
	cmd.Env = append(append(os.Environ(), "ERRAND_DB="), dbEnv(args)...)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run errand %v: %v", args, err)
	}
	return result{stdout.String(), stderr.String(), code}
}

// TestBatchEnqueueIDConflict: a batch id reused for a different batch is
// exit 1, one line naming what differs and "first_wins", which takes the
// existing batch.
func TestBatchEnqueueIDConflict(t *testing.T) {
	db := tempDB(t)
	ok(t, cliStdin(t, `{"id": "export-1", "jobs": [{"kind": "export"}]}`, "batch", "enqueue", "--file", "-", "--db", db))
	r := cliStdin(t, `{"id": "export-1", "jobs": [{"kind": "export"}, {"kind": "export"}]}`, "batch", "enqueue", "--file", "-", "--db", db)
	if r.code != 1 || strings.Count(r.stderr, "\n") != 1 || !strings.Contains(r.stderr, `batch id "export-1" is taken by a different batch (jobs differ)`) ||
		!strings.Contains(r.stderr, `set "first_wins": true`) {
		t.Fatalf("a different batch under the id: %s", r)
	}
	r = ok(t, cliStdin(t, `{"id": "export-1", "first_wins": true, "jobs": [{"kind": "export"}, {"kind": "export"}]}`, "batch", "enqueue", "--file", "-", "--db", db))
	if r.stdout != "export-1\n" {
		t.Fatalf("first_wins: %s", r)
	}
}
