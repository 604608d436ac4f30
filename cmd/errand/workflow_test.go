//go:build unix

package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandtype"
)

// checkoutJSON is a workflow whose second step fails at once.
const checkoutJSON = `{"id": "order-7", "name": "checkout", "steps": [
  {"name": "charge", "kind": "charge", "args": {"order": 7}, "compensate": {"kind": "refund"}},
  {"name": "book", "kind": "book", "depends_on": ["charge"], "max_attempts": 1},
  {"name": "mail", "kind": "mail", "depends_on": ["book"]}]}`

func writeFile(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "workflow.json")
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestWorkflowCommands(t *testing.T) { testWorkflowCommands(t, tempDB(t)) }

// TestPostgresWorkflowCommands runs the same commands on PostgreSQL.
func TestPostgresWorkflowCommands(t *testing.T) {
	db, _ := pgDB(t)
	testWorkflowCommands(t, db)
}

// testWorkflowCommands enqueues a workflow from a file, fails its second
// step, runs the compensation, and reads it at each stage.
func testWorkflowCommands(t *testing.T, db string) {
	ok(t, cli(t, "migrate", "--db", db))
	for _, tt := range []struct {
		args []string
		code int
		line string
	}{
		{[]string{"workflow", "nope"}, 1, "no workflow with id nope"},
		{[]string{"workflow"}, 2, "give the id"},
		{[]string{"workflow", "a", "b"}, 2, "unexpected argument"},
		{[]string{"workflow", "a", "--file", "x.json"}, 2, "--file goes with enqueue"},
		{[]string{"workflows", "--state", "dead"}, 2, "not a workflow state"},
		{[]string{"workflows", "x"}, 2, "unexpected argument"},
		{[]string{"workflow", "enqueue"}, 2, "give --file"},
		{[]string{"workflow", "enqueue", "--file", "/nonexistent/w.json"}, 2, "--file"},
		{[]string{"workflow", "enqueue", "--file", writeFile(t, `{"steps": [{"name": "a", "kind": "k", "id": "x"}]}`)}, 2, "unknown field"},
		{[]string{"workflow", "enqueue", "--file", writeFile(t, `{"steps": [{"name": "a"}]}`)}, 2, "steps[0] (a).kind"},
		{[]string{"workflow", "enqueue", "--file", writeFile(t, `{"steps": [{"name": "a", "kind": "k", "depends_on": ["b"]}]}`)}, 2, `depends on "b"`},
		{[]string{"workflow", "enqueue", "--file", writeFile(t, `{"steps": []} {}`)}, 2, "more than one JSON value"},
	} {
		r := cli(t, append(tt.args, "--db", db)...)
		if r.code != tt.code || !strings.Contains(r.stderr, tt.line) || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
			t.Errorf("%v: %s; want exit %d with one line containing %q", tt.args, r, tt.code, tt.line)
		}
	}
	if r := ok(t, cli(t, "workflows", "--db", db)); r.stdout != "no workflows\n" {
		t.Fatalf("workflows of an empty store printed %q", r.stdout)
	}
	if r := ok(t, cli(t, "workflows", "--json", "--db", db)); strings.TrimSpace(r.stdout) != "[]" {
		t.Fatalf("workflows --json of an empty store printed %q", r.stdout)
	}

	file := writeFile(t, checkoutJSON)
	if r := ok(t, cli(t, "workflow", "enqueue", "--file", file, "--db", db)); r.stdout != "order-7\n" {
		t.Fatalf("enqueue printed %q", r.stdout)
	}
	var res struct {
		Workflow  errandtype.Workflow `json:"workflow"`
		Jobs      []*errandtype.Job   `json:"jobs"`
		Duplicate bool                `json:"duplicate"`
	}
	if err := json.Unmarshal([]byte(ok(t, cli(t, "workflow", "enqueue", "--file", file, "--json", "--db", db)).stdout), &res); err != nil {
		t.Fatal(err)
	}
	if !res.Duplicate || res.Workflow.ID != "order-7" || len(res.Jobs) != 0 {
		t.Fatalf("enqueue again = %+v", res)
	}
	r := ok(t, cli(t, "workflows", "--db", db))
	for _, want := range []string{"order-7", "checkout", "running", "0/3 succeeded"} {
		if !strings.Contains(r.stdout, want) {
			t.Fatalf("workflows printed\n%s\nwant %q", r.stdout, want)
		}
	}

	ok(t, cli(t, "work", "--once", "--exec", "charge=true", "--db", db))
	ok(t, cli(t, "work", "--once", "--exec", "book=false", "--db", db))
	r = ok(t, cli(t, "workflow", "order-7", "--db", db))
	for _, want := range []string{"workflow order-7", "compensating", "failed step  book", "charge  -", "order-7.step.charge", "succeeded",
		"refund order-7.undo.charge", "book    charge", "dead", "1/1"} {
		if !strings.Contains(r.stdout, want) {
			t.Fatalf("workflow printed\n%s\nwant %q", r.stdout, want)
		}
	}
	if !strings.Contains(r.stdout, "next         compensating: undo charge is queued") {
		t.Fatalf("workflow does not say what happens next:\n%s", r.stdout)
	}
	// Why the dead step died, below the table.
	if !strings.Contains(r.stdout, "\nlast errors:\n  step book: exit_1: ") || strings.Contains(r.stdout, "step charge:") {
		t.Fatalf("workflow does not say why book died (and only book):\n%s", r.stdout)
	}
	for _, line := range strings.Split(r.stdout, "\n") {
		if f := strings.Fields(line); len(f) > 0 && f[0] == "mail" && strings.Join(f, " ") != "mail book mail - waiting - - -" {
			t.Fatalf("mail's row %q: want it waiting, not enqueued", line)
		}
	}
	if r := ok(t, cli(t, "inspect", "order-7.step.charge", "--db", db)); !strings.Contains(r.stdout, "order-7 (errand workflow order-7)") {
		t.Fatalf("inspect of a step does not name its workflow:\n%s", r.stdout)
	}

	ok(t, cli(t, "work", "--once", "--exec", "refund=true", "--db", db))
	var wf errandtype.Workflow
	if err := json.Unmarshal([]byte(ok(t, cli(t, "workflow", "order-7", "--json", "--db", db)).stdout), &wf); err != nil {
		t.Fatal(err)
	}
	c := wf.Steps[0].Compensation
	if wf.State != errandtype.WorkflowFailed || wf.FailedStep == nil || *wf.FailedStep != "book" || c == nil || c.State == nil ||
		*c.State != errandtype.StateSucceeded || wf.Steps[2].State != nil || wf.Steps[2].Enqueued {
		t.Fatalf("workflow --json after the compensation = %+v", wf)
	}
	var ws []errandtype.Workflow
	if err := json.Unmarshal([]byte(ok(t, cli(t, "workflows", "--state", "failed", "--json", "--db", db)).stdout), &ws); err != nil {
		t.Fatal(err)
	}
	if len(ws) != 1 || ws[0].ID != "order-7" {
		t.Fatalf("workflows --state failed = %+v", ws)
	}
	if r := ok(t, cli(t, "workflows", "--state", "running", "--db", db)); r.stdout != "no workflows\n" {
		t.Fatalf("workflows --state running printed %q", r.stdout)
	}
	if r := ok(t, cli(t, "workflows", "--before", "order-7", "--db", db)); r.stdout != "no workflows\n" {
		t.Fatalf("workflows --before the only one printed %q", r.stdout)
	}
	if r := cli(t, "workflows", "--before", "gone", "--db", db); r.code != 1 || !strings.Contains(r.stderr, "--before: no workflow with id gone") {
		t.Fatalf("workflows --before an unknown id: %s", r)
	}
	if r := ok(t, cli(t, "workflows", "--limit", "1", "--db", db)); !strings.Contains(r.stderr, "more workflows may match") ||
		!strings.Contains(r.stderr, "running=0 compensating=0 succeeded=0 failed=1") {
		t.Fatalf("workflows --limit 1 said on stderr %q; want the counts by state", r.stderr)
	}
	if r := ok(t, cli(t, "help", "workflow")); !strings.Contains(r.stdout, "errand workflow enqueue --file FILE.json") {
		t.Fatalf("help workflow:\n%s", r.stdout)
	}
}

// TestReplayOfACompensatedStep replays the dead step of a workflow that
// has begun compensating, then of one that has compensated: errand refuses
// with the way forward (rerun it as a new workflow), exits 1 and writes
// nothing. errand workflow rerun then starts the new workflow, which runs
// every step from the start; the old one says it was rerun.
func TestReplayOfACompensatedStep(t *testing.T) {
	db := tempDB(t)
	ok(t, cli(t, "migrate", "--db", db))
	ok(t, cli(t, "workflow", "enqueue", "--file", writeFile(t, checkoutJSON), "--db", db))
	ok(t, cli(t, "work", "--once", "--exec", "charge=true", "--db", db))
	ok(t, cli(t, "work", "--once", "--exec", "book=false", "--db", db))
	var wf errandtype.Workflow
	refused := func(stage, want string) {
		t.Helper()
		jobBefore := ok(t, cli(t, "inspect", "order-7.step.book", "--json", "--db", db)).stdout
		wfBefore := ok(t, cli(t, "workflow", "order-7", "--json", "--db", db)).stdout
		r := bin(t, "replay", "order-7.step.book", "--reason", "booking fixed", "--db", db)
		if r.code != 1 || r.stderr != want || r.stdout != "" {
			t.Fatalf("replay of the dead step %s: %s\nwant exit 1 and stderr %q", stage, r, want)
		}
		if after := ok(t, cli(t, "inspect", "order-7.step.book", "--json", "--db", db)).stdout; after != jobBefore {
			t.Fatalf("the refused replay changed the job:\nbefore %s\nafter  %s", jobBefore, after)
		}
		if after := ok(t, cli(t, "workflow", "order-7", "--json", "--db", db)).stdout; after != wfBefore {
			t.Fatalf("the refused replay changed the workflow:\nbefore %s\nafter  %s", wfBefore, after)
		}
		if r := ok(t, cli(t, "audit", "--db", db)); strings.Contains(r.stdout, "order-7.step.book") {
			t.Fatalf("the refused replay was audited:\n%s", r.stdout)
		}
		if err := json.Unmarshal([]byte(wfBefore), &wf); err != nil {
			t.Fatal(err)
		}
	}
	refused("while compensating", "errand: replay: job order-7.step.book is dead; its workflow order-7 is compensating (undoing charge), "+
		"and a replay would resume it over undone steps; once it has failed, rerun it as a new workflow: errand workflow rerun order-7\n")
	if wf.State != errandtype.WorkflowCompensating || wf.CompensationStartedAt == nil {
		t.Fatalf("workflow is %s (compensation started %v) after its step died; want compensating", wf.State, wf.CompensationStartedAt)
	}
	if r := cli(t, "workflow", "rerun", "order-7", "--db", db); r.code != 1 ||
		r.stderr != "errand: workflow: rerun workflow order-7: workflow is compensating; only a finished (succeeded or failed) workflow is rerun: wait until it has finished\n" {
		t.Fatalf("rerun of a compensating workflow: %s", r)
	}

	// A bulk replay leaves the step out, and says which.
	jobBefore := ok(t, cli(t, "inspect", "order-7.step.book", "--json", "--db", db)).stdout
	r := ok(t, cli(t, "replay", "--state", "dead", "--kind", "book", "--reason", "booking fixed", "--db", db))
	if !strings.Contains(r.stdout, "replayed 0 dead jobs") ||
		!strings.Contains(r.stdout, "left out 1 dead step of workflows that have compensated; rerun each workflow once it has failed (errand workflow rerun ID):\n  order-7.step.book\n") {
		t.Fatalf("bulk replay while compensating:\n%s", r.stdout)
	}
	if after := ok(t, cli(t, "inspect", "order-7.step.book", "--json", "--db", db)).stdout; after != jobBefore {
		t.Fatalf("the bulk replay changed the held step:\nbefore %s\nafter  %s", jobBefore, after)
	}

	// Once the compensation has run the replay is still refused.
	ok(t, cli(t, "work", "--once", "--exec", "refund=true", "--db", db))
	refused("once compensated", "errand: replay: job order-7.step.book is dead; its workflow order-7 compensated (undid charge), "+
		"and a replay would resume it over undone steps; rerun it as a new workflow: errand workflow rerun order-7\n")
	if r := ok(t, cli(t, "workflow", "order-7", "--db", db)); !strings.Contains(r.stdout,
		"next         failed: step book is dead (exit_1); compensated; rerun it as a new workflow: errand workflow rerun order-7\n") {
		t.Fatalf("workflow does not name the rerun:\n%s", r.stdout)
	}

	// The rerun: usage errors, then the new workflow, its retry, and what
	// the old one says.
	for _, tt := range []struct {
		args []string
		code int
		line string
	}{
		{[]string{"workflow", "rerun"}, 2, "give the id: errand workflow rerun ID"},
		{[]string{"workflow", "rerun", "order-7", "--id", "order-7"}, 2, "--id: is the workflow's own"},
		{[]string{"workflow", "nope", "--id", "x"}, 2, "--id goes with rerun"},
		{[]string{"workflow", "rerun", "nope"}, 1, "no workflow with id nope"},
	} {
		r := cli(t, append(tt.args, "--db", db)...)
		if r.code != tt.code || !strings.Contains(r.stderr, tt.line) || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
			t.Errorf("%v: %s; want exit %d with one line containing %q", tt.args, r, tt.code, tt.line)
		}
	}
	if r := ok(t, cli(t, "workflow", "rerun", "order-7", "--id", "order-7b", "--db", db)); r.stdout != "order-7b\n" {
		t.Fatalf("rerun printed %q", r.stdout)
	}
	var res struct {
		Workflow  workflowJSON      `json:"workflow"`
		Jobs      []*errandtype.Job `json:"jobs"`
		Duplicate bool              `json:"duplicate"`
	}
	if err := json.Unmarshal([]byte(ok(t, cli(t, "workflow", "rerun", "order-7", "--id", "order-7b", "--json", "--db", db)).stdout), &res); err != nil {
		t.Fatal(err)
	}
	if !res.Duplicate || res.Workflow.ID != "order-7b" || res.Workflow.RerunOf == nil || *res.Workflow.RerunOf != "order-7" ||
		len(res.Jobs) != 0 || !strings.HasPrefix(res.Workflow.Next, "waiting for step charge") {
		t.Fatalf("rerun again = %+v", res)
	}
	ok(t, cli(t, "work", "--once", "--exec", "charge=true", "--db", db))
	ok(t, cli(t, "work", "--once", "--exec", "book=true", "--db", db))
	ok(t, cli(t, "work", "--once", "--exec", "mail=true", "--db", db))
	var nw, old workflowJSON
	if err := json.Unmarshal([]byte(ok(t, cli(t, "workflow", "order-7b", "--json", "--db", db)).stdout), &nw); err != nil {
		t.Fatal(err)
	}
	if nw.State != errandtype.WorkflowSucceeded || nw.Next != "succeeded: every step succeeded; nothing more runs" {
		t.Fatalf("the rerun is %s: %s", nw.State, nw.Next)
	}
	if err := json.Unmarshal([]byte(ok(t, cli(t, "workflow", "order-7", "--json", "--db", db)).stdout), &old); err != nil {
		t.Fatal(err)
	}
	if old.State != errandtype.WorkflowFailed || old.RerunAs == nil || *old.RerunAs != "order-7b" || old.Next != "failed: rerun as workflow order-7b; see errand workflow order-7b" {
		t.Fatalf("the old workflow after its rerun = %+v", old)
	}
	if r := ok(t, cli(t, "workflow", "order-7", "--db", db)); !strings.Contains(r.stdout, "rerun as     order-7b\n") {
		t.Fatalf("workflow does not say it was rerun:\n%s", r.stdout)
	}
}

// workflowJSON is errand workflow --json: the workflow and "next".
type workflowJSON struct {
	errandtype.Workflow
	Next string `json:"next"`
}

// TestWorkflowPendingStepMaxAttempts: a step whose job is not enqueued yet
// shows the attempt budget it will run with, not 0.
func TestWorkflowPendingStepMaxAttempts(t *testing.T) {
	db := tempDB(t)
	ok(t, cli(t, "workflow", "enqueue", "--file", writeFile(t, checkoutJSON), "--db", db))
	var w errandtype.Workflow
	if err := json.Unmarshal([]byte(ok(t, cli(t, "workflow", "order-7", "--json", "--db", db)).stdout), &w); err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"charge": errand.DefaultMaxAttempts, "book": 1, "mail": errand.DefaultMaxAttempts}
	for _, s := range w.Steps {
		if s.MaxAttempts != want[s.Name] {
			t.Errorf("step %s (enqueued %v): max_attempts %d, want %d", s.Name, s.Enqueued, s.MaxAttempts, want[s.Name])
		}
	}
}
