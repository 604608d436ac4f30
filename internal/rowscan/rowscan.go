// Package rowscan reads query results row by row, the same way for
// database/sql's rows and pgx's.
package rowscan

// Row is one row to scan: a *sql.Row, *sql.Rows, pgx.Row or pgx.Rows.
type Row interface {
	Scan(dest ...any) error
}

// Rows are the rows of a query.
type Rows interface {
	Row
	Next() bool
	Err() error
}

// All reads every row of rows with scan, in order, and returns what it
// read, or the first error. It does not close rows.
func All[T any](rows Rows, scan func(row Row) (T, error)) ([]T, error) {
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// List is All, but reads no rows as an empty list rather than nil, so that
// an empty result is [] in JSON too.
func List[T any](rows Rows, scan func(row Row) (T, error)) ([]T, error) {
	out, err := All(rows, scan)
	if err == nil && out == nil {
		out = []T{}
	}
	return out, err
}
