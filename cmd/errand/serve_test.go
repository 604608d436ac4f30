//go:build unix

package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandtype"
)

const serveToken = "serve-test-token-0123456789"

// served is a running errand serve process.
type served struct {
	cmd    *exec.Cmd
	base   string // http://127.0.0.1:PORT
	mu     sync.Mutex
	stderr bytes.Buffer
	done   chan error
}

var servingAddr = regexp.MustCompile(`msg=serving addr=(\S+)`)

// startServe starts the errand binary's serve on a free loopback port and
// waits until it listens.
func startServe(t *testing.T, args ...string) *served {
	t.Helper()
	cmd := exec.Command(errandBin, append([]string{"serve", "--addr", "127.0.0.1:0"}, args...)...)
	cmd.Env = append(os.Environ(), "ERRAND_DB=", "XDG_CONFIG_HOME="+t.TempDir())
	pr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &served{cmd: cmd, done: make(chan error, 1)}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-s.done
	})
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			line := sc.Text()
			s.mu.Lock()
			s.stderr.WriteString(line + "\n")
			s.mu.Unlock()
			if m := servingAddr.FindStringSubmatch(line); m != nil {
				addr <- m[1]
			}
		}
		s.done <- cmd.Wait()
	}()
	select {
	case a := <-addr:
		s.base = "http://" + a
	case <-time.After(30 * time.Second):
		t.Fatalf("errand serve did not start:\n%s", s.log())
	}
	return s
}

func (s *served) log() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stderr.String()
}

// workerStarted waits for the worker's "worker started" line and returns
// it.
func (s *served) workerStarted(t *testing.T) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second) // a bound for a hung server
	for {
		for line := range strings.Lines(s.log()) {
			if strings.Contains(line, `msg="worker started"`) {
				return line
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the worker did not start:\n%s", s.log())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// call sends a JSON request with the test's operator token and decodes
// the answer into out (when not nil), returning the status.
func (s *served) call(t *testing.T, method, path string, body any, out any) int {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	r, err := http.NewRequest(method, s.base+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	r.Header.Set("Authorization", "Bearer "+serveToken)
	r.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if out != nil && len(b) > 0 {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: %d %s: %v", method, path, resp.StatusCode, b, err)
		}
	}
	return resp.StatusCode
}

// stop sends SIGTERM and waits for a clean exit.
func (s *served) stop(t *testing.T) {
	t.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-s.done:
		s.done <- err // for the cleanup
		if err != nil {
			t.Fatalf("errand serve exited with %v:\n%s", err, s.log())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("errand serve did not stop on SIGTERM:\n%s", s.log())
	}
}

// TestServeWorkerSession runs the real errand serve and works a job over
// HTTP as a worker in another language would: enqueue, claim, heartbeat,
// ack; then a failure, with the retry scheduled by the server.
func TestServeWorkerSession(t *testing.T) {
	db := tempDB(t)
	s := startServe(t, "--db", db, "--token", serveToken)

	// Without the token nothing is served.
	resp, err := http.Get(s.base + "/api/v1/jobs")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("no token: %d", resp.StatusCode)
	}

	var created struct {
		Job struct {
			ID string `json:"id"`
		} `json:"job"`
	}
	if code := s.call(t, "POST", "/api/v1/jobs", map[string]any{"kind": "resize", "args": map[string]int{"image": 7}}, &created); code != 201 {
		t.Fatalf("enqueue: %d", code)
	}
	var claimed struct {
		Jobs []struct {
			ID         string          `json:"id"`
			Args       json.RawMessage `json:"args"`
			LeaseToken string          `json:"lease_token"`
		} `json:"jobs"`
	}
	if code := s.call(t, "POST", "/api/v1/queues/default/claim", map[string]any{"kinds": []string{"resize"}, "worker": "node-1"}, &claimed); code != 200 {
		t.Fatalf("claim: %d", code)
	}
	if len(claimed.Jobs) != 1 || claimed.Jobs[0].ID != created.Job.ID || string(claimed.Jobs[0].Args) != `{"image":7}` {
		t.Fatalf("claimed %+v", claimed)
	}
	job := claimed.Jobs[0]
	var hb struct {
		LeaseUntil time.Time `json:"lease_until"`
	}
	if code := s.call(t, "POST", "/api/v1/jobs/"+job.ID+"/heartbeat", map[string]any{"lease_token": job.LeaseToken, "lease": "1m"}, &hb); code != 200 || time.Until(hb.LeaseUntil) < 50*time.Second {
		t.Fatalf("heartbeat: %d, lease until %s", code, hb.LeaseUntil)
	}
	if code := s.call(t, "POST", "/api/v1/jobs/"+job.ID+"/ack", map[string]any{"lease_token": "stale"}, nil); code != 409 {
		t.Fatalf("ack with a stale token: %d, want 409", code)
	}
	var acked struct {
		State string `json:"state"`
	}
	if code := s.call(t, "POST", "/api/v1/jobs/"+job.ID+"/ack", map[string]any{"lease_token": job.LeaseToken}, &acked); code != 200 || acked.State != "succeeded" {
		t.Fatalf("ack: %d %s", code, acked.State)
	}
	if code := s.call(t, "POST", "/api/v1/queues/default/claim", map[string]any{"kinds": []string{"resize"}}, nil); code != 204 {
		t.Fatalf("claim with nothing left: %d, want 204", code)
	}
	s.stop(t)

	js := listJobs(t, db)
	if len(js) != 1 || js[0].State != "succeeded" || js[0].Attempt != 1 {
		t.Fatalf("jobs after the session: %+v", js)
	}
}

// TestServeRunsWebhookWorker runs errand serve --http: a job enqueued over
// the API is delivered to the webhook, and acknowledged.
func TestServeRunsWebhookWorker(t *testing.T) {
	got := make(chan string, 1)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var env struct {
			ID string `json:"id"`
		}
		_ = json.NewDecoder(r.Body).Decode(&env)
		got <- env.ID
	}))
	defer hook.Close()
	db := tempDB(t)
	s := startServe(t, "--db", db, "--token", serveToken, "--http", "notify="+hook.URL, "--grace", "1s")
	// The startup line reports the settings in effect, defaults included,
	// as errand work's does.
	line := s.workerStarted(t)
	for _, want := range []string{`queues="default=10"`, "kinds=notify", "poll=1s", "lease=" + errand.DefaultLease.String(), "grace=1s"} {
		if !strings.Contains(line, want) {
			t.Errorf("startup line lacks %s: %s", want, line)
		}
	}
	var created struct {
		Job struct {
			ID string `json:"id"`
		} `json:"job"`
	}
	if code := s.call(t, "POST", "/api/v1/jobs", map[string]any{"kind": "notify"}, &created); code != 201 {
		t.Fatalf("enqueue: %d", code)
	}
	select {
	case id := <-got:
		if id != created.Job.ID {
			t.Fatalf("delivered %s, want %s", id, created.Job.ID)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("the webhook was not called:\n%s", s.log())
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		var j struct {
			State string `json:"state"`
		}
		s.call(t, "GET", "/api/v1/jobs/"+created.Job.ID, nil, &j)
		if j.State == "succeeded" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("job is %s, want succeeded:\n%s", j.State, s.log())
		}
		time.Sleep(20 * time.Millisecond)
	}
	s.stop(t)
}

func TestServeRefusesAnOpenPublicAddress(t *testing.T) {
	db := tempDB(t)
	for _, addr := range []string{"0.0.0.0:0", ":0", "192.0.2.1:8080", "example.com:80"} {
		r := cli(t, "serve", "--db", db, "--addr", addr)
		if r.code != exitUsage || !strings.Contains(r.stderr, "not a loopback address") || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
			t.Errorf("serve --addr %s without a token: %s", addr, r)
		}
	}
	for _, args := range [][]string{
		{"--addr", "nonsense"},
		{"--token", "short"},
		{"--exec", "x"},
		{"--queue", "q=1"},
		{"--token-file", filepath.Join(t.TempDir(), "missing")},
		{"extra"},
	} {
		r := cli(t, append([]string{"serve", "--db", db}, args...)...)
		if r.code != exitUsage {
			t.Errorf("serve %v: %s, want a usage error", args, r)
		}
	}
	if _, err := os.Stat(db); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused serve created the database: %v", err)
	}
}

func TestWorkOnceDeliversToAWebhook(t *testing.T) {
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusUnprocessableEntity)
		io.WriteString(w, "unknown customer")
	}))
	defer hook.Close()
	db := tempDB(t)
	id := enqueue(t, db, "charge")
	w := parseWork(t, cli(t, "work", "--once", "--db", db, "--http", "charge="+hook.URL))
	if w.Result != "dead" || w.Class != "http_422" || w.JobID == nil || *w.JobID != id {
		t.Fatalf("work --once --http: %+v", w)
	}
	if j := inspect(t, db, id); j.LastError == nil || !strings.Contains(j.LastError.Message, `"unknown customer"`) {
		t.Fatalf("last error %+v", j.LastError)
	}
	for _, spec := range []string{"charge", "charge=ftp://x", "=http://x"} {
		if r := cli(t, "work", "--once", "--db", db, "--http", spec); r.code != exitUsage {
			t.Errorf("--http %s: %s", spec, r)
		}
	}
}

// TestServeMountsEverything checks that errand serve answers the dashboard,
// /metrics and /readyz, each behind the token like the API, and /healthz
// to anyone.
func TestServeMountsEverything(t *testing.T) {
	db := tempDB(t)
	s := startServe(t, "--db", db, "--token", serveToken, "--ready-max-oldest-age", "1h")
	defer s.stop(t)
	if code := s.call(t, "POST", "/api/v1/jobs", map[string]any{"kind": "resize", "queue": "images", "args": map[string]int{"image": 7}}, nil); code != 201 {
		t.Fatalf("enqueue: %d", code)
	}
	for _, tc := range []struct{ path, want string }{
		{"/", "images"},
		{"/jobs?queue=images", "resize"},
		{"/metrics", `errand_queue_jobs{queue="images",state="queued"} 1`},
		{"/readyz", `"ready"`},
	} {
		resp, err := http.Get(s.base + tc.path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("GET %s without a token: %d, want 401", tc.path, resp.StatusCode)
		}
		req, _ := http.NewRequest("GET", s.base+tc.path, nil)
		req.Header.Set("Authorization", "Bearer "+serveToken)
		resp, err = http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(body), tc.want) {
			t.Errorf("GET %s: %d, want 200 containing %q; got:\n%.500s", tc.path, resp.StatusCode, tc.want, body)
		}
	}
	if code, body := getWith(t, s.base+"/healthz", ""); code != 200 || body != `{"status":"ok","reasons":[]}`+"\n" {
		t.Errorf("GET /healthz without a token: %d %q, want 200 and status ok alone", code, body)
	}
}

// getWith sends GET url with token (none when empty).
func getWith(t *testing.T, url, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

var generatedToken = regexp.MustCompile(`token_file=(\S+) sign_in=(\S+) token=(\S+)`)

// TestServeGeneratesAToken: errand serve without tokens makes one, which
// every request needs, in a file only its owner can read, and removes the
// file when it stops.
func TestServeGeneratesAToken(t *testing.T) {
	s := startServe(t, "--db", tempDB(t))
	m := generatedToken.FindStringSubmatch(s.log())
	if m == nil {
		t.Fatalf("errand serve did not say where its token is:\n%s", s.log())
	}
	path, signIn, token := m[1], m[2], m[3]
	if signIn != s.base+"/login" {
		t.Errorf("sign-in URL %s, want %s/login", signIn, s.base)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	if fi.Mode().Perm() != 0o600 || strings.TrimSpace(string(b)) != token {
		t.Errorf("token file %s: mode %s, content %q; want 0600 holding the token", path, fi.Mode().Perm(), b)
	}
	if code, _ := getWith(t, s.base+"/api/v1/jobs", ""); code != http.StatusUnauthorized {
		t.Errorf("a request without the token: %d, want 401", code)
	}
	if code, body := getWith(t, s.base+"/api/v1/jobs", token); code != http.StatusOK {
		t.Errorf("a request with the generated token: %d %s", code, body)
	}
	if strings.Count(s.log(), token) != 1 {
		t.Errorf("the token is printed %d times, want once:\n%s", strings.Count(s.log(), token), s.log())
	}
	s.stop(t)
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the token file outlived the server: %v", err)
	}
}

// TestServeNoAuth: --no-auth is the explicit choice of a tokenless server,
// and contradicts a token.
func TestServeNoAuth(t *testing.T) {
	s := startServe(t, "--db", tempDB(t), "--no-auth")
	if code, body := getWith(t, s.base+"/api/v1/jobs", ""); code != http.StatusOK {
		t.Errorf("--no-auth: a request without a token: %d %s", code, body)
	}
	if strings.Contains(s.log(), "token_file") {
		t.Errorf("--no-auth generated a token:\n%s", s.log())
	}
	s.stop(t)
	r := cli(t, "serve", "--db", tempDB(t), "--no-auth", "--token", serveToken)
	if r.code != exitUsage || !strings.Contains(r.stderr, "--no-auth serves without tokens") {
		t.Errorf("--no-auth with --token: %s", r)
	}
}

// TestServeRunsSchedulesAndRetention runs errand serve with --cron and
// --retain-dead alone: its worker claims nothing, fires the schedule (a job
// appears, and the schedule is listed by the API) and, on election, prunes
// the dead job planted two days ago, recording it in the audit, and keeps
// the one of a kind --retain-kind keeps longer.
func TestServeRunsSchedulesAndRetention(t *testing.T) {
	db := tempDB(t)
	enqueue(t, db, "mail", `{}`, "--id", "old-dead")
	plantFinished(t, db, "old-dead", "dead", "timeout", time.Now().Add(-48*time.Hour))
	// A kind kept longer than the default: its dead job stays.
	enqueue(t, db, "sms", `{}`, "--id", "kept-dead")
	plantFinished(t, db, "kept-dead", "dead", "timeout", time.Now().Add(-48*time.Hour))
	enqueue(t, db, "mail", `{}`, "--id", "waiting")

	s := startServe(t, "--db", db, "--token", serveToken, "--cron", `tick=@every 1s ping {"n": 1}`, "--retain-dead", "24h",
		"--retain-kind", "sms=:720h", "--grace", "1s")
	// A worker of schedules and retention alone claims from no queue.
	if line := s.workerStarted(t); !strings.Contains(line, `queues="" kinds=""`) || !strings.Contains(line, "poll=1s") {
		t.Errorf("startup line claims queues or lacks the poll interval: %s", line)
	}
	waitUntil := func(what string, cond func() bool) {
		t.Helper()
		// A bound for a hung server, not a speed check.
		deadline := time.Now().Add(30 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("%s did not happen:\n%s", what, s.log())
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	waitUntil("a scheduled job", func() bool {
		var l struct {
			Jobs []struct {
				Args json.RawMessage `json:"args"`
			} `json:"jobs"`
		}
		s.call(t, "GET", "/api/v1/jobs?kind=ping", nil, &l)
		return len(l.Jobs) > 0 && string(l.Jobs[0].Args) == `{"n":1}`
	})
	var sl struct {
		Schedules []struct {
			Name, Spec, Kind string
			LastJobID        *string `json:"last_job_id"`
		} `json:"schedules"`
	}
	if code := s.call(t, "GET", "/api/v1/schedules", nil, &sl); code != 200 || len(sl.Schedules) != 1 ||
		sl.Schedules[0].Name != "tick" || sl.Schedules[0].Spec != "@every 1s" || sl.Schedules[0].Kind != "ping" || sl.Schedules[0].LastJobID == nil {
		t.Fatalf("schedules: %d %+v", code, sl)
	}
	waitUntil("the prune of the old dead job", func() bool {
		return s.call(t, "GET", "/api/v1/jobs/old-dead", nil, nil) == http.StatusNotFound
	})
	if code := s.call(t, "GET", "/api/v1/jobs/kept-dead", nil, nil); code != http.StatusOK {
		t.Errorf("the dead job of a kind kept 720h: %d, want it kept", code)
	}
	var audit struct {
		Audit []struct {
			Action, Operator string
		} `json:"audit"`
	}
	if code := s.call(t, "GET", "/api/v1/audit?action=prune", nil, &audit); code != 200 || len(audit.Audit) != 1 || audit.Audit[0].Operator != "errand-retention" {
		t.Fatalf("audit: %d %+v", code, audit)
	}
	// The worker claims nothing: the waiting job still waits, and the
	// registry shows the worker with no queue.
	var ws struct {
		Workers []struct {
			Queues []any `json:"queues"`
		} `json:"workers"`
	}
	if code := s.call(t, "GET", "/api/v1/workers", nil, &ws); code != 200 || len(ws.Workers) != 1 || len(ws.Workers[0].Queues) != 0 {
		t.Fatalf("workers: %d %+v", code, ws)
	}
	s.stop(t)
	for _, j := range listJobs(t, db) {
		if j.ID == "waiting" && j.State != "queued" {
			t.Fatalf("a worker without handlers ran job waiting: %s", j.State)
		}
	}
}

func TestServeRefusesBadScheduleAndRetentionFlags(t *testing.T) {
	for _, args := range [][]string{
		{"--cron", "nospec"},
		{"--cron", "a=@every 1s k", "--cron", "a=@every 2s k"},
		{"--retain-succeeded", "48h", "--retain-dead", "24h"},
		{"--retain-kind", "mail=soon"},
		{"--retain-dead", "24h", "--retain-kind", "mail=48h"},
		{"--queue", "default=2", "--cron", "a=@every 1s k"},
	} {
		r := bin(t, append([]string{"serve", "--db", tempDB(t)}, args...)...)
		if r.code != 2 {
			t.Errorf("errand serve %q: exit %d, want 2 (usage)\n%s", args, r.code, r.stderr)
		}
		if slices.Contains(args, "--retain-kind") && !strings.Contains(r.stderr, "--retain-kind") {
			t.Errorf("errand serve %q: %s; want the error to name --retain-kind", args, r.stderr)
		}
	}
}

// TestServeDependencyWithoutExec runs errand serve --dependency KIND=DEP
// with no --exec: the kind is run only by remote workers, whose failures
// through the API open DEP's breaker; a claim then leaves the kind's jobs
// waiting while it takes other kinds, and errand breakers shows it open.
func TestServeDependencyWithoutExec(t *testing.T) {
	db := tempDB(t)
	s := startServe(t, "--db", db, "--token", serveToken, "--dependency", "send=smtp", "--breaker", "smtp=2/1m/1h")
	type claimed struct {
		Jobs []struct {
			ID         string `json:"id"`
			Kind       string `json:"kind"`
			LeaseToken string `json:"lease_token"`
		} `json:"jobs"`
	}
	ids := map[string]string{}
	for _, j := range []struct{ id, kind string }{{"s1", "send"}, {"s2", "send"}, {"s3", "send"}, {"r1", "resize"}} {
		if code := s.call(t, "POST", "/api/v1/jobs", map[string]any{"id": j.id, "kind": j.kind, "max_attempts": 10}, nil); code != 201 {
			t.Fatalf("enqueue %s: %d", j.id, code)
		}
		ids[j.id] = j.kind
	}
	for i := range 2 {
		var c claimed
		if code := s.call(t, "POST", "/api/v1/queues/default/claim", map[string]any{"kinds": []string{"send"}, "worker": "node-1"}, &c); code != 200 || len(c.Jobs) != 1 {
			t.Fatalf("claim %d of send: %d %+v\n%s", i, code, c, s.log())
		}
		var out struct {
			State string `json:"state"`
		}
		if code := s.call(t, "POST", "/api/v1/jobs/"+c.Jobs[0].ID+"/fail", map[string]any{"lease_token": c.Jobs[0].LeaseToken,
			"class": "smtp_refused", "message": "dial smtp: connection refused"}, &out); code != 200 || out.State != "retrying" {
			t.Fatalf("fail %s: %d %s", c.Jobs[0].ID, code, out.State)
		}
	}

	// s3 waits, claimable but for the breaker; r1's kind has no dependency.
	var c claimed
	if code := s.call(t, "POST", "/api/v1/queues/default/claim", map[string]any{"kinds": []string{"send", "resize"}, "max_jobs": 10}, &c); code != 200 ||
		len(c.Jobs) != 1 || c.Jobs[0].ID != "r1" {
		t.Fatalf("claim of send and resize with smtp's breaker open: %d %+v; want r1 alone", code, c)
	}
	if code := s.call(t, "POST", "/api/v1/queues/default/claim", map[string]any{"kinds": []string{"send"}}, nil); code != 204 {
		t.Fatalf("claim of send with smtp's breaker open: %d, want 204", code)
	}
	bs := breakersJSON(t, db)
	if len(bs) != 1 || bs[0].Dependency != "smtp" || bs[0].State != errandtype.BreakerOpen || bs[0].Trips != 1 || bs[0].LastError != "dial smtp: connection refused" {
		t.Fatalf("errand breakers --json = %+v; want smtp open, tripped once", bs)
	}
	if r := ok(t, cli(t, "breakers", "--db", db)); !strings.Contains(r.stdout, "smtp") || !strings.Contains(r.stdout, "open") {
		t.Fatalf("errand breakers:\n%s", r.stdout)
	}
	s.stop(t)
	if j := jobsByID(t, db)["s3"]; j.State != "queued" || j.Attempt != 0 {
		t.Fatalf("s3 is %s at attempt %d; want queued, never attempted", j.State, j.Attempt)
	}
}

// TestBusyPortNamesAddressAndFlag: a port another process holds is an
// error that names the address and the flag to change.
func TestBusyPortNamesAddressAndFlag(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	addr := ln.Addr().String()
	for _, c := range []struct {
		args []string
		flag string
	}{
		{[]string{"serve", "--token", serveToken, "--addr", addr}, "--addr"},
		{[]string{"work", "--exec", "k=/bin/true", "--metrics-addr", addr}, "--metrics-addr"},
	} {
		r := bin(t, append(c.args, "--db", tempDB(t))...)
		want := "listen on " + addr + ": address already in use; another process holds it: pass " + c.flag + " HOST:PORT"
		if r.code != 1 || strings.TrimSpace(r.stderr) != "errand: "+c.args[0]+": "+want {
			t.Errorf("errand %q: exit %d, stderr %q; want exit 1 and %q", c.args, r.code, r.stderr, want)
		}
	}
}
