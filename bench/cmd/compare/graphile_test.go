package main

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestGraphileRunner runs each measure of Graphile Worker's runner on a few
// jobs through compare's own calls, and checks the results are sane and
// the fresh schemas dropped. It needs node, `npm ci` in bench/graphile,
// and a PostgreSQL server (ERRAND_TEST_POSTGRES_URL, or compare's default);
// it skips, saying which is missing, without them.
func TestGraphileRunner(t *testing.T) {
	dir := defaultGraphileDir()
	if err := graphileReady(dir); err != nil {
		if errors.Is(err, errNoNode) {
			t.Skip("node is not installed")
		}
		t.Skipf("%v", err)
	}
	ctx := context.Background()
	url := testPostgresURL(t)
	var version string
	e := &env{store: "postgres", url: url, workers: 10, graphileDir: dir,
		graphileSeen: func(r graphileResponse) { version = r.Version }}
	var schemas []string
	e.created = func(s string) { schemas = append(schemas, s) }

	for _, req := range []graphileRequest{
		{Measure: "work", Jobs: 50, Batch: 20},
		{Measure: "work", Jobs: 50, Batch: 20, Analyze: true},
		{Measure: "bulk", Jobs: 50, Batch: 20},
	} {
		r, err := graphileThroughput(req)(ctx, e)
		if err != nil {
			t.Fatalf("%s: %v", req.Measure, err)
		}
		if r.perSec <= 0 || math.IsInf(r.perSec, 0) || math.IsNaN(r.perSec) {
			t.Errorf("%s: %v jobs/s", req.Measure, r.perSec)
		}
	}
	if !strings.HasPrefix(version, "0.") {
		t.Errorf("version %q, want the 0.x that package.json pins", version)
	}

	s := sampling{warmup: 2, samples: 5}
	r, err := graphileLatency(s)(ctx, e)
	if err != nil {
		t.Fatalf("latency: %v", err)
	}
	if len(r.latencies) != s.samples {
		t.Fatalf("latency: %d samples, want %d", len(r.latencies), s.samples)
	}
	for _, d := range append(r.latencies, r.first) {
		if d <= 0 || d > 10*time.Second {
			t.Errorf("latency: a job started %v after its enqueue", d)
		}
	}

	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if len(schemas) != 4 {
		t.Fatalf("%d fresh schemas, want 4", len(schemas))
	}
	for _, name := range schemas {
		var left bool
		if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)", name).Scan(&left); err != nil {
			t.Fatal(err)
		}
		if left {
			t.Errorf("schema %s was not dropped", name)
		}
	}
}

// TestSystemsFlag checks -systems: errand always among them, only known
// names, and with -scaling or -cost only errand and River, what they
// compare anyway.
func TestSystemsFlag(t *testing.T) {
	o, err := parseFlags([]string{"-systems", "errand, river"})
	if err != nil || !o.systemsSet || !o.has("river") || o.has("graphile") {
		t.Fatalf("-systems errand,river: %+v, %v", o, err)
	}
	for _, bad := range [][]string{
		{"-systems", "river,graphile"},
		{"-systems", "errand,sidekiq"},
		{"-systems", ""},
		{"-scaling", "-systems", "errand,graphile"},
		{"-cost", "-systems", "errand"},
	} {
		if _, err := parseFlags(bad); err == nil {
			t.Errorf("parseFlags(%q): no error", bad)
		}
	}
	for _, good := range [][]string{{"-scaling", "-systems", "errand,river"}, {"-cost", "-systems", "river,errand"}} {
		if _, err := parseFlags(good); err != nil {
			t.Errorf("parseFlags(%q): %v", good, err)
		}
	}
	o, err = parseFlags([]string{"-store", "sqlite"})
	if err != nil {
		t.Fatal(err)
	}
	if err := o.pickSystems(); err != nil || o.has("graphile") {
		t.Errorf("-store sqlite: systems %v, %v; want Graphile Worker left out", o.systems, err)
	}
}

// TestTableColumns checks the table's columns follow the systems: errand
// and River alone print the table as before Graphile Worker was added
// (beforeafter.sh reads its columns), and a system with no part in a row
// shows a dash.
func TestTableColumns(t *testing.T) {
	rows := []row{
		{store: "postgres", measure: "work (jobs/s)", errand: "100",
			other: map[string]string{"river": "50", "graphile": "25"},
			ratio: map[string]string{"river": "2.00×", "graphile": "4.00×"}, better: "higher"},
		{store: "postgres", measure: "ceiling (jobs/s)", errand: "100",
			other: map[string]string{"river": "120"}, ratio: map[string]string{"river": "0.83×"}, better: "higher"},
	}
	var b strings.Builder
	writeMarkdown(&b, rows, []string{"river"})
	want := "| store | measure | errand | River | errand ÷ River | better |\n" +
		"| --- | --- | ---: | ---: | ---: | --- |\n" +
		"| postgres | work (jobs/s) | 100 | 50 | 2.00× | higher |\n" +
		"| postgres | ceiling (jobs/s) | 100 | 120 | 0.83× | higher |\n"
	if b.String() != want {
		t.Errorf("errand and River:\n%s\nwant\n%s", b.String(), want)
	}
	b.Reset()
	writeMarkdown(&b, rows, []string{"river", "graphile"})
	want = "| store | measure | errand | River | Graphile | errand ÷ River | errand ÷ Graphile | better |\n" +
		"| --- | --- | ---: | ---: | ---: | ---: | ---: | --- |\n" +
		"| postgres | work (jobs/s) | 100 | 50 | 25 | 2.00× | 4.00× | higher |\n" +
		"| postgres | ceiling (jobs/s) | 100 | 120 | – | 0.83× | – | higher |\n"
	if b.String() != want {
		t.Errorf("all three:\n%s\nwant\n%s", b.String(), want)
	}
}
