//go:build unix

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"

	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/postgres"
	"github.com/errandhq/errand/postgres/pgtest"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The PostgreSQL side of the CLI's tests. Every test gets a schema of its
// own (errand_t_<random>), dropped when it ends, so tests and packages run
// in parallel on one database. The binary reads the schema from
// ERRAND_SCHEMA, so the helpers remember which schema each --db value of a
// test means and put it in the environment of every errand process they
// start (bin, startWorker, and cli, which runs the binary for PostgreSQL).

// pgSchemas maps each PostgreSQL --db value a test made to its schema.
var pgSchemas sync.Map

// pgDB returns a --db value for a fresh schema of the test's own, and the
// schema. The URL names the schema as its application_name, which keeps
// the --db values of parallel tests apart and shows in pg_stat_activity
// whose connections are whose.
func pgDB(t *testing.T) (db, schema string) {
	t.Helper()
	base := pgtest.URL(t)
	schema = pgtest.Schema(t, base)
	return pgAlias(t, base, schema, schema), schema
}

// pgAlias returns db with application_name set to app, meaning schema, so
// that one process's connections can be told from the others'.
func pgAlias(t *testing.T, db, schema, app string) string {
	t.Helper()
	u, err := url.Parse(db)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("application_name", app)
	u.RawQuery = q.Encode()
	alias := u.String()
	pgSchemas.Store(alias, schema)
	return alias
}

// dbEnv returns the environment an errand process with args needs for its
// --db: ERRAND_SCHEMA for a PostgreSQL test database, nothing otherwise.
func dbEnv(args []string) []string {
	for i, a := range args {
		var db string
		switch {
		case (a == "--db" || a == "-db") && i+1 < len(args):
			db = args[i+1]
		case strings.HasPrefix(a, "--db="):
			db = strings.TrimPrefix(a, "--db=")
		default:
			continue
		}
		if schema, ok := pgSchemas.Load(db); ok {
			return []string{"ERRAND_SCHEMA=" + schema.(string)}
		}
	}
	return nil
}

// pgSchemaOf returns the schema of a PostgreSQL test database.
func pgSchemaOf(db string) (string, bool) {
	schema, ok := pgSchemas.Load(db)
	if !ok {
		return "", false
	}
	return schema.(string), true
}

// openPGStore opens the store of a PostgreSQL test database with the
// library, as the binary does with ERRAND_SCHEMA set.
func openPGStore(t *testing.T, db string) *postgres.Store {
	t.Helper()
	schema, ok := pgSchemaOf(db)
	if !ok {
		t.Fatalf("%s is not a PostgreSQL test database", db)
	}
	st, err := postgres.Open(context.Background(), db, &postgres.Options{Schema: schema, MaxConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// pgPool opens a plain pool on the test database, for the SQL a test checks
// or breaks things with.
func pgPool(t *testing.T) *pgxpool.Pool {
	t.Helper()
	p, err := pgxpool.New(context.Background(), pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// jobsTable is the qualified name of a test schema's jobs table.
func jobsTable(schema string) string { return pgx.Identifier{schema, "errand_jobs"}.Sanitize() }

// stateCounts counts a schema's jobs by state.
func stateCounts(t *testing.T, p *pgxpool.Pool, schema string) map[string]int {
	t.Helper()
	rows, err := p.Query(context.Background(), `SELECT state, count(*) FROM `+jobsTable(schema)+` GROUP BY state`)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]int{}
	var state string
	var n int
	if _, err := pgx.ForEachRow(rows, []any{&state, &n}, func() error { m[state] = n; return nil }); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestPostgresBurnDown: four worker processes, each on its own connections,
// started together on 2,000 jobs enqueued beforehand. Every job succeeds
// once, on attempt 1: no job ran twice, so none was claimed twice under a
// live lease. The jobs' command appends "id attempt token" to a file of its
// worker's, so a second run of any job would show as a repeated id.
func TestPostgresBurnDown(t *testing.T) {
	t.Parallel()
	db, schema := pgDB(t)
	const n = 2000
	ids := enqueueN(t, db, "k", "default", n, errand.EnqueueOpts{})
	dir := t.TempDir()
	s := script(t, `echo "$ERRAND_JOB_ID $ERRAND_ATTEMPT $ERRAND_LEASE_TOKEN" >> "$1"`)
	var ws []*workerProc
	var files []string
	for i := range 4 {
		f := filepath.Join(dir, fmt.Sprintf("w%d", i))
		files = append(files, f)
		ws = append(ws, startWorker(t, db, "--queue", "default=8", "--lease", "5s", "--poll", "200ms",
			"--exec", "k="+s+" "+f))
	}
	for _, w := range ws {
		w.ready()
	}
	p := pgPool(t)
	start := time.Now()
	waitUntil(t, 3*time.Minute, "every job to succeed", func() bool { return stateCounts(t, p, schema)["succeeded"] == n })
	t.Logf("%d jobs in %s by 4 workers", n, time.Since(start).Round(time.Millisecond))

	seen := map[string]string{} // id -> the file that ran it
	tokens := map[string]bool{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatalf("worker file %s: %v (every worker should have run some jobs)", f, err)
		}
		count := 0
		for line := range strings.Lines(string(b)) {
			fs := strings.Fields(line)
			if len(fs) != 3 {
				t.Errorf("%s: malformed line %q", f, line)
				continue
			}
			count++
			id, attempt, token := fs[0], fs[1], fs[2]
			if prev, dup := seen[id]; dup {
				t.Errorf("job %s ran twice: in %s and in %s", id, prev, f)
			}
			seen[id] = f
			if attempt != "1" {
				t.Errorf("job %s ran with attempt %s, want 1", id, attempt)
			}
			if tokens[token] {
				t.Errorf("lease token %s handed out twice", token)
			}
			tokens[token] = true
		}
		t.Logf("%s ran %d jobs", filepath.Base(f), count)
	}
	if len(seen) != n {
		t.Errorf("%d distinct jobs ran, want %d", len(seen), n)
	}
	for _, id := range ids {
		if _, ok := seen[id]; !ok {
			t.Errorf("job %s never ran", id)
		}
	}
	var wrong int
	if err := p.QueryRow(context.Background(), `SELECT count(*) FROM `+jobsTable(schema)+
		` WHERE state <> 'succeeded' OR attempt <> 1 OR errors <> '[]'::jsonb`).Scan(&wrong); err != nil {
		t.Fatal(err)
	}
	if wrong != 0 {
		t.Errorf("%d jobs are not succeeded on attempt 1 with no history", wrong)
	}
	for _, w := range ws {
		w.signal(syscall.SIGTERM)
	}
	for i, w := range ws {
		if code := w.wait(20 * time.Second); code != 0 {
			t.Errorf("worker %d exited %d after SIGTERM, want 0", i, code)
		}
	}
}

// clientPorts returns the local TCP ports of the sockets process pid holds
// open: its database connections' client_port in pg_stat_activity. This
// finds every connection of the process, its pool's and its listener's
// alike, whatever application_name each sets.
func clientPorts(t *testing.T, pid int) []int {
	t.Helper()
	inodes := map[string]bool{}
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Skipf("no /proc to find a process's sockets: %v", err)
	}
	for _, fd := range fds {
		link, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name()))
		if inode, ok := strings.CutPrefix(link, "socket:["); err == nil && ok {
			inodes[strings.TrimSuffix(inode, "]")] = true
		}
	}
	var ports []int
	for _, table := range []string{"tcp", "tcp6"} {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/%s", pid, table))
		if err != nil {
			continue
		}
		for line := range strings.Lines(string(b)) {
			f := strings.Fields(line)
			if len(f) < 10 || !inodes[f[9]] {
				continue
			}
			_, port, _ := strings.Cut(f[1], ":")
			if p, err := strconv.ParseInt(port, 16, 32); err == nil {
				ports = append(ports, int(p))
			}
		}
	}
	return ports
}

// backendQueries returns the last statement of each backend serving
// process pid, by backend pid.
func backendQueries(t *testing.T, p *pgxpool.Pool, pid int) map[int]string {
	t.Helper()
	rows, err := p.Query(context.Background(), `SELECT pid, query FROM pg_stat_activity
		WHERE client_port = ANY($1) AND pid <> pg_backend_pid()`, clientPorts(t, pid))
	if err != nil {
		t.Fatal(err)
	}
	m := map[int]string{}
	var bpid int
	var query string
	if _, err := pgx.ForEachRow(rows, []any{&bpid, &query}, func() error { m[bpid] = query; return nil }); err != nil {
		t.Fatal(err)
	}
	return m
}

// terminateBackends ends every database connection of process pid, as an
// operator or a failover would, and returns how many it ended.
func terminateBackends(t *testing.T, p *pgxpool.Pool, pid int) int {
	t.Helper()
	var n int
	if err := p.QueryRow(context.Background(), `SELECT count(*) FILTER (WHERE pg_terminate_backend(pid))
		FROM pg_stat_activity WHERE client_port = ANY($1) AND pid <> pg_backend_pid()`, clientPorts(t, pid)).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// listening counts the backends of process pid whose last statement was a
// LISTEN: a listener idles there between notifications.
func listening(t *testing.T, p *pgxpool.Pool, pid int) int {
	t.Helper()
	n := 0
	for _, q := range backendQueries(t, p, pid) {
		if strings.HasPrefix(strings.ToUpper(strings.TrimSpace(q)), "LISTEN") {
			n++
		}
	}
	return n
}

// TestPostgresConnectionLoss: every connection of a running worker is
// terminated twice while it works through 200 jobs. The worker reconnects
// by itself (its pool dials afresh), keeps running, and loses no job: all
// 200 succeed, none is left running. A job whose outcome write died with its
// connection runs again once its lease expires: at least once, not exactly
// once.
func TestPostgresConnectionLoss(t *testing.T) {
	t.Parallel()
	db, schema := pgDB(t)
	app := "errand-w1-" + strings.TrimPrefix(schema, "errand_t_")
	w1 := pgAlias(t, db, schema, app)
	const n = 200
	enqueueN(t, db, "k", "default", n, errand.EnqueueOpts{BackoffBase: 100 * time.Millisecond, BackoffMax: 200 * time.Millisecond})
	s := script(t, `sleep 0.05`)
	w := startWorker(t, w1, "--queue", "default=4", "--lease", "2s", "--poll", "200ms", "--heartbeat", "200ms",
		"--leader-ttl", "1s", "--exec", "k="+s).ready()
	p := pgPool(t)
	if _, notifies := any((*postgres.Store)(nil)).(errandstore.Notifier); notifies {
		waitUntil(t, 10*time.Second, "the worker to LISTEN", func() bool { return listening(t, p, w.pid()) > 0 })
	}
	for _, after := range []int{40, 120} {
		waitUntil(t, time.Minute, fmt.Sprintf("%d jobs to succeed", after), func() bool { return stateCounts(t, p, schema)["succeeded"] >= after })
		if k := terminateBackends(t, p, w.pid()); k == 0 {
			t.Fatalf("the worker has no connection to terminate")
		} else {
			t.Logf("terminated %d connections of the worker after %d jobs", k, after)
		}
	}
	waitUntil(t, 2*time.Minute, "every job to succeed", func() bool { return stateCounts(t, p, schema)["succeeded"] == n })
	if _, notifies := any((*postgres.Store)(nil)).(errandstore.Notifier); notifies {
		// Its listener's connection was among those terminated; it
		// listens again on a new one.
		waitUntil(t, 15*time.Second, "the worker's listener to LISTEN again", func() bool { return listening(t, p, w.pid()) > 0 })
	}
	if !w.running() {
		t.Fatalf("the worker exited: %v\n%s", w.state, w.stderr.String())
	}
	if c := stateCounts(t, p, schema); c["succeeded"] != n || len(c) != 1 {
		t.Errorf("states %v, want all %d succeeded", c, n)
	}
	// It kept its registry row and can still be asked to drain.
	w.signal(syscall.SIGTERM)
	if code := w.wait(20 * time.Second); code != 0 {
		t.Errorf("worker exited %d after SIGTERM, want 0", code)
	}
	w.waitLog(time.Second, `msg="worker stopped"`)
}

// TestPostgresConcurrentMigrate: four errand migrate processes started
// together on a fresh schema all succeed and report the same version, and
// each migration is recorded once.
func TestPostgresConcurrentMigrate(t *testing.T) {
	t.Parallel()
	db, schema := pgDB(t)
	type run struct {
		cmd    *exec.Cmd
		stdout bytes.Buffer
		stderr bytes.Buffer
	}
	runs := make([]*run, 4)
	for i := range runs {
		r := &run{cmd: exec.Command(errandBin, "migrate", "--db", db)}
		r.cmd.Env = append(append(os.Environ(), "ERRAND_DB="), dbEnv(r.cmd.Args)...)
		r.cmd.Stdout, r.cmd.Stderr = &r.stdout, &r.stderr
		runs[i] = r
	}
	for _, r := range runs {
		if err := r.cmd.Start(); err != nil {
			t.Fatal(err)
		}
	}
	for i, r := range runs {
		if err := r.cmd.Wait(); err != nil {
			t.Errorf("migrate %d: %v\nstderr:\n%s", i, err, r.stderr.String())
		}
	}
	out := runs[0].stdout.String()
	var version int
	if _, err := fmt.Sscanf(out, "schema version %d\n", &version); err != nil || version < 3 {
		t.Fatalf("migrate printed %q, want schema version N with N at least 3", out)
	}
	for i, r := range runs[1:] {
		if r.stdout.String() != out {
			t.Errorf("migrate %d printed %q, migrate 0 %q", i+1, r.stdout.String(), out)
		}
	}
	rows, err := pgPool(t).Query(context.Background(), `SELECT version, count(*) FROM `+
		pgx.Identifier{schema, "errand_migrations"}.Sanitize()+` GROUP BY version ORDER BY version`)
	if err != nil {
		t.Fatal(err)
	}
	var v, c int
	var versions []int
	if _, err := pgx.ForEachRow(rows, []any{&v, &c}, func() error {
		if c != 1 {
			t.Errorf("migration %d recorded %d times", v, c)
		}
		versions = append(versions, v)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// The numbers may leave gaps; every migration file is recorded once.
	files, err := filepath.Glob(filepath.Join("..", "..", "postgres", "migrations", "*.sql"))
	if err != nil {
		t.Fatal(err)
	}
	if len(versions) != len(files) || versions[len(versions)-1] != version {
		t.Errorf("recorded migrations %v, want the %d migration files up to %d", versions, len(files), version)
	}
}

// leaderPIDs returns the pids errand workers --json marks as leading.
func leaderPIDs(t *testing.T, db string) []int {
	t.Helper()
	r := ok(t, bin(t, "workers", "--db", db, "--json"))
	var rows []struct {
		PID    int  `json:"pid"`
		Leader bool `json:"leader"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &rows); err != nil {
		t.Fatalf("workers --json: %v\n%s", err, r.stdout)
	}
	var pids []int
	for _, w := range rows {
		if w.Leader {
			pids = append(pids, w.PID)
		}
	}
	return pids
}

// TestPostgresLeaderKilled: of two workers exactly one leads; SIGKILLed, it
// cannot resign, and the other takes over once the lease (3s: long enough
// that a renewal delayed by a busy machine does not move it) expires on the
// database's clock.
func TestPostgresLeaderKilled(t *testing.T) {
	t.Parallel()
	db, _ := pgDB(t)
	s := script(t, "exit 0")
	a := startWorker(t, db, "--leader-ttl", "3s", "--heartbeat", "200ms", "--exec", "k="+s).ready()
	b := startWorker(t, db, "--leader-ttl", "3s", "--heartbeat", "200ms", "--exec", "k="+s).ready()
	var first int
	waitUntil(t, 15*time.Second, "a leader", func() bool {
		pids := leaderPIDs(t, db)
		if len(pids) > 1 {
			t.Fatalf("two leaders: %v", pids)
		}
		if len(pids) == 1 {
			first = pids[0]
		}
		return first != 0
	})
	leader, other := a, b
	if first == b.pid() {
		leader, other = b, a
	} else if first != a.pid() {
		t.Fatalf("leader pid %d is neither worker (%d, %d)", first, a.pid(), b.pid())
	}
	// Still exactly one, a few renewals later.
	time.Sleep(2500 * time.Millisecond)
	if pids := leaderPIDs(t, db); len(pids) != 1 || pids[0] != leader.pid() {
		t.Fatalf("leaders %v, want only %d", pids, leader.pid())
	}
	leader.signal(syscall.SIGKILL)
	leader.wait(10 * time.Second)
	killed := time.Now()
	waitUntil(t, 15*time.Second, "the other worker to lead", func() bool {
		pids := leaderPIDs(t, db)
		return len(pids) == 1 && pids[0] == other.pid()
	})
	t.Logf("the other worker led %s after the leader was killed", time.Since(killed).Round(time.Millisecond))
	other.waitLog(10*time.Second, `msg=leading`)
	other.signal(syscall.SIGTERM)
	if code := other.wait(20 * time.Second); code != 0 {
		t.Errorf("worker exited %d, want 0", code)
	}
}

// TestPostgresPollOnly: a worker with --poll-only never issues LISTEN (so
// it works where a pooler in transaction mode makes LISTEN unavailable) and
// still picks up a job another process enqueues, at its next poll.
func TestPostgresPollOnly(t *testing.T) {
	t.Parallel()
	db, schema := pgDB(t)
	app := "errand-poll-" + strings.TrimPrefix(schema, "errand_t_")
	wdb := pgAlias(t, db, schema, app)
	w := startWorker(t, wdb, "--poll-only", "--poll", "200ms", "--exec", "k="+script(t, "exit 0")).ready()
	if l := w.waitLog(time.Second, `msg="worker started"`); !strings.Contains(l, "poll_only=true") {
		t.Errorf("startup line lacks poll_only=true: %s", l)
	}
	time.Sleep(500 * time.Millisecond) // idle through a few polls
	id := strings.TrimSpace(ok(t, bin(t, "enqueue", "k", "--db", db)).stdout)
	waitUntil(t, 10*time.Second, "the job to succeed", func() bool { return inspect(t, db, id).State == "succeeded" })
	w.waitLog(10*time.Second, `msg="job succeeded"`, "job_id="+id)
	if n := listening(t, pgPool(t), w.pid()); n != 0 {
		t.Errorf("a --poll-only worker has %d connections that issued LISTEN", n)
	}
	w.signal(syscall.SIGTERM)
	if code := w.wait(20 * time.Second); code != 0 {
		t.Errorf("worker exited %d, want 0", code)
	}
}

// TestPostgresNotifyWakes: without --poll-only, a worker that polls only
// hourly starts a job enqueued by another process within seconds: the
// enqueuing process's NOTIFY wakes it.
func TestPostgresNotifyWakes(t *testing.T) {
	t.Parallel()
	db, schema := pgDB(t)
	if _, ok := any((*postgres.Store)(nil)).(errandstore.Notifier); !ok {
		t.Skip("postgres.Store does not implement errandstore.Notifier yet (postgres/notify.go)")
	}
	app := "errand-listen-" + strings.TrimPrefix(schema, "errand_t_")
	wdb := pgAlias(t, db, schema, app)
	w := startWorker(t, wdb, "--poll", "1h", "--exec", "k="+script(t, "exit 0")).ready()
	p := pgPool(t)
	// Listening, and its first (idle) claim is behind it: from here on only
	// a notification can wake it within the hour.
	waitUntil(t, 10*time.Second, "the worker to LISTEN", func() bool { return listening(t, p, w.pid()) > 0 })
	time.Sleep(500 * time.Millisecond)
	enqueued := time.Now()
	id := strings.TrimSpace(ok(t, bin(t, "enqueue", "k", "--db", db)).stdout)
	waitUntil(t, 10*time.Second, "the job to succeed", func() bool { return inspect(t, db, id).State == "succeeded" })
	t.Logf("a cross-process enqueue succeeded %s later", time.Since(enqueued).Round(time.Millisecond))
	w.signal(syscall.SIGTERM)
	if code := w.wait(20 * time.Second); code != 0 {
		t.Errorf("worker exited %d, want 0", code)
	}
}
