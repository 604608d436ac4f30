package postgres_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
	"github.com/errandhq/errand/postgres"
	"github.com/errandhq/errand/postgres/pgtest"
	"github.com/jackc/pgx/v5"
)

// openNamed opens a store on schema whose connections carry application
// name app (its listener's app + "/listener"), so that a test can find and
// terminate them, with its log written to logs when not nil.
func openNamed(t *testing.T, dbURL, schema, app string, logs *syncBuffer) *postgres.Store {
	t.Helper()
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("application_name", app)
	u.RawQuery = q.Encode()
	opts := &postgres.Options{Schema: schema, MaxConns: 4}
	if logs != nil {
		opts.Logger = slog.New(slog.NewTextHandler(logs, nil))
	}
	s, err := postgres.Open(t.Context(), u.String(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// loggingClient returns a client on s, logging to logs, whose "ping"
// handler reports the id of each job it runs on ran.
func loggingClient(t *testing.T, s *postgres.Store, logs io.Writer, ran chan<- string) *errand.Client[pgx.Tx] {
	t.Helper()
	c, err := errand.NewClient(s, &errand.Config{Logger: slog.New(slog.NewTextHandler(logs, nil)), Kinds: kindsOf([]testKind{{
		Name: "ping",
		Handler: errand.HandlerFunc(func(ctx context.Context, j *errandtype.Job) error {
			ran <- j.ID
			return nil
		}),
	}})})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// terminateApp terminates every backend whose application name starts
// with app, as a server restart or an idle-connection killer would, and
// returns how many it terminated.
func terminateApp(t *testing.T, by *postgres.Store, app string) int {
	t.Helper()
	var n int
	if err := by.Pool().QueryRow(t.Context(), `SELECT count(*) FILTER (WHERE pg_terminate_backend(pid))
		FROM pg_stat_activity WHERE starts_with(application_name, $1) AND pid <> pg_backend_pid()`, app).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// waitFor polls cond every 10ms until it holds, failing the test after
// 15s (a guard against a hang, not a measure).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no %s in 30s", what)
		}
	}
}

// listening reports whether a backend of app listens on a new connection,
// one not in old.
func listeningAgain(t *testing.T, by *postgres.Store, app string, old []int32) func() bool {
	return func() bool {
		var pids []int32
		rows, err := by.Pool().Query(t.Context(), `SELECT pid FROM pg_stat_activity
			WHERE application_name = $1 AND query LIKE 'LISTEN %'`, app+"/listener")
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var pid int32
			if err := rows.Scan(&pid); err != nil {
				t.Fatal(err)
			}
			pids = append(pids, pid)
		}
		if rows.Err() != nil {
			t.Fatal(rows.Err())
		}
		for _, p := range pids {
			if !containsPID(old, p) {
				return true
			}
		}
		return false
	}
}

func listenerPIDsOf(t *testing.T, by *postgres.Store, app string) []int32 {
	t.Helper()
	rows, err := by.Pool().Query(t.Context(), `SELECT pid FROM pg_stat_activity WHERE application_name = $1`, app+"/listener")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var pids []int32
	for rows.Next() {
		var pid int32
		if err := rows.Scan(&pid); err != nil {
			t.Fatal(err)
		}
		pids = append(pids, pid)
	}
	return pids
}

func containsPID(pids []int32, p int32) bool {
	for _, q := range pids {
		if q == p {
			return true
		}
	}
	return false
}

// TestWorkerConnectionsTerminated terminates every connection of a worker
// that polls once an hour: a job waiting when they die is found when its
// listener reconnects (the reconnect asks it to look at every queue), and a
// job enqueued through another store afterwards is woken by a notification
// on the new listening connection. Neither waits for the poll.
func TestWorkerConnectionsTerminated(t *testing.T) {
	dbURL := pgtest.URL(t)
	schema := pgtest.Schema(t, dbURL)
	app := "errand-w-" + strings.TrimPrefix(schema, "errand_t_")
	var logs syncBuffer
	workerStore := openNamed(t, dbURL, schema, app, &logs)
	producerStore := openForWorker(t, dbURL, schema)
	ran := make(chan string, 10)
	startWorker(t, loggingClient(t, workerStore, &logs, ran), errand.WorkerConfig{PollInterval: time.Hour})
	producer := countingClient(t, producerStore, nil)
	old := listenerPIDsOf(t, producerStore, app)
	if len(old) != 1 {
		t.Fatalf("worker's listener backends %v, want one", old)
	}

	// A job whose notification is lost: inserted through the store, which
	// sends none, just before the worker's connections die.
	lost, err := producerStore.JobInsertMany(t.Context(), &errandstore.JobInsertManyParams{Jobs: []*errandstore.JobInsertParams{
		{ID: "lost-wakeup", Queue: "default", Kind: "ping", Args: []byte(`{}`), ArgsVersion: 1, MaxAttempts: 3}}})
	if err != nil {
		t.Fatal(err)
	}
	if n := terminateApp(t, producerStore, app); n < 2 {
		t.Fatalf("terminated %d of the worker's connections, want its pool's and its listener's", n)
	}
	select {
	case id := <-ran:
		if id != lost[0].Job.ID {
			t.Errorf("ran %s, want %s", id, lost[0].Job.ID)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("the job waiting when the connections died did not run in 30s; the worker polls hourly, so the reconnect's look at every queue missed it\n%s", logs.String())
	}

	waitFor(t, "listener on a new connection", listeningAgain(t, producerStore, app, old))
	r, err := producer.Enqueue(t.Context(), errand.RawArgs{KindName: "ping"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case id := <-ran:
		if id != r.Job.ID {
			t.Errorf("ran %s, want %s", id, r.Job.ID)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("job enqueued after the reconnect not started in 30s; the worker polls hourly, so no wake-up reached it\n%s", logs.String())
	}
}

// proxy forwards TCP connections to a PostgreSQL server until cut, when it
// closes every connection and refuses new ones (it stops listening), as a
// server that went down does; restore listens again on the same port.
type proxy struct {
	t      *testing.T
	target string
	addr   string

	mu    sync.Mutex
	ln    net.Listener
	conns []net.Conn
	done  chan struct{}
}

func newProxy(t *testing.T, target string) *proxy {
	p := &proxy{t: t, target: target}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.addr = ln.Addr().String()
	p.serve(ln)
	t.Cleanup(p.cut)
	return p
}

func (p *proxy) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln, p.done = ln, make(chan struct{})
	p.mu.Unlock()
	done := p.done
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", p.target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, s)
			p.mu.Unlock()
			go func() { io.Copy(s, c); s.Close(); c.Close() }()
			go func() { io.Copy(c, s); s.Close(); c.Close() }()
		}
	}()
}

// cut closes the listener and every connection.
func (p *proxy) cut() {
	p.mu.Lock()
	ln, done := p.ln, p.done
	p.ln = nil
	p.mu.Unlock()
	if ln == nil {
		return
	}
	ln.Close()
	<-done
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// restore listens again on the proxy's port.
func (p *proxy) restore() {
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		p.t.Fatal(err)
	}
	p.serve(ln)
}

// cpuTime is the CPU time this process has used.
func cpuTime(t *testing.T) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// behindProxy opens two stores on a fresh schema: the worker's, named app,
// through a proxy the test may cut, and a producer's, straight to the
// server.
func behindProxy(t *testing.T, app string) (p *proxy, worker, producer *postgres.Store) {
	t.Helper()
	dbURL := pgtest.URL(t)
	schema := pgtest.Schema(t, dbURL)
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	p = newProxy(t, u.Host)
	u.Host = p.addr
	return p, openNamed(t, u.String(), schema, app, nil), openForWorker(t, dbURL, schema)
}

// TestWorkerServerUnreachable cuts a worker off from its server until a
// queue has failed four claims in a row (its poll, every 3s, finds the
// server gone; the retries follow 100ms, 200ms and 400ms later): once the
// server is back it runs a job enqueued meanwhile and says that claims
// succeed again. (That a failed claim is retried before the poll is
// TestFailedClaimRetriedBeforePoll's, on a fake clock.)
func TestWorkerServerUnreachable(t *testing.T) {
	p, workerStore, producerStore := behindProxy(t, "errand-unreachable")
	var logs syncBuffer
	ran := make(chan string, 10)
	c, err := errand.NewClient(workerStore, &errand.Config{
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Kinds: kindsOf([]testKind{{Name: "ping", Handler: errand.HandlerFunc(func(ctx context.Context, j *errandtype.Job) error {
			ran <- j.ID
			return nil
		})}})})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	startWorker(t, c, errand.WorkerConfig{Queues: map[string]int{"a": 2, "b": 2}, PollInterval: 3 * time.Second})

	p.cut()
	before, wall := cpuTime(t), time.Now()
	waitFor(t, "a fourth failed claim in a row", func() bool {
		return strings.Contains(logs.String(), " failed_in_a_row=4 ")
	})
	t.Logf("cut off for %v: %v of CPU", time.Since(wall), cpuTime(t)-before)
	// A job enqueued while the worker cannot hear of it.
	r, err := countingClient(t, producerStore, nil).Enqueue(t.Context(), errand.RawArgs{KindName: "ping"}, &errand.EnqueueOpts{Queue: "a"})
	if err != nil {
		t.Fatal(err)
	}
	p.restore()
	select {
	case id := <-ran:
		if id != r.Job.ID {
			t.Errorf("ran %s, want %s", id, r.Job.ID)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("job not run 30s after the server came back; the worker polls every 3s\n%s", logs.String())
	}
	waitFor(t, "the recovery logged", func() bool {
		return strings.Contains(logs.String(), `msg="claims succeed again"`)
	})
}

// TestOutcomeWrittenAfterOutage: a job whose handler returns while the
// server is unreachable has its outcome written once the server is back,
// its lease still live: it succeeds on its first attempt and runs once.
func TestOutcomeWrittenAfterOutage(t *testing.T) {
	p, workerStore, producerStore := behindProxy(t, "errand-outcome")
	var logs syncBuffer
	started, release := make(chan string, 10), make(chan struct{})
	c, err := errand.NewClient(workerStore, &errand.Config{
		Logger: slog.New(slog.NewTextHandler(&logs, nil)),
		Kinds: kindsOf([]testKind{{Name: "ping", Handler: errand.HandlerFunc(func(ctx context.Context, j *errandtype.Job) error {
			started <- j.ID
			<-release
			return nil
		})}})})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	startWorker(t, c, errand.WorkerConfig{Lease: 5 * time.Minute})
	r, err := countingClient(t, producerStore, nil).Enqueue(t.Context(), errand.RawArgs{KindName: "ping"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-started:
	case <-time.After(30 * time.Second):
		t.Fatal("job not started in 30s")
	}
	p.cut()
	close(release)
	waitFor(t, "a failed outcome write", func() bool {
		return strings.Contains(logs.String(), "record outcome failed; retrying while the lease lasts")
	})
	p.restore()
	waitFor(t, "the job to succeed", func() bool {
		j, err := producerStore.JobGet(t.Context(), &errandstore.JobGetParams{ID: r.Job.ID})
		if err != nil {
			t.Fatal(err)
		}
		return j.State == errandtype.StateSucceeded
	})
	j, err := producerStore.JobGet(t.Context(), &errandstore.JobGetParams{ID: r.Job.ID})
	if err != nil {
		t.Fatal(err)
	}
	if j.Attempt != 1 || len(j.Errors) != 0 {
		t.Errorf("job succeeded on attempt %d with errors %v, want its first attempt's outcome recorded", j.Attempt, j.Errors)
	}
	select {
	case id := <-started:
		t.Errorf("job %s ran again", id)
	default:
	}
}
