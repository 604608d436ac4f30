package main

import (
	"os"
	"strings"
	"testing"
)

// TestRun runs a small comparison: a row per repetition and system, each
// with a throughput and latencies.
func TestRun(t *testing.T) {
	url := os.Getenv("ERRAND_TEST_POSTGRES_URL")
	if url == "" {
		t.Skip("ERRAND_TEST_POSTGRES_URL is not set")
	}
	var out strings.Builder
	if err := run([]string{"-postgres", url, "-flows", "20", "-samples", "5", "-reps", "1"}, &out); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[2], "1    errand") || !strings.HasPrefix(lines[3], "1    dbos") {
		t.Errorf("output:\n%s", out.String())
	}
	if err := run([]string{"-flows", "0"}, &out); err == nil {
		t.Error("-flows 0 was accepted")
	}
}
