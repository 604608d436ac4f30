package main

import (
	"encoding/json"
	"flag"
	"io"
	"log/slog"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/errandhq/errand/errandhttp"
)

// TestEnqueueFlagsAreTheJSONAPIs holds errand enqueue's flags to the
// fields of POST /api/v1/jobs, which errandhttp's test holds to
// errand.EnqueueOpts: every field has a flag of its name and every flag
// but the command's own is a field, so that adding an option to one
// without the other fails here.
func TestEnqueueFlagsAreTheJSONAPIs(t *testing.T) {
	fs := flag.NewFlagSet("enqueue", flag.ContinueOnError)
	enqueueCommand.setup(fs, &env{stdout: io.Discard, stderr: io.Discard, logger: slog.New(slog.DiscardHandler)})
	flagOnly := map[string]string{"db": "the database", "json": "the output", "key": "an older name of --unique-key",
		"start-within": "--start-by from now, for a shell"}
	renamed := map[string]string{
		"kind": "", "args": "", // KIND and JSON_ARGS, the arguments
		"eager": "",    // errand enqueue runs no worker to start the job on
		"tags":  "tag", // one tag per flag, repeated
	}
	job := reflect.TypeFor[errandhttp.JobRequest]()
	fields := map[string]bool{}
	for i := range job.NumField() {
		name, _, _ := strings.Cut(job.Field(i).Tag.Get("json"), ",")
		f, ok := renamed[name]
		if !ok {
			f = strings.ReplaceAll(name, "_", "-")
		}
		fields[f] = true
		if f != "" && fs.Lookup(f) == nil {
			t.Errorf("the JSON API's %q has no flag --%s: add it, or say why not in this test", name, f)
		}
	}
	fs.VisitAll(func(f *flag.Flag) {
		if !fields[f.Name] && flagOnly[f.Name] == "" {
			t.Errorf("--%s is no field of the JSON API's job, nor errand.EnqueueOpts': add the option, or say why not in this test", f.Name)
		}
	})
}

// TestEnqueueTagFlag: --tag, repeated, gives the job its tags in order.
func TestEnqueueTagFlag(t *testing.T) {
	db := tempDB(t)
	r := ok(t, cli(t, "enqueue", "k", "--tag", "eu", "--tag", "bulk", "--db", db, "--json"))
	var out struct {
		Job struct {
			Tags []string `json:"tags"`
		} `json:"job"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil || strings.Join(out.Job.Tags, ",") != "eu,bulk" {
		t.Fatalf("--tag eu --tag bulk: %s (%v)", r.stdout, err)
	}
	if r := cli(t, "enqueue", "k", "--tag", "a b\x00", "--db", db); r.code != 2 || !strings.Contains(r.stderr, "--tag") {
		t.Fatalf("a bad --tag: %s", r)
	}
}

// TestEnqueueMetadataFlag: --metadata keeps a JSON object with the job,
// shown by inspect; anything but an object is refused, and nothing is
// enqueued.
func TestEnqueueMetadataFlag(t *testing.T) {
	db := tempDB(t)
	r := ok(t, cli(t, "enqueue", "k", "--id", "m1", "--metadata", `{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "n": 1}`, "--db", db, "--json"))
	var out struct {
		Job struct {
			Metadata map[string]any `json:"metadata"`
		} `json:"job"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil || out.Job.Metadata["traceparent"] != "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01" || out.Job.Metadata["n"] != 1.0 {
		t.Fatalf("--metadata: %s (%v)", r.stdout, err)
	}
	if r := ok(t, cli(t, "inspect", "m1", "--db", db)); !strings.Contains(r.stdout, `"traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"`) {
		t.Fatalf("inspect shows no metadata:\n%s", r.stdout)
	}
	for _, bad := range []string{`[1]`, `"x"`, `{"a":`} {
		if r := cli(t, "enqueue", "k", "--id", "m2", "--metadata", bad, "--db", db); r.code != 2 || !strings.Contains(r.stderr, "--metadata") {
			t.Fatalf("--metadata %s: %s", bad, r)
		}
	}
	if r := cli(t, "inspect", "m2", "--db", db); r.code == 0 {
		t.Fatalf("a refused --metadata enqueued its job: %s", r)
	}
}

// TestEnqueueStartByFlags: --start-by and --start-within set the job's
// start-by, which inspect shows with the class its deadline ends it with;
// both at once, a bad time or a start-by before --run-at are refused, and
// nothing is enqueued.
func TestEnqueueStartByFlags(t *testing.T) {
	db := tempDB(t)
	at := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	r := ok(t, cli(t, "enqueue", "k", "--id", "s1", "--start-by", at.Format(time.RFC3339), "--max-age", "2h", "--db", db, "--json"))
	var out struct {
		Job struct {
			StartBy  *time.Time `json:"start_by"`
			Deadline *time.Time `json:"deadline"`
		} `json:"job"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil || out.Job.StartBy == nil || !out.Job.StartBy.Equal(at) ||
		out.Job.Deadline == nil || !out.Job.Deadline.Equal(at) {
		t.Fatalf("--start-by %s: %s (%v); want start_by and deadline %s", at.Format(time.RFC3339), r.stdout, err, at)
	}
	if r := ok(t, cli(t, "inspect", "s1", "--db", db)); !strings.Contains(r.stdout, "start by") || !strings.Contains(r.stdout, "class start_by") {
		t.Fatalf("inspect shows no start-by:\n%s", r.stdout)
	}
	before := time.Now()
	r = ok(t, cli(t, "enqueue", "k", "--id", "s2", "--start-within", "10m", "--db", db, "--json"))
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil || out.Job.StartBy == nil ||
		out.Job.StartBy.Before(before.Add(10*time.Minute).Truncate(time.Microsecond)) || out.Job.StartBy.After(time.Now().Add(10*time.Minute)) {
		t.Fatalf("--start-within 10m: %s (%v)", r.stdout, err)
	}
	for _, bad := range [][]string{
		{"--start-by", "tomorrow"},
		{"--start-by", at.Format(time.RFC3339), "--start-within", "1m"},
		{"--start-within", "-1m"},
		{"--start-by", at.Format(time.RFC3339), "--run-at", at.Add(time.Minute).Format(time.RFC3339)},
	} {
		r := cli(t, append([]string{"enqueue", "k", "--id", "s3", "--db", db}, bad...)...)
		if r.code != 2 || !strings.Contains(r.stderr, "--start-") {
			t.Fatalf("enqueue %v: %s; want exit 2 naming the flag", bad, r)
		}
	}
	if r := cli(t, "inspect", "s3", "--db", db); r.code == 0 {
		t.Fatalf("a refused start-by enqueued its job: %s", r)
	}
}
