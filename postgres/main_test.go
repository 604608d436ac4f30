//go:build unix

package postgres_test

import (
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/errandhq/errand/postgres/pgtest"
)

// Without a PostgreSQL URL the tests skip, and say so in a line that names
// the variable to set, rather than passing in silence.
func TestSkippedTestsAreAnnounced(t *testing.T) {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, pgtest.EnvURL+"=") {
			env = append(env, kv)
		}
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestStore$", "-test.count=1")
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true} // no terminal: the notice goes to stderr only
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("test binary without %s: %v\n%s%s", pgtest.EnvURL, err, out, stderr.String())
	}
	if n := strings.Count(stderr.String(), pgtest.SkipNotice); n != 1 {
		t.Fatalf("stderr %q has the skip notice %d times, want once", stderr.String(), n)
	}
	if !strings.Contains(pgtest.SkipNotice, pgtest.EnvURL+"=postgres://") {
		t.Fatalf("the notice %q does not say how to run the tests", pgtest.SkipNotice)
	}
}
