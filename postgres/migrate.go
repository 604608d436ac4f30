package postgres

import (
	"context"
	"embed"
	"fmt"
	"hash/fnv"

	"github.com/errandhq/errand/errandtype"
	"github.com/errandhq/errand/internal/migration"
	"github.com/jackc/pgx/v5"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// migrations returns the store's numbered migrations.
func migrations() ([]migration.Migration, error) {
	return migration.Load(migrationFS, "migrations")
}

// migrationLock is the advisory lock key that serialises migrations of one
// schema: the schema name hashed with FNV-1a, stable across releases and
// PostgreSQL versions (unlike hashtext).
func migrationLock(schema string) int64 {
	h := fnv.New64a()
	h.Write([]byte("errand.migrate:" + schema))
	return int64(h.Sum64())
}

// Migrate applies errand's pending migrations. Open and New call it; it is
// exported for deployments that migrate separately.
func (s *Store) Migrate(ctx context.Context) error { return s.migrate(ctx) }

// migrate applies the pending migrations in one transaction that holds an
// advisory lock on the schema: a process that opens the store while another
// migrates waits, then finds the work done. Migrations are numbered and
// forward-only. The schema and the migrations table are created only when
// missing, so a role without CREATE on the database can open a migrated
// store.
func (s *Store) migrate(ctx context.Context) error {
	ms, err := migrations()
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, migrationLock(s.name)); err != nil {
			return err
		}
		applied, err := s.appliedMigrations(ctx, tx, migration.Latest(ms))
		if err != nil {
			return err
		}
		return s.applyMigrations(ctx, tx, ms, applied)
	})
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	return nil
}

// appliedMigrations reads the versions applied to the schema, creating
// the schema and its migrations table on first use. A version newer than
// known, the latest this build knows, is refused.
func (s *Store) appliedMigrations(ctx context.Context, tx pgx.Tx, known int) (map[int]bool, error) {
	applied := map[int]bool{}
	var exists bool
	if err := tx.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, s.table("errand_migrations")).Scan(&exists); err != nil {
		return nil, err
	}
	if !exists {
		return applied, s.createMigrations(ctx, tx)
	}
	rows, err := tx.Query(ctx, s.sql(`SELECT version FROM {migrations}`))
	if err != nil {
		return nil, err
	}
	vs, err := pgx.CollectRows(rows, pgx.RowTo[int])
	if err != nil {
		return nil, err
	}
	for _, v := range vs {
		if v > known {
			return nil, migration.Newer("database schema "+s.schema, v, known)
		}
		applied[v] = true
	}
	return applied, nil
}

// createMigrations creates the store's schema, unless it exists, and its
// migrations table.
func (s *Store) createMigrations(ctx context.Context, tx pgx.Tx) error {
	var schemaExists bool
	if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)`, s.name).Scan(&schemaExists); err != nil {
		return err
	}
	if !schemaExists {
		if _, err := tx.Exec(ctx, `CREATE SCHEMA `+s.schema); err != nil {
			return fmt.Errorf("create schema %s: %w", s.schema, err)
		}
	}
	_, err := tx.Exec(ctx, s.sql(`CREATE TABLE {migrations} (
		version    integer     PRIMARY KEY,
		name       text        NOT NULL,
		applied_at timestamptz NOT NULL DEFAULT now())`))
	return err
}

// applyMigrations applies, in order, the migrations of ms not applied.
func (s *Store) applyMigrations(ctx context.Context, tx pgx.Tx, ms []migration.Migration, applied map[int]bool) error {
	pending := false
	for _, m := range ms {
		if !applied[m.Version] {
			pending = true
		}
	}
	if !pending {
		return nil
	}
	// The migration files name tables unqualified.
	if _, err := tx.Exec(ctx, `SET LOCAL search_path TO `+s.schema); err != nil {
		return err
	}
	for _, m := range ms {
		if applied[m.Version] {
			continue
		}
		if _, err := tx.Exec(ctx, m.SQL); err != nil {
			return fmt.Errorf("%s: %w", m.Name, err)
		}
		if _, err := tx.Exec(ctx, s.sql(`INSERT INTO {migrations} (version, name) VALUES ($1, $2)`), m.Version, m.Name); err != nil {
			return fmt.Errorf("%s: %w", m.Name, err)
		}
	}
	return nil
}

// checkSchema checks, reading only, that the schema holds errand's tables at
// the version this errand knows.
func (s *Store) checkSchema(ctx context.Context) error {
	ms, err := migrations()
	if err != nil {
		return fmt.Errorf("load migrations: %w", err)
	}
	known := migration.Latest(ms)
	var schemaExists, tableExists bool
	if err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1), to_regclass($2) IS NOT NULL`,
		s.name, s.table("errand_migrations")).Scan(&schemaExists, &tableExists); err != nil {
		return fmt.Errorf("read schema %s: %w", s.schema, err)
	}
	switch {
	case !schemaExists:
		return fmt.Errorf("schema %s does not exist: %w", s.schema, errandtype.ErrNoSchema)
	case !tableExists:
		return fmt.Errorf("schema %s has no errand tables: %w", s.schema, errandtype.ErrNoSchema)
	}
	var newest int
	if err := s.pool.QueryRow(ctx, s.sql(`SELECT coalesce(max(version), 0) FROM {migrations}`)).Scan(&newest); err != nil {
		return fmt.Errorf("read schema version: %w", err)
	}
	return migration.Check("database schema "+s.schema, newest, known)
}

// SchemaVersion returns the newest applied migration.
func (s *Store) SchemaVersion(ctx context.Context) (int, error) {
	var v int
	err := s.pool.QueryRow(ctx, s.sql(`SELECT coalesce(max(version), 0) FROM {migrations}`)).Scan(&v)
	return v, err
}
