package sqlite_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/errandhq/errand/errandstore"
)

// TestListenQueuesSeesOtherConnections: a listener delivers "" after another
// store on the same file commits, stays silent while nobody writes, and
// closes its channel when its context ends.
func TestListenQueuesSeesOtherConnections(t *testing.T) {
	path := filepath.Join(t.TempDir(), "errand.db")
	s := open(t, path, nil)
	defer s.Close()
	other := open(t, path, nil)
	defer other.Close()

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	ch, err := s.ListenQueues(ctx)
	if err != nil {
		t.Fatal(err)
	}

	// Nobody writes: a hundred checks find nothing to deliver.
	select {
	case q := <-ch:
		t.Fatalf("delivered %q with no commit", q)
	case <-time.After(100 * sqliteWakeInterval):
	}

	for i := range 3 {
		if _, err := other.DB().ExecContext(t.Context(), `CREATE TABLE IF NOT EXISTS app (x)`); err != nil {
			t.Fatal(err)
		}
		if _, err := other.DB().ExecContext(t.Context(), `INSERT INTO app VALUES (?)`, i); err != nil {
			t.Fatal(err)
		}
		select {
		case q := <-ch:
			if q != "" {
				t.Fatalf("delivered %q, want \"\" (every queue)", q)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("commit %d by another connection was not delivered", i)
		}
	}

	// The store's own writer is another connection to the listener too.
	if _, err := s.DB().ExecContext(t.Context(), `INSERT INTO app VALUES (9)`); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatal("a commit by the store's own writer was not delivered")
	}

	cancel()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				return
			}
		case <-deadline:
			t.Fatal("channel still open 10s after ctx ended")
		}
	}
}

// TestListenQueuesSkipsOwnTransactions: the store's own transactions (an
// insert, a claim) deliver nothing to its listener, whose process wakes
// its workers directly; a commit by the application on Store.DB, or by
// another store, right after them is delivered.
func TestListenQueuesSkipsOwnTransactions(t *testing.T) {
	path := filepath.Join(t.TempDir(), "errand.db")
	s := open(t, path, nil)
	defer s.Close()
	other := open(t, path, nil)
	defer other.Close()
	if _, err := s.DB().ExecContext(t.Context(), `CREATE TABLE app (x)`); err != nil {
		t.Fatal(err)
	}
	ch, err := s.ListenQueues(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	ownTransactions := func() {
		t.Helper()
		n++
		if _, err := s.JobInsertMany(t.Context(), &errandstore.JobInsertManyParams{Jobs: []*errandstore.JobInsertParams{{
			ID: "j" + strconv.Itoa(n), Queue: "q", Kind: "k", Args: json.RawMessage(`{}`), ArgsVersion: 1, MaxAttempts: 3,
		}}}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.JobClaimMany(t.Context(), &errandstore.JobClaimParams{Queues: []string{"q"}, Limit: 1, Lease: time.Minute, Owner: "w"}); err != nil {
			t.Fatal(err)
		}
	}
	for i, commit := range []func() error{
		func() error { _, err := s.DB().ExecContext(t.Context(), `INSERT INTO app VALUES (1)`); return err },
		func() error { _, err := other.DB().ExecContext(t.Context(), `INSERT INTO app VALUES (2)`); return err },
	} {
		ownTransactions()
		// A hundred checks within the window after the writes find only
		// the store's own commits.
		select {
		case <-ch:
			t.Fatalf("round %d: delivered after the store's own transactions only", i)
		case <-time.After(100 * sqliteWakeInterval):
		}
		if err := commit(); err != nil {
			t.Fatal(err)
		}
		select {
		case <-ch:
		case <-time.After(10 * time.Second):
			t.Fatalf("round %d: a commit after the store's own was not delivered", i)
		}
	}
}

// TestListenQueuesWaitsOutAHeldWriter: a check that finds the store's own
// commit while another transaction holds the writer past the check's wait
// for it tells the commit apart once the writer is free, instead of
// delivering as if the check had failed.
func TestListenQueuesWaitsOutAHeldWriter(t *testing.T) {
	path := filepath.Join(t.TempDir(), "errand.db")
	s := open(t, path, nil)
	defer s.Close()
	ch, err := s.ListenQueues(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if _, err := s.JobInsertMany(t.Context(), &errandstore.JobInsertManyParams{Jobs: []*errandstore.JobInsertParams{{
			ID: "j" + strconv.Itoa(i), Queue: "q", Kind: "k", Args: json.RawMessage(`{}`), ArgsVersion: 1, MaxAttempts: 3,
		}}}); err != nil {
			t.Fatal(err)
		}
		// The writer stays held well past the check's 20ms wait for it.
		if err := s.InTx(t.Context(), func(context.Context, *sql.Tx) error {
			time.Sleep(150 * time.Millisecond)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		select {
		case <-ch:
			t.Fatalf("round %d: delivered after the store's own transactions only", i)
		case <-time.After(100 * sqliteWakeInterval):
		}
	}
}

// sqliteWakeInterval is the default Options.WakeInterval.
const sqliteWakeInterval = 2 * time.Millisecond
