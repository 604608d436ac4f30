package postgres

import (
	"context"
	"database/sql"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/internal/sqltx"
	"github.com/jackc/pgx/v5/stdlib"
)

// SQLStore is a Store seen through database/sql: the same store, whose
// transaction methods take a *sql.Tx of the pgx driver
// (github.com/jackc/pgx/v5/stdlib) instead of a pgx.Tx. It is an
// [errandstore.TxStore] of *sql.Tx, for applications whose own code runs on
// database/sql: errand.NewClient(store.SQL(db), cfg) returns a
// *errand.Client[*sql.Tx]. Every other method is the Store's.
type SQLStore struct {
	*Store
	db     *sql.DB
	ownsDB bool // Close closes db
}

var _ errandstore.TxStore[*sql.Tx] = (*SQLStore)(nil)

// SQL returns the store's database/sql view. db is the application's
// handle on the store's database, opened with the pgx driver; InTx begins
// its transactions there. A nil db means a handle on the store's own pool
// (stdlib.OpenDBFromPool), which opens no connection until it is used and
// which the view's Close closes. The view's Close also closes the store.
func (s *Store) SQL(db *sql.DB) *SQLStore {
	v := &SQLStore{Store: s, db: db}
	if db == nil {
		v.db, v.ownsDB = stdlib.OpenDBFromPool(s.pool.Pool), true
	}
	return v
}

// DB returns the database/sql handle InTx uses.
func (s *SQLStore) DB() *sql.DB { return s.db }

// JobInsertManyTx implements [errandstore.TxStore]: tx is a *sql.Tx of the pgx
// driver on the store's database. Times come from statement_timestamp(),
// not the start of the caller's transaction.
func (s *SQLStore) JobInsertManyTx(ctx context.Context, tx *sql.Tx, p *errandstore.JobInsertManyParams) ([]errandstore.JobInsertResult, error) {
	if errandstore.HasDebounce(p.Jobs) {
		return errandstore.InsertKeyed(ctx, keyedTx{s.Store, sqlQuerier{tx}, s.inTx}, p.Jobs)
	}
	return s.insert(ctx, sqlQuerier{tx}, s.inTx, p.Jobs)
}

// EffectRecordTx implements [errandstore.TxStore]: tx is a *sql.Tx of the pgx
// driver on the store's database.
func (s *SQLStore) EffectRecordTx(ctx context.Context, tx *sql.Tx, p *errandstore.EffectRecordParams) (bool, error) {
	return s.recordEffect(ctx, sqlQuerier{tx}, p)
}

// InTx implements [errandstore.TxStore]: it begins a transaction on DB, runs fn
// with it and commits, or rolls back when fn returns an error or panics.
func (s *SQLStore) InTx(ctx context.Context, fn func(ctx context.Context, tx *sql.Tx) error) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	return sqltx.Run(tx, func(tx *sql.Tx) error { return fn(ctx, tx) })
}

// Close closes the handle the view opened, if it opened one, and the
// store.
func (s *SQLStore) Close() error {
	if s.ownsDB {
		_ = s.db.Close()
	}
	return s.Store.Close()
}
