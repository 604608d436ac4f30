// Package postgres is errand's multi-host store: PostgreSQL through pgx v5,
// for workers spread over many machines with one source of truth.
//
// # Time
//
// The database's clock is the only time authority: with [Options.Clock] nil,
// every lease, schedule and expiry decision is taken in SQL against now()
// (the start of errand's own short transactions) or statement_timestamp()
// (inside a caller's transaction, which may have begun long ago). A worker
// whose own clock is off neither steals live leases nor keeps dead ones. Tests
// inject a clock instead; then every statement uses its time. Either way each
// statement takes the time as one argument, coalesce($1::timestamptz, now()),
// NULL when no clock is injected.
//
// # Schema
//
// errand keeps its tables (errand_jobs, errand_audit, errand_effects,
// errand_workers, errand_leaders, errand_migrations) in one schema, "errand"
// by default, so they stay apart from the application's own. [Options.Schema]
// names another; the tables keep their errand_ prefix so that even "public"
// is safe. Open creates the schema and applies the embedded migrations inside
// one transaction holding a transaction-level advisory lock derived from the
// schema name, so processes that start together apply each migration once.
// With [Options.NoMigrate] it creates nothing and only checks, reading, that
// the schema is errand's at this release's version: for tools that must not
// turn a mistyped schema name into a new, empty queue.
//
// # Connecting
//
// Each new connection of a pool [Open] creates gives up after the URL's
// connect_timeout, or [DefaultConnectTimeout], and the error names the
// servers that did not answer.
//
// # Transactions
//
// A Store is an [errandstore.TxStore] of [pgx.Tx]: [Store.JobInsertManyTx] and
// [Store.EffectRecordTx] join the caller's pgx transaction (from any pgx
// connection or pool on the same database), and [Store.InTx] begins one on
// the store's pool. An application on database/sql uses the store's
// [SQLStore] view instead ([Store.SQL]), an errandstore.TxStore of *sql.Tx of the
// pgx driver (github.com/jackc/pgx/v5/stdlib, sql.Open("pgx", url)), so
// that a client of either takes only the transaction type it can join.
//
// # JSON
//
// Args, progress, tags and the error history are jsonb: PostgreSQL keeps
// their value, not their spelling (key order and whitespace may change, and
// a string may not contain \u0000). Numbers are written out in full
// (1e2 as 100); errand's Client writes them so to every store (see
// errand.PlainJSON), so SQLite keeps the same numbers.
//
// # For code in this package
//
// A Store holds pool, the connection pool every method uses, and schema, the
// quoted schema name; s.table("errand_jobs") is a table's qualified name.
// Code that adds capabilities here (LISTEN/NOTIFY) uses those two.
package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
	"github.com/errandhq/errand/internal/sqlbuild"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// DefaultSchema is the schema errand's tables live in unless
// [Options.Schema] names another.
const DefaultSchema = "errand"

// DefaultConnectTimeout bounds each new connection of a pool that [Open]
// creates, from dialling to the server's first answers, when the URL sets no
// connect_timeout (or sets 0): a server that accepts the TCP connection and
// never answers must not hang its caller. connect_timeout=N in the URL (in
// seconds) replaces it.
const DefaultConnectTimeout = 10 * time.Second

// Options configure a Store. The zero value is sensible.
type Options struct {
	// Clock is the store's time authority. Nil means the database's clock
	// (now()), which is what production wants: every host then agrees.
	// Tests inject a clock they can move.
	Clock errandstore.Clock
	// Schema holds errand's tables; it is created if missing (unless
	// NoMigrate). Default "errand". Give a different schema to each errand
	// deployment that shares a database.
	Schema string
	// MaxConns bounds the pool Open creates. Zero means pgxpool's default
	// (the larger of 4 and the number of CPUs), or pool_max_conns in the
	// URL. New ignores it: the caller configured that pool.
	MaxConns int
	// Logger hears what the store does on its own, such as a listener
	// losing and regaining its connection. Nil discards.
	Logger *slog.Logger
	// NoMigrate opens only a schema that errand has already migrated to
	// this release's version, and creates or changes nothing: no schema, no
	// table. A missing schema, or one without errand's tables (a mistyped
	// Schema, say), is refused with an error matching [errandtype.ErrNoSchema];
	// a schema older or newer than this errand's is refused too. For tools
	// that inspect or operate on an existing queue, such as errand's
	// reading commands.
	NoMigrate bool
	// ListenURL is where the store's listening connection goes (LISTEN for
	// wake-ups and cancels). Empty means the pool's own settings. Behind a
	// pooler in transaction mode, where LISTEN does not work, give a direct
	// connection to the server here (see docs/postgresql.md, "Poolers").
	ListenURL string
	// NoVacuum leaves the vacuuming of errand_jobs to autovacuum alone. By
	// default the worker that leads also vacuums it whenever its dead rows
	// pass 10,000 plus 5% of its live ones, which autovacuum, when on,
	// does not let happen (the migration sets it to 2%): claims read every
	// dead entry at the head of the claim index until a vacuum removes it
	// (see docs/postgresql.md, "Operating it"). It needs a role that owns
	// the table or the database; another is told so in the leader's log.
	NoVacuum bool
}

// Store is errand's PostgreSQL store. It implements [errandstore.TxStore] with
// [pgx.Tx]; [Store.SQL] views it with *sql.Tx.
type Store struct {
	pool     db                // every method's connections (see conns.go)
	ownsPool bool              // Close closes pool
	schema   string            // quoted identifier, e.g. "errand"
	name     string            // the schema's name, unquoted
	clock    errandstore.Clock // nil: the database's clock
	logger   *slog.Logger      // never nil
	sweeps   errandstore.ClaimSweeps
	hub      listenHub       // the listening connection; see notify.go
	listenTo *pgx.ConnConfig // Options.ListenURL parsed; nil: the pool's
	noVacuum bool            // Options.NoVacuum

	// own expands the {name} placeholders of SQL that runs in errand's own
	// short transactions; inTx of SQL that runs in a caller's.
	own, inTx *strings.Replacer
	// expanded keeps what sql expanded, up to maxExpanded statements.
	expanded  sync.Map // statement -> its expansion
	nExpanded atomic.Int64
}

// maxExpanded bounds the statements sql keeps expanded. errand's statements
// are a few hundred texts; the bound only guards against a caller that
// would build a new text for each call.
const maxExpanded = 4096

var _ errandstore.TxStore[pgx.Tx] = (*Store)(nil)

// Open connects to the database at url (postgres://user@host:port/db?...),
// applies errand's migrations (unless [Options.NoMigrate]), and returns the
// store. Close closes its pool. Each connection attempt is bounded by the
// URL's connect_timeout, or [DefaultConnectTimeout]; a server that does not
// answer in time is named in the error.
func Open(ctx context.Context, url string, opts *Options) (*Store, error) {
	cfg, err := parseConfig(url, opts)
	if err != nil {
		return nil, fmt.Errorf("open postgres: %w", err)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open postgres: %w", err)
	}
	// The first connection is made here rather than inside the migration,
	// so that a server that does not answer is reported as such.
	conn, err := pool.Acquire(ctx)
	if err != nil {
		pool.Close()
		return nil, connectError(ctx, cfg.ConnConfig, err)
	}
	conn.Release()
	s, err := New(ctx, pool, opts)
	if err != nil {
		pool.Close()
		return nil, err
	}
	s.ownsPool = true
	return s, nil
}

// parseConfig parses url into the configuration of the pool Open creates.
func parseConfig(url string, opts *Options) (*pgxpool.Config, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, err
	}
	if opts != nil && opts.MaxConns > 0 {
		cfg.MaxConns = int32(opts.MaxConns)
	}
	if cfg.ConnConfig.ConnectTimeout <= 0 {
		cfg.ConnConfig.ConnectTimeout = DefaultConnectTimeout
	}
	cfg.PrepareConn = PrepareConn
	return cfg, nil
}

// connectError says which servers did not answer when a first connection
// timed out on its own (not because the caller's ctx ended).
func connectError(ctx context.Context, cfg *pgx.ConnConfig, err error) error {
	var cerr *pgconn.ConnectError
	if ctx.Err() == nil && !pgconn.Timeout(err) && errors.As(err, &cerr) {
		return &openError{err: err, msg: fmt.Sprintf("open postgres: cannot connect to %s (%v); check that the server runs there and that the URL names its database and a role that may log in",
			addresses(cfg), lastCause(err))}
	}
	if !pgconn.Timeout(err) || ctx.Err() != nil {
		return fmt.Errorf("open postgres: %w", err)
	}
	return fmt.Errorf("open postgres: no answer from %s within %s; check the host and port, or raise connect_timeout (seconds) in the URL: %w",
		addresses(cfg), cfg.ConnectTimeout, err)
}

// openError is an error of Open that says what to check in a line of its
// own, and wraps what the driver met.
type openError struct {
	msg string
	err error
}

func (e *openError) Error() string { return e.msg }
func (e *openError) Unwrap() error { return e.err }

// lastCause is the last error under err, where the driver met it: past
// the configuration it repeats, and of the servers or TLS modes it tried,
// the last one's.
func lastCause(err error) error {
	for {
		if many, ok := err.(interface{ Unwrap() []error }); ok {
			if errs := many.Unwrap(); len(errs) > 0 {
				err = errs[len(errs)-1]
				continue
			}
		}
		next := errors.Unwrap(err)
		if next == nil {
			return err
		}
		err = next
	}
}

// addresses lists the servers a configuration tries, as host:port (or the
// socket path).
func addresses(cfg *pgx.ConnConfig) string {
	return strings.Join(hostList(&cfg.Config), ", ")
}

// hostList returns the servers a configuration tries, each once (a URL's
// host appears once for each TLS mode tried on it).
func hostList(cfg *pgconn.Config) []string {
	var list []string
	seen := map[string]bool{}
	add := func(host string, port uint16) {
		addr := net.JoinHostPort(host, strconv.Itoa(int(port)))
		if strings.HasPrefix(host, "/") {
			addr = filepath.Join(host, ".s.PGSQL."+strconv.Itoa(int(port)))
		}
		if !seen[addr] {
			seen[addr] = true
			list = append(list, addr)
		}
	}
	add(cfg.Host, cfg.Port)
	for _, fb := range cfg.Fallbacks {
		add(fb.Host, fb.Port)
	}
	return list
}

// New returns a store on the application's own pool, applying errand's
// migrations (unless [Options.NoMigrate]). Close does not close the pool.
// The pool's own connect timeout bounds its connections; pgxpool bounds
// them at 2 minutes when the pool's configuration sets none.
func New(ctx context.Context, pool *pgxpool.Pool, opts *Options) (*Store, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Schema == "" {
		o.Schema = DefaultSchema
	}
	s := &Store{pool: db{pool}, schema: pgx.Identifier{o.Schema}.Sanitize(), name: o.Schema, clock: o.Clock, logger: o.Logger, noVacuum: o.NoVacuum}
	if s.logger == nil {
		s.logger = slog.New(slog.DiscardHandler)
	}
	s.own = s.replacer("now()")
	s.inTx = s.replacer("statement_timestamp()")
	if o.ListenURL != "" {
		cfg, err := pgx.ParseConfig(o.ListenURL)
		if err != nil {
			return nil, fmt.Errorf("open postgres: ListenURL: %w; give a postgres:// URL of the server itself, not of the pooler", err)
		}
		if cfg.ConnectTimeout <= 0 {
			cfg.ConnectTimeout = DefaultConnectTimeout
		}
		s.listenTo = cfg
	}
	if o.NoMigrate {
		if err := s.checkSchema(ctx); err != nil {
			return nil, fmt.Errorf("open postgres: %w", poolerHint(err))
		}
		return s, nil
	}
	if err := s.migrate(ctx); err != nil {
		return nil, poolerHint(err)
	}
	return s, nil
}

// replacer expands {jobs} and the other table names, and {now}: the
// injected clock's time when the statement's $1 is not NULL, else dbNow.
func (s *Store) replacer(dbNow string) *strings.Replacer {
	return strings.NewReplacer(
		"{now}", "coalesce($1::timestamptz, "+dbNow+")",
		"{jobs}", s.table("errand_jobs"),
		"{audit}", s.table("errand_audit"),
		"{pauses}", s.table("errand_pauses"),
		"{effects}", s.table("errand_effects"),
		"{steps}", s.table("errand_steps"),
		"{signals}", s.table("errand_signals"),
		"{events}", s.table("errand_events"),
		"{streams}", s.table("errand_streams"),
		"{workers}", s.table("errand_workers"),
		"{leaders}", s.table("errand_leaders"),
		"{fair_turns}", s.table("errand_fair_turns"),
		"{dead_hook_cursors}", s.table("errand_dead_hook_cursors"),
		"{migrations}", s.table("errand_migrations"),
	)
}

// table returns the qualified name of one of errand's tables.
func (s *Store) table(name string) string { return s.schema + "." + name }

// sql expands a statement that runs in errand's own transaction. It keeps
// each expansion: the claim's and the outcomes' statements are long, and
// expanding them anew cost an allocation of their length each time.
func (s *Store) sql(q string) string {
	if e, ok := s.expanded.Load(q); ok {
		return e.(string)
	}
	e := s.own.Replace(q)
	if s.nExpanded.Add(1) <= maxExpanded {
		s.expanded.Store(q, e)
	}
	return e
}

// InTx implements [errandstore.TxStore]: it begins a transaction on the store's
// pool, at READ COMMITTED as every transaction of the store's own, runs fn
// with it and commits, or rolls back when fn returns an error or panics.
func (s *Store) InTx(ctx context.Context, fn func(ctx context.Context, tx pgx.Tx) error) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error { return fn(ctx, tx) })
}

// Pool returns the store's connection pool, for the application's own
// queries and transactions ([Store.JobInsertManyTx] takes a pgx.Tx begun on
// it).
func (s *Store) Pool() *pgxpool.Pool { return s.pool.Pool }

// Schema returns the name of the schema errand's tables live in.
func (s *Store) Schema() string { return s.name }

// Close closes the pool if Open created it.
func (s *Store) Close() error {
	if s.ownsPool {
		s.pool.Close()
	}
	return nil
}

// paceNow is the time ClaimSweeps paces claims by: the injected clock's,
// or this process's when the database keeps time.
func (s *Store) paceNow() time.Time {
	if s.clock == nil {
		return time.Now()
	}
	return s.clock.Now()
}

// nowArg is the $1 of every statement: the injected clock's time at the
// store's precision, or nil for the database's clock. Read it once per
// operation so that every statement of a transaction agrees.
func (s *Store) nowArg() any {
	if s.clock == nil {
		return nil
	}
	return micro(s.clock.Now())
}

// Now implements [errandstore.Store]: the database's now(), or the injected
// clock's time.
func (s *Store) Now(ctx context.Context) (time.Time, error) {
	if s.clock != nil {
		return s.clock.Now().UTC(), nil
	}
	var t time.Time
	if err := s.pool.QueryRow(ctx, `SELECT now()`).Scan(&t); err != nil {
		return time.Time{}, fmt.Errorf("now: %w", err)
	}
	return t.UTC(), nil
}

// micro truncates t to the microseconds PostgreSQL keeps, in UTC.
func micro(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }

// dialect renders the SQL this store builds as SQLite's does: parameters
// $N, the tables as {name} for the statement's expansion to name in the
// store's schema.
var dialect = sqlbuild.Dialect{
	Mark:  "$",
	Table: func(name string) string { return "{" + name + "}" },
	Time:  func(t time.Time) any { return micro(t) },
}

// us is d in whole microseconds, the unit of durations in SQL.
func us(d time.Duration) int64 { return d.Microseconds() }

// querier is what the statements that may run in a caller's transaction
// need, so that they are written once for pgx and database/sql.
type querier interface {
	exec(ctx context.Context, sql string, args ...any) (int64, error)
	query(ctx context.Context, sql string, args ...any) (rows, error)
}

type rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
	Close()
}

// pgxQuerier adapts a pgx.Tx (or the pool).
type pgxQuerier struct {
	db interface {
		Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
		Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	}
}

func (q pgxQuerier) exec(ctx context.Context, sql string, args ...any) (int64, error) {
	tag, err := q.db.Exec(ctx, sql, args...)
	return tag.RowsAffected(), err
}

func (q pgxQuerier) query(ctx context.Context, sql string, args ...any) (rows, error) {
	return q.db.Query(ctx, sql, args...)
}

// sqlQuerier adapts a *sql.Tx of the pgx stdlib driver.
type sqlQuerier struct{ tx *sql.Tx }

func (q sqlQuerier) exec(ctx context.Context, sql string, args ...any) (int64, error) {
	res, err := q.tx.ExecContext(ctx, sql, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

func (q sqlQuerier) query(ctx context.Context, sql string, args ...any) (rows, error) {
	rs, err := q.tx.QueryContext(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	return sqlRows{rs}, nil
}

type sqlRows struct{ *sql.Rows }

func (r sqlRows) Close() { _ = r.Rows.Close() }

// isNoRows reports a QueryRow that found nothing.
func isNoRows(err error) bool { return errors.Is(err, pgx.ErrNoRows) }

// storableOnly returns the values of list that are text every store keeps
// ([errandtype.StorableText]): the others name nothing, and PostgreSQL would
// refuse the query outright where SQLite finds nothing. It is never nil, so
// a filter of nothing but such values still matches nothing rather than
// everything.
func storableOnly(list []string) []string {
	out := make([]string, 0, len(list))
	for _, s := range list {
		if errandtype.StorableText(s) {
			out = append(out, s)
		}
	}
	return out
}

// badValue turns PostgreSQL's refusal of a value (SQLSTATE class 22, data
// exception: a NUL byte in text, invalid UTF-8, a number out of range; and
// class 54, a program limit a value exceeded, such as jsonb's size) into
// an *errandtype.InputError. Such an error is a bug in the value, not an
// outage: callers must not retry it as they would a lost connection. The
// Client checks values before writing, so this is the last line of defence.
func badValue(err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && (strings.HasPrefix(pgErr.Code, "22") || strings.HasPrefix(pgErr.Code, "54")) {
		return &errandtype.InputError{Field: "value", Message: fmt.Sprintf("PostgreSQL refused it: %s (SQLSTATE %s)", pgErr.Message, pgErr.Code)}
	}
	return err
}

var _ errandstore.ParallelWriter = (*Store)(nil)

// WritesInParallel implements [errandstore.ParallelWriter]: PostgreSQL's
// transactions lock rows, not the database.
func (s *Store) WritesInParallel() bool { return true }
