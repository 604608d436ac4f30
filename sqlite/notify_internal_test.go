package sqlite

import (
	"path/filepath"
	"testing"
	"time"
)

// TestListenQueuesWithoutWatch: where the WAL cannot be watched, the
// listener checks every interval and still sees another store's commits.
func TestListenQueuesWithoutWatch(t *testing.T) {
	path := filepath.Join(t.TempDir(), "errand.db")
	s, err := Open(t.Context(), path, &Options{pollWAL: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	other, err := Open(t.Context(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	ch, err := s.ListenQueues(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	// Past the window of checks that every listener starts with.
	time.Sleep(walWriteWindow + 500*time.Millisecond)
	for i := range 3 {
		if _, err := other.DB().ExecContext(t.Context(), `CREATE TABLE IF NOT EXISTS app (x)`); err != nil {
			t.Fatal(err)
		}
		if _, err := other.DB().ExecContext(t.Context(), `INSERT INTO app VALUES (?)`, i); err != nil {
			t.Fatal(err)
		}
		select {
		case <-ch:
		case <-time.After(10 * time.Second):
			t.Fatalf("commit %d by another connection was not delivered", i)
		}
	}
}
