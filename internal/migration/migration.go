// Package migration reads a store's numbered, forward-only SQL migrations
// from an embedded file system. Each store applies them its own way; the
// numbering and its checks are shared, so a version number means the same
// schema on every store.
package migration

import (
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
)

// Migration is one numbered SQL file.
type Migration struct {
	Version int
	Name    string // the file name, e.g. 001_init.sql
	SQL     string
}

// Load returns the *.sql files in dir of fsys, ordered by the number their
// names start with. A file without a number or two files with one number is
// an error. The numbers may leave gaps: features developed side by side
// reserve their numbers, and each store applies every migration it has not
// applied, whatever its number, so a number filled in later is applied then.
func Load(fsys fs.FS, dir string) ([]Migration, error) {
	names, err := fs.Glob(fsys, path.Join(dir, "*.sql"))
	if err != nil {
		return nil, err
	}
	ms := make([]Migration, 0, len(names))
	for _, n := range names {
		base := path.Base(n)
		v, err := strconv.Atoi(strings.SplitN(base, "_", 2)[0])
		if err != nil || v < 1 {
			return nil, fmt.Errorf("migration %s: name must start with its number, e.g. 004_retention.sql", base)
		}
		b, err := fs.ReadFile(fsys, n)
		if err != nil {
			return nil, err
		}
		ms = append(ms, Migration{Version: v, Name: base, SQL: string(b)})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].Version < ms[j].Version })
	for i := 1; i < len(ms); i++ {
		if ms[i].Version == ms[i-1].Version {
			return nil, fmt.Errorf("migration %s: number %d is also %s's; give each migration its own number", ms[i].Name, ms[i].Version, ms[i-1].Name)
		}
	}
	if len(ms) == 0 {
		return nil, fmt.Errorf("no migrations in %s", dir)
	}
	return ms, nil
}

// Latest is the newest version of ms, which Load returned.
func Latest(ms []Migration) int { return ms[len(ms)-1].Version }

// Check compares a database's newest applied version with latest, the
// newest this errand knows, and returns nil when they are equal, or the
// error that says what to do: upgrade errand for a newer schema, migrate
// an older one. where names the database ("database", "database schema
// \"errand\"").
func Check(where string, newest, latest int) error {
	if newest > latest {
		return Newer(where, newest, latest)
	}
	if newest < latest {
		return fmt.Errorf("%s is at schema version %d but this errand needs %d; run errand migrate (or open it with migrations) first", where, newest, latest)
	}
	return nil
}

// Newer is the error for a database that a newer errand migrated: it is
// refused before anything is applied.
func Newer(where string, newest, latest int) error {
	return fmt.Errorf("%s is at schema version %d but this errand knows only up to %d; upgrade errand", where, newest, latest)
}
