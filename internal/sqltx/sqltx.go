// Package sqltx ends a database/sql transaction the way every errand store
// does: committed when the work in it succeeds, rolled back when it fails
// or panics.
package sqltx

import "database/sql"

// Run runs fn in tx, which the caller began, then commits tx, or rolls it
// back when fn returns an error or panics. It returns fn's error, or the
// commit's.
func Run(tx *sql.Tx, fn func(tx *sql.Tx) error) error {
	committed := false
	defer func() {
		if !committed {
			_ = tx.Rollback() // after an error or a panic
		}
	}()
	if err := fn(tx); err != nil {
		return err
	}
	committed = true
	return tx.Commit()
}
