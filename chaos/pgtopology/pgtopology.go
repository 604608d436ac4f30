// Package pgtopology runs private PostgreSQL servers for tests and the
// fault harness, through chaos/topology/pg-standby.sh, so that one place
// knows how they are made, restarted and failed over: a primary with a
// streaming standby, or a primary alone.
package pgtopology

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/errandhq/errand/chaos/topology"
)

// Mode says whether the primary's commits wait for the standby.
type Mode string

const (
	// Sync makes every commit wait until the standby has it
	// (synchronous_standby_names, synchronous_commit=on): a promoted
	// standby has every commit the primary acknowledged.
	Sync Mode = "sync"
	// Async streams commits after acknowledging them: the last ones
	// acknowledged may be missing from a promoted standby.
	Async Mode = "async"
	// Single is a primary without a standby: a server of the caller's own
	// to restart, at PostgreSQL's default settings (autovacuum on).
	Single Mode = "single"
)

// Bin is the directory of the PostgreSQL binaries the script runs; the
// environment's PG_BIN replaces it.
const Bin = "/usr/lib/postgresql/15/bin"

// Topology is a running primary and standby (none for Single) on free
// ports of 127.0.0.1, in a directory of their own.
type Topology struct {
	Dir         string
	Mode        Mode
	PrimaryPort int
	StandbyPort int // 0 for Single
	// URL names both servers and asks for the one that accepts writes
	// (target_session_attrs=read-write): the primary, and after a failover
	// the promoted standby.
	URL        string
	PrimaryURL string
	StandbyURL string // empty for Single

	script string
}

// binDir is where the script finds the binaries.
func binDir() string {
	if d := os.Getenv("PG_BIN"); d != "" {
		return d
	}
	return Bin
}

// Available reports why a topology cannot be made here, or nil: the
// PostgreSQL binaries or bash are missing, or, as root, there is no
// postgres user to run the servers as (initdb refuses root).
func Available() error {
	for _, name := range []string{"initdb", "pg_ctl", "pg_basebackup", "postgres", "psql"} {
		if _, err := os.Stat(filepath.Join(binDir(), name)); err != nil {
			return fmt.Errorf("no %s in %s: install postgresql-15 (Debian), or set PG_BIN to its bin directory", name, binDir())
		}
	}
	if _, err := exec.LookPath("bash"); err != nil {
		return errors.New("no bash on PATH to run pg-standby.sh")
	}
	if os.Geteuid() == 0 {
		if _, err := user.Lookup("postgres"); err != nil {
			return errors.New("running as root, and there is no postgres user to run the servers as: create it, or run as another user")
		}
	}
	return nil
}

// Start makes a primary and a standby streaming from it (only the primary
// for Single), in a new directory under the system's temporary directory,
// and returns once the standby streams (and, for Sync, is synchronous).
// Stop removes them.
func Start(ctx context.Context, mode Mode) (*Topology, error) {
	if mode != Sync && mode != Async && mode != Single {
		return nil, fmt.Errorf("pgtopology: mode %q: give Sync, Async or Single", mode)
	}
	if err := Available(); err != nil {
		return nil, err
	}
	// Under os.TempDir, whose parents the servers' user can pass through.
	root, err := os.MkdirTemp("", "errand-pg-standby-")
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(root, 0o755); err != nil {
		os.RemoveAll(root)
		return nil, err
	}
	script := filepath.Join(root, "pg-standby.sh")
	if err := os.WriteFile(script, topology.PGStandby, 0o755); err != nil {
		os.RemoveAll(root)
		return nil, err
	}
	t := &Topology{Dir: filepath.Join(root, "cluster"), Mode: mode, script: script}
	out, err := t.run(ctx, "start", t.Dir, "--"+string(mode))
	if err != nil {
		t.Stop(context.WithoutCancel(ctx))
		return nil, err
	}
	if err := t.parse(out); err != nil {
		t.Stop(context.WithoutCancel(ctx))
		return nil, err
	}
	return t, nil
}

// KillPrimary sends SIGKILL to the primary's postmaster and returns once it
// is gone; its backends exit when they notice.
func (t *Topology) KillPrimary(ctx context.Context) error {
	_, err := t.run(ctx, "kill-primary", t.Dir)
	return err
}

// RestartPrimary restarts the primary at once (pg_ctl restart -m
// immediate: a crash and its recovery) and returns once it accepts
// connections again.
func (t *Topology) RestartPrimary(ctx context.Context) error {
	_, err := t.run(ctx, "restart-primary", t.Dir)
	return err
}

// Promote makes the standby the primary (pg_ctl promote) and returns once
// it accepts writes.
func (t *Topology) Promote(ctx context.Context) error {
	_, err := t.run(ctx, "promote", t.Dir)
	return err
}

// Status reports the script's status lines: the ports, the URLs, and
// PRIMARY_ROLE and STANDBY_ROLE (primary, standby, down or unreachable).
func (t *Topology) Status(ctx context.Context) (map[string]string, error) {
	out, err := t.run(ctx, "status", t.Dir)
	if err != nil {
		return nil, err
	}
	return keyValues(out), nil
}

// Stop stops both servers and removes their directory.
func (t *Topology) Stop(ctx context.Context) error {
	var err error
	if _, statErr := os.Stat(filepath.Join(t.Dir, "topology.env")); statErr == nil {
		_, err = t.run(ctx, "stop", t.Dir)
	}
	return errors.Join(err, os.RemoveAll(filepath.Dir(t.Dir)))
}

// Log returns the end of a server's log ("primary" or "standby"), for a
// failing test's message.
func (t *Topology) Log(node string) string {
	b, _ := os.ReadFile(filepath.Join(t.Dir, node+".log"))
	if len(b) > 4096 {
		b = b[len(b)-4096:]
	}
	return string(b)
}

func (t *Topology) run(ctx context.Context, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "bash", append([]string{t.script}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("pg-standby.sh %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

func (t *Topology) parse(out []byte) error {
	kv := keyValues(out)
	var err error
	if t.PrimaryPort, err = strconv.Atoi(kv["PRIMARY_PORT"]); err != nil {
		return fmt.Errorf("pg-standby.sh start printed no PRIMARY_PORT: %q", out)
	}
	t.URL, t.PrimaryURL, t.StandbyURL = kv["URL"], kv["PRIMARY_URL"], kv["STANDBY_URL"]
	if t.URL == "" || t.PrimaryURL == "" {
		return fmt.Errorf("pg-standby.sh start printed no URLs: %q", out)
	}
	if t.Mode == Single {
		return nil
	}
	if t.StandbyPort, err = strconv.Atoi(kv["STANDBY_PORT"]); err != nil {
		return fmt.Errorf("pg-standby.sh start printed no STANDBY_PORT: %q", out)
	}
	if t.StandbyURL == "" {
		return fmt.Errorf("pg-standby.sh start printed no STANDBY_URL: %q", out)
	}
	return nil
}

// keyValues reads KEY=VALUE lines.
func keyValues(out []byte) map[string]string {
	kv := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), "="); ok {
			kv[k] = v
		}
	}
	return kv
}
