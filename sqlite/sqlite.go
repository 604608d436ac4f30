// Package sqlite is errand's embedded store: one SQLite file, no server, no
// setup. It suits one machine; several worker processes on that machine may
// share the file.
//
// The application opens its database through [Open] and uses [Store.DB] for
// its own transactions too, so that a job is enqueued in the same transaction
// as the business change ([errand.Client.EnqueueTx]) and one writer serves
// both. SQLite allows one writer at a time; errand's handle keeps a single
// writer connection, runs every transaction as BEGIN IMMEDIATE (a deferred
// read-then-write transaction would fail with SQLITE_BUSY instead of waiting),
// and uses WAL so readers never wait for the writer. Reads that errand makes
// for operators (get, list, stats) use a separate read-only pool.
//
// Because the writer is a single connection, do not call errand methods that
// write (Enqueue, claims, replays) while holding a transaction from DB()
// in the same goroutine: they would wait for the connection the transaction
// holds. Use the Tx forms inside a transaction.
//
// The driver is github.com/ncruces/go-sqlite3, SQLite translated to pure Go,
// so building errand needs no C compiler. It was chosen over
// modernc.org/sqlite by measurement: the two tie on commit-bound work, but
// when two worker processes write one file at once, ncruces's busy handler
// (short randomized waits) keeps both moving, while SQLite's default handler
// (which modernc uses) backs off to 100ms sleeps and starved one process for
// seconds at a time, up to SQLITE_BUSY errors. See docs/sqlite.md.
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
	"github.com/errandhq/errand/internal/sqlbuild"
	"github.com/errandhq/errand/internal/sqltx"
	"github.com/ncruces/go-sqlite3"
	"github.com/ncruces/go-sqlite3/driver" // also registers the "sqlite3" driver
)

// Options configure a Store. The zero value is durable and sensible.
type Options struct {
	// Clock is the store's time authority. Nil means the process clock.
	// Tests inject a clock they can move.
	Clock errandstore.Clock
	// Synchronous is SQLite's synchronous setting: "FULL" (the default)
	// survives power loss; "NORMAL" is several times faster per commit and
	// may lose the last transactions on power loss (never on a process
	// crash).
	Synchronous string
	// BusyTimeout is how long a writer waits for another process's write
	// transaction. Default 10s.
	BusyTimeout time.Duration
	// ReadConns bounds the read-only pool. Default 4.
	ReadConns int
	// MustExist makes Open fail when the file does not exist, instead of
	// creating an empty database: for tools that only inspect one.
	MustExist bool
	// NoMigrate opens only a database that errand has already migrated to
	// this release's schema, and changes nothing in the file on opening: no
	// table is created and no setting (such as the journal mode) is
	// changed. The schema is checked through a read-only connection before
	// anything else touches the file. A missing file, or a SQLite database
	// without errand's tables (another application's, say), is refused with
	// an error matching [errandtype.ErrNoSchema]; a schema older or newer than
	// this errand's is refused too. For tools that inspect or operate on an
	// existing queue, such as errand's reading commands.
	NoMigrate bool
	// Logger hears what the store does on its own, such as giving back a
	// claimed job whose row it could not read. Nil discards it.
	Logger *slog.Logger
	// WakeInterval is how often a listening worker ([Store.ListenQueues])
	// checks whether another connection or process has committed to the
	// database, so that a job enqueued by another process starts within
	// about this long rather than at the worker's next poll. Each check
	// is one PRAGMA data_version on an idle connection, about 15µs of CPU
	// (BenchmarkDataVersion, see docs/sqlite.md); waking that often is what
	// costs, about 4% of a core at 2ms. On Linux the
	// checks run only in the second after a write to the WAL file, which
	// inotify reports, so an idle worker makes almost none (see
	// docs/sqlite.md). Default 2ms. Workers with PollOnly do not check at all.
	WakeInterval time.Duration

	// pollWAL makes ListenQueues check every WakeInterval, as it does where
	// inotify is unavailable, so tests on Linux cover that path too.
	pollWAL bool
	// checkpointPages and forcePages replace walCheckpointPages and
	// walForcePages, so tests reach them with fewer writes; noCheckpointer
	// leaves the checkpointer stopped, so they see the writer's fallback.
	checkpointPages, forcePages int
	noCheckpointer              bool
}

// Store is errand's SQLite store. It implements [errandstore.TxStore] with
// *sql.Tx: transactions on [Store.DB].
type Store struct {
	db     *sql.DB // the single writer; also the application's handle
	read   *sql.DB // read-only pool for operator queries
	clock  errandstore.Clock
	sweeps errandstore.ClaimSweeps // paces the claims' sweeps
	path   string
	opts   Options // with defaults applied
	// busyTimeout bounds every wait for the writer: SQLite's, for another
	// process's lock, and tx's, for the writer connection in this one.
	busyTimeout time.Duration
	// ownChanges counts the rows the store's own transactions (tx) changed
	// through the writer: ListenQueues subtracts it from the writer's total
	// to tell the application's commits on Store.DB from the store's own.
	ownChanges atomic.Int64
	cache      stmtCache // statements prepared on the writer; see stmts.go
	ckpt       *checkpointer
	logger     *slog.Logger // never nil
}

var _ errandstore.TxStore[*sql.Tx] = (*Store)(nil)

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

// Open opens (creating if needed) the SQLite database at path, applies
// errand's migrations, and returns the store. With [Options.NoMigrate] it
// only opens a database errand has already migrated, and writes nothing.
func Open(ctx context.Context, path string, opts *Options) (*Store, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if path == "" || path == ":memory:" || strings.HasPrefix(path, "file:") {
		return nil, fmt.Errorf("open sqlite: %q is not a file path; give a path such as ./errand.db", path)
	}
	if err := o.applyDefaults(); err != nil {
		return nil, fmt.Errorf("open sqlite: %w", err)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("open sqlite: %w", err)
	}
	if err := checkExisting(ctx, path, abs, o); err != nil {
		return nil, fmt.Errorf("open sqlite: %w", err)
	}
	ckpt := newCheckpointer(dsn(abs, o, false), o.checkpointPages, o.forcePages, o.BusyTimeout)
	db, err := driver.Open(dsn(abs, o, false), func(c *sqlite3.Conn) error {
		if err := ckpt.initWriter(c); err != nil {
			return err
		}
		return stablePlans(c)
	})
	if err != nil {
		return nil, fmt.Errorf("open sqlite: %w", err)
	}
	if !o.noCheckpointer {
		ckpt.start()
	}
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	db.SetConnMaxLifetime(0)
	db.SetConnMaxIdleTime(0)
	s := &Store{db: db, clock: o.Clock, path: abs, opts: o, busyTimeout: o.BusyTimeout, ckpt: ckpt, logger: o.Logger}
	if s.logger == nil {
		s.logger = slog.New(slog.DiscardHandler)
	}
	if !o.NoMigrate {
		if err := s.migrate(ctx); err != nil {
			ckpt.close()
			db.Close()
			return nil, err
		}
	}
	read, err := sql.Open("sqlite3", dsn(abs, o, true))
	if err != nil {
		ckpt.close()
		db.Close()
		return nil, fmt.Errorf("open sqlite: %w", err)
	}
	read.SetMaxOpenConns(o.ReadConns)
	s.read = read
	return s, nil
}

// applyDefaults fills in the options left zero, in one place, and checks
// the ones given.
func (o *Options) applyDefaults() error {
	if o.Clock == nil {
		o.Clock = systemClock{}
	}
	switch strings.ToUpper(o.Synchronous) {
	case "":
		o.Synchronous = "FULL"
	case "FULL", "NORMAL":
		o.Synchronous = strings.ToUpper(o.Synchronous)
	default:
		return fmt.Errorf("synchronous %q: use FULL or NORMAL", o.Synchronous)
	}
	if o.BusyTimeout <= 0 {
		o.BusyTimeout = 10 * time.Second
	}
	if o.ReadConns <= 0 {
		o.ReadConns = 4
	}
	if o.WakeInterval <= 0 {
		o.WakeInterval = defaultWakeInterval
	}
	if o.checkpointPages <= 0 {
		o.checkpointPages = walCheckpointPages
	}
	if o.forcePages <= 0 {
		o.forcePages = walForcePages
	}
	return nil
}

// checkExisting checks, for options that open only an existing store,
// that the file at abs (path as given) exists and, without migrations,
// holds errand's current schema.
func checkExisting(ctx context.Context, path, abs string, o Options) error {
	if !o.MustExist && !o.NoMigrate {
		return nil
	}
	if _, err := os.Stat(abs); err != nil {
		if o.NoMigrate {
			return fmt.Errorf("%s does not exist: %w", path, errandtype.ErrNoSchema)
		}
		return fmt.Errorf("%s does not exist; check the path (or --db / ERRAND_DB)", path)
	}
	if o.NoMigrate {
		return checkSchema(ctx, abs, o)
	}
	return nil
}

// stablePlans makes the writer plan each statement once. SQLite otherwise
// prepares a statement again at each run whose bound values differ from the
// last, when they could change the choice of a partial index: every claim,
// whose time always differs, was planned anew, 0.25 ms of the 0.4 ms a
// claim of one job took, and an acknowledgment a quarter of its time
// (BenchmarkClaimOnly, BenchmarkAckOnly; TestClaimNotReplanned). The hot
// path's statements name their index or need none that depends on a value.
// Readers keep value-aware plans for operators' lists.
func stablePlans(c *sqlite3.Conn) error {
	_, err := c.Config(sqlite3.DBCONFIG_ENABLE_QPSG, true)
	return err
}

// dsn builds a connection string for the ncruces driver. Pragmas run on every
// new connection.
func dsn(path string, o Options, readOnly bool) string {
	q := url.Values{}
	q.Add("_pragma", "busy_timeout("+strconv.FormatInt(o.BusyTimeout.Milliseconds(), 10)+")")
	q.Add("_pragma", "foreign_keys(1)")
	if readOnly {
		q.Add("_pragma", "query_only(1)")
	} else {
		q.Add("_pragma", "journal_mode(WAL)")
		q.Add("_pragma", "synchronous("+o.Synchronous+")")
		q.Set("_txlock", "immediate")
	}
	u := url.URL{Scheme: "file", Path: path, RawQuery: q.Encode()}
	return u.String()
}

// DB returns the database handle: the single writer connection. The
// application uses it for its own tables and transactions, and passes its
// *sql.Tx to errand's Tx methods.
func (s *Store) DB() *sql.DB { return s.db }

// ReadDB returns the read-only pool. Reads through it never wait for the
// writer, so an application may use it for queries that need not see its own
// uncommitted writes.
func (s *Store) ReadDB() *sql.DB { return s.read }

// Path returns the absolute path of the database file.
func (s *Store) Path() string { return s.path }

// Close stops the checkpointer and closes both connection pools.
func (s *Store) Close() error {
	s.ckpt.close()
	s.cache.close()
	err := s.db.Close()
	if s.read != nil {
		err = errors.Join(err, s.read.Close())
	}
	return err
}

// Now returns the store's clock.
func (s *Store) Now(context.Context) (time.Time, error) { return s.clock.Now().UTC(), nil }

// ErrWriterBusy reports that the store's single writer connection stayed
// taken for a whole busy timeout. Most often the caller itself holds it: a
// goroutine with an open transaction on [Store.DB] that calls a method of
// errand's (Client.Enqueue rather than Client.EnqueueTx) waits for itself.
var ErrWriterBusy = errors.New("the SQLite writer connection is busy")

// InTx implements [errandstore.TxStore]: it runs fn in an immediate
// transaction on the writer, committing when fn returns nil and rolling
// back when it returns an error or panics. Do not call errand methods that
// write outside the transaction from fn: they would wait for the writer fn
// holds.
func (s *Store) InTx(ctx context.Context, fn func(ctx context.Context, tx *sql.Tx) error) error {
	return s.tx(ctx, func(tx *sql.Tx) error { return fn(ctx, tx) })
}

// tx runs fn in an immediate transaction on the writer. It waits for the
// writer connection no longer than the busy timeout, as SQLite waits for
// another process's lock: a wait past that is almost always a transaction
// of the application's own, on this goroutine, that will never end while
// it waits.
func (s *Store) tx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	conn, err := s.writer(ctx)
	if err != nil {
		return err
	}
	err = func() error {
		defer conn.Close()
		if before, ok := totalChanges(conn); ok {
			defer func() { // before conn goes back: a watcher reads both at once
				// Not after ctx ended: if it ended before the transaction
				// did, database/sql discards conn, closing it from a
				// goroutine of its own, and a read racing that close can be
				// handed the connection half closed (a nil-pointer panic in
				// database/sql). Uncounted, the changes only cost a wake-up.
				if ctx.Err() != nil {
					return
				}
				if after, ok := totalChanges(conn); ok {
					s.ownChanges.Add(after - before)
				}
			}()
		}
		tx, err := conn.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		return sqltx.Run(tx, fn)
	}()
	// With the writer released, prepare what the transaction had to
	// prepare for itself, for the next.
	s.cache.prepareMissed(ctx, s.db)
	return err
}

// writer takes the writer connection, waiting at most the busy timeout.
func (s *Store) writer(ctx context.Context) (*sql.Conn, error) {
	wctx, cancel := context.WithTimeoutCause(ctx, s.busyTimeout, ErrWriterBusy)
	defer cancel()
	conn, err := s.db.Conn(wctx)
	if err == nil {
		return conn, nil
	}
	if ctx.Err() == nil && errors.Is(context.Cause(wctx), ErrWriterBusy) {
		return nil, fmt.Errorf("%w: waited %s; a transaction on Store.DB holds it. If this goroutine holds that transaction, enqueue inside it with Client.EnqueueTx, and keep transactions on Store.DB short", ErrWriterBusy, s.busyTimeout)
	}
	return nil, err
}

func micros(t time.Time) int64 { return t.UnixMicro() }

// dialect renders the SQL this store builds as PostgreSQL's does: numbered
// parameters ?N, the tables by name, times in microseconds.
var dialect = sqlbuild.Dialect{
	Mark:  "?",
	Table: func(name string) string { return "errand_" + name },
	Time:  func(t time.Time) any { return micros(t) },
}

func fromMicros(us int64) time.Time { return time.UnixMicro(us).UTC() }

func nullMicros(v sql.NullInt64) *time.Time {
	if !v.Valid {
		return nil
	}
	t := fromMicros(v.Int64)
	return &t
}

// zeroTime is v as a time, the zero time for NULL.
func zeroTime(v sql.NullInt64) time.Time {
	if !v.Valid {
		return time.Time{}
	}
	return fromMicros(v.Int64)
}

func nullString(v sql.NullString) *string {
	if !v.Valid {
		return nil
	}
	s := v.String
	return &s
}

// placeholders returns "?, ?, ?" for n values.
func placeholders(n int) string {
	return strings.TrimSuffix(strings.Repeat("?, ", n), ", ")
}
