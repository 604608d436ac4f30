package sqlite

import (
	"context"
	"database/sql"
)

// stmts prepares each distinct statement of a batch once on its
// transaction, for the rows of the batch to execute: parsing SQL once per
// row cost more than executing it. Close releases them all.
type stmts struct {
	tx *sql.Tx
	m  map[string]*sql.Stmt
}

func newStmts(tx *sql.Tx) *stmts { return &stmts{tx: tx, m: map[string]*sql.Stmt{}} }

// get returns q prepared on the transaction, preparing it on first use.
func (c *stmts) get(ctx context.Context, q string) (*sql.Stmt, error) {
	if st, ok := c.m[q]; ok {
		return st, nil
	}
	st, err := c.tx.PrepareContext(ctx, q)
	if err != nil {
		return nil, err
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
