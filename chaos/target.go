package chaos

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/chaos/pgtopology"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
	"github.com/errandhq/errand/postgres"
	"github.com/errandhq/errand/sqlite"
	"github.com/jackc/pgx/v5"
)

// Target is the database under test and the faults it can take. A failover
// topology (a primary and a standby) is another Target.
type Target interface {
	// Name is the store's name in the report: sqlite, postgres.
	Name() string
	// URL is what worker processes get as ERRAND_DB: a path or a URL,
	// through the harness's proxy where there is one.
	URL() string
	// Env is the rest of a worker process's database environment.
	Env() []string
	// Open opens a client of the store, directly, with clock as the
	// store's clock when the store takes one (nil: its own).
	Open(ctx context.Context, clock errandstore.Clock, cfg *errand.Config) (Client, error)
	// Restart restarts the database server; Terminate ends the server
	// side of the harness's connections. Each returns ErrUnsupported when
	// the target cannot, saying why.
	Restart(ctx context.Context) error
	Terminate(ctx context.Context) error
	// Close releases the database (a schema dropped, a cluster stopped).
	Close() error
}

// ErrUnsupported is a fault the target cannot take.
var ErrUnsupported = errors.New("unsupported by this target")

// Client is the part of errand.Client the harness uses, whatever the
// store's transaction type.
type Client interface {
	Enqueue(ctx context.Context, args errand.JobArgs, opts *errand.EnqueueOpts) (*errand.EnqueueResult, error)
	EnqueueBatch(ctx context.Context, params []errand.EnqueueParams, opts *errand.BatchOpts) (*errandstore.BatchInsertResult, error)
	EnqueueWorkflow(ctx context.Context, steps []errand.WorkflowStep, opts *errand.WorkflowOpts) (*errandstore.WorkflowInsertResult, error)
	Get(ctx context.Context, id string) (*errandtype.Job, error)
	List(ctx context.Context, opts *errand.ListOpts) ([]*errandtype.Job, error)
	Audit(ctx context.Context, opts *errand.AuditOpts) ([]errandtype.AuditRecord, error)
	Batch(ctx context.Context, id string) (*errandstore.Batch, error)
	Workflow(ctx context.Context, id string) (*errandtype.Workflow, error)
	Cancel(ctx context.Context, id string, opts *errand.CancelOpts) (*errandtype.Job, error)
	Replay(ctx context.Context, id string, opts *errand.ReplayOpts) (*errandtype.Job, error)
	NewWorker(config *errand.WorkerConfig) (*errand.Worker, error)
	Close() error
}

// closingClient closes its store with the client.
type closingClient struct {
	Client
	closeStore func() error
}

func (c closingClient) Close() error {
	err := c.Client.Close()
	return errors.Join(err, c.closeStore())
}

// openClient opens the store at db (a SQLite path or a postgres:// URL, in
// schema) and a client of it. clock is the store's clock (nil: the store's
// own; PostgreSQL's is the server's).
func openClient(ctx context.Context, db, schema string, clock errandstore.Clock, noMigrate bool, cfg *errand.Config) (Client, error) {
	if strings.HasPrefix(db, "postgres://") || strings.HasPrefix(db, "postgresql://") {
		st, err := postgres.Open(ctx, db, &postgres.Options{Schema: schema, Clock: clock, MaxConns: 8, NoMigrate: noMigrate})
		if err != nil {
			return nil, err
		}
		return clientOf(st, st.Close, cfg)
	}
	st, err := sqlite.Open(ctx, db, &sqlite.Options{Clock: clock, NoMigrate: noMigrate})
	if err != nil {
		return nil, err
	}
	return clientOf(st, st.Close, cfg)
}

func clientOf[TTx any](st errandstore.TxStore[TTx], closeStore func() error, cfg *errand.Config) (Client, error) {
	c, err := errand.NewClient(st, cfg)
	if err != nil {
		closeStore()
		return nil, err
	}
	return closingClient{c, closeStore}, nil
}

// sqliteTarget is a SQLite file that every process opens.
type sqliteTarget struct {
	path string
	// disk is the tmpfs the file lives on, for the full-disk fault; empty
	// when mounting failed.
	disk string
}

func (t *sqliteTarget) Name() string  { return "sqlite" }
func (t *sqliteTarget) URL() string   { return t.path }
func (t *sqliteTarget) Env() []string { return nil }
func (t *sqliteTarget) Open(ctx context.Context, clock errandstore.Clock, cfg *errand.Config) (Client, error) {
	return openClient(ctx, t.path, "", clock, false, cfg)
}
func (t *sqliteTarget) Restart(context.Context) error {
	return fmt.Errorf("restart: %w: SQLite has no server; its processes are killed instead", ErrUnsupported)
}
func (t *sqliteTarget) Terminate(context.Context) error {
	return fmt.Errorf("terminate: %w: SQLite has no server connections", ErrUnsupported)
}
func (t *sqliteTarget) Close() error {
	if t.disk == "" {
		return nil
	}
	// Keep the database beside the run's other files: the tmpfs goes.
	for _, suffix := range []string{"", "-wal"} {
		if b, err := os.ReadFile(t.path + suffix); err == nil {
			os.WriteFile(filepath.Join(filepath.Dir(t.disk), "errand.db"+suffix), b, 0o600)
		}
	}
	return syscall.Unmount(t.disk, syscall.MNT_DETACH)
}

// mountTmpfs mounts a tmpfs of size bytes on dir, for a disk that can fill.
func mountTmpfs(dir string, size int64) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	return syscall.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=%d,mode=0700", size))
}

// postgresTarget is a schema of the harness's own on a PostgreSQL server,
// reached by worker processes through the harness's TCP proxy. Its
// connections carry an application_name of their own, so terminating
// backends hits no one else's. Restart needs a private cluster (topo).
type postgresTarget struct {
	direct  string // the server's URL, with the schema's application_name
	proxied string
	schema  string
	app     string
	proxy   *proxy
	// A private cluster, when the harness started one: restartable.
	topo *pgtopology.Topology
}

func newPostgresTarget(ctx context.Context, base, schema string) (*postgresTarget, error) {
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return nil, fmt.Errorf("postgres URL %q: give postgres://user@host:port/db", base)
	}
	app := "errand-chaos-" + schema
	q := u.Query()
	q.Set("application_name", app)
	u.RawQuery = q.Encode()
	t := &postgresTarget{direct: u.String(), schema: schema, app: app}
	p, err := startProxy(u.Host)
	if err != nil {
		return nil, err
	}
	t.proxy = p
	pu := *u
	pu.Host = p.addr
	t.proxied = pu.String()
	return t, nil
}

func (t *postgresTarget) Name() string  { return "postgres" }
func (t *postgresTarget) URL() string   { return t.proxied }
func (t *postgresTarget) Env() []string { return []string{"ERRAND_SCHEMA=" + t.schema} }
func (t *postgresTarget) Open(ctx context.Context, clock errandstore.Clock, cfg *errand.Config) (Client, error) {
	return openClient(ctx, t.direct, t.schema, clock, false, cfg)
}

func (t *postgresTarget) admin(ctx context.Context, sql string, args ...any) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, strings.Replace(t.direct, "application_name="+url.QueryEscape(t.app), "application_name=errand-chaos-admin", 1))
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, sql, args...)
	return err
}

// Terminate ends every backend of this run's connections (workers, server,
// listeners, the harness's own), and nobody else's.
func (t *postgresTarget) Terminate(ctx context.Context) error {
	return t.admin(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name LIKE $1 AND pid <> pg_backend_pid()`, t.app+"%")
}

func (t *postgresTarget) Restart(ctx context.Context) error {
	if t.topo == nil {
		return fmt.Errorf("restart: %w: the shared server is never restarted; pass -pg-private for a cluster of the run's own", ErrUnsupported)
	}
	return t.topo.RestartPrimary(ctx)
}

func (t *postgresTarget) Close() error {
	t.proxy.close()
	var err error
	if t.topo == nil {
		err = t.admin(context.Background(), `DROP SCHEMA IF EXISTS `+pgx.Identifier{t.schema}.Sanitize()+` CASCADE`)
	} else {
		err = t.topo.Stop(context.Background())
	}
	return err
}
