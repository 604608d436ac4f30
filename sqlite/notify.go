package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/errandhq/errand"
)

// Wake-ups across processes need no server and no message: every commit to
// the file is the signal. A listener keeps one read-only connection of its
// own and asks it for PRAGMA data_version every WakeInterval; SQLite changes
// that number whenever another connection, in this process or any other,
// has committed to the database since the last call. On a change the
// listener delivers "", "look at every queue": the number does not say
// which table or queue changed. In WAL mode the pragma reads the shared
// WAL index in memory and touches no page of the file, so an idle check is
// cheap; see the README for its measured cost.

var _ errand.Notifier = (*Store)(nil)

// defaultWakeInterval is Options.WakeInterval's default.
const defaultWakeInterval = 2 * time.Millisecond

// NotifyQueues implements [errand.Notifier]. It does nothing: on SQLite the
// enqueue's commit is itself the notification, which ListenQueues sees.
func (s *Store) NotifyQueues(context.Context, []string) error { return nil }

// ListenQueues implements [errand.Notifier]. It opens a read-only
// connection of its own (none of the read pool's) and returns once it has
// read the database's data_version: a commit made after it returns, by any
// other connection, is delivered.
//
// The returned channel delivers "" (look at every queue) after other
// connections have committed, including this process's writer, so a
// worker's own claims and acknowledgments wake it too; an idle worker
// writes nothing, so it is not woken by itself. Commits made while a ""
// waits to be read are gathered into it: at most one is pending. A failed
// check is retried at the next interval and followed by a "", in case it
// hid a commit. The listener closes its connection and then the channel
// when ctx ends; ctx, not [Store.Close], ends it. The interval runs on real
// time, not on Options.Clock.
func (s *Store) ListenQueues(ctx context.Context) (<-chan string, error) {
	db, err := sql.Open("sqlite3", dsn(s.path, s.opts, true))
	if err != nil {
		return nil, fmt.Errorf("listen for queues: %w", err)
	}
	db.SetMaxOpenConns(1)
	stmt, err := db.PrepareContext(ctx, `PRAGMA data_version`)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("listen for queues: %w", err)
	}
	version, err := dataVersion(ctx, stmt)
	if err != nil {
		stmt.Close()
		db.Close()
		return nil, fmt.Errorf("listen for queues: %w", err)
	}
	out := make(chan string, 1)
	go func() {
		defer close(out)
		defer db.Close()
		defer stmt.Close()
		tick := time.NewTicker(s.opts.WakeInterval)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			v, err := dataVersion(ctx, stmt)
			if err != nil {
				version = -1 // the next successful check delivers ""
				continue
			}
			if v == version {
				continue
			}
			version = v
			select {
			case out <- "":
			default: // one is pending already: it covers this commit too
			}
		}
	}()
	return out, nil
}

// dataVersion reads PRAGMA data_version through stmt.
func dataVersion(ctx context.Context, stmt *sql.Stmt) (int64, error) {
	var v int64
	err := stmt.QueryRowContext(ctx).Scan(&v)
	return v, err
}
