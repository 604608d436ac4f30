// Package failover tests errand across a PostgreSQL failover: a primary with
// a streaming standby (chaos/pgtopology), the primary SIGKILLed under load
// and the standby promoted, with real errand work and errand serve
// processes on a multi-host URL.
package failover

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/chaos/pgtopology"
	"github.com/errandhq/errand/postgres"
	"github.com/errandhq/errand/postgres/pgtest"
	"github.com/jackc/pgx/v5"
)

const (
	lease       = 2 * time.Second
	maxAttempts = 5
	// loadBefore runs before the kill, promoteAfter between the kill and
	// the promotion (the standby is read-only then, and refused by
	// target_session_attrs=read-write), loadAfter after the promotion.
	loadBefore   = 3 * time.Second
	promoteAfter = time.Second
	loadAfter    = 6 * time.Second
	// quietBound bounds the wait for every job to finish: a hung system,
	// not a measured figure.
	quietBound = 60 * time.Second
)

// TestFailoverSync: with a synchronous standby every acknowledged enqueue
// and outcome survives the failover.
func TestFailoverSync(t *testing.T) { runFailover(t, pgtopology.Sync, false) }

// TestFailoverAsync: with an asynchronous standby the last acknowledged
// commits may be lost; the other guarantees hold, and the loss is reported.
func TestFailoverAsync(t *testing.T) { runFailover(t, pgtopology.Async, false) }

// TestFailoverSilentPrimary: the dead primary's address takes connections
// and never answers, as a machine that is gone rather than a server that
// refuses. Every new connection first waits out the connect timeout (10s by
// default) on it before it tries the standby; errand, listeners included,
// must get there all the same.
func TestFailoverSilentPrimary(t *testing.T) { runFailover(t, pgtopology.Sync, true) }

var errandBin struct {
	once sync.Once
	path string
	err  error
}

// buildErrand builds ./cmd/errand once for the package's tests.
func buildErrand(t *testing.T) string {
	errandBin.once.Do(func() {
		dir, err := os.MkdirTemp("", "errand-failover-bin-")
		if err != nil {
			errandBin.err = err
			return
		}
		errandBin.path = filepath.Join(dir, "errand")
		out, err := exec.Command("go", "build", "-o", errandBin.path, "github.com/errandhq/errand/cmd/errand").CombinedOutput()
		if err != nil {
			errandBin.err = fmt.Errorf("go build ./cmd/errand: %v\n%s", err, out)
		}
	})
	if errandBin.err != nil {
		t.Fatal(errandBin.err)
	}
	return errandBin.path
}

func TestMain(m *testing.M) {
	code := m.Run()
	if errandBin.path != "" {
		os.RemoveAll(filepath.Dir(errandBin.path))
	}
	os.Exit(code)
}

// hookArgs are jobs that errand work delivers to the test's sink;
// remoteArgs are claimed and acknowledged through errand serve's API.
type hookArgs struct{ N int }

func (hookArgs) Kind() string { return "hook" }

type remoteArgs struct{ N int }

// slowArgs are delivered to the sink too, which answers only after
// slowRun, longer than the lease: a slow job running when the primary dies
// must renew its lease on the promoted standby, or lose it and run again.
type slowArgs struct{ N int }

func (slowArgs) Kind() string { return "slow" }

const slowRun = 3 * time.Second

func (remoteArgs) Kind() string { return "remote" }

// firsts records, for each kind of call, the first that began after the
// kill and succeeded: when it succeeded.
type firsts struct {
	mu   sync.Mutex
	kill time.Time
	at   map[string]time.Time
}

func (f *firsts) killed(at time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.kill = at
}

// saw records a call of what that began at began and succeeded at done.
func (f *firsts) saw(what string, began, done time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.kill.IsZero() || began.Before(f.kill) {
		return
	}
	if _, ok := f.at[what]; !ok {
		f.at[what] = done
	}
}

func (f *firsts) since(what string) (time.Duration, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	at, ok := f.at[what]
	return at.Sub(f.kill), ok
}

// ledger is what the test was told succeeded.
type ledger struct {
	mu       sync.Mutex
	enqueued map[string]bool // id -> enqueue answered success
	acked    map[string]bool // id -> ack answered 2xx
	attempts map[string]int  // id -> deliveries to the sink
	failures map[string]int  // what failed (enqueue, claim, ack...) -> count
}

func (l *ledger) add(m map[string]bool, id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	m[id] = true
}

func (l *ledger) failed(what string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.failures[what]++
}

// silentLoadAfter is loadAfter when the old primary is silent: long enough
// for connections to wait out the default connect timeout on it.
const silentLoadAfter = 16 * time.Second

func runFailover(t *testing.T, mode pgtopology.Mode, silent bool) {
	if err := pgtopology.Available(); err != nil {
		t.Skip(err)
	}
	bin := buildErrand(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	top, err := pgtopology.Start(ctx, mode)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("primary log:\n%s\nstandby log:\n%s", top.Log("primary"), top.Log("standby"))
		}
		if err := top.Stop(context.Background()); err != nil {
			t.Error(err)
		}
	})
	t.Logf("%s topology: primary :%d, standby :%d; %s", mode, top.PrimaryPort, top.StandbyPort, top.URL)

	store, err := postgres.Open(ctx, top.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	client, err := errand.NewClient(store, &errand.Config{AllowUnknownKinds: true})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()

	l := &ledger{enqueued: map[string]bool{}, acked: map[string]bool{}, attempts: map[string]int{}, failures: map[string]int{}}
	f := &firsts{at: map[string]time.Time{}}

	// The sink: errand work delivers hook jobs here. A job's claim time is
	// its lease's end less the lease, on the same host's clock.
	sink := httptestServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var env struct {
			ID         string    `json:"id"`
			LeaseUntil time.Time `json:"lease_until"`
		}
		if err := json.NewDecoder(r.Body).Decode(&env); err != nil || env.ID == "" {
			http.Error(w, "bad envelope", http.StatusBadRequest)
			return
		}
		l.mu.Lock()
		l.attempts[env.ID]++
		l.mu.Unlock()
		f.saw("claim by errand work (sink delivery)", env.LeaseUntil.Add(-lease), time.Now())
		if r.URL.Path == "/slow" {
			sleep(r.Context(), slowRun)
		}
		w.WriteHeader(http.StatusNoContent)
	}))

	// ERRAND_FAILOVER_LOGS keeps the processes' logs in a directory of its
	// own, test by test, for reading after the run.
	dir := t.TempDir()
	if keep := os.Getenv("ERRAND_FAILOVER_LOGS"); keep != "" {
		dir = filepath.Join(keep, t.Name())
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	var procs []*process
	for i := range 2 {
		procs = append(procs, startProcess(t, bin, filepath.Join(dir, fmt.Sprintf("work%d.log", i)),
			"work", "--db", top.URL, "--http", "hook="+sink, "--http", "slow="+sink+"/slow", "--queue", "default=4", "--queue", "slow=4", "--lease", lease.String()))
	}
	serve := startProcess(t, bin, filepath.Join(dir, "serve.log"),
		"serve", "--db", top.URL, "--addr", "127.0.0.1:0", "--no-auth")
	procs = append(procs, serve)
	api := "http://" + serve.waitFor(t, regexp.MustCompile(`msg=serving addr=(\S+)`)) + "/api/v1"
	defer func() {
		if t.Failed() {
			for _, p := range procs {
				t.Logf("%s:\n%s", p.name, p.tail())
			}
		}
	}()

	hc := &http.Client{Timeout: 5 * time.Second}
	call := func(ctx context.Context, path string, body any, header ...string) (int, []byte, error) {
		b, _ := json.Marshal(body)
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, api+path, bytes.NewReader(b))
		if err != nil {
			return 0, nil, err
		}
		req.Header.Set("Content-Type", "application/json")
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		resp, err := hc.Do(req)
		if err != nil {
			return 0, nil, err
		}
		defer resp.Body.Close()
		out, err := io.ReadAll(resp.Body)
		return resp.StatusCode, out, err
	}

	// Load: enqueues through the library and through the API; a remote
	// worker claiming and acknowledging through the API.
	loadCtx, stopLoad := context.WithCancel(ctx)
	workCtx, stopWork := context.WithCancel(ctx)
	var load, work sync.WaitGroup
	var seq atomic.Int64
	// producer enqueues every pause until the load stops, each job n by
	// enqueue, which returns its id and whether it answered success.
	producer := func(what string, pause time.Duration, enqueue func(n int) (string, bool)) {
		load.Go(func() {
			for loadCtx.Err() == nil {
				began := time.Now()
				if id, ok := enqueue(int(seq.Add(1))); ok {
					l.add(l.enqueued, id)
					f.saw(what, began, time.Now())
				} else {
					l.failed(what)
				}
				sleep(loadCtx, pause)
			}
		})
	}
	producer("library enqueue", 15*time.Millisecond, func(n int) (string, bool) {
		id := fmt.Sprintf("lib-%d", n)
		var args errand.JobArgs = hookArgs{n}
		queue := "default"
		switch {
		case n%2 == 0:
			args, queue = remoteArgs{n}, "remote"
		case n%41 == 1:
			args, queue = slowArgs{n}, "slow"
		}
		cctx, cancel := context.WithTimeout(loadCtx, 5*time.Second)
		defer cancel()
		_, err := client.Enqueue(cctx, args, &errand.EnqueueOpts{ID: id, Queue: queue, MaxAttempts: maxAttempts})
		return id, err == nil
	})
	producer("API call (enqueue)", 30*time.Millisecond, func(n int) (string, bool) {
		id := fmt.Sprintf("api-%d", n)
		kind, queue := "hook", "default"
		if n%2 == 0 {
			kind, queue = "remote", "remote"
		}
		status, _, err := call(loadCtx, "/jobs", map[string]any{"kind": kind, "queue": queue, "args": map[string]int{"n": n}, "max_attempts": maxAttempts},
			"Idempotency-Key", id)
		return id, err == nil && status/100 == 2
	})
	work.Go(func() {
		for workCtx.Err() == nil {
			began := time.Now()
			status, body, err := call(workCtx, "/queues/remote/claim", map[string]any{"kinds": []string{"remote"}, "lease": lease.String(), "max_jobs": 10, "worker": "failover-test"})
			if err != nil || (status != http.StatusOK && status != http.StatusNoContent) {
				l.failed("API claim")
				sleep(workCtx, 100*time.Millisecond)
				continue
			}
			if status == http.StatusNoContent {
				sleep(workCtx, 50*time.Millisecond)
				continue
			}
			claimedAt := time.Now()
			f.saw("remote claim through the API", began, claimedAt)
			var claimed struct {
				Jobs []struct {
					ID         string `json:"id"`
					LeaseToken string `json:"lease_token"`
				} `json:"jobs"`
			}
			if err := json.Unmarshal(body, &claimed); err != nil {
				t.Errorf("claim answered %s: %v", body, err)
				return
			}
			for _, j := range claimed.Jobs {
				l.mu.Lock()
				l.attempts[j.ID]++
				l.mu.Unlock()
				status, _, err := call(workCtx, "/jobs/"+j.ID+"/ack", map[string]string{"lease_token": j.LeaseToken})
				if err == nil && status/100 == 2 {
					l.add(l.acked, j.ID)
				} else {
					l.failed("API ack")
				}
			}
		}
	})

	sleep(ctx, loadBefore)
	if err := top.KillPrimary(ctx); err != nil {
		t.Fatal(err)
	}
	if silent {
		pgtest.SilentServerAt(t, fmt.Sprintf("127.0.0.1:%d", top.PrimaryPort))
	}
	killAt := time.Now() // the postmaster is dead: nothing begun now reaches it
	f.killed(killAt)
	sleep(ctx, promoteAfter)
	promoteAt := time.Now()
	if err := top.Promote(ctx); err != nil {
		t.Fatal(err)
	}
	promoted := time.Now()
	t.Logf("killed the primary at +0; promote began at +%v and returned at +%v", promoteAt.Sub(killAt).Round(time.Millisecond), promoted.Sub(killAt).Round(time.Millisecond))
	if silent {
		sleep(ctx, silentLoadAfter)
	} else {
		sleep(ctx, loadAfter)
	}
	stopLoad()
	load.Wait()

	// The promoted standby is the database now.
	conn, err := pgx.Connect(ctx, top.StandbyURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	deadline := time.Now().Add(quietBound)
	var open int
	for {
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM errand.errand_jobs WHERE state NOT IN ('succeeded', 'dead', 'cancelled')`).Scan(&open); err != nil {
			t.Fatal(err)
		}
		if open == 0 || time.Now().After(deadline) {
			break
		}
		sleep(ctx, 200*time.Millisecond)
	}
	stopWork()
	work.Wait()

	// Each errand work process listens for wake-ups on a connection of its
	// own, outside the pool: it must have found the promoted standby too.
	var listeners int
	for {
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE application_name = 'errand-listener'`).Scan(&listeners); err != nil {
			t.Fatal(err)
		}
		if listeners >= 2 || time.Now().After(deadline) {
			break
		}
		sleep(ctx, 200*time.Millisecond)
	}
	if listeners < 2 {
		t.Errorf("%d listeners on the promoted standby, want one per errand work process (2): a listener did not reconnect", listeners)
	}

	type row struct {
		kind, state        string
		attempt, max       int
		expiredRunningFrom bool
	}
	rows, err := conn.Query(ctx, `SELECT id, kind, state, attempt, max_attempts, state = 'running' AND lease_until < now() FROM errand.errand_jobs`)
	if err != nil {
		t.Fatal(err)
	}
	jobs := map[string]row{}
	for rows.Next() {
		var id string
		var r row
		if err := rows.Scan(&id, &r.kind, &r.state, &r.attempt, &r.max, &r.expiredRunningFrom); err != nil {
			t.Fatal(err)
		}
		jobs[id] = r
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}

	l.mu.Lock()
	defer l.mu.Unlock()
	var lostEnqueues, lostAcks []string
	for id := range l.enqueued {
		if _, ok := jobs[id]; !ok {
			lostEnqueues = append(lostEnqueues, id)
		}
	}
	for id := range l.acked {
		if jobs[id].state != "succeeded" {
			lostAcks = append(lostAcks, fmt.Sprintf("%s (%s)", id, jobs[id].state))
		}
	}
	for id, r := range jobs {
		if r.attempt > r.max {
			t.Errorf("job %s ran %d attempts of at most %d", id, r.attempt, r.max)
		}
		if r.expiredRunningFrom {
			t.Errorf("job %s is running with an expired lease once quiet", id)
		}
		if r.state != "succeeded" && r.state != "dead" && r.state != "cancelled" {
			t.Errorf("job %s is %s, not finished, %v after the load stopped", id, r.state, quietBound)
		}
	}
	for id, n := range l.attempts {
		if n > maxAttempts {
			t.Errorf("job %s was delivered %d times, more than its %d attempts", id, n, maxAttempts)
		}
	}
	retried, slow := 0, map[string]int{}
	for _, r := range jobs {
		if r.attempt > 1 {
			retried++
		}
		if r.kind == "slow" {
			slow[fmt.Sprintf("%s after %d attempts", r.state, r.attempt)]++
		}
	}
	t.Logf("%s: slow jobs (%v each, lease %v): %v", mode, slowRun, lease, slow)
	t.Logf("%s: %d jobs in the promoted database; %d enqueues and %d acks answered success; %d jobs took more than one attempt; failed calls: %v",
		mode, len(jobs), len(l.enqueued), len(l.acked), retried, l.failures)
	switch mode {
	case pgtopology.Sync:
		if len(lostEnqueues) > 0 {
			t.Errorf("%d acknowledged enqueues are missing after the failover: %v", len(lostEnqueues), lostEnqueues)
		}
		if len(lostAcks) > 0 {
			t.Errorf("%d acknowledged outcomes are not recorded after the failover: %v", len(lostAcks), lostAcks)
		}
	case pgtopology.Async:
		t.Logf("async: lost %d acknowledged enqueues %v and %d acknowledged outcomes %v (allowed: commits not yet streamed)",
			len(lostEnqueues), lostEnqueues, len(lostAcks), lostAcks)
	}

	for _, what := range []string{"library enqueue", "API call (enqueue)", "claim by errand work (sink delivery)", "remote claim through the API"} {
		d, ok := f.since(what)
		if !ok {
			t.Errorf("no %s succeeded after the kill: errand did not reconnect", what)
			continue
		}
		t.Logf("%s: first %s %v after the kill (%v after promote returned)", mode, what, d.Round(time.Millisecond), (d - promoted.Sub(killAt)).Round(time.Millisecond))
	}
	for _, p := range procs {
		if p.exited() {
			t.Errorf("%s exited during the failover:\n%s", p.name, p.tail())
		}
	}
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// httptestServer serves h on a free loopback port until the test ends and
// returns its URL.
func httptestServer(t *testing.T, h http.Handler) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String()
}

// process is a running errand process whose log goes to a file.
type process struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
}

func startProcess(t *testing.T, bin, log string, args ...string) *process {
	out, err := os.Create(log)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.Env = append(os.Environ(), "ERRAND_DB=", "XDG_CONFIG_HOME="+filepath.Dir(log))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &process{name: "errand " + strings.Join(args[:1], " ") + " (" + filepath.Base(log) + ")", cmd: cmd, log: log, done: make(chan struct{})}
	go func() {
		cmd.Wait()
		out.Close()
		close(p.done)
	}()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(15 * time.Second):
			cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func (p *process) tail() string {
	b, _ := os.ReadFile(p.log)
	if len(b) > 8192 {
		b = b[len(b)-8192:]
	}
	return string(b)
}

// waitFor waits for a log line matching re and returns its first group.
func (p *process) waitFor(t *testing.T, re *regexp.Regexp) string {
	deadline := time.Now().Add(30 * time.Second) // a bound for a hung process
	for time.Now().Before(deadline) && !p.exited() {
		sc := bufio.NewScanner(strings.NewReader(p.tail()))
		for sc.Scan() {
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				return m[1]
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%s did not log %s:\n%s", p.name, re, p.tail())
	return ""
}
