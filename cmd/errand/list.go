package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/errandhq/errand"
)

// printList prints the rows of a listing, errand batches or errand
// workflows: with asJSON one JSON array ([] when there are none), else
// "no NOUN" (noun is plural) or the table that table writes, its times
// relative to the database's clock.
func printList[T any](ctx context.Context, e *env, st errand.Store, rows []T, asJSON bool, noun string, table func(io.Writer, []T, time.Time) error) error {
	if asJSON {
		if rows == nil {
			rows = []T{}
		}
		return writeJSON(e.stdout, rows)
	}
	if len(rows) == 0 {
		_, err := fmt.Fprintln(e.stdout, "no "+noun)
		return err
	}
	now, err := st.Now(ctx)
	if err != nil {
		return err
	}
	return table(e.stdout, rows, now)
}
