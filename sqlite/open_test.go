package sqlite_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
	"github.com/errandhq/errand/sqlite"
)

// otherApp makes another application's database: one table of its own, in
// SQLite's default rollback-journal mode.
func otherApp(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "other-app.db")
	exec(t, path, `CREATE TABLE invoices (id INTEGER PRIMARY KEY, total INTEGER)`, `INSERT INTO invoices (total) VALUES (42)`)
	return path
}

// dirEntries lists the names in dir, to see sidecar files (-wal, -shm,
// -journal) appear.
func dirEntries(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

// TestNoMigrateLeavesOtherDatabasesAlone opens files that are not errand's
// without migrating: each is refused and left exactly as it was, byte for
// byte, still in rollback-journal mode and without errand's tables.
func TestNoMigrateLeavesOtherDatabasesAlone(t *testing.T) {
	empty := filepath.Join(t.TempDir(), "empty.db")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	notes := filepath.Join(t.TempDir(), "notes.txt")
	if err := os.WriteFile(notes, []byte("not a database, but long enough to have a header of a kind\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name     string
		path     string
		noSchema bool // the error matches errandtype.ErrNoSchema
	}{
		{"other application", otherApp(t), true},
		{"empty file", empty, true},
		{"not a database", notes, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			before, err := os.ReadFile(tt.path)
			if err != nil {
				t.Fatal(err)
			}
			files := dirEntries(t, filepath.Dir(tt.path))
			s, err := sqlite.Open(t.Context(), tt.path, &sqlite.Options{NoMigrate: true})
			if err == nil {
				s.Close()
				t.Fatal("Open with NoMigrate succeeded")
			}
			if got := errors.Is(err, errandtype.ErrNoSchema); got != tt.noSchema {
				t.Errorf("Open: %v; matches ErrNoSchema %v, want %v", err, got, tt.noSchema)
			}
			after, err := os.ReadFile(tt.path)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(before, after) {
				t.Errorf("Open with NoMigrate changed %s", tt.path)
			}
			if got := dirEntries(t, filepath.Dir(tt.path)); strings.Join(got, " ") != strings.Join(files, " ") {
				t.Errorf("files next to the database: %v, before %v", got, files)
			}
			if !tt.noSchema || len(before) == 0 {
				return
			}
			if mode := query(t, tt.path, `PRAGMA journal_mode`); len(mode) != 1 || mode[0] != "delete" {
				t.Errorf("journal mode %v, want delete", mode)
			}
			if tables := query(t, tt.path, `SELECT name FROM sqlite_master WHERE name LIKE 'errand%'`); len(tables) > 0 {
				t.Errorf("errand's tables appeared: %v", tables)
			}
		})
	}

	missing := filepath.Join(t.TempDir(), "missing.db")
	if s, err := sqlite.Open(t.Context(), missing, &sqlite.Options{NoMigrate: true}); !errors.Is(err, errandtype.ErrNoSchema) {
		if s != nil {
			s.Close()
		}
		t.Errorf("Open with NoMigrate on a missing file: %v, want ErrNoSchema", err)
	}
	if _, err := os.Stat(missing); !os.IsNotExist(err) {
		t.Errorf("Open with NoMigrate created %s", missing)
	}
}

// TestNoMigrateOpensAMigratedDatabase reads and writes jobs through a store
// opened without migrating on a database errand migrated.
func TestNoMigrateOpensAMigratedDatabase(t *testing.T) {
	path := filepath.Join(t.TempDir(), "errand.db")
	s := open(t, path, nil)
	if _, err := s.JobInsertMany(t.Context(), &errandstore.JobInsertManyParams{Jobs: []*errandstore.JobInsertParams{{ID: "j1", Queue: "default", Kind: "k", Args: []byte(`{}`), ArgsVersion: 1, MaxAttempts: 1}}}); err != nil {
		t.Fatal(err)
	}
	s.Close()

	s, err := sqlite.Open(t.Context(), path, &sqlite.Options{NoMigrate: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if j, err := s.JobGet(t.Context(), &errandstore.JobGetParams{ID: "j1"}); err != nil || j.ID != "j1" {
		t.Fatalf("JobGet = %v, %v", j, err)
	}
	if _, err := s.JobCancel(t.Context(), &errandstore.JobCancelParams{ID: "j1"}); err != nil {
		t.Fatalf("JobCancel: %v", err)
	}
}

// TestNoMigrateRefusesOtherVersions: a database an older errand migrated,
// or a newer one, is not opened by a store that may not migrate it; the
// error says what to do, and nothing is applied.
func TestNoMigrateRefusesOtherVersions(t *testing.T) {
	for _, tt := range []struct {
		name     string
		path     string
		versions string
		want     []string
	}{
		{"older", schemaAt(t, 2), "1,2", []string{"schema version 2", "errand migrate"}},
		{"newer", schemaAt(t, 2, 99), "1,2,99", []string{"version 99", "upgrade errand"}},
	} {
		s, err := sqlite.Open(t.Context(), tt.path, &sqlite.Options{NoMigrate: true})
		if err == nil {
			s.Close()
			t.Errorf("%s: Open with NoMigrate succeeded", tt.name)
			continue
		}
		for _, w := range tt.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: Open: %v, want it to contain %q", tt.name, err, w)
			}
		}
		if vs := query(t, tt.path, `SELECT version FROM errand_migrations ORDER BY version`); strings.Join(vs, ",") != tt.versions {
			t.Errorf("%s: versions after a refused open: %v, want %s", tt.name, vs, tt.versions)
		}
	}
}
