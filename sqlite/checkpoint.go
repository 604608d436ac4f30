package sqlite

import (
	"context"
	"database/sql"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ncruces/go-sqlite3"
	"github.com/ncruces/go-sqlite3/driver"
)

// Checkpoints. In WAL mode a commit appends pages to the WAL file, and a
// checkpoint copies them back into the database file and syncs it, so that
// the next writer can start the WAL over. SQLite's automatic checkpoint
// runs on the committing connection once the WAL holds 1000 pages, inside
// that commit: with the single writer, the enqueue or the claim that
// crossed the line waited for the copy and the sync (8-15ms measured on
// this project's machines, against 0.2-1ms for the commit itself), and so
// did every transaction queued behind it for the writer.
//
// So the writer no longer checkpoints in the ordinary course. A WAL hook
// on the writer, called after each of its commits with the WAL's length,
// asks a checkpointer of the store's, with a connection of its own, for a
// passive checkpoint once the WAL holds walCheckpointPages: it copies what
// it can without blocking the writer or any reader, and the writer's next
// transaction starts the WAL over when everything was copied. This is how
// Litestream manages checkpoints. A steady stream of commits never leaves
// the WAL fully copied (commits land while the checkpoint runs, and a
// running checkpoint holds off the restart), so at walForcePages the
// writer checkpoints inside its commit with RESTART: it waits for a
// checkpoint in progress and for readers still in the WAL (SQLite's busy
// handler, up to the busy timeout), copies what is left, little since the
// checkpointer copied the rest, and starts the WAL over. The WAL thus
// stays bounded whatever the checkpointer manages.
//
// Several processes on one file each checkpoint after their own commits.
// SQLite runs one checkpoint at a time and fails any other at once, busy
// handler or not: a passive checkpoint that finds another running is tried
// again later, and the writer's RESTART at the next commit.

const (
	// walCheckpointPages is the WAL length, in pages, at which the
	// checkpointer is asked for a checkpoint: SQLite's own default.
	walCheckpointPages = 1000
	// walForcePages is the WAL length at which the writer checkpoints
	// inside its commit: about 8MB of 4KB pages.
	walForcePages = 2 * walCheckpointPages
	// checkpointQuiet is how long the writer must have committed nothing
	// before the checkpointer copies what its last checkpoint left.
	checkpointQuiet = 2 * time.Millisecond
	// forceWait bounds how long the writer's checkpoint inside a commit
	// waits for readers still in the WAL. A reader that holds its snapshot
	// longer (an application's long query on Store.ReadDB) keeps the WAL
	// from starting over whatever the writer does, so the writer does not
	// wait it out: it tries again once the WAL has grown walCheckpointPages
	// more, and a long reader costs a commit at most forceWait that often.
	forceWait = 50 * time.Millisecond
)

// checkpointer runs passive checkpoints on a connection of its own when the
// writer's WAL hook asks for one, and holds the hook's fallback. The store owns it: Open starts it and
// Close stops it.
type checkpointer struct {
	dsn   string
	pages int // ask at this WAL length
	force int // checkpoint inside the commit at this length

	wanted  chan struct{} // a request is pending
	running sync.Mutex    // held by a checkpoint of this store's
	ctx     context.Context
	stop    context.CancelFunc
	done    sync.WaitGroup

	busy time.Duration // the writer's busy timeout, restored after a forced checkpoint
	// retryAt is the WAL length at which the writer next checkpoints
	// inside a commit, after one that readers held off; 0 when none did.
	retryAt atomic.Int64

	// For tests: checkpoints the checkpointer ran, those the writer ran
	// inside a commit, the writer's tries that readers held off, and the
	// WAL's length at the last commit.
	background, inline, heldOff, walPages atomic.Int64
	commits                               atomic.Int64 // the writer's, counted by its WAL hook
}

func newCheckpointer(dsn string, pages, force int, busy time.Duration) *checkpointer {
	ctx, cancel := context.WithCancel(context.Background())
	return &checkpointer{
		dsn:    dsn,
		pages:  pages,
		force:  force,
		busy:   busy,
		wanted: make(chan struct{}, 1),
		ctx:    ctx,
		stop:   cancel,
	}
}

// initWriter installs the WAL hook on a new writer connection. A WAL hook
// replaces SQLite's automatic checkpoint on that connection.
func (c *checkpointer) initWriter(conn *sqlite3.Conn) error {
	conn.WALHook(c.committed)
	return nil
}

// committed is the writer's WAL hook: SQLite calls it after each commit,
// with the number of pages in the WAL, once the write lock is released.
func (c *checkpointer) committed(conn *sqlite3.Conn, schema string, pages int) error {
	c.walPages.Store(int64(pages))
	c.commits.Add(1)
	if pages >= c.force && int64(pages) >= c.retryAt.Load() {
		// The checkpointer's own checkpoint would fail this one, so it
		// waits for that first. It waits for readers at most forceWait.
		// An error would be reported as the commit's, which has happened:
		// a later commit tries again.
		c.running.Lock()
		conn.BusyTimeout(forceWait)
		start := time.Now()
		_, _, err := conn.WALCheckpoint(schema, sqlite3.CHECKPOINT_RESTART)
		waited := time.Since(start)
		conn.BusyTimeout(c.busy)
		c.running.Unlock()
		switch {
		case err == nil:
			c.inline.Add(1)
			c.retryAt.Store(0)
		case waited >= forceWait:
			// Readers held it off: wait for more growth.
			c.heldOff.Add(1)
			c.retryAt.Store(int64(pages + c.pages))
		default:
			// Another process's checkpoint was running, which fails this
			// one at once: the next commit tries again.
		}
		return nil
	}
	if pages >= c.pages {
		select {
		case c.wanted <- struct{}{}:
		default: // one is pending: it covers this commit too
		}
	}
	return nil
}

// start runs the checkpointer until stop.
func (c *checkpointer) start() {
	c.done.Go(c.run)
}

// close stops the checkpointer and waits for it. Idempotent.
func (c *checkpointer) close() {
	c.stop()
	c.done.Wait()
}

func (c *checkpointer) run() {
	var db *sql.DB // opened at the first request: most stores never need one
	defer func() {
		if db != nil {
			db.Close()
		}
	}()
	// After a checkpoint that could not copy the whole WAL (commits came
	// meanwhile), the rest waits for a quiet spell of the writer or for
	// another walCheckpointPages of growth: chasing a busy writer commit
	// by commit costs a sync of the database file each time, and under a
	// steady stream of commits walForcePages ends the WAL's run anyway.
	quiet := time.NewTimer(time.Hour)
	quiet.Stop()
	defer quiet.Stop()
	var (
		partial  bool  // the last checkpoint left pages in the WAL
		copiedTo int64 // the WAL length up to which it copied
		commits  int64 // the writer's commits when it ended
	)
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-c.wanted:
			if w := c.walPages.Load(); partial && w >= copiedTo && w-copiedTo < int64(c.pages) {
				continue // the quiet timer runs
			}
		case <-quiet.C:
			if n := c.commits.Load(); n != commits {
				commits = n
				quiet.Reset(checkpointQuiet)
				continue
			}
		}
		quiet.Stop()
		if db == nil {
			if db = c.open(); db == nil {
				continue // the next commit asks again; walForcePages bounds the WAL
			}
		}
		commits = c.commits.Load()
		busy, log, copied, err := c.passive(db)
		// log is the WAL's length when the checkpoint began: commits
		// made while it ran are left too.
		partial = err != nil || busy != 0 || copied < max(log, c.walPages.Load())
		if partial {
			copiedTo = max(copied, 0)
			quiet.Reset(checkpointQuiet)
		}
	}
}

// open opens the checkpointer's connection; nil when it cannot.
func (c *checkpointer) open() *sql.DB {
	db, err := driver.Open(c.dsn)
	if err != nil {
		return nil
	}
	db.SetMaxOpenConns(1)
	return db
}

// passive runs a PASSIVE checkpoint, which neither waits for nor blocks
// the writer and readers. It reports the WAL's length and how much of it
// is now copied; -1 and -1, or busy, when another connection was
// checkpointing.
func (c *checkpointer) passive(db *sql.DB) (busy, log, copied int64, err error) {
	c.running.Lock()
	err = db.QueryRowContext(c.ctx, `PRAGMA wal_checkpoint(PASSIVE)`).Scan(&busy, &log, &copied)
	c.running.Unlock()
	if err == nil {
		c.background.Add(1)
	}
	return busy, log, copied, err
}
