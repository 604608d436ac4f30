package sqlite

import (
	"context"
	"database/sql"
	"sync"
	"time"
)

// stmts prepares each distinct statement of a batch once on its
// transaction, for the rows of the batch to execute: parsing SQL once per
// row cost more than executing it. Close releases them all. With a cache
// (see Store.ownStmts) a statement is prepared once on the writer connection
// and reused by every later transaction of the store.
type stmts struct {
	tx    *sql.Tx
	m     map[string]*sql.Stmt
	cache *stmtCache // nil: prepare on tx alone
}

func newStmts(tx *sql.Tx) *stmts { return &stmts{tx: tx, m: map[string]*sql.Stmt{}} }

// ownStmts returns the statements of tx, a transaction of the store's own
// on its writer (Store.tx), drawing on the store's cache.
func (s *Store) ownStmts(tx *sql.Tx) *stmts {
	st := newStmts(tx)
	st.cache = &s.cache
	return st
}

// get returns q prepared on the transaction, preparing it on first use.
func (c *stmts) get(ctx context.Context, q string) (*sql.Stmt, error) {
	if st, ok := c.m[q]; ok {
		return st, nil
	}
	var st *sql.Stmt
	if parent := c.cache.get(q); parent != nil {
		st = c.tx.StmtContext(ctx, parent)
	} else {
		var err error
		if st, err = c.tx.PrepareContext(ctx, q); err != nil {
			return nil, err
		}
		c.cache.miss(q)
	}
	c.m[q] = st
	return st, nil
}

// Close closes every statement prepared.
func (c *stmts) Close() {
	for _, st := range c.m {
		st.Close()
	}
}

// stmtCacheMax bounds the statements a store keeps prepared. The hot path
// uses a handful (a claim per number of queues and kinds, an outcome update
// per outcome kind, the insert of a job); past the bound, statements are
// prepared in each transaction as before.
const stmtCacheMax = 64

// stmtPrepareWait bounds how long a store waits for its writer connection to
// prepare, after a transaction, the statements it missed: when another
// transaction has taken the writer, they are prepared after a later one.
const stmtPrepareWait = 20 * time.Millisecond

// stmtCache keeps statements prepared on the writer connection from one
// transaction to the next: parsing the claim's UPDATE took about a fifth
// of the claim of one job. A statement a transaction misses is prepared on
// the store's *sql.DB once that transaction has released the writer (a
// DB-level statement cannot be prepared while the one connection is taken);
// transactions then take it with Tx.StmtContext, which reuses the
// connection's preparation.
type stmtCache struct {
	mu     sync.Mutex
	stmts  map[string]*sql.Stmt
	missed map[string]struct{}
	closed bool
}

// get returns q's cached statement, or nil.
func (c *stmtCache) get(q string) *sql.Stmt {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stmts[q]
}

// miss notes q for prepareMissed.
func (c *stmtCache) miss(q string) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.stmts)+len(c.missed) >= stmtCacheMax {
		return
	}
	if c.missed == nil {
		c.missed = map[string]struct{}{}
	}
	c.missed[q] = struct{}{}
}

// prepareMissed prepares on db the statements transactions missed. It is
// called with the writer released; a statement it cannot prepare in time
// is missed again and prepared later.
func (c *stmtCache) prepareMissed(ctx context.Context, db *sql.DB) {
	c.mu.Lock()
	missed := c.missed
	c.missed = nil
	c.mu.Unlock()
	if len(missed) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), stmtPrepareWait)
	defer cancel()
	for q := range missed {
		st, err := db.PrepareContext(ctx, q)
		if err != nil {
			return
		}
		c.mu.Lock()
		if _, dup := c.stmts[q]; dup || c.closed {
			c.mu.Unlock()
			st.Close()
			continue
		}
		if c.stmts == nil {
			c.stmts = map[string]*sql.Stmt{}
		}
		c.stmts[q] = st
		c.mu.Unlock()
	}
}

// close closes the cached statements.
func (c *stmtCache) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	for _, st := range c.stmts {
		st.Close()
	}
	clear(c.stmts)
}
