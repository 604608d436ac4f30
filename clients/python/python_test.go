// Package python_test runs the Python client's tests (test_errand_client.py)
// against a real errand serve, on SQLite and on PostgreSQL, so that
// go test ./... covers the client.
package python_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/errandhq/errand/internal/servetest"
)

func TestPythonClient(t *testing.T) {
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 is not installed: the Python client's tests need it (CI installs it)")
	}
	servetest.OnBothStores(t, func(t *testing.T, base string) { runPython(t, python, base) })
}

// runPython runs the unittest suite against the server at base.
func runPython(t *testing.T, python, base string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, python, "-m", "unittest", "-v", "test_errand_client")
	cmd.Env = append(os.Environ(), "ERRAND_URL="+base, "ERRAND_TOKEN="+servetest.Token, "PYTHONDONTWRITEBYTECODE=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("python3 -m unittest: %v\n%s", err, out)
	}
	if !bytes.Contains(out, []byte("OK")) || bytes.Contains(out, []byte("skipped")) {
		t.Fatalf("the Python tests did not all run and pass:\n%s", out)
	}
	t.Logf("%d bytes of unittest output, all passed", len(out))
}
