package pgtest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// PgBouncer starts a PgBouncer of the test's own, in transaction pooling
// mode, in front of the server at url, and returns the URL of the same
// database through it. It skips the test when no pgbouncer is installed
// (Debian's package pgbouncer; CI installs it). The pooler stops when the
// test ends.
func PgBouncer(t testing.TB, url string) string {
	t.Helper()
	bin, err := exec.LookPath("pgbouncer")
	if err != nil {
		if bin, err = exec.LookPath("/usr/sbin/pgbouncer"); err != nil {
			t.Skip("pgbouncer is not installed; install it (Debian: apt-get install pgbouncer) to run the pooler tests")
		}
	}
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		t.Fatalf("pgbouncer: %s: %v", EnvURL, err)
	}
	// A directory of its own rather than t.TempDir, whose parent only root
	// may enter: the pooler writes its log here as another user.
	dir, err := os.MkdirTemp("", "errand-pgbouncer-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	port := freePort(t)
	// auth_type any with a forced user: the pooler logs in as the test's
	// role whatever a client says, so no password file is needed.
	ini := fmt.Sprintf(`[databases]
%s = host=%s port=%d dbname=%s user=%s
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %d
unix_socket_dir =
auth_type = any
pool_mode = transaction
max_client_conn = 1000
default_pool_size = 20
ignore_startup_parameters = extra_float_digits
logfile = %s
`, cfg.Database, cfg.Host, cfg.Port, cfg.Database, cfg.User, port, filepath.Join(dir, "pgbouncer.log"))
	path := filepath.Join(dir, "pgbouncer.ini")
	if err := os.WriteFile(path, []byte(ini), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, path)
	if os.Geteuid() == 0 {
		// PgBouncer refuses to run as root.
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: unprivileged(t)}
		if err := os.Chmod(dir, 0o777); err != nil {
			t.Fatal(err)
		}
	}
	// It logs to logfile too; a failure to start shows it.
	if err := cmd.Start(); err != nil {
		t.Fatalf("start pgbouncer: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	pooled := withHostPort(url, "127.0.0.1", port)
	deadline := time.Now().Add(15 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		conn, err := pgx.Connect(ctx, pooled+sep(pooled)+"default_query_exec_mode=simple_protocol")
		if err == nil {
			conn.Close(ctx)
			cancel()
			return pooled
		}
		cancel()
		select {
		case err := <-exited:
			log, _ := os.ReadFile(filepath.Join(dir, "pgbouncer.log"))
			t.Fatalf("pgbouncer exited (%v):\n%s", err, log)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("pgbouncer on port %d does not answer: %v", port, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// unprivileged is the credential of the postgres user, or nobody.
func unprivileged(t testing.TB) *syscall.Credential {
	for _, name := range []string{"postgres", "nobody"} {
		u, err := user.Lookup(name)
		if err != nil {
			continue
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	}
	t.Skip("running as root with neither a postgres nor a nobody user to run pgbouncer as")
	return nil
}

// freePort returns a loopback port that was free a moment ago.
func freePort(t testing.TB) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// withHostPort is url with its host and port replaced.
func withHostPort(url, host string, port int) string {
	scheme, rest, _ := strings.Cut(url, "://")
	auth, hostAndRest, ok := strings.Cut(rest, "@")
	if !ok {
		auth, hostAndRest = "", rest
	} else {
		auth += "@"
	}
	i := strings.IndexAny(hostAndRest, "/?")
	if i < 0 {
		i = len(hostAndRest)
	}
	return scheme + "://" + auth + net.JoinHostPort(host, strconv.Itoa(port)) + hostAndRest[i:]
}

// sep is the separator that adds a parameter to url.
func sep(url string) string {
	if strings.Contains(url, "?") {
		return "&"
	}
	return "?"
}
