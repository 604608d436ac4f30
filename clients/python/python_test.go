// Package python_test runs the Python client's tests (test_errand_client.py)
// against a real errand serve, on SQLite and on PostgreSQL, so that
// go test ./... covers the client.
package python_test

import (
	"bytes"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/errandhq/errand/postgres/pgtest"
)

// token is the operator token of the servers the tests start.
const token = "python-client-test-0123456789abcdef"

func TestPythonClient(t *testing.T) {
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 is not installed: the Python client's tests need it (CI installs it)")
	}
	bin := filepath.Join(t.TempDir(), "errand")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/errandhq/errand/cmd/errand").CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/errand: %v\n%s", err, out)
	}
	t.Run("sqlite", func(t *testing.T) {
		runPython(t, python, serve(t, bin, filepath.Join(t.TempDir(), "errand.db")))
	})
	t.Run("postgres", func(t *testing.T) {
		url := pgtest.URL(t)
		runPython(t, python, serve(t, bin, url, "ERRAND_SCHEMA="+pgtest.Schema(t, url)))
	})
}

// serve starts errand serve on db and returns its base URL once it
// answers; it is stopped with SIGTERM when the test ends.
func serve(t *testing.T, bin, db string, env ...string) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	var log bytes.Buffer
	cmd := exec.Command(bin, "serve", "--db", db, "--addr", addr)
	cmd.Env = append(append(os.Environ(), "ERRAND_TOKEN="+token), env...)
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("errand serve's log:\n%s", log.String())
		}
	})
	base := "http://" + addr
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(base + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return base
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("errand serve did not answer at %s within 30s: %v\n%s", base, err, log.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// runPython runs the unittest suite against the server at base.
func runPython(t *testing.T, python, base string) {
	t.Helper()
	cmd := exec.Command(python, "-m", "unittest", "-v", "test_errand_client")
	cmd.Env = append(os.Environ(), "ERRAND_URL="+base, "ERRAND_TOKEN="+token, "PYTHONDONTWRITEBYTECODE=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("python3 -m unittest: %v\n%s", err, out)
	}
	if !bytes.Contains(out, []byte("OK")) || bytes.Contains(out, []byte("skipped")) {
		t.Fatalf("the Python tests did not all run and pass:\n%s", out)
	}
	t.Logf("%d bytes of unittest output, all passed", len(out))
}
