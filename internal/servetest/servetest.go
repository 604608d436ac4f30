// Package servetest starts errand serve for tests of clients in other
// languages: a real server, built from this module, on a database of the
// test's.
package servetest

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

// Token is the operator token of the servers Start starts.
const Token = "client-test-token-0123456789abcdef"

// OnBothStores builds errand, then calls fn with the base URL of an errand
// serve on a fresh SQLite file, and of one on a fresh schema of the test
// PostgreSQL database (skipped without one, as pgtest skips).
func OnBothStores(t *testing.T, fn func(t *testing.T, base string)) {
	bin := Build(t)
	t.Run("sqlite", func(t *testing.T) {
		fn(t, Start(t, bin, filepath.Join(t.TempDir(), "errand.db")))
	})
	t.Run("postgres", func(t *testing.T) {
		url := pgtest.URL(t)
		fn(t, Start(t, bin, url, "ERRAND_SCHEMA="+pgtest.Schema(t, url)))
	})
}

// Build builds cmd/errand into the test's temporary directory.
func Build(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "errand")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/errandhq/errand/cmd/errand").CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/errand: %v\n%s", err, out)
	}
	return bin
}

// Start starts errand serve (bin) on db and returns its base URL once it
// answers; it is stopped with SIGTERM when the test ends.
func Start(t *testing.T, bin, db string, env ...string) string {
	t.Helper()
	return StartArgs(t, bin, db, nil, env...)
}

// StartArgs is Start with more arguments of errand serve (--faktory ADDR,
// say).
func StartArgs(t *testing.T, bin, db string, args []string, env ...string) string {
	t.Helper()
	addr := FreeAddr(t)
	var log bytes.Buffer
	cmd := exec.Command(bin, append([]string{"serve", "--db", db, "--addr", addr}, args...)...)
	cmd.Env = append(append(os.Environ(), "ERRAND_TOKEN="+Token), env...)
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

// FreeAddr returns a loopback address whose port was free a moment ago,
// for a server the test starts.
func FreeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
