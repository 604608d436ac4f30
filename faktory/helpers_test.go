package faktory

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtest"
	"github.com/errandhq/errand/errandtype"
	"github.com/errandhq/errand/internal/sqlitetest"
	"github.com/errandhq/errand/postgres"
	"github.com/errandhq/errand/postgres/pgtest"
	"github.com/errandhq/errand/sqlite"
)

// env is a Faktory server over a fresh SQLite store, on a loopback
// port, with a clock the test moves.
type env struct {
	t     *testing.T
	c     *errand.Client[*sql.Tx]
	clock *errandtest.Clock
	srv   *Server
	addr  string
}

// start serves a fresh SQLite store with opts (nil: short waits for
// tests).
func start(t *testing.T, opts *Options) *env {
	t.Helper()
	clock := errandtest.NewClock(time.Now().UTC().Truncate(time.Millisecond)) // stores keep microseconds
	st, err := sqlite.Open(t.Context(), sqlitetest.Path(t), &sqlite.Options{Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return startOn(t, st, clock, opts)
}

// onBothStores runs body against a server of a fresh SQLite store and of
// a fresh schema of the test PostgreSQL database (skipped without one).
func onBothStores(t *testing.T, body func(t *testing.T, e *env)) {
	t.Run("sqlite", func(t *testing.T) { body(t, start(t, nil)) })
	t.Run("postgres", func(t *testing.T) {
		url := pgtest.URL(t)
		clock := errandtest.NewClock(time.Now().UTC().Truncate(time.Millisecond))
		st, err := postgres.Open(t.Context(), url, &postgres.Options{Schema: pgtest.Schema(t, url), MaxConns: 4, Clock: clock})
		if err != nil {
			t.Fatal(err)
		}
		v := st.SQL(nil)
		t.Cleanup(func() { v.Close() })
		body(t, startOn(t, v, clock, nil))
	})
}

// startOn serves st, whose clock is clock, with opts.
func startOn(t *testing.T, st errandstore.TxStore[*sql.Tx], clock *errandtest.Clock, opts *Options) *env {
	t.Helper()
	c, err := errand.NewClient(st, &errand.Config{AllowUnknownKinds: true, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	if opts == nil {
		opts = &Options{}
	}
	if opts.FetchWait == 0 {
		opts.FetchWait = 200 * time.Millisecond
	}
	if opts.PollInterval == 0 {
		opts.PollInterval = 50 * time.Millisecond
	}
	srv, err := NewServer(c, opts)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	t.Cleanup(func() {
		srv.Close()
		if err := <-served; !errors.Is(err, ErrServerClosed) {
			t.Errorf("Serve returned %v, want ErrServerClosed", err)
		}
	})
	return &env{t: t, c: c, clock: clock, srv: srv, addr: ln.Addr().String()}
}

// job reads job id from errand.
func (e *env) job(id string) *errandtype.Job {
	e.t.Helper()
	j, err := e.c.Get(context.Background(), id)
	if err != nil {
		e.t.Fatalf("get job %s: %v", id, err)
	}
	return j
}

// client is a raw protocol client, as a test drives it.
type client struct {
	t  *testing.T
	nc net.Conn
	r  *bufio.Reader
	hi map[string]any
}

// dial connects and reads the server's +HI.
func (e *env) dial() *client {
	e.t.Helper()
	nc, err := net.Dial("tcp", e.addr)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { nc.Close() })
	c := &client{t: e.t, nc: nc, r: bufio.NewReader(nc)}
	hi := c.reply()
	payload, ok := strings.CutPrefix(hi, "+HI ")
	if !ok {
		e.t.Fatalf("greeting %q, want +HI {...}", hi)
	}
	if err := json.Unmarshal([]byte(payload), &c.hi); err != nil {
		e.t.Fatalf("greeting %q: %v", hi, err)
	}
	return c
}

// worker dials and says HELLO as worker wid (none: a producer).
func (e *env) worker(wid string) *client {
	e.t.Helper()
	c := e.dial()
	hello := map[string]any{"hostname": "test", "v": 2, "pid": 1}
	if wid != "" {
		hello["wid"] = wid
	}
	c.must("HELLO "+mustJSON(e.t, hello), "+OK")
	return c
}

// send sends one command line and returns the reply.
func (c *client) send(line string) string {
	c.t.Helper()
	c.nc.SetWriteDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c.nc, line+"\r\n"); err != nil {
		c.t.Fatalf("send %.40q: %v", line, err)
	}
	return c.reply()
}

// must sends line and fails unless the reply is want.
func (c *client) must(line, want string) {
	c.t.Helper()
	if got := c.send(line); got != want {
		c.t.Fatalf("%.60s: reply %q, want %q", line, got, want)
	}
}

// mustErr sends line and fails unless the reply is an error holding each
// of parts.
func (c *client) mustErr(line string, parts ...string) string {
	c.t.Helper()
	got := c.send(line)
	if !strings.HasPrefix(got, "-ERR ") {
		c.t.Fatalf("%.60s: reply %q, want -ERR", line, got)
	}
	for _, p := range parts {
		if !strings.Contains(got, p) {
			c.t.Fatalf("%.60s: reply %q, want it to say %q", line, got, p)
		}
	}
	return got
}

// reply reads one reply: "+..." or "-..." as sent, a bulk string as its
// payload after "$", and null as "$nil".
func (c *client) reply() string {
	c.t.Helper()
	c.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	line, err := c.r.ReadString('\n')
	if err != nil {
		c.t.Fatalf("read reply: %v (read %q)", err, line)
	}
	line = strings.TrimSuffix(line, "\r\n")
	if !strings.HasPrefix(line, "$") {
		return line
	}
	n, err := strconv.Atoi(line[1:])
	if err != nil {
		c.t.Fatalf("bulk header %q", line)
	}
	if n < 0 {
		return "$nil"
	}
	b := make([]byte, n+2)
	if _, err := io.ReadFull(c.r, b); err != nil {
		c.t.Fatalf("read bulk of %d: %v", n, err)
	}
	return "$" + string(b[:n])
}

// closed reports whether the server closed the connection within d.
func (c *client) closed(d time.Duration) bool {
	c.nc.SetReadDeadline(time.Now().Add(d))
	for {
		if _, err := c.r.ReadByte(); err != nil {
			return errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || strings.Contains(err.Error(), "reset")
		}
	}
}

// fetch sends FETCH and decodes the job, or returns nil for null.
func (c *client) fetch(queues ...string) *wireJob {
	c.t.Helper()
	got := c.send(strings.TrimSpace("FETCH " + strings.Join(queues, " ")))
	if got == "$nil" {
		return nil
	}
	payload, ok := strings.CutPrefix(got, "$")
	if !ok {
		c.t.Fatalf("FETCH: reply %q, want a job or null", got)
	}
	var j wireJob
	if err := json.Unmarshal([]byte(payload), &j); err != nil {
		c.t.Fatalf("FETCH: %q: %v", payload, err)
	}
	return &j
}

// push pushes job (a map or struct) and fails unless it is accepted.
func (c *client) push(job any) {
	c.t.Helper()
	c.must("PUSH "+mustJSON(c.t, job), "+OK")
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// fjob is a Faktory job to push.
func fjob(jid, jobtype string, args ...any) map[string]any {
	if args == nil {
		args = []any{}
	}
	return map[string]any{"jid": jid, "jobtype": jobtype, "args": args}
}

func ack(jid string) string { return fmt.Sprintf(`ACK {"jid":%q}`, jid) }
