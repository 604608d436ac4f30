package errandhttp_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/errandhq/errand/errandhttp"
	"github.com/errandhq/errand/postgres"
	"github.com/errandhq/errand/postgres/pgtest"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// lostServer serves the API over a PostgreSQL store whose connections
// carry application name app, on a pool of four that the test fills, with
// a second store (admin) for the test's own statements. The pool pings no
// connection on its own, whatever its idle time, so that only
// postgres.PrepareConn can find the dead ones.
func lostServer(t *testing.T) (s *server, admin *postgres.Store, schema, app string) {
	t.Helper()
	url := pgtest.URL(t)
	schema = pgtest.Schema(t, url)
	app = "errand-lost-" + strings.TrimPrefix(schema, "errand_t_")
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 4
	cfg.ConnConfig.RuntimeParams["application_name"] = app
	cfg.ShouldPing = func(context.Context, pgxpool.ShouldPingParams) bool { return false }
	cfg.PrepareConn = postgres.PrepareConn
	pool, err := pgxpool.NewWithConfig(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	st, err := postgres.New(t.Context(), pool, &postgres.Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	v := st.SQL(nil)
	t.Cleanup(func() { v.Close() })
	admin, err = postgres.Open(t.Context(), url, &postgres.Options{Schema: schema, MaxConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close() })
	// Four connections in the pool, all idle.
	var conns []*pgxpool.Conn
	for range 4 {
		c, err := pool.Acquire(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	for _, c := range conns {
		c.Release()
	}
	return newServer(t, v, nil, nil), admin, schema, app
}

// TestAPIPooledConnectionsTerminated: every pooled connection of the
// server's store is terminated, as a database restart or an idle-session
// killer would; the enqueues that follow all succeed, none sent on a dead
// connection.
func TestAPIPooledConnectionsTerminated(t *testing.T) {
	s, admin, _, app := lostServer(t)
	var n int
	if err := admin.Pool().QueryRow(t.Context(), `SELECT count(*) FILTER (WHERE pg_terminate_backend(pid, 30000))
		FROM pg_stat_activity WHERE application_name = $1`, app).Scan(&n); err != nil || n != 4 {
		t.Fatalf("terminated %d of the pool's 4 connections: %v", n, err)
	}
	for range 5 {
		want(t, "enqueue after the connections died", s.op(t, "POST", "/api/v1/jobs", map[string]any{"kind": "task"}), http.StatusCreated, "")
	}
}

// TestAPIConnectionLostMidStatement: an enqueue whose connection is
// terminated while its INSERT waits on a lock is answered 503 unavailable
// with Retry-After, at once: it is not sent again (a second INSERT would
// wait on the lock, and might duplicate a job that had been written).
func TestAPIConnectionLostMidStatement(t *testing.T) {
	s, admin, schema, app := lostServer(t)
	r := lostMidStatement(t, admin, schema, app, "EXCLUSIVE", func() response {
		return s.op(t, "POST", "/api/v1/jobs", map[string]any{"kind": "task"})
	})
	want(t, "enqueue on a lost connection", r, http.StatusServiceUnavailable, "unavailable")
	if n := s.jobCount(t); n != 0 {
		t.Fatalf("%d jobs; the terminated INSERT wrote one", n)
	}
	want(t, "enqueue once the lock is gone", s.op(t, "POST", "/api/v1/jobs", map[string]any{"kind": "task"}), http.StatusCreated, "")
}

// TestDashboardConnectionLostMidStatement: a dashboard page whose read
// loses its connection says the database is unavailable, 503 with
// Retry-After, as the API does, not that the server failed.
func TestDashboardConnectionLostMidStatement(t *testing.T) {
	s, admin, schema, app := lostServer(t)
	dash := errandhttp.NewDashboard(s.c, nil)
	r := lostMidStatement(t, admin, schema, app, "ACCESS EXCLUSIVE", func() response {
		rec := httptest.NewRecorder()
		dash.ServeHTTP(rec, httptest.NewRequest("GET", "/jobs/some-job", nil))
		return response{status: rec.Code, header: rec.Header(), body: rec.Body.Bytes()}
	})
	if r.status != http.StatusServiceUnavailable || !strings.Contains(string(r.body), "could not be reached") {
		t.Fatalf("dashboard page on a lost connection: %d %s; want 503 saying the database could not be reached", r.status, r.body)
	}
}

// lostMidStatement locks the jobs table in mode, sends the request, and
// terminates the server's connection once its statement waits on the
// lock; it returns the answer, which must come while the lock is still
// held (the statement is not sent again) and carry Retry-After: 2.
func lostMidStatement(t *testing.T, admin *postgres.Store, schema, app, mode string, send func() response) response {
	t.Helper()
	ctx := t.Context()
	lock, err := admin.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Rollback(context.Background())
	if _, err := lock.Exec(ctx, `LOCK TABLE `+pgx.Identifier{schema, "errand_jobs"}.Sanitize()+` IN `+mode+` MODE`); err != nil {
		t.Fatal(err)
	}
	answered := make(chan response, 1)
	go func() { answered <- send() }()
	var pid int32
	for deadline := time.Now().Add(30 * time.Second); pid == 0; time.Sleep(10 * time.Millisecond) {
		err := lock.QueryRow(ctx, `SELECT pid FROM pg_stat_activity WHERE application_name = $1 AND wait_event_type = 'Lock'`, app).Scan(&pid)
		if err != nil && err != pgx.ErrNoRows {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatal("the request did not reach the lock in 30s")
		}
	}
	if _, err := lock.Exec(ctx, `SELECT pg_terminate_backend($1)`, pid); err != nil {
		t.Fatal(err)
	}
	var r response
	select {
	case r = <-answered:
	case <-time.After(30 * time.Second):
		t.Fatal("no answer in 30s while the lock is held: the statement was sent again")
	}
	if got := r.header.Get("Retry-After"); got != "2" {
		t.Errorf("Retry-After %q, want 2", got)
	}
	if err := lock.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	return r
}
