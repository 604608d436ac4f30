package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"
	"unicode/utf8"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandtype"
)

// enqueueFile is what errand batch enqueue and errand workflow enqueue do
// alike. It reads req from --file (see readEnqueueFile) and checks it
// before the database is opened, so that bad input creates none; then it
// enqueues it, and answers an id that holds something else with what to
// change.
func enqueueFile(ctx context.Context, db string, pos []string, file, what, endpoint string, req any,
	check func() error, enqueue func(*errand.Client[*sql.Tx]) error) error {
	if err := readEnqueueFile(pos, file, what, endpoint, req); err != nil {
		return err
	}
	if err := check(); err != nil {
		return err
	}
	c, closeDB, err := openClient(ctx, db, mayCreate, &errand.Config{})
	if err != nil {
		return err
	}
	defer closeDB()
	if err := enqueue(c); err != nil {
		return idConflict(err, "\"id\"", "set \"first_wins\": true")
	}
	return nil
}

// showByID is errand batch ID and errand workflow ID: it gets the record
// noun names by id and prints jsonOf it with --json, else writes it for a
// person as of the store's now.
func showByID[T any](ctx context.Context, e *env, db, id, noun string, asJSON bool,
	get func(*errand.Client[*sql.Tx], context.Context, string) (T, error),
	jsonOf func(T) any, write func(T, time.Time) error) error {
	c, closeDB, err := openClient(ctx, db, mustExist, &errand.Config{})
	if err != nil {
		return err
	}
	defer closeDB()
	v, err := get(c, ctx, id)
	if errors.Is(err, errandtype.ErrNotFound) {
		return fmt.Errorf("no %s with id %s; errand %ss lists them", noun, id, noun)
	}
	if err != nil {
		return err
	}
	if asJSON {
		return writeJSON(e.stdout, jsonOf(v))
	}
	now, err := c.Store().Now(ctx)
	if err != nil {
		return err
	}
	return write(v, now)
}

// orEmpty returns jobs, or an empty list for none, so that JSON prints []
// rather than null.
func orEmpty(jobs []*errandtype.Job) []*errandtype.Job {
	if jobs == nil {
		return []*errandtype.Job{}
	}
	return jobs
}

// readEnqueueFile is the --file of errand batch enqueue and errand
// workflow enqueue: it decodes FILE (- for standard input), one JSON object
// without unknown fields, into req. pos are the arguments after enqueue,
// which must be none; what names the object and its help topic ("batch"),
// endpoint the API path that takes the same JSON.
func readEnqueueFile(pos []string, file, what, endpoint string, req any) error {
	if len(pos) > 0 {
		return usagef("unexpected argument %q; give the %s with --file FILE.json", pos[0], what)
	}
	if file == "" {
		return usagef("give --file FILE.json (or --file - for standard input): the %s as POST %s takes it", what, endpoint)
	}
	var b []byte
	var err error
	if file == "-" {
		b, err = io.ReadAll(os.Stdin)
	} else {
		b, err = os.ReadFile(file)
	}
	if err != nil {
		return usagef("--file: %v", err)
	}
	// The decoder would turn invalid UTF-8 into U+FFFD unseen, and a
	// kind, queue or id would be stored other than written.
	if !utf8.Valid(b) {
		return usagef("--file %s is not valid UTF-8; save the %s as UTF-8", file, what)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(req); err != nil {
		return usagef("--file %s is not a %s: %v; see errand help %s", file, what, err, what)
	}
	if _, err := dec.Token(); err != io.EOF {
		return usagef("--file %s holds more than one JSON value; give one %s object", file, what)
	}
	return nil
}
