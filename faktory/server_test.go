package faktory

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandtype"
)

func TestPushFetchAck(t *testing.T) {
	onBothStores(t, func(t *testing.T, e *env) {
		w := e.worker("w1")
		w.push(map[string]any{"jid": "job-00001", "jobtype": "resize", "args": []any{7, "big"}, "queue": "images", "priority": 7, "retry": 3})

		j := e.job("job-00001")
		if j.Kind != "resize" || j.Queue != "images" || compact(t, j.Args) != `[7,"big"]` || j.Priority != -2 || j.MaxAttempts != 4 || j.State != errandtype.StateQueued {
			t.Fatalf("enqueued %s %s %s priority %d max %d %s; want resize images [7,\"big\"] -2 4 queued", j.Kind, j.Queue, j.Args, j.Priority, j.MaxAttempts, j.State)
		}
		got := w.fetch("images")
		if got == nil {
			t.Fatal("FETCH images: null, want the job")
		}
		if got.Jid != "job-00001" || got.Type != "resize" || compact(t, got.Args) != `[7,"big"]` || got.Queue != "images" ||
			got.Priority != 7 || got.Retry != 3 || got.ReserveFor != 1800 || got.Failure != nil || string(got.Custom) != "{}" {
			t.Fatalf("fetched %+v", got)
		}
		if _, err := time.Parse(time.RFC3339Nano, got.CreatedAt); err != nil {
			t.Fatalf("created_at %q: %v", got.CreatedAt, err)
		}
		j = e.job("job-00001")
		if j.State != errandtype.StateRunning || j.LeaseOwner == nil || *j.LeaseOwner != "faktory:w1" {
			t.Fatalf("after FETCH: %s owned by %v; want running, faktory:w1", j.State, j.LeaseOwner)
		}
		if want := e.clock.Now().Add(DefaultReserveFor); !j.LeaseUntil.Equal(want) {
			t.Fatalf("lease until %s, want reserve_for from now, %s", j.LeaseUntil, want)
		}
		w.must(ack("job-00001"), "+OK")
		if j := e.job("job-00001"); j.State != errandtype.StateSucceeded {
			t.Fatalf("after ACK: %s, want succeeded", j.State)
		}
		w.mustErr(ack("job-00001"), "not reserved by worker")
	})
}

// The connections of one worker share its reservations: Faktory clients
// pool connections and ACK on any of them.
func TestAckOnAnotherConnectionOfTheWorker(t *testing.T) {
	onBothStores(t, func(t *testing.T, e *env) {
		a, b := e.worker("w1"), e.worker("w1")
		a.push(fjob("job-00002", "k"))
		if a.fetch() == nil {
			t.Fatal("FETCH: null")
		}
		e.worker("w2").mustErr(ack("job-00002"), "not reserved by worker", `"w2"`)
		b.must(ack("job-00002"), "+OK")
	})
}

// FETCH takes the queues strictly in the order given, and within a queue
// Faktory's priorities in order, 9 first.
func TestFetchOrder(t *testing.T) {
	onBothStores(t, func(t *testing.T, e *env) {
		w := e.worker("w1")
		w.push(map[string]any{"jid": "low-0001", "jobtype": "k", "args": []any{}, "queue": "q2", "priority": 9})
		for _, p := range []int{1, 9, 5} {
			w.push(map[string]any{"jid": "q1-p" + string(rune('0'+p)) + "-001", "jobtype": "k", "args": []any{}, "queue": "q1", "priority": p})
		}
		var got []string
		for range 4 {
			j := w.fetch("q1", "q2")
			if j == nil {
				t.Fatal("FETCH: null")
			}
			got = append(got, j.Jid)
		}
		if want := "q1-p9-001 q1-p5-001 q1-p1-001 low-0001"; strings.Join(got, " ") != want {
			t.Fatalf("fetched %v, want %s", got, want)
		}
		if j := w.fetch("q1", "q2"); j != nil {
			t.Fatalf("fetched %s from empty queues", j.Jid)
		}
	})
}

func TestFetchDefaultQueueWaitsThenNull(t *testing.T) {
	e := start(t, &Options{FetchWait: 300 * time.Millisecond})
	w := e.worker("w1")
	w.push(map[string]any{"jid": "other-001", "jobtype": "k", "args": []any{}, "queue": "other"})
	began := time.Now()
	if j := w.fetch(); j != nil {
		t.Fatalf("FETCH without queues took %s of queue %s; want the default queue only", j.Jid, j.Queue)
	}
	if waited := time.Since(began); waited < 300*time.Millisecond {
		t.Fatalf("FETCH answered null after %s, want it to wait FetchWait (300ms)", waited)
	}
	w.push(fjob("default-1", "k"))
	if j := w.fetch(); j == nil || j.Jid != "default-1" {
		t.Fatalf("FETCH: %v, want default-1", j)
	}
}

// A PUSH wakes a waiting FETCH at once, not at its next poll.
func TestFetchWokenByPush(t *testing.T) {
	e := start(t, &Options{FetchWait: 5 * time.Second, PollInterval: time.Hour})
	w, p := e.worker("w1"), e.worker("")
	got := make(chan *wireJob, 1)
	go func() { got <- w.fetch() }()
	time.Sleep(100 * time.Millisecond) // let the FETCH wait
	began := time.Now()
	p.push(fjob("wake-0001", "k"))
	select {
	case j := <-got:
		if j == nil || j.Jid != "wake-0001" {
			t.Fatalf("FETCH: %v, want wake-0001", j)
		}
		if d := time.Since(began); d > time.Second {
			t.Fatalf("FETCH answered %s after the PUSH", d)
		}
	case <-time.After(4 * time.Second):
		t.Fatal("FETCH still waiting 4s after a PUSH")
	}
}

// at schedules the job: it is not fetched before then.
func TestPushAt(t *testing.T) {
	onBothStores(t, func(t *testing.T, e *env) {
		w := e.worker("w1")
		at := time.Now().Add(time.Hour).UTC().Truncate(time.Millisecond)
		w.push(map[string]any{"jid": "later-001", "jobtype": "k", "args": []any{}, "at": at.Format(time.RFC3339Nano)})
		if j := e.job("later-001"); !j.AvailableAt.Equal(at) {
			t.Fatalf("available at %s, want %s", j.AvailableAt, at)
		}
		if j := w.fetch(); j != nil {
			t.Fatalf("fetched %s an hour early", j.Jid)
		}
		e.clock.Set(at.Add(time.Second))
		if j := w.fetch(); j == nil || j.Jid != "later-001" {
			t.Fatalf("FETCH after at: %v, want later-001", j)
		}
	})
}

// An ACK whose reservation ended, the job now another worker's, is
// refused: errand's fencing, never a silent success.
func TestAckAfterLeaseLost(t *testing.T) {
	onBothStores(t, func(t *testing.T, e *env) {
		a, b := e.worker("a"), e.worker("b")
		a.push(fjob("fence-001", "k"))
		if j := a.fetch(); j == nil {
			t.Fatal("FETCH: null")
		}
		e.clock.Advance(DefaultReserveFor + time.Second)
		if j := b.fetch(); j == nil || j.Jid != "fence-001" {
			t.Fatalf("worker b's FETCH after the reservation ended: %v", j)
		}
		a.mustErr(ack("fence-001"), "lease lost", "nothing was recorded")
		if j := e.job("fence-001"); j.State != errandtype.StateRunning || *j.LeaseOwner != "faktory:b" {
			t.Fatalf("after a's refused ACK: %s owned by %s; want running under b", j.State, *j.LeaseOwner)
		}
		b.must(ack("fence-001"), "+OK")
	})
}

// FAIL records the class, message and backtrace; the job retries on
// errand's policy, and its next FETCH carries the failure.
func TestFailRetriesWithFailure(t *testing.T) {
	onBothStores(t, func(t *testing.T, e *env) {
		w := e.worker("w1")
		w.push(map[string]any{"jid": "flaky-001", "jobtype": "k", "args": []any{}, "retry": 2})
		w.fetch()
		w.must(`FAIL {"jid":"flaky-001","errtype":"TypeError","message":"x is undefined","backtrace":["at a (a.js:1)","at b (b.js:2)"]}`, "+OK")
		j := e.job("flaky-001")
		if j.State != errandtype.StateRetrying || len(j.Errors) != 1 {
			t.Fatalf("after FAIL: %s with %d errors, want retrying with 1", j.State, len(j.Errors))
		}
		if got := j.Errors[0]; got.Class != "type_error" || got.Message != "x is undefined" || got.Stack != "at a (a.js:1)\nat b (b.js:2)" {
			t.Fatalf("error %+v", got)
		}
		e.clock.Set(j.AvailableAt.Add(time.Second))
		got := w.fetch()
		if got == nil || got.Failure == nil {
			t.Fatalf("FETCH of the retry: %+v, want its failure", got)
		}
		want := wireFailure{RetryCount: 0, Remaining: 2, FailedAt: wireTime(j.Errors[0].At), Message: "x is undefined", ErrType: "type_error",
			Backtrace: []string{"at a (a.js:1)", "at b (b.js:2)"}}
		if mustJSON(t, got.Failure) != mustJSON(t, want) {
			t.Fatalf("failure %s, want %s", mustJSON(t, got.Failure), mustJSON(t, want))
		}
		w.must(`FAIL {"jid":"flaky-001","message":"again"}`, "+OK")
		e.clock.Set(e.job("flaky-001").AvailableAt.Add(time.Second))
		if got := w.fetch(); got.Failure.RetryCount != 1 || got.Failure.Remaining != 1 || got.Failure.ErrType != "error" {
			t.Fatalf("second retry's failure %+v", got.Failure)
		}
		w.must(`FAIL {"jid":"flaky-001","message":"last"}`, "+OK")
		if j := e.job("flaky-001"); j.State != errandtype.StateDead || len(j.Errors) != 3 {
			t.Fatalf("after the third failure of retry 2: %s with %d errors, want dead with 3", j.State, len(j.Errors))
		}
	})
}

// retry 0 and -1 fail once, to dead: errand never discards a job.
func TestNoRetryIsDeadNotDiscarded(t *testing.T) {
	for _, retry := range []int{0, -1} {
		e := start(t, nil)
		w := e.worker("w1")
		w.push(map[string]any{"jid": "once-0001", "jobtype": "k", "args": []any{}, "retry": retry})
		w.fetch()
		w.must(`FAIL {"jid":"once-0001","errtype":"Boom","message":"no"}`, "+OK")
		if j := e.job("once-0001"); j.State != errandtype.StateDead || j.LastError == nil || j.LastError.Class != "boom" {
			t.Fatalf("retry %d: after FAIL %s %+v, want dead with class boom", retry, j.State, j.LastError)
		}
	}
}

func TestPushRefusals(t *testing.T) {
	e := start(t, nil)
	w := e.worker("")
	for _, tc := range []struct{ job, says string }{
		{`{"jobtype":"k","args":[]}`, "jid: is missing"},
		{`{"jid":"x-000001","args":[]}`, "jobtype: is missing"},
		{`{"jid":"x-000001","jobtype":"k"}`, "args: must be a JSON array"},
		{`{"jid":"x-000001","jobtype":"k","args":{"a":1}}`, "args: must be a JSON array"},
		{`{"jid":"x-000001","jobtype":"k","args":[],"priority":10}`, "priority: 10 is out of range"},
		{`{"jid":"x-000001","jobtype":"k","args":[],"priority":"high"}`, "field priority is string, want a number"},
		{`{"jid":"x-000001","jobtype":"k","args":[],"retry":-2}`, "retry: -2 is out of range"},
		{`{"jid":"x-000001","jobtype":"k","args":[],"reserve_for":-1}`, "reserve_for: -1 is negative"},
		{`{"jid":"x-000001","jobtype":"k","args":[],"reserve_for":90000}`, "reserve_for: 90000 is over"},
		{`{"jid":"x-000001","jobtype":"k","args":[],"at":"tomorrow"}`, `at: "tomorrow" is not an RFC 3339 time`},
		{`{"jid":"x-000001","jobtype":"k","args":[],"custom":[1]}`, "custom: must be a JSON object"},
		{`{"jid":"x-000001","jobtype":"k","args":[],"queue":"a b"}`, "queue"},
		{`{"jid":"x-000001","jobtype":"k","args":[`, "invalid JSON"},
		{`[1,2]`, "not a JSON object"},
		{``, "not a JSON object"},
	} {
		w.mustErr("PUSH "+tc.job, "PUSH: ", tc.says)
	}
	if n, _ := e.c.Stats(context.Background()); len(n) != 0 {
		t.Fatalf("refused pushes enqueued: %+v", n)
	}
	w.push(fjob("x-000001", "k")) // the connection is still usable
}

// A PUSH of a jid that exists returns the existing job when it is the
// same job (a retried push), and is refused when it differs.
func TestPushExistingJid(t *testing.T) {
	onBothStores(t, func(t *testing.T, e *env) {
		w := e.worker("")
		w.push(fjob("dup-00001", "k", 1))
		w.push(fjob("dup-00001", "k", 1))
		w.mustErr("PUSH "+mustJSON(t, fjob("dup-00001", "k", 2)), `jid "dup-00001" is taken by a different job (args differ)`)
		if j := e.job("dup-00001"); compact(t, j.Args) != "[1]" {
			t.Fatalf("args %s after pushes, want the first push's [1]", j.Args)
		}
	})
}

func TestPushBulk(t *testing.T) {
	e := start(t, nil)
	w := e.worker("")
	w.must("PUSHB "+mustJSON(t, []any{fjob("bulk-0001", "k"), fjob("bulk-0002", "k")}), "${}")
	got := w.send("PUSHB " + mustJSON(t, []any{
		fjob("bulk-0003", "k"),
		map[string]any{"jid": "bulk-0004", "jobtype": "k", "args": []any{}, "priority": 11},
		fjob("bulk-0001", "k", "changed"),
		map[string]any{"jobtype": "k", "args": []any{}},
		fjob("bulk-0003", "k"),
	}))
	var refused map[string]string
	if err := json.Unmarshal([]byte(strings.TrimPrefix(got, "$")), &refused); err != nil {
		t.Fatalf("PUSHB reply %q: %v", got, err)
	}
	if len(refused) != 4 || !strings.Contains(refused["bulk-0004"], "priority") ||
		!strings.Contains(refused["bulk-0001"], "taken by a different job") || !strings.Contains(refused["[3]"], "jid: is missing") ||
		!strings.Contains(refused["[4]"], `jid "bulk-0003" is pushed twice`) {
		t.Fatalf("PUSHB refused %v; want bulk-0004 (priority), bulk-0001 (taken), [3] (no jid) and [4] (bulk-0003 again)", refused)
	}
	for _, id := range []string{"bulk-0002", "bulk-0003"} {
		if j := e.job(id); j.State != errandtype.StateQueued {
			t.Fatalf("%s: %s, want queued", id, j.State)
		}
	}
	w.mustErr("PUSHB {}", "PUSHB: ", "send a JSON array of jobs")
}

func TestPassword(t *testing.T) {
	const password = "s3cret-Pa55w0rd-xyz"
	// The hash the faktory-worker Node.js client computes for salt a1b2c3
	// and 3 iterations.
	if got := passwordHash(password, "a1b2c3", 3); got != "3d056479f25381c443a9b118eaa9c4e8f2c04d35de0fdca6c6755bba850ffbf7" {
		t.Fatalf("passwordHash = %s", got)
	}
	e := start(t, &Options{Password: password})
	c := e.dial()
	salt, _ := c.hi["s"].(string)
	iters, _ := c.hi["i"].(float64)
	if salt == "" || iters < minHashIterations || c.hi["v"] != float64(2) {
		t.Fatalf("+HI %v, want v 2, a salt and at least %d iterations", c.hi, minHashIterations)
	}
	c.must(`INFO`, `-ERR send HELLO first: "INFO" needs a HELLO {...} after the server's +HI`)
	c.must(`HELLO {"v":2,"wid":"w1","pwdhash":"`+passwordHash(password, salt, int(iters))+`"}`, "+OK")
	c.must(`BEAT {"wid":"w1"}`, "+OK")

	bad := e.dial()
	bad.must(`HELLO {"v":2,"pwdhash":"`+passwordHash("wrong-password-123", bad.hi["s"].(string), int(bad.hi["i"].(float64)))+`"}`, "-ERR invalid password")
	if !bad.closed(2 * time.Second) {
		t.Fatal("the connection stayed open after a wrong password")
	}
	none := e.dial()
	none.mustErr(`HELLO {"v":2}`, "this server needs a password")
	if !none.closed(2 * time.Second) {
		t.Fatal("the connection stayed open after a HELLO without a password")
	}
	// A hash of another connection's salt is no good here.
	replay := e.dial()
	replay.must(`HELLO {"v":2,"pwdhash":"`+passwordHash(password, salt, int(iters))+`"}`, "-ERR invalid password")
}

func TestHelloRefusals(t *testing.T) {
	e := start(t, nil)
	c := e.dial()
	c.mustErr(`PUSH {}`, "send HELLO first")
	c.mustErr(`HELLO {"v":2,`, "HELLO: invalid JSON")
	c.mustErr(`HELLO {"v":2,"wid":"a\u0001b"}`, "wid", "control")
	c.must(`HELLO {"v":2,"wid":"w1"}`, "+OK")
	c.mustErr(`HELLO {"v":2,"wid":"w1"}`, "already given")
	c.mustErr(`BEAT {"wid":"w2"}`, "not this connection's worker")
	c.must(`BEAT {"wid":"w1","current_state":"","rss_kb":1024}`, "+OK")
	p := e.worker("")
	p.mustErr(`FETCH default`, `FETCH needs a worker id`)
	p.mustErr(ack("j-0000001"), "this connection has no worker id")
}

func TestUnsupportedAndUnknownCommands(t *testing.T) {
	e := start(t, nil)
	w := e.worker("w1")
	for verb, line := range map[string]string{
		"MUTATE": `MUTATE {"cmd":"kill","target":"retries"}`,
		"QUEUE":  `QUEUE PAUSE default`,
		"FLUSH":  `FLUSH`,
		"BATCH":  `BATCH NEW {}`,
		"TRACK":  `TRACK GET abc`,
	} {
		w.mustErr(line, verb+" is not supported by errand's Faktory server")
	}
	w.mustErr("push {}", `unknown command "push"`, "HELLO, PUSH, PUSHB, FETCH")
	w.mustErr("\x01\r\x02 junk", "unknown command")
	w.mustErr(`ACK {"jid":`, "ACK: invalid JSON")
	w.mustErr(`FAIL [1]`, "FAIL: ")
	w.mustErr(`ACK {}`, "jid is missing")
	w.mustErr("FETCH default \x01", "FETCH: ", "queue")
	w.mustErr("FETCH"+strings.Repeat(" q", 101), "FETCH names 101 queues; name at most 100")
	// Still usable after all of it.
	w.push(fjob("after-001", "k"))
	if j := w.fetch(); j == nil {
		t.Fatal("FETCH after refused commands: null")
	}
}

func TestOversizedLine(t *testing.T) {
	e := start(t, &Options{MaxLineBytes: 1024})
	w := e.worker("")
	w.must("PUSH "+mustJSON(t, fjob("fits-0001", "k", strings.Repeat("a", 900))), "+OK")
	w.mustErr("PUSH "+mustJSON(t, fjob("huge-0001", "k", strings.Repeat("a", 5000))), "command line over 1024 bytes")
	if !w.closed(2 * time.Second) {
		t.Fatal("the connection stayed open after an oversized line")
	}
	if _, err := e.c.Get(context.Background(), "huge-0001"); err == nil {
		t.Fatal("the oversized push was enqueued")
	}
	e.worker("").push(fjob("next-0001", "k")) // the server serves on
}

// A client that does not finish its HELLO, or a line it began, is cut
// off; one that idles too long is closed.
func TestSlowClients(t *testing.T) {
	e := start(t, &Options{HandshakeTimeout: 200 * time.Millisecond, LineTimeout: 200 * time.Millisecond, IdleTimeout: 400 * time.Millisecond})
	silent := e.dial()
	if got := silent.reply(); !strings.Contains(got, "no HELLO within 200ms") {
		t.Fatalf("silent client got %q", got)
	}
	if !silent.closed(time.Second) {
		t.Fatal("a client without HELLO stayed connected")
	}

	slow := e.worker("w1")
	slow.nc.Write([]byte(`PUSH {"jid":`)) // and never the rest
	if got := slow.reply(); !strings.Contains(got, "timed out reading a command") {
		t.Fatalf("slow client got %q", got)
	}
	if !slow.closed(time.Second) {
		t.Fatal("a client that stopped mid-line stayed connected")
	}

	idle := e.worker("w2")
	time.Sleep(250 * time.Millisecond) // longer than LineTimeout, shorter than IdleTimeout
	idle.must(`BEAT {"wid":"w2"}`, "+OK")
	idle.nc.SetReadDeadline(time.Now().Add(2 * time.Second))
	b, err := io.ReadAll(idle.r)
	if err != nil || len(b) != 0 {
		t.Fatalf("an idle client got %q, %v; want the connection closed without a word", b, err)
	}
}

// A job claimed for a FETCH whose answer cannot be delivered is given back
// at once, its attempt not counted.
func TestUndeliveredFetchGivesTheJobBack(t *testing.T) {
	onBothStores(t, func(t *testing.T, e *env) {
		e.worker("").push(fjob("lost-0001", "k"))
		server, client := net.Pipe()
		c := newConn(e.srv, server)
		c.hello, c.wid, c.owner = true, "w1", "faktory:w1"
		c.s.res.attach("w1")
		done := make(chan struct{})
		go func() { defer close(done); c.dispatch("FETCH"); c.flush() }()
		client.Close() // the worker is gone before the answer
		<-done
		j := e.job("lost-0001")
		if j.State != errandtype.StateQueued || j.Attempt != 0 || j.LeaseToken != nil {
			t.Fatalf("after an undelivered FETCH: %s attempt %d; want queued, attempt 0", j.State, j.Attempt)
		}
		if _, ok := e.srv.res.token("w1", "lost-0001"); ok {
			t.Fatal("the undelivered job is still reserved")
		}
	})
}

// Shutdown tells workers to terminate, hands out no more jobs, and waits
// for the jobs they hold to be acknowledged.
func TestShutdownTerminatesWorkers(t *testing.T) {
	e := start(t, nil)
	w := e.worker("w1")
	w.push(fjob("held-0001", "k"))
	w.push(fjob("left-0001", "k"))
	if j := w.fetch(); j == nil {
		t.Fatal("FETCH: null")
	}
	stopped := make(chan error, 1)
	go func() { stopped <- e.srv.Shutdown(context.Background()) }()
	deadline := time.Now().Add(5 * time.Second)
	for !e.srv.isDraining() && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	w.must(`BEAT {"wid":"w1"}`, `${"state":"terminate"}`)
	if j := w.fetch(); j != nil {
		t.Fatalf("FETCH during shutdown handed out %s", j.Jid)
	}
	select {
	case err := <-stopped:
		t.Fatalf("Shutdown returned %v while the worker held a job", err)
	default:
	}
	w.must(ack("held-0001"), "+OK")
	select {
	case err := <-stopped:
		if err != nil {
			t.Fatalf("Shutdown: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Shutdown still waiting after the held job was acknowledged")
	}
	if !w.closed(2 * time.Second) {
		t.Fatal("the connection stayed open after Shutdown")
	}
	if j := e.job("left-0001"); j.State != errandtype.StateQueued {
		t.Fatalf("the job not fetched is %s, want queued", j.State)
	}
}

// Shutdown gives up at its context's end: the held job is not lost, it
// stays running under its lease.
func TestShutdownGivesUpAtDeadline(t *testing.T) {
	e := start(t, nil)
	w := e.worker("w1")
	w.push(fjob("held-0001", "k"))
	w.fetch()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if err := e.srv.Shutdown(ctx); err != context.DeadlineExceeded {
		t.Fatalf("Shutdown: %v, want DeadlineExceeded", err)
	}
	if j := e.job("held-0001"); j.State != errandtype.StateRunning {
		t.Fatalf("held job %s after Shutdown, want running until its lease ends", j.State)
	}
}

func TestInfo(t *testing.T) {
	e := start(t, nil)
	w := e.worker("w1")
	w.push(fjob("info-0001", "k"))
	w.push(map[string]any{"jid": "info-0002", "jobtype": "k", "args": []any{}, "queue": "mail"})
	got := w.send("INFO")
	var info struct {
		Faktory struct {
			TotalEnqueued int            `json:"total_enqueued"`
			Queues        map[string]int `json:"queues"`
		} `json:"faktory"`
		Server struct {
			Description string `json:"description"`
		} `json:"server"`
	}
	if err := json.Unmarshal([]byte(strings.TrimPrefix(got, "$")), &info); err != nil {
		t.Fatalf("INFO %q: %v", got, err)
	}
	if info.Faktory.TotalEnqueued != 2 || info.Faktory.Queues["default"] != 1 || info.Faktory.Queues["mail"] != 1 || info.Server.Description != "errand" {
		t.Fatalf("INFO %s", got)
	}
}

func TestEndClosesTheConnection(t *testing.T) {
	e := start(t, nil)
	w := e.worker("w1")
	w.nc.Write([]byte("END\r\n"))
	if !w.closed(2 * time.Second) {
		t.Fatal("END left the connection open")
	}
}

// reserve_for is the fetched job's lease: 60 s at least, as in Faktory.
func TestReserveFor(t *testing.T) {
	onBothStores(t, func(t *testing.T, e *env) {
		a, b := e.worker("a"), e.worker("b")
		a.push(map[string]any{"jid": "short-001", "jobtype": "k", "args": []any{}, "reserve_for": 30})
		a.push(map[string]any{"jid": "hour-0001", "jobtype": "k", "args": []any{}, "reserve_for": 3600, "queue": "long"})
		if j := a.fetch(); j == nil || j.Jid != "short-001" || j.ReserveFor != 60 {
			t.Fatalf("FETCH: %+v, want short-001 reserved for 60s, Faktory's least", j)
		}
		if j := e.job("short-001"); !j.LeaseUntil.Equal(e.clock.Now().Add(time.Minute)) {
			t.Fatalf("lease until %s, want 60s from now", j.LeaseUntil)
		}
		if j := a.fetch("long"); j == nil || j.ReserveFor != 3600 {
			t.Fatalf("FETCH long: %+v, want reserved for 3600s", j)
		}
		if j := e.job("hour-0001"); !j.LeaseUntil.Equal(e.clock.Now().Add(time.Hour)) {
			t.Fatalf("lease until %s, want an hour from now", j.LeaseUntil)
		}
		e.clock.Advance(61 * time.Second)
		if j := b.fetch(); j == nil || j.Jid != "short-001" {
			t.Fatalf("b's FETCH after 61s: %v, want short-001 again", j)
		}
		a.mustErr(ack("short-001"), "lease lost")
		a.must(ack("hour-0001"), "+OK")
		b.must(ack("short-001"), "+OK")
	})
}

// custom is kept in the job's metadata, under "faktory", and comes back
// on FETCH unchanged; so does retry -1.
func TestCustomAndRetryRoundTrip(t *testing.T) {
	e := start(t, nil)
	w := e.worker("w1")
	custom := `{"tenant":"acme","trace":{"id":"t-1","sampled":true},"n":[1,2.5,null]}`
	w.push(map[string]any{"jid": "custom-01", "jobtype": "k", "args": []any{}, "custom": json.RawMessage(custom), "retry": -1})
	if got, want := string(e.job("custom-01").Metadata), `{"faktory":{"custom":`+custom+`,"retry":-1}}`; got != want {
		t.Fatalf("metadata %s, want %s", got, want)
	}
	j := w.fetch()
	if j == nil || string(j.Custom) != custom || j.Retry != -1 {
		t.Fatalf("FETCH: %+v; want custom %s and retry -1", j, custom)
	}
	// A re-push of the jid with other custom fields is the same job: custom
	// describes the request, not the work, and the first push's is kept.
	w.push(map[string]any{"jid": "custom-01", "jobtype": "k", "args": []any{}, "custom": map[string]any{"tenant": "other"}, "retry": -1})
	if got := string(e.job("custom-01").Metadata); !strings.Contains(got, "acme") {
		t.Fatalf("metadata %s after a re-push, want the first push's", got)
	}
	w.mustErr("PUSH "+mustJSON(t, map[string]any{"jid": "custom-02", "jobtype": "k", "args": []any{}, "custom": map[string]any{"blob": strings.Repeat("x", 70000)}}),
		"custom: is ", "keep custom fields under")
}

// A job enqueued through errand with metadata of its own reaches a
// Faktory worker with empty custom fields, its metadata left alone.
func TestFetchJobEnqueuedByErrand(t *testing.T) {
	onBothStores(t, func(t *testing.T, e *env) {
		_, err := e.c.Enqueue(context.Background(), errand.RawArgs{KindName: "resize", JSON: json.RawMessage(`{"image":7}`)},
			&errand.EnqueueOpts{ID: "native-01", Priority: 3, MaxAttempts: 2, Metadata: json.RawMessage(`{"traceparent":"00-abc"}`)})
		if err != nil {
			t.Fatal(err)
		}
		w := e.worker("w1")
		j := w.fetch()
		if j == nil || compact(t, j.Args) != `[{"image":7}]` || string(j.Custom) != "{}" || j.Priority != 2 || j.Retry != 1 || j.ReserveFor != 1800 {
			t.Fatalf("FETCH: %+v; want args [{\"image\":7}], custom {}, priority 2, retry 1, reserve_for 1800", j)
		}
	})
}

// Among many jobs of a PUSHB, those errand refuses (a jid taken by a
// different job, a queue errand cannot name) are named, and every other
// job is enqueued.
func TestPushBulkRefusesOnlyTheBadJobs(t *testing.T) {
	onBothStores(t, func(t *testing.T, e *env) {
		w := e.worker("")
		w.push(fjob("taken-017", "k", "first"))
		w.push(fjob("taken-042", "k", "first"))
		var jobs []any
		for i := range 64 {
			jid := fmt.Sprintf("many-%03d", i)
			switch i {
			case 17, 42:
				jid = fmt.Sprintf("taken-%03d", i)
			}
			jobs = append(jobs, fjob(jid, "k", "second"))
		}
		jobs = append(jobs, map[string]any{"jid": "badq-0001", "jobtype": "k", "args": []any{}, "queue": "tab\tqueue"})
		got := w.send("PUSHB " + mustJSON(t, jobs))
		var refused map[string]string
		if err := json.Unmarshal([]byte(strings.TrimPrefix(got, "$")), &refused); err != nil {
			t.Fatalf("PUSHB reply %q: %v", got, err)
		}
		if len(refused) != 3 || !strings.Contains(refused["taken-017"], "taken by a different job") ||
			!strings.Contains(refused["taken-042"], "taken by a different job") || !strings.Contains(refused["badq-0001"], "queue") {
			t.Fatalf("PUSHB refused %v; want taken-017, taken-042 and badq-0001", refused)
		}
		js, err := e.c.List(context.Background(), &errand.ListOpts{Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		if len(js) != 64 { // 62 new, and the two taken
			t.Fatalf("%d jobs after the PUSHB, want 64", len(js))
		}
	})
}

// compact returns JSON b without spaces: PostgreSQL's jsonb writes some.
func compact(t *testing.T, b []byte) string {
	t.Helper()
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	return buf.String()
}

// A Faktory worker is in errand's worker registry under faktory:WID, and
// an operator's cancel of its job takes effect when it reports.
func TestWorkerRegistryAndCancel(t *testing.T) {
	e := start(t, nil)
	w := e.worker("w1")
	w.push(fjob("cancel-01", "k"))
	if j := w.fetch(); j == nil {
		t.Fatal("FETCH: null")
	}
	ws, err := e.c.Workers(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(ws) != 1 || ws[0].ID != "faktory:w1" || ws[0].Host != "remote" || len(ws[0].Queues) != 1 || ws[0].Queues[0].Name != "default" {
		t.Fatalf("workers %+v, want faktory:w1 on host remote, queue default", ws)
	}
	if _, err := e.c.Cancel(context.Background(), "cancel-01", &errand.CancelOpts{Operator: "op", Reason: "not needed"}); err != nil {
		t.Fatal(err)
	}
	w.must(`FAIL {"jid":"cancel-01","errtype":"AbortError","message":"stopped"}`, "+OK")
	if j := e.job("cancel-01"); j.State != errandtype.StateCancelled {
		t.Fatalf("after FAIL of a cancelled job: %s, want cancelled", j.State)
	}
}
