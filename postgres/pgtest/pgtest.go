// Package pgtest gives tests a PostgreSQL database to run errand against:
// the server named by ERRAND_TEST_POSTGRES_URL, and a schema of each test's
// own that is dropped when the test ends, so tests and packages can share
// one database and run in parallel.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// EnvURL names the variable that points the tests at a server.
const EnvURL = "ERRAND_TEST_POSTGRES_URL"

// URL returns the database the tests use, or skips the test, saying which
// variable to set.
func URL(t testing.TB) string {
	t.Helper()
	url := os.Getenv(EnvURL)
	if url == "" {
		t.Skip("set " + EnvURL + " to run the PostgreSQL tests, e.g. postgres://postgres@127.0.0.1:5432/test?sslmode=disable")
	}
	return url
}

// Schema names a fresh schema (errand_t_<random>) for the test and drops it,
// with everything in it, when the test ends. errand creates it on open.
func Schema(t testing.TB, url string) string {
	t.Helper()
	schema := Name()
	DropAtEnd(t, url, schema)
	return schema
}

// Name returns a new schema name, errand_t_<random>.
func Name() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return "errand_t_" + hex.EncodeToString(b)
}

// DropAtEnd drops schema, with everything in it, when the test ends.
func DropAtEnd(t testing.TB, url, schema string) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := Drop(ctx, url, schema); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
	})
}

// Drop drops schema, with everything in it, if it exists.
func Drop(ctx context.Context, url, schema string) error {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, `DROP SCHEMA IF EXISTS `+pgx.Identifier{schema}.Sanitize()+` CASCADE`)
	return err
}

// SkipNotice is the line AnnounceSkip prints.
const SkipNotice = "errand: the PostgreSQL tests were skipped; run them with " + EnvURL + "=postgres://postgres@127.0.0.1:5432/test?sslmode=disable go test ./..."

// AnnounceSkip tells a person running the tests that the PostgreSQL tests
// will be skipped, and how to run them, when EnvURL is unset. go test shows
// a passing package's output only with -v, so the line goes to the terminal
// the tests were started from (when there is one) as well as to stderr. The
// postgres package's TestMain calls it, so `go test ./...` prints it once.
func AnnounceSkip() {
	if os.Getenv(EnvURL) != "" {
		return
	}
	fmt.Fprintln(os.Stderr, SkipNotice)
	if tty, err := os.OpenFile("/dev/tty", os.O_WRONLY, 0); err == nil {
		fmt.Fprintln(tty, SkipNotice)
		tty.Close()
	}
}

// SilentServer listens on a loopback port, accepts connections and never
// writes a byte: a server that hangs every client, for testing connect
// timeouts. It returns host:port; the test's cleanup closes it.
func SilentServer(t testing.TB) string {
	t.Helper()
	return SilentServerAt(t, "127.0.0.1:0")
}

// SilentServerAt is SilentServer on addr: a dead server's port that takes
// connections, as a machine that is gone does not refuse them.
func SilentServerAt(t testing.TB, addr string) string {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return ln.Addr().String()
}
