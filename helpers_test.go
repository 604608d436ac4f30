package errand_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"testing"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtest"
	"github.com/errandhq/errand/errandtype"
	"github.com/errandhq/errand/internal/sqlitetest"
	"github.com/errandhq/errand/sqlite"
)

// newTestClock returns a fake clock for a store and a client to share. It
// starts on a whole second so that times survive the store's microsecond
// precision unchanged.
func newTestClock() *errandtest.Clock {
	return errandtest.NewClock(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
}

// clockWait is how long a test waits for the code under test to react to
// the fake clock, or to block on it: generous, since the machines are
// shared and slow; a passing test never waits it out.
const clockWait = 10 * time.Second

// blockUntilAt waits until n of clock's timers are armed to fire at at: a
// worker whose poll interval is an hour has gone idle once its poll timer
// is armed for an hour from now.
func blockUntilAt(t testing.TB, clock *errandtest.Clock, at time.Time, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), clockWait)
	defer cancel()
	if err := clock.BlockUntilAt(ctx, at, n); err != nil {
		t.Fatal(err)
	}
}

// openStore opens a fresh SQLite file in a temporary directory, at the
// current schema. A nil clock means the process clock.
func openStore(t testing.TB, clock errandstore.Clock) *sqlite.Store {
	t.Helper()
	return openStoreAt(t, sqlitetest.Path(t), clock)
}

// openStoreAt opens the SQLite file at path, which other stores may share.
func openStoreAt(t testing.TB, path string, clock errandstore.Clock) *sqlite.Store {
	t.Helper()
	st, err := sqlite.Open(context.Background(), path, &sqlite.Options{Clock: clock})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() {
		if err := st.Close(); err != nil {
			t.Errorf("close store: %v", err)
		}
	})
	return st
}

func newClient(t testing.TB, st errandstore.TxStore[*sql.Tx], cfg *errand.Config) *errand.Client[*sql.Tx] {
	t.Helper()
	c, err := errand.NewClient(st, cfg)
	if err != nil {
		t.Fatalf("new client: %v", err)
	}
	return c
}

// testKind is one kind of a test's client, by name: the tests' jobs are
// raw, so that one handler can serve kinds named at run time.
type testKind struct {
	Name        string
	Handler     errand.Handler // nil: declared only
	MaxAttempts int
	RetryPolicy *errand.RetryPolicy
	Timeout     time.Duration
}

// kindsOf builds a client's Kinds from ks.
func kindsOf(ks []testKind) *errand.Kinds {
	kinds := errand.NewKinds()
	for _, k := range ks {
		kinds.HandleRaw(k.Name, k.Handler, &errand.KindOpts{MaxAttempts: k.MaxAttempts, RetryPolicy: k.RetryPolicy, Timeout: k.Timeout})
	}
	return kinds
}

// rawArgs are args of kind with v's JSON.
func rawArgs(t testing.TB, kind string, v any) errand.RawArgs {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return errand.RawArgs{KindName: kind, JSON: b}
}

// handlerClient returns a client with one kind, "task", run by h.
func handlerClient(t testing.TB, st errandstore.TxStore[*sql.Tx], h errand.HandlerFunc) *errand.Client[*sql.Tx] {
	t.Helper()
	return newClient(t, st, &errand.Config{Kinds: kindsOf([]testKind{{Name: "task", Handler: h}})})
}

func enqueue(t testing.TB, c *errand.Client[*sql.Tx], kind string, opts *errand.EnqueueOpts) *errandtype.Job {
	t.Helper()
	r, err := c.Enqueue(context.Background(), errand.RawArgs{KindName: kind}, opts)
	if err != nil {
		t.Fatalf("enqueue %s: %v", kind, err)
	}
	return r.Job
}

// enqueueN enqueues n jobs of kind with empty args in one EnqueueMany call.
func enqueueN(t testing.TB, c *errand.Client[*sql.Tx], kind string, n int) []errand.EnqueueResult {
	t.Helper()
	ps := make([]errand.EnqueueParams, n)
	for i := range ps {
		ps[i] = errand.EnqueueParams{Args: errand.RawArgs{KindName: kind}}
	}
	rs, err := c.EnqueueMany(context.Background(), ps)
	if err != nil {
		t.Fatalf("enqueue %d %s: %v", n, kind, err)
	}
	return rs
}

func getJob(t testing.TB, c *errand.Client[*sql.Tx], id string) *errandtype.Job {
	t.Helper()
	j, err := c.Get(context.Background(), id)
	if err != nil {
		t.Fatalf("get %s: %v", id, err)
	}
	return j
}

func workOne(t testing.TB, c *errand.Client[*sql.Tx], opts *errand.WorkOneOpts) *errand.WorkResult {
	t.Helper()
	r, err := c.WorkOne(context.Background(), opts)
	if err != nil {
		t.Fatalf("work one: %v", err)
	}
	return r
}

// count runs a count(*) query on the store's database.
func count(t testing.TB, db *sql.DB, query string, args ...any) int {
	t.Helper()
	var n int
	if err := db.QueryRow(query, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

// rowCounts counts the rows of every errand table, to show that a rejected
// call wrote nothing.
func rowCounts(t testing.TB, db *sql.DB) [3]int {
	t.Helper()
	return [3]int{
		count(t, db, `SELECT count(*) FROM errand_jobs`),
		count(t, db, `SELECT count(*) FROM errand_audit`),
		count(t, db, `SELECT count(*) FROM errand_effects`),
	}
}

func mustExec(t testing.TB, db *sql.DB, query string, args ...any) {
	t.Helper()
	if _, err := db.Exec(query, args...); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}

func classes(errs []errandtype.AttemptError) []string {
	var cs []string
	for _, e := range errs {
		cs = append(cs, e.Class)
	}
	return cs
}
