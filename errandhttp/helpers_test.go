package errandhttp_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandhttp"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtest"
	"github.com/errandhq/errand/errandtype"
	"github.com/errandhq/errand/internal/sqlitetest"
	"github.com/errandhq/errand/postgres"
	"github.com/errandhq/errand/postgres/pgtest"
	"github.com/errandhq/errand/sqlite"
)

// Secrets of the test tokens.
const (
	operatorSecret = "operator-secret-0123456789"
	readerSecret   = "reader-secret-0123456789ab"
)

// testTokens are an operator named alice and a reader named grafana.
var testTokens = []errandhttp.Token{
	{Name: "alice", Secret: operatorSecret, Role: errandhttp.RoleOperator},
	{Name: "grafana", Secret: readerSecret, Role: errandhttp.RoleRead},
}

func newTestClock() *errandtest.Clock {
	return errandtest.NewClock(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
}

func openSQLite(t testing.TB, clock errandstore.Clock) *sqlite.Store {
	t.Helper()
	st, err := sqlite.Open(context.Background(), sqlitetest.Path(t), &sqlite.Options{Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// eachStore runs body on SQLite and, when ERRAND_TEST_POSTGRES_URL is set,
// on a fresh PostgreSQL schema, both on a fake clock.
func eachStore(t *testing.T, body func(t *testing.T, s errandstore.TxStore[*sql.Tx], clock *errandtest.Clock)) {
	t.Run("sqlite", func(t *testing.T) {
		clock := newTestClock()
		body(t, openSQLite(t, clock), clock)
	})
	t.Run("postgres", func(t *testing.T) {
		url := pgtest.URL(t)
		clock := newTestClock()
		s, err := postgres.Open(t.Context(), url, &postgres.Options{Schema: pgtest.Schema(t, url), MaxConns: 4, Clock: clock})
		if err != nil {
			t.Fatal(err)
		}
		v := s.SQL(nil)
		t.Cleanup(func() { v.Close() })
		body(t, v, clock)
	})
}

// server is the composed handler of a client over s, served by httptest.
type server struct {
	*httptest.Server
	c *errand.Client[*sql.Tx]
}

func newServer(t testing.TB, s errandstore.TxStore[*sql.Tx], clock errand.TimeSource, opts *errandhttp.Options) *server {
	t.Helper()
	kinds := errand.NewKinds()
	kinds.HandleRaw("task", nil, &errand.KindOpts{RetryPolicy: &errand.RetryPolicy{Base: 10 * time.Second, Max: 10 * time.Second}})
	c, err := errand.NewClient(s, &errand.Config{Kinds: kinds, AllowUnknownKinds: true, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	return serveClient(t, c, opts)
}

// serveClient serves errandhttp.New's handler of c, with opts (nil: the
// test tokens), until the test ends.
func serveClient(t testing.TB, c *errand.Client[*sql.Tx], opts *errandhttp.Options) *server {
	t.Helper()
	if opts == nil {
		opts = &errandhttp.Options{Auth: &errandhttp.AuthOptions{Tokens: testTokens}}
	}
	h, err := errandhttp.New(c, opts)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &server{Server: srv, c: c}
}

// response is what one request got.
type response struct {
	status int
	header http.Header
	body   []byte
}

// json decodes the body into a generic value.
func (r response) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("status %d, body %q: %v", r.status, r.body, err)
	}
	return m
}

// errorCode returns the error's code, or "".
func (r response) errorCode() string {
	var e struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	_ = json.Unmarshal(r.body, &e)
	return e.Error.Code
}

func (r response) String() string { return string(r.body) }

// req is one request to make.
type req struct {
	method, path string
	token        string // bearer token; "" sends none
	body         any    // string: sent as is; otherwise JSON-encoded
	header       map[string]string
}

func (s *server) do(t testing.TB, q req) response {
	t.Helper()
	var body io.Reader
	switch b := q.body.(type) {
	case nil:
	case string:
		body = strings.NewReader(b)
	default:
		enc, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		body = bytes.NewReader(enc)
	}
	r, err := http.NewRequest(q.method, s.URL+q.path, body)
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		r.Header.Set("Content-Type", "application/json")
	}
	if q.token != "" {
		r.Header.Set("Authorization", "Bearer "+q.token)
	}
	for k, v := range q.header {
		r.Header.Set(k, v)
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return response{status: resp.StatusCode, header: resp.Header, body: b}
}

// op sends a request with the operator's token.
func (s *server) op(t testing.TB, method, path string, body any) response {
	t.Helper()
	return s.do(t, req{method: method, path: path, token: operatorSecret, body: body})
}

// want fails the test unless r has the status (and, when code is not
// empty, the error code).
func want(t *testing.T, what string, r response, status int, code string) {
	t.Helper()
	if r.status != status || (code != "" && r.errorCode() != code) {
		t.Fatalf("%s: %d %s; want %d %s", what, r.status, r.body, status, code)
	}
}

// jobCount counts every job in the store.
func (s *server) jobCount(t *testing.T) int {
	t.Helper()
	js, err := s.c.List(context.Background(), &errand.ListOpts{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	return len(js)
}

func (s *server) job(t *testing.T, id string) *errandtype.Job {
	t.Helper()
	j, err := s.c.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return j
}
