package main

import (
	"os"
	"strings"
	"testing"
)

// TestMain runs this binary as a worker process of the recovery measure
// when the measure re-executes it so.
func TestMain(m *testing.M) {
	if len(os.Args) > 2 && os.Args[1] == childFlag {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func pgURL(t *testing.T) string {
	url := os.Getenv("ERRAND_TEST_POSTGRES_URL")
	if url == "" {
		t.Skip("ERRAND_TEST_POSTGRES_URL is not set")
	}
	return url
}

// rows returns the output's lines after its header line, which starts
// with first, split into fields.
func rows(t *testing.T, out, first string) [][]string {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, first) {
			var rs [][]string
			for _, r := range lines[i+1:] {
				if !strings.HasPrefix(r, " ") { // not a line of phases
					rs = append(rs, strings.Fields(r))
				}
			}
			return rs
		}
	}
	t.Fatalf("no header line starting %q in:\n%s", first, out)
	return nil
}

// checkBench checks a row per system for each store, each with its flows,
// a throughput and latencies.
func checkBench(t *testing.T, out string, stores ...string) {
	t.Helper()
	rs := rows(t, out, "rep ")
	want := len(stores) * len(systems)
	if len(rs) != want {
		t.Fatalf("%d rows, want %d:\n%s", len(rs), want, out)
	}
	for i, r := range rs {
		store, sys := stores[i/len(systems)], systems[i%len(systems)].name
		flows := "20"
		if sys == "dbos-queue" {
			flows = "4"
		}
		if len(r) != 8 || r[0] != "1" || r[1] != store || r[2] != sys || r[3] != flows || r[4] == "0" {
			t.Errorf("row %d is %q, want rep 1, %s, %s, %s flows, a throughput:\n%s", i, r, store, sys, flows, out)
		}
	}
}

var tiny = []string{"-flows", "20", "-samples", "3", "-queue-flows", "4", "-queue-samples", "2", "-reps", "1"}

func TestRunPostgres(t *testing.T) {
	var out strings.Builder
	if err := run(append([]string{"-postgres", pgURL(t)}, tiny...), &out); err != nil {
		t.Fatal(err)
	}
	checkBench(t, out.String(), "postgres")
}

func TestRunSQLite(t *testing.T) {
	var out strings.Builder
	if err := run(append([]string{"-store", "sqlite", "-phases"}, tiny...), &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "errand synchronous=FULL") {
		t.Errorf("no synchronous settings:\n%s", out.String())
	}
	// With -phases, a line after each of errand's rows, its phases all seen.
	if n := strings.Count(out.String(), "p50 ms of each phase: to handler "); n != 2 || strings.Contains(out.String(), " -") {
		t.Errorf("%d lines of phases, want 2 with no negative phase:\n%s", n, out.String())
	}
	checkBench(t, out.String(), "sqlite")
}

// checkRecovery checks that errand's and DBOS's first case finished every
// flow, running step 1 once each, and that each DBOS case has its row.
func checkRecovery(t *testing.T, out, store string) {
	t.Helper()
	rs := rows(t, out, "store ")
	if len(rs) != 4 {
		t.Fatalf("%d rows, want 4:\n%s", len(rs), out)
	}
	for i, r := range rs {
		if len(r) < 8 || r[0] != store || r[1] != []string{"errand", "dbos", "dbos", "dbos"}[i] {
			t.Errorf("row %d is %q:\n%s", i, r, out)
		}
	}
	for _, i := range []int{0, 1} {
		row := strings.Join(rs[i], " ")
		if !strings.Contains(row, " 3 of 3, the last at ") || !strings.HasSuffix(row, "once each (3 runs)") {
			t.Errorf("row %d: %s; want every flow finished, step 1 run once each:\n%s", i, row, out)
		}
	}
}

var tinyRecovery = []string{"-recovery", "-recover-flows", "3", "-recover-timeout", "5s", "-lease", "1s"}

func TestRecoveryPostgres(t *testing.T) {
	var out strings.Builder
	if err := run(append([]string{"-postgres", pgURL(t)}, tinyRecovery...), &out); err != nil {
		t.Fatal(err)
	}
	checkRecovery(t, out.String(), "postgres")
}

func TestRecoverySQLite(t *testing.T) {
	var out strings.Builder
	if err := run(append([]string{"-store", "sqlite"}, tinyRecovery...), &out); err != nil {
		t.Fatal(err)
	}
	checkRecovery(t, out.String(), "sqlite")
}

// Bad flags are refused, naming what to change, before anything runs.
func TestBadFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-flows", "0"}, "-flows 0: give at least 1"},
		{[]string{"-queue-samples", "-1"}, "-queue-samples -1: give at least 1"},
		{[]string{"-recover-flows", "0"}, "-recover-flows 0"},
		{[]string{"-store", "mysql"}, `-store "mysql": give postgres, sqlite or both`},
		{[]string{"-sqlite-sync", "OFF"}, `-sqlite-sync "OFF": give FULL or NORMAL`},
		{[]string{"-recover-timeout", "0s"}, "-recover-timeout 0s: give a positive duration"},
		{[]string{"-lease", "10ms"}, "-lease 10ms: give between 1s and"},
		{[]string{"-reps", "2", "extra"}, `unexpected argument "extra"`},
		{[]string{"-nope"}, "flag provided but not defined: -nope"},
	} {
		var out strings.Builder
		err := run(c.args, &out)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("run(%q) = %v; want an error containing %q", c.args, err, c.want)
		}
		if out.Len() > 0 {
			t.Errorf("run(%q) printed %q before refusing", c.args, out.String())
		}
	}
	if err := childMain("river", []string{"-flows", "1", "-log", "x"}); err == nil || !strings.Contains(err.Error(), "give errand or dbos") {
		t.Errorf("childMain(river) = %v; want it refused", err)
	}
}
