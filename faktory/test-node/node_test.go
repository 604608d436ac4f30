// Package testnode_test runs the unchanged faktory-worker client for
// Node.js (pinned in package-lock.json) against a real errand serve
// --faktory, on SQLite and on PostgreSQL, so that go test ./... holds
// errand to what a Faktory worker does.
package testnode_test

import (
	"bytes"
	"context"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/errandhq/errand/internal/servetest"
	"github.com/errandhq/errand/postgres/pgtest"
)

// password is the Faktory password of the servers under test.
const password = "faktory-test-Pw-9b2e71c4"

func TestFaktoryWorkerClient(t *testing.T) {
	npm, err := exec.LookPath("npm")
	if err != nil {
		t.Skip("npm is not installed: the Faktory client's tests need Node.js 20 or newer (CI installs it)")
	}
	if out, err := exec.Command(npm, "ci", "--no-audit", "--no-fund").CombinedOutput(); err != nil {
		t.Fatalf("npm ci: %v\n%s", err, out)
	}
	bin := servetest.Build(t)
	t.Run("sqlite", func(t *testing.T) {
		runNode(t, bin, filepath.Join(t.TempDir(), "errand.db"))
	})
	t.Run("postgres", func(t *testing.T) {
		u := pgtest.URL(t)
		runNode(t, bin, u, "ERRAND_SCHEMA="+pgtest.Schema(t, u))
	})
}

// runNode starts errand serve --faktory on db and runs the Node tests
// against it; every test must run and pass.
func runNode(t *testing.T, bin, db string, env ...string) {
	t.Helper()
	faddr := servetest.FreeAddr(t)
	base := servetest.StartArgs(t, bin, db, []string{"--faktory", faddr}, append(env, "ERRAND_FAKTORY_PASSWORD="+password)...)
	furl := &url.URL{Scheme: "tcp", User: url.UserPassword("", password), Host: faddr}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", "--test")
	cmd.Env = append(os.Environ(), "FAKTORY_URL="+furl.String(), "ERRAND_URL="+base, "ERRAND_TOKEN="+servetest.Token)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("node --test: %v\n%s", err, out)
	}
	for _, want := range []string{"# fail 0", "# skipped 0", "# todo 0", "# cancelled 0"} {
		if !bytes.Contains(out, []byte(want)) {
			t.Fatalf("the Faktory client's tests did not all run and pass (no %q):\n%s", want, out)
		}
	}
	if bytes.Contains(out, []byte("# pass 0\n")) {
		t.Fatalf("no Faktory client test ran:\n%s", out)
	}
	t.Logf("%d bytes of test output, all passed", len(out))
}
