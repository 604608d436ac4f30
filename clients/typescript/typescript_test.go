// Package typescript_test runs the TypeScript client's tests (src/test,
// with Node's test runner) against a real errand serve, on SQLite and on
// PostgreSQL, so that go test ./... covers the client.
package typescript_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/errandhq/errand/internal/servetest"
)

func TestTypeScriptClient(t *testing.T) {
	npm, err := exec.LookPath("npm")
	if err != nil {
		t.Skip("npm is not installed: the TypeScript client's tests need Node.js 20 or newer (CI installs it)")
	}
	// The pinned packages of package-lock.json: the compiler and the
	// generator of the contract's types.
	if out, err := exec.Command(npm, "ci", "--no-audit", "--no-fund").CombinedOutput(); err != nil {
		t.Fatalf("npm ci: %v\n%s", err, out)
	}
	servetest.OnBothStores(t, func(t *testing.T, base string) { runNode(t, npm, base) })
}

// runNode compiles the client and runs its tests against the server at
// base.
func runNode(t *testing.T, npm, base string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, npm, "test")
	cmd.Env = append(os.Environ(), "ERRAND_URL="+base, "ERRAND_TOKEN="+servetest.Token)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("npm test: %v\n%s", err, out)
	}
	if !bytes.Contains(out, []byte("# fail 0")) || !bytes.Contains(out, []byte("# skipped 0")) {
		t.Fatalf("the TypeScript tests did not all run and pass:\n%s", out)
	}
	t.Logf("%d bytes of test output, all passed", len(out))
}
