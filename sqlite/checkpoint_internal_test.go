package sqlite

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// walFrame is the size of one page in the WAL file: the page and its
// 24-byte frame header. The file starts with a 32-byte header.
const walFrame = 4096 + 24

// openForCheckpoints opens a store on path whose checkpoints come at small
// WAL lengths, with a table to write to.
func openForCheckpoints(t *testing.T, path string, o Options) *Store {
	t.Helper()
	s, err := Open(t.Context(), path, &o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if _, err := s.DB().ExecContext(t.Context(), `CREATE TABLE IF NOT EXISTS app (x BLOB)`); err != nil {
		t.Fatal(err)
	}
	return s
}

// writeOne commits one row of about a page, in a transaction of its own.
func writeOne(t *testing.T, s *Store) {
	t.Helper()
	if _, err := s.DB().ExecContext(t.Context(), `INSERT INTO app VALUES (?)`, bytes.Repeat([]byte{'x'}, 3000)); err != nil {
		t.Fatal(err)
	}
}

func walSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path + "-wal")
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// TestCheckpointOffTheCommit: once the WAL holds checkpointPages, the
// checkpointer copies it back into the database on its own connection, so
// that the writer starts the WAL over, and no commit checkpoints.
func TestCheckpointOffTheCommit(t *testing.T) {
	s := openForCheckpoints(t, filepath.Join(t.TempDir(), "errand.db"), Options{
		Synchronous: "NORMAL", checkpointPages: 50, forcePages: 1 << 30,
	})
	// Commit until the WAL starts over. Under a steady stream of commits
	// a passive checkpoint never copies the whole WAL (commits land while
	// it runs; walForcePages ends the WAL's run then, and is out of reach
	// here), so past 50 pages the writer leaves ever longer quiet spells,
	// in which the checkpointer copies the rest. The test watches for the
	// restart rather than counting commits: how far past 50 pages the WAL
	// grows depends on scheduling.
	var most int64
	pause := time.Millisecond
	deadline := time.Now().Add(time.Minute)
	for {
		writeOne(t, s)
		w := s.ckpt.walPages.Load()
		if w < most {
			break // the WAL started over: everything in it was copied
		}
		most = w
		if time.Now().After(deadline) {
			t.Fatalf("the WAL holds %d pages after a minute of commits and quiet spells up to %v; no checkpoint emptied it (background checkpoints: %d)",
				w, pause, s.ckpt.background.Load())
		}
		if w >= 50 {
			time.Sleep(pause) // a quiet spell for the checkpointer
			pause = min(2*pause, 200*time.Millisecond)
		}
	}
	if most < 50 {
		t.Errorf("the WAL started over at %d pages; want no checkpoint before 50", most)
	}
	if s.ckpt.background.Load() == 0 {
		t.Error("the WAL started over, but the checkpointer ran no checkpoint")
	}
	if n := s.ckpt.inline.Load(); n != 0 {
		t.Errorf("%d commits checkpointed inside the commit; want none below forcePages", n)
	}
}

// TestCheckpointWALStaysBounded: under a steady stream of commits, with the
// checkpointer running or stopped, and with two stores (as two processes)
// writing one file, the WAL file stays within forcePages and a few
// commits' worth of pages: the writer checkpoints inside a commit when it
// must.
func TestCheckpointWALStaysBounded(t *testing.T) {
	const force = 200
	// A few commits past force: another store's checkpoint in progress
	// fails the writer's at once, and the next commit tries again.
	const slack = 60
	bound := int64(32 + (force+slack)*walFrame)
	for _, tc := range []struct {
		name         string
		stopped      bool
		stores       int
		wantInlineGT int64 // inline checkpoints expected above this
	}{
		{name: "checkpointer running", stores: 1, wantInlineGT: -1},
		{name: "checkpointer stopped", stopped: true, stores: 1, wantInlineGT: 0},
		{name: "two stores", stores: 2, wantInlineGT: -1},
		{name: "two stores, checkpointers stopped", stopped: true, stores: 2, wantInlineGT: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "errand.db")
			var stores []*Store
			for range tc.stores {
				stores = append(stores, openForCheckpoints(t, path, Options{
					Synchronous: "NORMAL", checkpointPages: 50, forcePages: force, noCheckpointer: tc.stopped,
				}))
			}
			var largest int64
			for i := range 3000 { // about 15 times the bound's pages
				writeOne(t, stores[i%len(stores)])
				largest = max(largest, walSize(t, path))
			}
			t.Logf("largest %d pages, inline %d, background %d", (largest-32)/walFrame, stores[0].ckpt.inline.Load(), stores[0].ckpt.background.Load())
			if largest > bound {
				t.Errorf("the WAL file reached %d bytes; want at most %d (%d pages)", largest, bound, force+slack)
			}
			var inline int64
			for _, s := range stores {
				inline += s.ckpt.inline.Load()
			}
			if inline <= tc.wantInlineGT {
				t.Errorf("commits checkpointed %d times; want more than %d", inline, tc.wantInlineGT)
			}
		})
	}
}

// TestCheckpointLongReader: a reader that holds its snapshot keeps the WAL
// from starting over. The writer's checkpoint inside a commit does not
// wait it out on every commit: held off once, it tries again only after
// another checkpointPages of growth. Once the reader is done, the WAL
// starts over.
func TestCheckpointLongReader(t *testing.T) {
	path := filepath.Join(t.TempDir(), "errand.db")
	s := openForCheckpoints(t, path, Options{
		Synchronous: "NORMAL", checkpointPages: 50, forcePages: 100, noCheckpointer: true,
	})
	writeOne(t, s)
	tx, err := s.ReadDB().BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var n int
	if err := tx.QueryRowContext(t.Context(), `SELECT count(*) FROM app`).Scan(&n); err != nil { // the snapshot is taken
		t.Fatal(err)
	}
	for range 300 {
		writeOne(t, s)
	}
	// The writer tried at 100 pages and then every 50 more, not at each
	// commit past 100.
	pages := s.ckpt.walPages.Load()
	if tries, most := s.ckpt.heldOff.Load(), (pages-100)/50+1; tries < 1 || tries > most {
		t.Errorf("with a reader in the WAL the writer tried %d checkpoints as the WAL grew to %d pages; want 1 to %d", tries, pages, most)
	}
	if s.ckpt.heldOff.Load() == 0 {
		t.Error("no checkpoint was held off by the reader")
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	for range 100 {
		writeOne(t, s)
		if s.ckpt.walPages.Load() < 50 {
			return // the WAL started over
		}
	}
	t.Fatalf("the WAL holds %d pages 100 commits after the reader ended; want it started over", s.ckpt.walPages.Load())
}
