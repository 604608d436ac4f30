package errand_test

// A checkpointed job survives a real crash: a worker process runs a job
// over many rows in chunks, each chunk's rows and then its checkpoint
// committed; the test SIGKILLs it mid-run and starts another, which resumes
// from the checkpoint. The rows written twice are the redone work, at most
// one chunk.

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
	"github.com/errandhq/errand/postgres"
	"github.com/errandhq/errand/postgres/pgtest"
	"github.com/errandhq/errand/sqlite"
	"github.com/jackc/pgx/v5"
)

// Environment of a chunk worker process.
const (
	envChunkWorker = "ERRAND_TEST_CHUNK_WORKER" // "1" runs chunkWorkerMain
	envChunkDB     = "ERRAND_TEST_CHUNK_DB"     // a SQLite path or a PostgreSQL URL
	envChunkSchema = "ERRAND_TEST_CHUNK_SCHEMA" // the PostgreSQL schema
)

// The job: chunkRows rows in chunks of chunkSize. The million rows
// in chunks of a thousand behave the same, a hundred times longer; the
// example ExampleCheckpoint shows the handler.
const (
	chunkRows = 100_000
	chunkSize = 1_000
)

// chunkArgs are the args of a "rows" job.
type chunkArgs struct {
	Rows  int `json:"rows"`
	Chunk int `json:"chunk"`
}

// chunkCheckpoint is the resume point: the first row not yet written.
type chunkCheckpoint struct {
	Next int `json:"next"`
}

// chunkDB is the database the chunk workers write their rows into, the
// jobs' own: a SQLite file or a PostgreSQL schema.
type chunkDB struct {
	db    *sql.DB
	table string // the rows table, qualified
}

// openChunkStore opens the store at dsn (schema for PostgreSQL) and its
// rows table.
func openChunkStore(ctx context.Context, dsn, schema string) (errandstore.TxStore[*sql.Tx], *chunkDB, error) {
	if strings.HasPrefix(dsn, "postgres://") {
		s, err := postgres.Open(ctx, dsn, &postgres.Options{Schema: schema, MaxConns: 4})
		if err != nil {
			return nil, nil, err
		}
		v := s.SQL(nil)
		return v, &chunkDB{db: v.DB(), table: pgx.Identifier{schema, "chunk_rows"}.Sanitize()}, nil
	}
	s, err := sqlite.Open(ctx, dsn, nil)
	if err != nil {
		return nil, nil, err
	}
	return s, &chunkDB{db: s.DB(), table: "chunk_rows"}, nil
}

// writeRows writes rows [from, to) in one transaction, tagged with the
// writing process.
func (c *chunkDB) writeRows(ctx context.Context, from, to int) error {
	var b strings.Builder
	b.WriteString("INSERT INTO " + c.table + " (n, pid) VALUES ")
	for n := from; n < to; n++ {
		if n > from {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "(%d,%d)", n, os.Getpid())
	}
	_, err := c.db.ExecContext(ctx, b.String())
	return err
}

// rowsHandler is the chunked job: from its checkpoint (or row 0), write a
// chunk, then checkpoint past it, until every row is written.
func rowsHandler(rows *chunkDB) errand.HandlerFunc {
	return func(ctx context.Context, job *errandtype.Job) error {
		var args chunkArgs
		if err := json.Unmarshal(job.Args, &args); err != nil {
			return errand.Permanent(err)
		}
		cp, _, err := errand.Checkpoint[chunkCheckpoint](job)
		if err != nil {
			return err
		}
		for from := cp.Next; from < args.Rows; from += args.Chunk {
			to := min(from+args.Chunk, args.Rows)
			if err := rows.writeRows(ctx, from, to); err != nil {
				return err
			}
			if err := errand.SetProgress(ctx, chunkCheckpoint{Next: to}); err != nil {
				return err
			}
			// Work that takes a moment, as real chunks do: it leaves the
			// test time to kill the process mid-run.
			time.Sleep(2 * time.Millisecond)
		}
		return nil
	}
}

// chunkWorkerMain is a chunk worker process: it runs a Worker (lease 2s)
// until every "rows" job has succeeded, then prints "done".
func chunkWorkerMain() int {
	ctx := context.Background()
	st, rows, err := openChunkStore(ctx, os.Getenv(envChunkDB), os.Getenv(envChunkSchema))
	if err != nil {
		fmt.Fprintln(os.Stderr, "chunk worker:", err)
		return 1
	}
	c, err := errand.NewClient(st, &errand.Config{Kinds: kindsOf([]testKind{{Name: "rows", Handler: rowsHandler(rows)}})})
	if err != nil {
		fmt.Fprintln(os.Stderr, "chunk worker:", err)
		return 1
	}
	w, err := c.NewWorker(&errand.WorkerConfig{Queues: map[string]int{errand.DefaultQueue: 1}, Lease: 2 * time.Second, PollInterval: 100 * time.Millisecond})
	if err != nil {
		fmt.Fprintln(os.Stderr, "chunk worker:", err)
		return 1
	}
	if err := w.Start(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "chunk worker:", err)
		return 1
	}
	fmt.Println("ready")
	for {
		js, err := c.List(ctx, &errand.ListOpts{States: []errandtype.JobState{errandtype.StateSucceeded}})
		if err == nil && len(js) > 0 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := w.Stop(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "chunk worker:", err)
		return 1
	}
	fmt.Println("done")
	return 0
}

// chunkProc is a running chunk worker process.
type chunkProc struct {
	cmd    *exec.Cmd
	out    *bufio.Reader
	stderr strings.Builder
}

func startChunkWorker(t *testing.T, dsn, schema string) *chunkProc {
	return startTestProcess(t, envChunkWorker+"=1", envChunkDB+"="+dsn, envChunkSchema+"="+schema)
}

// sharedStore opens a fresh database of store (sqlite or postgres) for
// worker processes to share: its dsn and schema, a store on it, and its
// rows table, created.
func sharedStore(t *testing.T, store string) (dsn, schema string, st errandstore.TxStore[*sql.Tx], rows *chunkDB) {
	t.Helper()
	if store == "sqlite" {
		dsn = filepath.Join(t.TempDir(), "errand.db")
	} else {
		dsn = pgtest.URL(t)
		schema = pgtest.Schema(t, dsn)
	}
	st, rows, err := openChunkStore(context.Background(), dsn, schema)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	mustExec(t, rows.db, `CREATE TABLE `+rows.table+` (n INTEGER NOT NULL, pid INTEGER NOT NULL)`)
	return dsn, schema, st, rows
}

// kill SIGKILLs the process and waits for it to die of it.
func (p *chunkProc) kill(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, p.out)
	_ = p.cmd.Wait()
	if ws, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() {
		t.Fatalf("the worker process was not killed: %v", p.cmd.ProcessState)
	}
}

// startTestProcess starts this test binary as a worker process with env
// added to the environment, and waits for it to say "ready".
func startTestProcess(t *testing.T, env ...string) *chunkProc {
	t.Helper()
	p := &chunkProc{cmd: exec.Command(os.Args[0], "-test.run=^$")}
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stderr = &p.stderr
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p.out = bufio.NewReader(out)
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if p.cmd.ProcessState == nil {
			_ = p.cmd.Process.Kill()
			_ = p.cmd.Wait()
		}
	})
	if line, err := p.out.ReadString('\n'); err != nil || line != "ready\n" {
		t.Fatalf("worker process did not start: %q, %v; stderr:\n%s", line, err, p.stderr.String())
	}
	return p
}

// TestCheckpointSurvivesSIGKILL: a chunked job whose worker is SIGKILLed
// mid-run is resumed by another worker process from its checkpoint; the
// rows written twice are at most one chunk, and every row is written. On
// both stores.
func TestCheckpointSurvivesSIGKILL(t *testing.T) {
	t.Parallel()
	for _, store := range []string{"sqlite", "postgres"} {
		t.Run(store, func(t *testing.T) {
			ctx := context.Background()
			dsn, schema, st, rows := sharedStore(t, store)
			c := newClient(t, st, &errand.Config{Kinds: kindsOf([]testKind{{Name: "rows"}})})
			r, err := c.Enqueue(ctx, rawArgs(t, "rows", chunkArgs{Rows: chunkRows, Chunk: chunkSize}), nil)
			if err != nil {
				t.Fatal(err)
			}
			id := r.Job.ID

			first := startChunkWorker(t, dsn, schema)
			written := func() int { return count(t, rows.db, `SELECT count(*) FROM `+rows.table) }
			deadline := time.Now().Add(2 * time.Minute)
			for written() < chunkRows/5 {
				if time.Now().After(deadline) {
					t.Fatalf("the first worker wrote %d rows in 2 minutes; stderr:\n%s", written(), first.stderr.String())
				}
				time.Sleep(5 * time.Millisecond)
			}
			first.kill(t)
			atKill := written()
			j := getJob(t, c, id)
			cp, ok, err := errand.Checkpoint[chunkCheckpoint](j)
			if err != nil || !ok || j.State != errandtype.StateRunning {
				t.Fatalf("after the kill: state %s, checkpoint %v %v %v", j.State, cp, ok, err)
			}
			if atKill >= chunkRows {
				t.Fatalf("the first worker finished before the kill; the test needs it mid-run")
			}

			second := startChunkWorker(t, dsn, schema)
			line, err := second.out.ReadString('\n')
			if err != nil || line != "done\n" {
				t.Fatalf("second worker: %q, %v; stderr:\n%s", line, err, second.stderr.String())
			}
			if err := second.cmd.Wait(); err != nil {
				t.Fatalf("second worker: %v; stderr:\n%s", err, second.stderr.String())
			}

			total := written()
			distinct := count(t, rows.db, `SELECT count(DISTINCT n) FROM `+rows.table)
			redone := total - chunkRows
			t.Logf("killed at %d rows written (checkpoint %d); %d rows redone", atKill, cp.Next, redone)
			if distinct != chunkRows {
				t.Errorf("%d distinct rows written, want %d", distinct, chunkRows)
			}
			if redone < 0 || redone > chunkSize {
				t.Errorf("%d rows redone after the crash; want at most one chunk (%d)", redone, chunkSize)
			}
			j = getJob(t, c, id)
			if j.State != errandtype.StateSucceeded || j.Attempt != 2 || len(j.Errors) != 1 || j.Errors[0].Class != errandstore.ClassLeaseExpired {
				t.Errorf("job %s attempt %d history %+v; want succeeded on attempt 2 after a lease_expired", j.State, j.Attempt, j.Errors)
			}
			if cp, _, _ := errand.Checkpoint[chunkCheckpoint](j); cp.Next != chunkRows {
				t.Errorf("final checkpoint %+v, want next %d", cp, chunkRows)
			}
		})
	}
}

// TestReplayCheckpoint: a replay keeps the checkpoint, so the job resumes;
// Restart, or corrected args, clear it.
func TestReplayCheckpoint(t *testing.T) {
	ctx := context.Background()
	clock := newTestClock()
	s := openStore(t, clock)
	var seen []string
	c := handlerClient(t, s, func(ctx context.Context, j *errandtype.Job) error {
		seen = append(seen, string(j.Progress))
		if err := errand.SetProgress(ctx, chunkCheckpoint{Next: 7}); err != nil {
			return err
		}
		return errand.Permanent(errors.New("stop"))
	})
	id := enqueue(t, c, "task", nil).ID
	run := func() {
		t.Helper()
		if r := workOne(t, c, nil); r.Result != errand.ResultDead {
			t.Fatalf("attempt: %s", r.Result)
		}
	}
	run()
	for _, opts := range []*errand.ReplayOpts{
		{Operator: "ana", Reason: "resume"},
		{Operator: "ana", Reason: "start over", Restart: true},
		{Operator: "ana", Reason: "fixed args", Args: []byte(`{"fixed":true}`)},
	} {
		if _, err := c.Replay(ctx, id, opts); err != nil {
			t.Fatal(err)
		}
		run()
	}
	want := []string{"", `{"next":7}`, "", ""}
	if len(seen) != len(want) {
		t.Fatalf("attempts saw %q, want %q", seen, want)
	}
	for i := range want {
		if seen[i] != want[i] {
			t.Errorf("attempt %d saw progress %q, want %q", i+1, seen[i], want[i])
		}
	}
}
