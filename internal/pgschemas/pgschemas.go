// Package pgschemas gives tests a PostgreSQL schema at errand's current
// migration quickly. Migrating a new schema takes about a fifth of a
// second (the server syncs each new index's file to disk), more than most
// tests take; emptying one a test has finished with takes a few
// milliseconds. So a test gets a schema another test emptied when one is
// free, and a new one otherwise, and has it to itself.
package pgschemas

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/errandhq/errand/postgres"
	"github.com/errandhq/errand/postgres/pgtest"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Take returns a schema at errand's current migration, on the database
// url, that no other test uses and that holds no job nor anything else.
// When t ends it is emptied for another test, or dropped if t changed
// what it holds (a trigger, statistics).
func Take(t *testing.T, url string) string {
	t.Helper()
	return schemas.take(t, url)
}

// Close drops the schemas no test holds. A package's TestMain calls it
// after its tests.
func Close() { schemas.close() }

var schemas pool

type pool struct {
	mu     sync.Mutex
	url    string
	db     *pgxpool.Pool // empties and drops schemas
	free   []string      // schemas emptied, as new as a migrated one
	shape  string        // what a migrated schema holds (see shapeSQL)
	tables []string      // the tables a test writes rows in, the same in every such schema
}

// take is Take.
func (p *pool) take(t *testing.T, url string) string {
	t.Helper()
	p.mu.Lock()
	if p.url == "" {
		p.url = url
	}
	if url != p.url {
		p.mu.Unlock()
		t.Fatalf("schemas are kept on %s, not %s", p.url, url)
	}
	name := ""
	if n := len(p.free); n > 0 {
		name, p.free = p.free[n-1], p.free[:n-1]
	}
	p.mu.Unlock()
	if name == "" {
		name = p.migrate(t)
	}
	t.Cleanup(func() {
		if err := p.give(name); err != nil {
			t.Errorf("schema %s: %v", name, err)
		}
	})
	return name
}

// migrate migrates a new schema, and records what it holds the first time.
func (p *pool) migrate(t *testing.T) string {
	t.Helper()
	name := pgtest.Name()
	s, err := postgres.Open(t.Context(), p.url, &postgres.Options{Schema: name, MaxConns: 1})
	if err != nil {
		pgtest.DropAtEnd(t, p.url, name)
		t.Fatalf("migrate schema %s: %v", name, err)
	}
	s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	shape, err := p.inspect(ctx, name)
	var tables []string
	if err == nil && p.firstShape() {
		tables, err = p.listTables(ctx, name)
	}
	if err != nil {
		pgtest.DropAtEnd(t, p.url, name)
		t.Fatalf("schema %s: %v", name, err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.shape == "" {
		p.shape, p.tables = shape, tables
	} else if shape != p.shape {
		pgtest.DropAtEnd(t, p.url, name)
		t.Fatalf("schema %s holds, migrated:\n%s\nwhere an earlier one held:\n%s", name, shape, p.shape)
	}
	return name
}

// shapeSQL describes what schema $1 holds: its relations (with their
// columns' count, storage options and planner statistics), triggers and
// functions. A schema a test changed (a trigger it added, a table it
// analyzed) describes differently from a migrated one and is dropped,
// never handed on.
const shapeSQL = `SELECT coalesce(string_agg(x, E'\n' ORDER BY x), '') FROM (
		SELECT format('relation %s %s columns=%s options=%s tuples=%s pages=%s', c.relname, c.relkind,
			c.relnatts, c.reloptions, c.reltuples, c.relpages)
		FROM pg_class c WHERE c.relnamespace = $1::regnamespace
		UNION ALL SELECT format('trigger %s on %s', t.tgname, c.relname)
		FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid WHERE c.relnamespace = $1::regnamespace
		UNION ALL SELECT 'function ' || f.proname FROM pg_proc f WHERE f.pronamespace = $1::regnamespace
	) s(x)`

// tablesSQL lists the tables of schema $1 whose rows a test writes.
const tablesSQL = `SELECT relname FROM pg_class
	WHERE relnamespace = $1::regnamespace AND relkind = 'r' AND relname <> 'errand_migrations'`

// inspect returns what schema holds.
func (p *pool) inspect(ctx context.Context, schema string) (shape string, err error) {
	db, err := p.open(ctx)
	if err != nil {
		return "", err
	}
	if err := db.QueryRow(ctx, shapeSQL, schema).Scan(&shape); err != nil {
		return "", fmt.Errorf("describe: %w", err)
	}
	return shape, nil
}

// firstShape reports whether no migrated schema has been described yet.
func (p *pool) firstShape() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.shape == ""
}

// listTables returns the tables of schema whose rows a test writes.
func (p *pool) listTables(ctx context.Context, schema string) ([]string, error) {
	rows, _ := p.db.Query(ctx, tablesSQL, schema)
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("list tables: %w", err)
	}
	return tables, nil
}

// open returns the pool's own connections, opened on first use.
func (p *pool) open(ctx context.Context) (*pgxpool.Pool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.db == nil {
		pool, err := pgxpool.New(ctx, p.url)
		if err != nil {
			return nil, err
		}
		p.db = pool
	}
	return p.db, nil
}

// give takes back schema from the test that ended: emptied, for another,
// when it holds what a migrated schema does, and dropped otherwise. The
// test's stores are closed by then (t.Cleanup runs last what it was given
// first), so no connection of the test holds a lock in it.
func (p *pool) give(schema string) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	shape, err := p.inspect(ctx, schema)
	p.mu.Lock()
	migratedShape, tables := p.shape, p.tables
	p.mu.Unlock()
	if err == nil && shape == migratedShape {
		b := &pgx.Batch{}
		b.Queue("BEGIN")
		b.Queue("SET LOCAL lock_timeout = '10s'") // a connection the test left open
		for _, t := range tables {
			b.Queue("DELETE FROM " + pgx.Identifier{schema, t}.Sanitize())
		}
		b.Queue("COMMIT")
		if err = p.db.SendBatch(ctx, b).Close(); err == nil {
			p.mu.Lock()
			p.free = append(p.free, schema)
			p.mu.Unlock()
			return nil
		}
	}
	if derr := pgtest.Drop(ctx, p.url, schema); derr != nil {
		return fmt.Errorf("drop: %w", derr)
	}
	if err != nil {
		return fmt.Errorf("empty: %w (dropped instead)", err)
	}
	return nil
}

// close drops the schemas no test holds.
func (p *pool) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.db == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, s := range p.free {
		if err := pgtest.Drop(ctx, p.url, s); err != nil {
			fmt.Fprintf(os.Stderr, "pgschemas: drop schema %s: %v\n", s, err)
		}
	}
	p.free = nil
	p.db.Close()
	p.db = nil
}
