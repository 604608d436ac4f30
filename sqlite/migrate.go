package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"net/url"
	"strconv"

	"github.com/errandhq/errand/errandtype"
	"github.com/errandhq/errand/internal/migration"
	"github.com/ncruces/go-sqlite3"
)

// checkSchema checks, without writing anything, that the file at path holds
// errand's schema at the version this errand knows. It opens a connection
// of its own with mode=ro: the writer's pragmas would switch another
// application's database to WAL for good.
func checkSchema(ctx context.Context, path string, o Options) error {
	known, err := knownVersion()
	if err != nil {
		return err
	}
	q := url.Values{}
	q.Set("mode", "ro")
	q.Add("_pragma", "busy_timeout("+strconv.FormatInt(o.BusyTimeout.Milliseconds(), 10)+")")
	q.Add("_pragma", "query_only(1)")
	db, err := sql.Open("sqlite3", (&url.URL{Scheme: "file", Path: path, RawQuery: q.Encode()}).String())
	if err != nil {
		return err
	}
	defer db.Close()
	var tables int
	err = db.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'errand_migrations'`).Scan(&tables)
	switch {
	case errors.Is(err, sqlite3.NOTADB):
		return fmt.Errorf("%s is not a SQLite database: %w", path, err)
	case err != nil:
		return fmt.Errorf("read %s: %w", path, err)
	case tables == 0:
		return fmt.Errorf("%s has no errand tables: %w", path, errandtype.ErrNoSchema)
	}
	var newest int
	if err := db.QueryRowContext(ctx, `SELECT coalesce(max(version), 0) FROM errand_migrations`).Scan(&newest); err != nil {
		return fmt.Errorf("read schema version: %w", err)
	}
	return migration.Check("database", newest, known)
}

//go:embed migrations/*.sql
var migrationFS embed.FS

// migrations returns the store's numbered migrations.
func migrations() ([]migration.Migration, error) {
	return migration.Load(migrationFS, "migrations")
}

// knownVersion is the newest schema version this errand knows.
func knownVersion() (int, error) {
	ms, err := migrations()
	if err != nil {
		return 0, fmt.Errorf("load migrations: %w", err)
	}
	return migration.Latest(ms), nil
}

// Migrate applies errand's pending migrations. Open calls it; it is exported
// for deployments that migrate separately. Migrations are numbered and
// forward-only; each runs in its own immediate transaction, so processes that
// open the same file at once apply each migration exactly once. A database
// that a newer errand migrated is refused before anything is applied.
func (s *Store) Migrate(ctx context.Context) error { return s.migrate(ctx) }

func (s *Store) migrate(ctx context.Context) error {
	known, err := knownVersion()
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	ms, _ := migrations() // knownVersion loaded them
	if _, err := s.db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS errand_migrations (
		version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)`); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	for _, m := range ms {
		var newer error
		err := s.tx(ctx, func(tx *sql.Tx) error {
			// Each transaction reads the newest version first, so that a
			// newer errand's schema, even one migrated by another process
			// a moment ago, is refused before this migration is applied.
			var newest, applied int
			if err := tx.QueryRowContext(ctx, `SELECT coalesce(max(version), 0), count(*) FILTER (WHERE version = ?)
				FROM errand_migrations`, m.Version).Scan(&newest, &applied); err != nil {
				return err
			}
			if newest > known {
				newer = migration.Newer("database", newest, known)
				return newer
			}
			if applied > 0 {
				return nil
			}
			if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
				return err
			}
			_, err := tx.ExecContext(ctx, `INSERT INTO errand_migrations (version, name, applied_at) VALUES (?, ?, ?)`,
				m.Version, m.Name, micros(s.clock.Now()))
			return err
		})
		if newer != nil {
			return fmt.Errorf("migrate: %w", newer)
		}
		if err != nil {
			return fmt.Errorf("migrate %s: %w", m.Name, err)
		}
	}
	return nil
}

// SchemaVersion returns the newest applied migration.
func (s *Store) SchemaVersion(ctx context.Context) (int, error) {
	var v int
	err := s.read.QueryRowContext(ctx, `SELECT coalesce(max(version), 0) FROM errand_migrations`).Scan(&v)
	return v, err
}
