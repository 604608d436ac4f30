//go:build unix

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestWorkExecEnv runs errand work --once as a process whose environment
// holds the operator token and a database URL: the command sees neither,
// and sees the variable --exec-env names.
func TestWorkExecEnv(t *testing.T) {
	db := tempDB(t)
	out := filepath.Join(t.TempDir(), "env")
	s := script(t, `echo "${ERRAND_TOKEN:-unset} ${ERRAND_READ_TOKEN:-unset} ${PASSED:-unset} $ERRAND_JOB_ID" > `+out)
	ok(t, cli(t, "enqueue", "k", "--id", "j-1", "--db", db))
	t.Setenv("ERRAND_TOKEN", "operator-secret-0123456789")
	t.Setenv("ERRAND_READ_TOKEN", "reader-secret-0123456789")
	t.Setenv("PASSED", "named")
	ok(t, bin(t, "work", "--once", "--db", db, "--exec", "k="+s, "--exec-env", "PASSED"))
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.TrimSpace(string(b)), "unset unset named j-1"; got != want {
		t.Errorf("the command saw %q, want %q", got, want)
	}
}
