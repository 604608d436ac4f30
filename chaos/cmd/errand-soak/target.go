package main

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/chaos/pgtopology"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
	"github.com/errandhq/errand/postgres"
	"github.com/errandhq/errand/sqlite"
)

// target is the store under soak: the client the load enqueues through,
// the environment the errand processes open it with, and what the
// sampler reads of it.
type target struct {
	client *errand.Client[*sql.Tx]
	env    []string // ERRAND_DB (and ERRAND_SCHEMA) for the processes
	close  func()

	dbFiles []string // SQLite: the database, its -wal and -shm

	pg     *pgx.Conn            // PostgreSQL: the sampler's own connection
	schema string               // and the run's schema, also the processes' application_name
	keep   bool                 // leave the schema in place
	server string               // PostgreSQL's version and autovacuum setting, for the report
	topo   *pgtopology.Topology // -pg-private: the cluster, stopped at shutdown
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// openTarget opens the store for cfg, in dir for SQLite.
func openTarget(ctx context.Context, cfg *config, dir string) (*target, error) {
	if cfg.store == "sqlite" {
		path := filepath.Join(dir, "soak.db")
		st, err := sqlite.Open(ctx, path, nil)
		if err != nil {
			return nil, fmt.Errorf("open sqlite %s: %w", path, err)
		}
		t := &target{env: []string{"ERRAND_DB=" + path}, dbFiles: []string{path, path + "-wal", path + "-shm"}}
		return t, t.withClient(st, st.Close)
	}
	t := &target{schema: "errand_soak_" + randomHex(4), keep: cfg.dir != ""}
	base := cfg.pgURL
	if cfg.private {
		topo, err := pgtopology.Start(ctx, pgtopology.Single)
		if err != nil {
			return nil, fmt.Errorf("start a private cluster: %w", err)
		}
		t.topo, base = topo, topo.URL
	}
	fail := func(err error) (*target, error) {
		if t.pg != nil {
			t.pg.Close(ctx)
		}
		if t.topo != nil {
			_ = t.topo.Stop(context.WithoutCancel(ctx))
		}
		return nil, err
	}
	procURL, err := withAppName(base, t.schema)
	if err != nil {
		return fail(err)
	}
	ownURL, _ := withAppName(base, t.schema+"-ctl")
	t.env = []string{"ERRAND_DB=" + procURL, "ERRAND_SCHEMA=" + t.schema}
	if t.pg, err = pgx.Connect(ctx, ownURL); err != nil {
		return fail(fmt.Errorf("connect to postgres: %w", err))
	}
	var version, autovacuum string
	if err := t.pg.QueryRow(ctx, "SELECT current_setting('server_version'), current_setting('autovacuum')").Scan(&version, &autovacuum); err != nil {
		return fail(fmt.Errorf("read the server's settings: %w", err))
	}
	t.server = fmt.Sprintf("PostgreSQL %s, autovacuum %s", version, autovacuum)
	if t.topo != nil {
		t.server += ", a private cluster"
	}
	st, err := postgres.Open(ctx, ownURL, &postgres.Options{Schema: t.schema})
	if err != nil {
		return fail(fmt.Errorf("open postgres schema %s: %w", t.schema, err))
	}
	view := st.SQL(nil)
	return t, t.withClient(view, func() error { view.Close(); return st.Close() })
}

func (t *target) withClient(st errandstore.TxStore[*sql.Tx], closeStore func() error) error {
	c, err := errand.NewClient(st, &errand.Config{})
	if err != nil {
		_ = closeStore()
		return err
	}
	t.client = c
	t.close = func() { c.Close(); _ = closeStore() }
	return nil
}

// withAppName sets application_name in a PostgreSQL URL, so that
// pg_stat_activity tells the run's connections apart.
func withAppName(raw, app string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", usagef("-pg-url does not parse (%v): write it as postgres://user@host:5432/db", err)
	}
	q := u.Query()
	q.Set("application_name", app)
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// shutdown closes the store and drops the run's schema unless kept; a
// private cluster is stopped and removed, kept or not.
func (t *target) shutdown(ctx context.Context) error {
	t.close()
	if t.pg == nil {
		return nil
	}
	defer t.pg.Close(ctx)
	if t.topo != nil {
		t.pg.Close(ctx)
		return t.topo.Stop(ctx)
	}
	if t.keep {
		return nil
	}
	if _, err := t.pg.Exec(ctx, "DROP SCHEMA "+pgx.Identifier{t.schema}.Sanitize()+" CASCADE"); err != nil {
		return fmt.Errorf("drop schema %s: %w", t.schema, err)
	}
	return nil
}

// conns counts the open database connections of the processes pids:
// PostgreSQL's sessions under the run's application_name (the listener's
// has "/listener" added), or the fds of pids that point at SQLite's files.
func (t *target) conns(ctx context.Context, pids []int) (float64, error) {
	if t.pg != nil {
		var n int
		err := t.pg.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE application_name = $1 OR application_name LIKE $1 || '/%'`, t.schema).Scan(&n)
		return float64(n), err
	}
	n := 0
	for _, pid := range pids {
		fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
		if err != nil {
			return 0, err
		}
		for _, fd := range fds {
			dest, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name()))
			if err == nil && t.isDBFile(dest) {
				n++
			}
		}
	}
	return float64(n), nil
}

func (t *target) isDBFile(path string) bool {
	for _, f := range t.dbFiles {
		if path == f {
			return true
		}
	}
	return false
}

// sizes reads the store's footprint: its tables' sizes on PostgreSQL
// (with the dead tuples no vacuum has reclaimed yet), its files' on SQLite.
func (t *target) sizes(ctx context.Context, rec *recorder) error {
	if t.pg == nil {
		for _, f := range t.dbFiles[:2] {
			var size int64
			if fi, err := os.Stat(f); err == nil {
				size = fi.Size()
			}
			rec.add(fileLabel(f), "bytes", ruleBounded, float64(size))
		}
		return nil
	}
	for _, table := range []string{"errand_jobs", "errand_audit"} {
		var size, dead int64
		err := t.pg.QueryRow(ctx, `SELECT pg_total_relation_size(c.oid), coalesce(s.n_dead_tup, 0)
			FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
			LEFT JOIN pg_stat_user_tables s ON s.relid = c.oid
			WHERE n.nspname = $1 AND c.relname = $2`, t.schema, table).Scan(&size, &dead)
		if err != nil {
			return fmt.Errorf("size of %s: %w", table, err)
		}
		rec.add(table+"_bytes", "bytes", ruleBounded, float64(size))
		rec.add(table+"_dead_tuples", "rows", ruleInfo, float64(dead))
	}
	return nil
}

// fileLabel names a SQLite file's series: db_file or wal_file.
func fileLabel(path string) string {
	if strings.HasSuffix(path, "-wal") {
		return "wal_file_bytes"
	}
	return "db_file_bytes"
}

// rows counts the jobs by state through the client: finished ones are
// what retention must bound, waiting ones what the workers must keep up
// with.
func (t *target) rows(ctx context.Context, rec *recorder, slack float64) error {
	stats, err := t.client.Stats(ctx)
	if err != nil {
		return err
	}
	counts := map[errandtype.JobState]int{}
	for _, q := range stats {
		for s, n := range q.Counts {
			counts[s] += n
		}
	}
	rec.add("rows_succeeded", "rows", ruleBounded, float64(counts[errandtype.StateSucceeded]))
	rec.add("rows_dead", "rows", ruleBounded, float64(counts[errandtype.StateDead]))
	waiting := counts[errandtype.StateQueued] + counts[errandtype.StateRetrying] + counts[errandtype.StateRunning]
	rec.addSlack("rows_waiting", "rows", ruleBacklog, float64(waiting), slack)
	return nil
}
