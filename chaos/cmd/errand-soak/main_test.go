package main

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/errandhq/errand/chaos/pgtopology"
)

// errandBin is errand, built once for the tests.
var errandBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "errand-soak-test-")
	if err != nil {
		panic(err)
	}
	if errandBin, err = buildErrand(context.Background(), dir); err != nil {
		panic(err)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// TestSoakShort runs the whole command for 16s on each store (PostgreSQL
// both shared and private): it must build errand, run the fleet under load,
// take every sample of every series and report them.
func TestSoakShort(t *testing.T) {
	stores := map[string]string{"sqlite": ""}
	if url := os.Getenv("ERRAND_TEST_POSTGRES_URL"); url != "" {
		stores["postgres"] = url
	}
	if pgtopology.Available() == nil {
		stores["postgres-private"] = ""
	}
	for name, url := range stores {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			store, private := strings.TrimSuffix(name, "-private"), strings.HasSuffix(name, "-private")
			dir := filepath.Join(t.TempDir(), "run")
			args := []string{"-store", store, "-duration", "16s", "-sample", "2s", "-rate", "40", "-workers", "2", "-dir", dir, "-errand", errandBin, "--json"}
			if url != "" {
				args = append(args, "-pg-url", url)
			}
			if private {
				args = append(args, "-pg-private")
			}
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), args, &stdout, &stderr)
			var rep report
			if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
				t.Fatalf("exit %d, stdout is not the JSON report (%v): %s\nstderr: %s", code, err, stdout.String(), stderr.String())
			}
			// A 16s run is too short for retention to bound the tables,
			// so growth (exit 1) is expected here; a failed run is not.
			if code != 0 && (code != 1 || rep.Flat) {
				t.Fatalf("exit %d, flat %v; stderr: %s", code, rep.Flat, stderr.String())
			}
			if rep.Schema != "" && !private {
				t.Cleanup(func() { dropSchema(t, url, rep.Schema) }) // -dir keeps it
			}
			if private && !strings.Contains(rep.Server, "autovacuum on, a private cluster") {
				t.Errorf("server %q: want a private cluster with autovacuum on", rep.Server)
			}
			checkReport(t, &rep, store)
			checkCSV(t, rep.CSV, rep.Samples, len(rep.Series))
			if rep.Totals.Enqueued == 0 || rep.Totals.EnqueuedAPI == 0 || rep.Totals.DeliveredOK == 0 ||
				rep.Totals.DeliveredFailed == 0 || rep.Totals.DeliveredPoison == 0 || rep.Totals.EnqueueErrors != 0 {
				t.Errorf("totals %+v: want jobs through both paths, each answer of the sink, no errors", rep.Totals)
			}
		})
	}
}

func dropSchema(t *testing.T, url, schema string) {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Errorf("drop schema %s: %v", schema, err)
		return
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "DROP SCHEMA "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
		t.Errorf("drop schema %s: %v", schema, err)
	}
}

func checkReport(t *testing.T, rep *report, store string) {
	t.Helper()
	if rep.Samples != 8 {
		t.Errorf("%d samples, want 8", rep.Samples)
	}
	want := []string{"worker0_rss_bytes", "worker1_fds", "serve_goroutines", "db_conns", "rows_succeeded", "rows_dead",
		"rows_waiting", "delivered_ok_per_sample", "soak_heap_bytes", "soak_goroutines"}
	if store == "sqlite" {
		want = append(want, "db_file_bytes", "wal_file_bytes")
	} else {
		want = append(want, "errand_jobs_bytes", "errand_audit_bytes")
	}
	got := map[string]summary{}
	for _, s := range rep.Series {
		got[s.Name] = s
		if s.Samples != rep.Samples {
			t.Errorf("series %s has %d samples of %d", s.Name, s.Samples, rep.Samples)
		}
		if s.Verdict != "flat" && s.Verdict != "grew" && s.Verdict != "info" {
			t.Errorf("series %s: verdict %q", s.Name, s.Verdict)
		}
	}
	for _, name := range want {
		s, ok := got[name]
		if !ok {
			t.Errorf("no series %s", name)
			continue
		}
		if s.Max <= 0 && name != "rows_waiting" {
			t.Errorf("series %s never read above zero: %+v", name, s)
		}
	}
	if !strings.HasPrefix(rep.Schema, "errand_soak_") && store == "postgres" {
		t.Errorf("schema %q", rep.Schema)
	}
}

func checkCSV(t *testing.T, path string, samples, series int) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != samples+1 || len(rows[0]) != series+2 {
		t.Fatalf("csv has %d rows of %d columns, want %d of %d", len(rows), len(rows[0]), samples+1, series+2)
	}
}

func TestUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "give -store"},
		{[]string{"-store", "mysql"}, "use sqlite or postgres"},
		{[]string{"-store", "postgres", "-pg-url", "mysql://x"}, "-pg-url postgres://"},
		{[]string{"-store", "sqlite", "-pg-private"}, "-pg-private is for -store postgres"},
		{[]string{"-store", "sqlite", "-duration", "10s", "-sample", "5s"}, "fewer than 8 samples"},
		{[]string{"-store", "sqlite", "-rate", "0"}, "-rate 0"},
		{[]string{"-store", "sqlite", "-workers", "0"}, "-workers 0"},
		{[]string{"-store", "sqlite", "-sample", "1ms"}, "too short"},
		{[]string{"-store", "sqlite", "extra"}, "unexpected argument"},
		{[]string{"-store", "sqlite", "-bogus"}, "bogus"},
		{[]string{"-store", "sqlite", "-errand", "/nonexistent/errand"}, "not an executable"},
	} {
		var stdout, stderr bytes.Buffer
		t.Setenv("ERRAND_TEST_POSTGRES_URL", "")
		if code := run(context.Background(), tc.args, &stdout, &stderr); code != 2 || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("%q: exit %d, stderr %q; want 2 and %q", tc.args, code, stderr.String(), tc.want)
		}
	}
}
