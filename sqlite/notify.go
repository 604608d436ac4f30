package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/errandhq/errand/errandstore"
	"github.com/ncruces/go-sqlite3"
)

// Wake-ups across processes need no server and no message: every commit to
// the file is the signal. A listener keeps one read-only connection of its
// own and asks it for PRAGMA data_version, which SQLite changes whenever
// another connection, in this process or any other, has committed to the
// database since the last call. On a change the listener delivers "",
// "look at every queue": the number does not say which table or queue
// changed. In WAL mode the pragma reads the shared WAL index in memory and
// touches no page of the file, so a check costs about 15µs of CPU
// (BenchmarkDataVersion, see docs/sqlite.md).
//
// When to check: on Linux, an idle listener waits on inotify for a write to
// the WAL file, which every commit makes, and then checks every
// WakeInterval for walWriteWindow, because the write comes before the
// commit is visible (SQLite syncs the WAL, with synchronous=FULL, and then
// publishes the commit in the WAL index, which inotify does not see). An
// idle worker thus wakes for nothing at all. Elsewhere, or when inotify is
// unavailable, it checks every WakeInterval, always: waking that often is
// what costs (see docs/sqlite.md, "Wake-ups across processes").

var _ errandstore.Notifier = (*Store)(nil)

// defaultWakeInterval is Options.WakeInterval's default.
const defaultWakeInterval = 2 * time.Millisecond

// walWriteWindow is how long a listener checks every WakeInterval after a
// write to the WAL file: longer than a commit's sync on a slow disk.
const walWriteWindow = time.Second

// NotifyQueues implements [errandstore.Notifier]. It does nothing: on SQLite the
// enqueue's commit is itself the notification, which ListenQueues sees.
func (s *Store) NotifyQueues(context.Context, []string) error { return nil }

// ListenQueues implements [errandstore.Notifier]. It opens a read-only
// connection of its own (none of the read pool's) and returns once it has
// read the database's data_version: a commit made after it returns, by any
// other connection, is delivered.
//
// The returned channel delivers "" (look at every queue) after other
// connections have committed, and after the application's commits on
// [Store.DB], but not after the store's own transactions alone: a
// worker's claims and acknowledgments do not wake it (what they make
// claimable, the worker wakes for itself), nor do this process's
// enqueues, which wake its workers directly. To tell them apart, a check
// that finds the database changed asks the writer connection, whose
// data_version changes with other connections' commits only, and how many
// rows it changed beyond those of the store's own transactions; while a
// transaction holds the writer, the check is retried at each interval
// until it is free (see writerHeldDefer). Commits made while a "" waits
// to be read are gathered into it: at most one is pending. A failed check
// is retried at the next interval and followed by a "", in case it hid a
// commit. On Linux, checks run only in the second after a write to
// the WAL file. The listener closes its connection and then the channel
// when ctx ends; ctx, not [Store.Close], ends it. The interval runs on real
// time, not on Options.Clock.
func (s *Store) ListenQueues(ctx context.Context) (<-chan string, error) {
	out := make(chan string, 1)
	err := s.watchCommits(ctx, true, func(context.Context, *sql.DB) {
		select {
		case out <- "":
		default: // one is pending already: it covers this commit too
		}
	}, func() { close(out) })
	if err != nil {
		return nil, fmt.Errorf("listen for queues: %w", err)
	}
	return out, nil
}

var _ errandstore.CancelListener = (*Store)(nil)

// pendingCancelsSQL lists the running jobs with a cancel request. It reads
// the errand_jobs_cancel index, which holds exactly those rows: none, almost
// always.
const pendingCancelsSQL = `SELECT id FROM errand_jobs INDEXED BY errand_jobs_cancel
	WHERE state = 'running' AND cancel_requested_at IS NOT NULL`

// ListenCancels implements [errandstore.CancelListener]. It watches commits as
// ListenQueues does and, after each, reads the running jobs with a cancel
// request on its own read-only connection: one seek of an index that is
// empty unless a cancel is pending. It delivers each id once while its
// request stays pending, and "" after a failed read. The channel is closed
// when ctx ends.
func (s *Store) ListenCancels(ctx context.Context) (<-chan string, error) {
	out := make(chan string, 16)
	delivered := map[string]bool{}
	send := func(ctx context.Context, id string) bool {
		select {
		case out <- id:
			return true
		case <-ctx.Done():
			return false
		}
	}
	err := s.watchCommits(ctx, false, func(ctx context.Context, db *sql.DB) {
		rows, err := db.QueryContext(ctx, pendingCancelsSQL)
		if err != nil {
			send(ctx, "")
			return
		}
		var ids []string
		for rows.Next() {
			var id string
			if rows.Scan(&id) == nil {
				ids = append(ids, id)
			}
		}
		rows.Close()
		if rows.Err() != nil {
			send(ctx, "")
			return
		}
		now := make(map[string]bool, len(ids))
		for _, id := range ids {
			now[id] = true
			if !delivered[id] && !send(ctx, id) {
				return
			}
		}
		delivered = now // a request no longer pending may be delivered again if made again
	}, func() { close(out) })
	if err != nil {
		return nil, fmt.Errorf("listen for cancels: %w", err)
	}
	return out, nil
}

// watchCommits calls changed, from a goroutine of its own, after other
// connections commit to the database (see ListenQueues for how and when it
// checks), and after a failed check; it calls done when ctx ends, after it
// has closed its connection. It returns once it has read the database's
// data_version, so a commit made after it returns is seen. changed gets
// the watcher's own read-only connection. With skipOwn, commits of the
// store's own transactions alone (tx) call nothing.
func (s *Store) watchCommits(ctx context.Context, skipOwn bool, changed func(context.Context, *sql.DB), done func()) error {
	// Watch before reading the first version, so that no commit falls
	// between them unseen.
	events := make(chan struct{}, 1)
	stopWatch, err := watchWAL(s.path, events)
	watching := err == nil // else check every interval, always
	if watching && s.opts.pollWAL {
		stopWatch()
		watching = false
	}
	fail := func(err error) error {
		if watching {
			stopWatch()
		}
		return err
	}
	db, err := sql.Open("sqlite3", dsn(s.path, s.opts, true))
	if err != nil {
		return fail(err)
	}
	db.SetMaxOpenConns(1)
	// The writer's state is read before the watcher's version, so that a
	// commit after both changes the version and is then told apart.
	var own writerState
	if skipOwn {
		if own, err = s.writerState(ctx); err != nil {
			own = writerState{version: -1}
		}
	}
	stmt, err := db.PrepareContext(ctx, `PRAGMA data_version`)
	if err != nil {
		db.Close()
		return fail(err)
	}
	version, err := dataVersion(ctx, stmt)
	if err != nil {
		stmt.Close()
		db.Close()
		return fail(err)
	}
	w := &commitWatch{s: s, db: db, stmt: stmt, skipOwn: skipOwn, changed: changed, version: version, own: own}
	go func() {
		defer done()
		defer db.Close()
		defer stmt.Close()
		if watching {
			defer stopWatch()
		}
		w.run(ctx, events, watching)
	}()
	return nil
}

// commitWatch is the state of a watchCommits between its checks.
type commitWatch struct {
	s       *Store
	db      *sql.DB
	stmt    *sql.Stmt // PRAGMA data_version
	skipOwn bool
	changed func(context.Context, *sql.DB)
	version int64       // the data_version last seen; -1 after a failed check
	own     writerState // the writer's state at the last change seen
	// heldSince is when a check first found the writer held by a
	// transaction; zero while it is not.
	heldSince time.Time
}

// run checks on each of events (when watching) and every WakeInterval
// until ctx ends.
func (w *commitWatch) run(ctx context.Context, events <-chan struct{}, watching bool) {
	timer := time.NewTimer(w.s.opts.WakeInterval)
	defer timer.Stop()
	// With a watch, check until then. It starts as a window, for a
	// commit whose write came before the watch and whose publication
	// came after the first version.
	until := time.Now().Add(walWriteWindow)
	armed := true // the timer runs: a check is coming
	for {
		select {
		case <-ctx.Done():
			return
		case <-events:
			until = time.Now().Add(walWriteWindow)
			if armed {
				// A busy writer's events come faster than the
				// interval; the coming check covers them.
				continue
			}
		case <-timer.C:
			armed = false
		}
		retry, err := w.check(ctx)
		if retry || !watching || err != nil || time.Now().Before(until) {
			timer.Reset(w.s.opts.WakeInterval)
			armed = true
		}
	}
}

// check reads data_version and calls changed when it moved (and, with
// skipOwn, not by the store's own transactions alone). retry asks for
// another check: the writer is held, and the change is told apart once
// it is free.
func (w *commitWatch) check(ctx context.Context) (retry bool, err error) {
	v, err := dataVersion(ctx, w.stmt)
	if err != nil {
		w.version = -1 // the next successful check delivers ""
		return false, err
	}
	if v == w.version {
		return false, nil
	}
	if !w.skipOwn {
		w.version = v
		w.changed(ctx, w.db)
		return false, nil
	}
	o, werr := w.s.writerState(ctx)
	if errors.Is(werr, errWriterHeld) {
		if w.heldSince.IsZero() {
			w.heldSince = time.Now()
		}
		if time.Since(w.heldSince) < writerHeldDefer {
			// Version unchanged: the next check tells this change
			// apart once the writer is free.
			return true, nil
		}
	}
	w.heldSince = time.Time{}
	w.version = v
	if werr == nil && o == w.own {
		return false, nil // the store's own transactions only
	}
	if werr != nil {
		o = writerState{version: -1}
	}
	w.own = o
	w.changed(ctx, w.db)
	return false, nil
}

// dataVersion reads PRAGMA data_version through stmt.
func dataVersion(ctx context.Context, stmt *sql.Stmt) (int64, error) {
	var v int64
	err := stmt.QueryRowContext(ctx).Scan(&v)
	return v, err
}

// writerState is what the writer connection tells of the commits it did
// not make as the store's own transactions: its data_version, which
// changes with other connections' commits only, and the rows it changed
// beyond those of the store's transactions (the application's, through
// Store.DB). version -1: unknown, unequal to any state read.
type writerState struct {
	version, appChanges int64
}

// writerStateWait bounds how long a check waits for the writer connection
// while a transaction holds it (an application's on Store.DB may hold it
// long); past it the check is retried, for at most writerHeldDefer.
const writerStateWait = 20 * time.Millisecond

// writerHeldDefer bounds how long a listener puts off a change while the
// writer stays held, before it delivers as after a failed check. Putting
// it off costs no latency: a worker's claim needs the writer too, and
// would wait for the same transaction. A change seen during one of the
// store's own transactions (an insert, a claim, under load longer than
// writerStateWait) is thus told apart once it ends instead of waking the
// workers for nothing.
const writerHeldDefer = time.Second

// errWriterHeld reports that a transaction held the writer connection for
// all of writerStateWait.
var errWriterHeld = errors.New("sqlite: the writer connection is held")

// writerState reads the writer's state, waiting for the writer connection
// at most writerStateWait if a transaction holds it (errWriterHeld).
func (s *Store) writerState(ctx context.Context) (writerState, error) {
	wctx, cancel := context.WithTimeout(ctx, writerStateWait)
	defer cancel()
	conn, err := s.db.Conn(wctx)
	if err != nil {
		if ctx.Err() == nil && wctx.Err() != nil {
			return writerState{}, errWriterHeld
		}
		return writerState{}, err
	}
	defer conn.Close()
	var st writerState
	if err := conn.QueryRowContext(ctx, `PRAGMA data_version`).Scan(&st.version); err != nil {
		return writerState{}, err
	}
	total, ok := totalChanges(conn)
	if !ok {
		return writerState{}, errors.New("sqlite: no total_changes on the writer")
	}
	st.appChanges = total - s.ownChanges.Load()
	return st, nil
}

// totalChanges returns the rows conn changed since it opened
// (sqlite3_total_changes64): inserted, updated or deleted, rolled back or
// not.
func totalChanges(conn *sql.Conn) (n int64, ok bool) {
	err := conn.Raw(func(dc any) error {
		c, is := dc.(interface{ Raw() *sqlite3.Conn })
		if !is {
			return errors.New("not an ncruces connection")
		}
		n = c.Raw().TotalChanges()
		return nil
	})
	return n, err == nil
}
