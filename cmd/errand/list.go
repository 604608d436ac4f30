package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
)

// printList prints the rows of a listing, errand batches or errand
// workflows: with asJSON one JSON array ([] when there are none), else
// "no NOUN" (noun is plural) or the table that table writes, its times
// relative to the database's clock.
func printList[T any](ctx context.Context, e *env, st errandstore.Store, rows []T, asJSON bool, noun string, table func(io.Writer, []T, time.Time) error) error {
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

// beforeCursor is the position in a listing, newest first, after the row
// id of a noun (batch, workflow) whose creation time created reads: the
// value of a --before flag. Empty id is no position.
func beforeCursor(ctx context.Context, noun, id string, created func(context.Context, string) (time.Time, error)) (*errandtype.ListCursor, error) {
	if id == "" {
		return nil, nil
	}
	at, err := created(ctx, id)
	if errors.Is(err, errandtype.ErrNotFound) {
		return nil, fmt.Errorf("--before: no %s with id %s (retention may have deleted it); list again from the newest", noun, id)
	}
	if err != nil {
		return nil, err
	}
	return &errandtype.ListCursor{CreatedAt: at, ID: id}, nil
}
