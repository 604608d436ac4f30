// Package sqlbuild renders the SQL that errand's two SQL stores build the
// same way but for their dialect: how a numbered parameter is written, how
// a table is named and how a time is stored.
package sqlbuild

import (
	"strconv"
	"time"
)

// Dialect is what differs between the stores in the SQL this package
// renders.
type Dialect struct {
	// Mark prefixes a numbered parameter: "?" on SQLite (?1), "$" on
	// PostgreSQL ($1).
	Mark string
	// Table names the table errand_name, e.g. "errand_jobs" for "jobs", or a
	// placeholder the store expands later.
	Table func(name string) string
	// Time is t as the store binds it.
	Time func(t time.Time) any
}

// Param is the numbered parameter n.
func (d Dialect) Param(n int) string { return d.Mark + strconv.Itoa(n) }
