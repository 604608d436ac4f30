package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"

	"github.com/errandhq/errand/errandtype"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Lost connections. A pooled connection whose server went away (a restart,
// pg_terminate_backend, an idle timeout) is found out before a statement is
// sent on it, by [PrepareConn], and the pool hands out another: that check
// is what keeps statements off dead connections. An Exec, a single-row
// query or a BEGIN that failed before any of it was sent
// (pgconn.SafeToRetry) is sent once more; a multi-row Query reports a send
// error only from its rows, once it can no longer be told apart, so it is
// not. Any other lost connection is reported as
// [errandtype.ErrStoreUnavailable]: the statement may have run, so it is never
// sent again. All of it happens here, in db, the pool every statement of
// the store goes through.

// PrepareConn is a pgxpool PrepareConn hook that turns away a connection
// whose server has already said goodbye: anything waiting to be read on an
// idle connection is a FATAL message (the server terminated the session)
// or the end of the stream. The pool then tries another connection, so no
// statement is sent on a dead one. It costs one non-blocking read of the
// socket, no round trip. Pools that [Open] creates use it; set it on a
// pool of your own that you pass to [New]:
//
//	cfg.PrepareConn = postgres.PrepareConn
func PrepareConn(ctx context.Context, c *pgx.Conn) (bool, error) {
	if err := c.PgConn().SyncConn(ctx); err != nil {
		return false, nil
	}
	return !serverSpoke(c.PgConn().Conn()), nil
}

// db is the store's pool, retrying a statement none of which was sent and
// reporting a lost connection as errandtype.ErrStoreUnavailable.
type db struct{ *pgxpool.Pool }

// resend reports whether a failed statement may be sent again: none of it
// reached the server, and the caller still waits.
func resend(ctx context.Context, err error) bool {
	return err != nil && ctx.Err() == nil && pgconn.SafeToRetry(err)
}

// retry runs op, and once more when none of it was sent.
func retry[T any](ctx context.Context, op func() (T, error)) (T, error) {
	v, err := op()
	if resend(ctx, err) {
		v, err = op()
	}
	return v, unavailable(ctx, err)
}

func (d db) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	return retry(ctx, func() (pgconn.CommandTag, error) { return d.Pool.Exec(ctx, sql, args...) })
}

func (d db) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	r, err := d.Pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, unavailable(ctx, err)
	}
	return lostRows{r, ctx}, nil
}

func (d db) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return &retryRow{ctx: ctx, query: func() pgx.Row { return d.Pool.QueryRow(ctx, sql, args...) }}
}

func (d db) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	return lostBatch{d.Pool.SendBatch(ctx, b), ctx}
}

// Begin begins one of the store's own transactions (pgx.BeginFunc calls
// it) at READ COMMITTED, as beginSQL begins a batch's.
func (d db) Begin(ctx context.Context) (pgx.Tx, error) {
	return d.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
}

// beginSQL begins a transaction of the store's own in a batch. Its
// transactions run at READ COMMITTED whatever the server's
// default_transaction_isolation: those that wait for a lock and then read
// what the lock's holder wrote (a debounce key's job, the migrations
// applied, a job's signals) need the fresh snapshot each statement takes
// there; under REPEATABLE READ they would read from before the wait.
const beginSQL = "BEGIN ISOLATION LEVEL READ COMMITTED"

func (d db) BeginTx(ctx context.Context, opts pgx.TxOptions) (pgx.Tx, error) {
	tx, err := retry(ctx, func() (pgx.Tx, error) { return d.Pool.BeginTx(ctx, opts) })
	if err != nil {
		return nil, err
	}
	return lostTx{tx}, nil
}

func (d db) Acquire(ctx context.Context) (conn, error) {
	c, err := d.Pool.Acquire(ctx)
	return conn{c}, unavailable(ctx, err)
}

// conn is one of the pool's connections, for statements that must share
// one.
type conn struct{ c *pgxpool.Conn }

func (c conn) Release()        { c.c.Release() }
func (c conn) Conn() *pgx.Conn { return c.c.Conn() }

func (c conn) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	tag, err := c.c.Exec(ctx, sql, args...)
	return tag, unavailable(ctx, err)
}

func (c conn) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	return lostBatch{c.c.SendBatch(ctx, b), ctx}
}

// retryRow runs its query when scanned, and once more when none of it was
// sent.
type retryRow struct {
	ctx   context.Context
	query func() pgx.Row
}

func (r *retryRow) Scan(dest ...any) error {
	_, err := retry(r.ctx, func() (struct{}, error) { return struct{}{}, r.query().Scan(dest...) })
	return err
}

// lostRows, lostRow, lostBatch and lostTx report a lost connection as
// errandtype.ErrStoreUnavailable, never sending a statement again: by then it
// may have run.
type lostRows struct {
	pgx.Rows
	ctx context.Context
}

func (r lostRows) Err() error             { return unavailable(r.ctx, r.Rows.Err()) }
func (r lostRows) Scan(dest ...any) error { return unavailable(r.ctx, r.Rows.Scan(dest...)) }

func (r lostRows) Values() ([]any, error) {
	v, err := r.Rows.Values()
	return v, unavailable(r.ctx, err)
}

type lostRow struct {
	pgx.Row
	ctx context.Context
}

func (r lostRow) Scan(dest ...any) error { return unavailable(r.ctx, r.Row.Scan(dest...)) }

type lostBatch struct {
	pgx.BatchResults
	ctx context.Context
}

func (b lostBatch) Exec() (pgconn.CommandTag, error) {
	tag, err := b.BatchResults.Exec()
	return tag, unavailable(b.ctx, err)
}

func (b lostBatch) Query() (pgx.Rows, error) {
	r, err := b.BatchResults.Query()
	return lostRows{r, b.ctx}, unavailable(b.ctx, err)
}

func (b lostBatch) QueryRow() pgx.Row { return lostRow{b.BatchResults.QueryRow(), b.ctx} }
func (b lostBatch) Close() error      { return unavailable(b.ctx, b.BatchResults.Close()) }

type lostTx struct{ pgx.Tx }

func (t lostTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	tag, err := t.Tx.Exec(ctx, sql, args...)
	return tag, unavailable(ctx, err)
}

func (t lostTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	r, err := t.Tx.Query(ctx, sql, args...)
	if err != nil {
		return nil, unavailable(ctx, err)
	}
	return lostRows{r, ctx}, nil
}

func (t lostTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return lostRow{t.Tx.QueryRow(ctx, sql, args...), ctx}
}

func (t lostTx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	return lostBatch{t.Tx.SendBatch(ctx, b), ctx}
}

func (t lostTx) Commit(ctx context.Context) error { return unavailable(ctx, t.Tx.Commit(ctx)) }

// unavailable wraps err in errandtype.ErrStoreUnavailable when it says that the
// server could not be reached or the connection was lost, and not that the
// caller gave up.
func unavailable(ctx context.Context, err error) error {
	if err == nil || ctx.Err() != nil || errors.Is(err, errandtype.ErrStoreUnavailable) || !connLost(err) {
		return err
	}
	return fmt.Errorf("%w: %w", errandtype.ErrStoreUnavailable, err)
}

// connLost reports an error of a connection that failed or was lost: no
// server answered, the network failed, or the server ended the session
// (a FATAL error: terminated, shutting down, an idle timeout).
func connLost(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		// A refused login (class 28) or a database that does not exist
		// (3D) is a setting to fix, not a server to wait for.
		if strings.HasPrefix(pgErr.Code, "28") || strings.HasPrefix(pgErr.Code, "3D") {
			return false
		}
		return pgErr.Severity == "FATAL" || pgErr.Severity == "PANIC" || strings.HasPrefix(pgErr.Code, "08")
	}
	var connectErr *pgconn.ConnectError
	var netErr net.Error
	return errors.As(err, &connectErr) || errors.As(err, &netErr) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, io.EOF) || errors.Is(err, pgconn.ErrConnClosed) || errors.Is(err, net.ErrClosed)
}

// poolerHint says what to change when a named prepared statement failed
// the way a pooler in transaction mode breaks them: pgx prepares and caches
// each statement on its connection, and such a pooler runs the next
// transaction on another server connection, where it is missing or left over.
func poolerHint(err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && (pgErr.Code == "42P05" || pgErr.Code == "26000") {
		return fmt.Errorf("%w (behind a pooler in transaction mode? add default_query_exec_mode=cache_describe to the URL: see docs/postgresql.md, Poolers)", err)
	}
	return err
}
