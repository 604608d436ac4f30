package postgres_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandtype"
	"github.com/errandhq/errand/postgres"
	"github.com/errandhq/errand/postgres/pgtest"
	"github.com/jackc/pgx/v5"
)

// receive returns the next name ch delivers, failing the test after 10s.
func receive(t *testing.T, ch <-chan string, what string) string {
	t.Helper()
	select {
	case q, ok := <-ch:
		if !ok {
			t.Fatalf("%s: listener channel closed", what)
		}
		return q
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: nothing delivered in 10s", what)
		return ""
	}
}

// listenerPIDs returns the backend pids of the connections listening on
// schema's channel.
func listenerPIDs(t *testing.T, s *postgres.Store, schema string) []int32 {
	t.Helper()
	rows, err := s.Pool().Query(t.Context(), `SELECT pid FROM pg_stat_activity
		WHERE application_name = 'errand-listener' AND query LIKE 'LISTEN %' AND strpos(query, $1) > 0
		ORDER BY pid`, schema)
	if err != nil {
		t.Fatal(err)
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		t.Fatal(err)
	}
	return pids
}

// flushed counts the markers of flush, so that each is unique.
var flushed atomic.Int64

// flush returns the names ch delivers before a marker that s notifies after
// the call, so every name notified on ch's channel before the call. It sends
// two markers, the second once the first has arrived: the listener gathers
// pending names in a set, so only the second is sure to come after them.
func flush(t *testing.T, s *postgres.Store, ch <-chan string) []string {
	t.Helper()
	var names []string
	for range 2 {
		marker := fmt.Sprintf("flush-%d", flushed.Add(1))
		if err := s.NotifyQueues(t.Context(), []string{marker}); err != nil {
			t.Fatal(err)
		}
		for q := receive(t, ch, "waiting for "+marker); q != marker; q = receive(t, ch, "waiting for "+marker) {
			names = append(names, q)
		}
	}
	slices.Sort(names)
	return names
}

// TestNotifyReachesListenersOfTheSchema checks that a notification sent
// through one store reaches a listener on another pool for the same schema,
// each queue once, and not a listener on another schema.
func TestNotifyReachesListenersOfTheSchema(t *testing.T) {
	url := pgtest.URL(t)
	schemaA, schemaB := pgtest.Schema(t, url), pgtest.Schema(t, url)
	senderA, listenerA, onB := open(t, url, schemaA, nil), open(t, url, schemaA, nil), open(t, url, schemaB, nil)
	defer senderA.Close()
	defer listenerA.Close()
	defer onB.Close()
	ctx := t.Context()
	chA, err := listenerA.ListenQueues(ctx)
	if err != nil {
		t.Fatal(err)
	}
	chB, err := onB.ListenQueues(ctx)
	if err != nil {
		t.Fatal(err)
	}

	if err := senderA.NotifyQueues(ctx, []string{"beta", "alpha", "beta"}); err != nil {
		t.Fatal(err)
	}
	if got := flush(t, senderA, chA); !slices.Equal(got, []string{"alpha", "beta"}) {
		t.Errorf("schema A's listener got %q, want alpha and beta", got)
	}
	if got := flush(t, onB, chB); len(got) > 0 {
		t.Errorf("schema B's listener got %q from schema A", got)
	}
	if err := onB.NotifyQueues(ctx, []string{"only-b"}); err != nil {
		t.Fatal(err)
	}
	if got := flush(t, senderA, chA); len(got) > 0 {
		t.Errorf("schema A's listener got %q from schema B", got)
	}
}

// TestListenReconnects terminates the listener's connection on the server:
// the listener reconnects by itself, delivers "" (look at every queue), and
// later notifications arrive.
func TestListenReconnects(t *testing.T) {
	url := pgtest.URL(t)
	schema := pgtest.Schema(t, url)
	var logs syncBuffer
	sender := open(t, url, schema, nil)
	listener, err := postgres.Open(t.Context(), url, &postgres.Options{Schema: schema,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer sender.Close()
	defer listener.Close()
	ctx := t.Context()
	ch, err := listener.ListenQueues(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := sender.NotifyQueues(ctx, []string{"before"}); err != nil {
		t.Fatal(err)
	}
	if q := receive(t, ch, "before the drop"); q != "before" {
		t.Fatalf("got %q, want before", q)
	}
	pids := listenerPIDs(t, sender, schema)
	if len(pids) != 1 {
		t.Fatalf("listener backends %v, want one", pids)
	}
	var killed bool
	if err := sender.Pool().QueryRow(ctx, `SELECT pg_terminate_backend($1)`, pids[0]).Scan(&killed); err != nil || !killed {
		t.Fatalf("pg_terminate_backend(%d) = %v, %v", pids[0], killed, err)
	}

	if q := receive(t, ch, "after the drop"); q != "" {
		t.Fatalf("first delivery after the drop %q, want \"\" (look at every queue)", q)
	}
	// The terminated backend may still be listed for a moment: the client
	// sees the error it sends before it exits, and the listener may have
	// reconnected by then. Wait for it to leave, with the new one in its
	// place.
	var after []int32
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		after = listenerPIDs(t, sender, schema)
		if len(after) == 1 && after[0] != pids[0] {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("listener backends %v after terminating %d, want one new one", after, pids[0])
			break
		}
	}
	if err := sender.NotifyQueues(ctx, []string{"after"}); err != nil {
		t.Fatal(err)
	}
	if q := receive(t, ch, "after reconnecting"); q != "after" {
		t.Errorf("got %q, want after", q)
	}
	// An operator sees the drop and the recovery.
	for _, want := range []string{"lost its connection", "reconnected"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, logs.String())
		}
	}
}

// TestListenReconnectsPastSilentServer: after a failover the URL's first
// server may be a dead primary whose address takes connections and never
// answers; the listener, cut off, reconnects to the next server all the
// same, each server bounded by the URL's connect_timeout.
func TestListenReconnectsPastSilentServer(t *testing.T) {
	live := pgtest.URL(t)
	schema := pgtest.Schema(t, live)
	u, err := url.Parse(live)
	if err != nil {
		t.Fatal(err)
	}
	u.Host = pgtest.SilentServer(t) + "," + u.Host
	q := u.Query()
	q.Set("connect_timeout", "1")
	q.Set("application_name", "errand-silent-first")
	u.RawQuery = q.Encode()
	var logs syncBuffer
	listener, err := postgres.Open(t.Context(), u.String(), &postgres.Options{Schema: schema,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer listener.Close()
	sender := open(t, live, schema, nil)
	defer sender.Close()
	ch, err := listener.ListenQueues(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if n := terminateApp(t, sender, "errand-silent-first/listener"); n != 1 {
		t.Fatalf("terminated %d listener backends, want 1", n)
	}
	if q := receive(t, ch, "after the drop"); q != "" {
		t.Fatalf("first delivery after the drop %q, want \"\" (look at every queue)", q)
	}
	if err := sender.NotifyQueues(t.Context(), []string{"after"}); err != nil {
		t.Fatal(err)
	}
	if q := receive(t, ch, "after reconnecting"); q != "after" {
		t.Errorf("got %q, want after", q)
	}
	if !strings.Contains(logs.String(), "reconnected") {
		t.Errorf("log lacks the reconnect:\n%s", logs.String())
	}
}

// syncBuffer is a bytes.Buffer safe for a logger and a test to share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// TestListenEndsWithContext checks that ending ctx closes the channel and
// the listener's connection.
func TestListenEndsWithContext(t *testing.T) {
	url := pgtest.URL(t)
	schema := pgtest.Schema(t, url)
	s := open(t, url, schema, nil)
	defer s.Close()
	ctx, cancel := context.WithCancel(t.Context())
	ch, err := s.ListenQueues(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if pids := listenerPIDs(t, s, schema); len(pids) != 1 {
		t.Fatalf("listener backends %v, want one", pids)
	}
	cancel()
	select {
	case q, ok := <-ch:
		if ok {
			t.Fatalf("delivered %q after ctx ended, want the channel closed", q)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("channel still open 10s after ctx ended")
	}
	// The connection was closed before the channel; the server may take a
	// moment to notice.
	deadline := time.Now().Add(15 * time.Second)
	for len(listenerPIDs(t, s, schema)) > 0 {
		if time.Now().After(deadline) {
			t.Fatal("listener's connection still open 15s after its channel closed")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// openForWorker opens a store closed when the test's cleanups run, after
// the workers and clients registered later are stopped.
func openForWorker(t *testing.T, url, schema string) *postgres.Store {
	t.Helper()
	s := open(t, url, schema, nil)
	t.Cleanup(func() { s.Close() })
	return s
}

// countingClient returns a client on s whose "ping" handler reports the id
// of each job it runs on ran.
func countingClient(t *testing.T, s *postgres.Store, ran chan<- string) *errand.Client[pgx.Tx] {
	t.Helper()
	c, err := errand.NewClient(s, &errand.Config{Kinds: kindsOf([]testKind{{
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

// startWorker starts a worker on c and waits for its first idle claim, so
// that a job enqueued afterwards is found only by a wake-up or a poll.
func startWorker(t *testing.T, c *errand.Client[pgx.Tx], cfg errand.WorkerConfig) *errand.Worker {
	t.Helper()
	w, err := c.NewWorker(&cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := w.Stop(ctx); err != nil {
			t.Errorf("stop worker: %v", err)
		}
	})
	deadline := time.Now().Add(10 * time.Second)
	for w.Stats().IdleClaims == 0 {
		if time.Now().After(deadline) {
			t.Fatal("worker made no claim in 10s")
		}
		time.Sleep(time.Millisecond)
	}
	return w
}

// TestWakeAcrossStores checks that a worker polling once an hour starts a
// job enqueued through another store (another process's pool) at once: the
// enqueuing client's NOTIFY wakes it.
func TestWakeAcrossStores(t *testing.T) {
	url := pgtest.URL(t)
	schema := pgtest.Schema(t, url)
	workerStore, producerStore := openForWorker(t, url, schema), openForWorker(t, url, schema)
	ran := make(chan string, 1)
	startWorker(t, countingClient(t, workerStore, ran), errand.WorkerConfig{PollInterval: time.Hour})
	producer := countingClient(t, producerStore, nil)

	start := time.Now()
	r, err := producer.Enqueue(t.Context(), errand.RawArgs{KindName: "ping"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case id := <-ran:
		if id != r.Job.ID {
			t.Errorf("ran %s, want %s", id, r.Job.ID)
		}
		t.Logf("enqueue to handler start: %v", time.Since(start))
	case <-time.After(10 * time.Second):
		t.Fatal("job not started 10s after its enqueue; the worker polls hourly, so no wake-up reached it")
	}
}

// notifyCounter is a store that counts its NotifyQueues calls: the
// announcements a client sends after its inserts.
type notifyCounter struct {
	*postgres.Store
	sent atomic.Int64
}

func (n *notifyCounter) NotifyQueues(ctx context.Context, queues []string) error {
	n.sent.Add(1)
	return n.Store.NotifyQueues(ctx, queues)
}

// TestLoneEnqueueAnnouncedInItsInsert: a job enqueued alone, by a client
// with no announcement on its way and no worker of the queue asleep in its
// process, is announced by its INSERT, in the same commit: listeners hear
// of it and the client sends no NOTIFY after it. A duplicate, which
// inserts nothing, announces nothing.
func TestLoneEnqueueAnnouncedInItsInsert(t *testing.T) {
	url := pgtest.URL(t)
	schema := pgtest.Schema(t, url)
	listener := openForWorker(t, url, schema)
	store := &notifyCounter{Store: openForWorker(t, url, schema)}
	c, err := errand.NewClient[pgx.Tx](store, nil)
	if err != nil {
		t.Fatal(err)
	}
	ch, err := listener.ListenQueues(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	enqueue := func(id, queue string) *errand.EnqueueResult {
		t.Helper()
		// Past the millisecond of announcements that follows the last.
		time.Sleep(2 * time.Millisecond)
		r, err := c.Enqueue(t.Context(), errand.RawArgs{KindName: "ping"}, &errand.EnqueueOpts{ID: id, Queue: queue})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}

	for i, q := range []string{"first", "second", "third"} {
		enqueue(fmt.Sprintf("lone-%d", i), q)
		if got := flush(t, listener, ch); !slices.Equal(got, []string{q}) {
			t.Fatalf("after a lone enqueue into %s the listener heard %q", q, got)
		}
	}
	if r := enqueue("lone-0", "first"); !r.Duplicate {
		t.Fatal("the same id enqueued twice was not reported a duplicate")
	}
	if got := flush(t, listener, ch); len(got) > 0 {
		t.Fatalf("a duplicate, which inserts nothing, was announced: %q", got)
	}
	c.Close() // sends any announcement still pending
	if n := store.sent.Load(); n != 0 {
		t.Fatalf("the client sent %d NOTIFYs after its lone inserts, want 0: each insert announces itself", n)
	}
}

// TestPollOnlyAcrossStores checks that a PollOnly worker does not listen
// and still finds a job enqueued through another store by polling.
func TestPollOnlyAcrossStores(t *testing.T) {
	url := pgtest.URL(t)
	schema := pgtest.Schema(t, url)
	workerStore, producerStore := openForWorker(t, url, schema), openForWorker(t, url, schema)
	ran := make(chan string, 1)
	startWorker(t, countingClient(t, workerStore, ran), errand.WorkerConfig{PollInterval: 200 * time.Millisecond, PollOnly: true})
	if pids := listenerPIDs(t, workerStore, schema); len(pids) != 0 {
		t.Errorf("a PollOnly worker listens: backends %v", pids)
	}
	producer := countingClient(t, producerStore, nil)
	if _, err := producer.Enqueue(t.Context(), errand.RawArgs{KindName: "ping"}, nil); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ran:
	case <-time.After(10 * time.Second):
		t.Fatal("PollOnly worker polling every 200ms did not start the job in 10s")
	}
}

// TestNotifyLongSchemaNames checks schemas whose channel name would pass
// PostgreSQL's 63-byte limit: two that differ only in their last byte
// each get their own channel.
func TestNotifyLongSchemaNames(t *testing.T) {
	url := pgtest.URL(t)
	base := pgtest.Schema(t, url) + "_" + strings.Repeat("x", 63)
	schemaA, schemaB := base[:62]+"a", base[:62]+"b"
	for _, schema := range []string{schemaA, schemaB} {
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			conn, err := pgx.Connect(ctx, url)
			if err != nil {
				t.Errorf("drop schema %s: %v", schema, err)
				return
			}
			defer conn.Close(ctx)
			if _, err := conn.Exec(ctx, `DROP SCHEMA IF EXISTS `+pgx.Identifier{schema}.Sanitize()+` CASCADE`); err != nil {
				t.Errorf("drop schema %s: %v", schema, err)
			}
		})
	}
	a, b := open(t, url, schemaA, nil), open(t, url, schemaB, nil)
	defer a.Close()
	defer b.Close()
	if a.Schema() != schemaA || len(schemaA) != 63 {
		t.Fatalf("schema %q, want %q (63 bytes)", a.Schema(), schemaA)
	}
	chA, err := a.ListenQueues(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	chB, err := b.ListenQueues(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := a.NotifyQueues(t.Context(), []string{"long"}); err != nil {
		t.Fatal(err)
	}
	if got := flush(t, a, chA); !slices.Equal(got, []string{"long"}) {
		t.Errorf("listener on the same long schema got %q, want long", got)
	}
	if got := flush(t, b, chB); len(got) > 0 {
		t.Errorf("listener on a schema differing in its last byte got %q", got)
	}
}

// TestOneListenConnection checks that a store's queue and cancel
// subscriptions share one connection: each gets only its own channel's
// notifications, both hear "" after that connection drops, and the
// connection closes when the last of them ends, not before.
func TestOneListenConnection(t *testing.T) {
	url := pgtest.URL(t)
	schema := pgtest.Schema(t, url)
	s, sender := open(t, url, schema, nil), open(t, url, schema, nil)
	defer s.Close()
	defer sender.Close()
	queuesCtx, endQueues := context.WithCancel(t.Context())
	defer endQueues()
	cancelsCtx, endCancels := context.WithCancel(t.Context())
	defer endCancels()
	queues, err := s.ListenQueues(queuesCtx)
	if err != nil {
		t.Fatal(err)
	}
	cancels, err := s.ListenCancels(cancelsCtx)
	if err != nil {
		t.Fatal(err)
	}
	pids := listenerPIDs(t, sender, schema)
	if len(pids) != 1 {
		t.Fatalf("listener backends %v for a queue and a cancel subscription, want one", pids)
	}
	notifyCancel := func(id string) {
		t.Helper()
		if _, err := sender.Pool().Exec(t.Context(), `SELECT pg_notify($1, $2)`, "errand_cancel_"+schema, id); err != nil {
			t.Fatal(err)
		}
	}

	notifyCancel("job-1")
	if id := receive(t, cancels, "a cancel"); id != "job-1" {
		t.Errorf("cancel subscription got %q, want job-1", id)
	}
	if err := sender.NotifyQueues(t.Context(), []string{"q"}); err != nil {
		t.Fatal(err)
	}
	// The flush's markers are queue notifications: the queue subscription
	// got no cancel id before them, and the cancel subscription none of them.
	if got := flush(t, sender, queues); !slices.Equal(got, []string{"q"}) {
		t.Errorf("queue subscription got %q, want q", got)
	}
	notifyCancel("job-2")
	if id := receive(t, cancels, "a second cancel"); id != "job-2" {
		t.Errorf("cancel subscription got %q, want job-2 (queue names crossed over?)", id)
	}

	var killed bool
	if err := sender.Pool().QueryRow(t.Context(), `SELECT pg_terminate_backend($1)`, pids[0]).Scan(&killed); err != nil || !killed {
		t.Fatalf("pg_terminate_backend(%d) = %v, %v", pids[0], killed, err)
	}
	if q := receive(t, queues, "queues after the drop"); q != "" {
		t.Errorf("queue subscription's first delivery after the drop %q, want \"\"", q)
	}
	if id := receive(t, cancels, "cancels after the drop"); id != "" {
		t.Errorf("cancel subscription's first delivery after the drop %q, want \"\"", id)
	}

	endQueues()
	for range queues {
	}
	notifyCancel("job-3")
	if id := receive(t, cancels, "a cancel after the queue subscription ended"); id != "job-3" {
		t.Errorf("cancel subscription got %q, want job-3", id)
	}
	if pids := listenerPIDs(t, sender, schema); len(pids) != 1 {
		t.Errorf("listener backends %v with the cancel subscription left, want one", pids)
	}
	endCancels()
	for range cancels {
	}
	deadline := time.Now().Add(15 * time.Second)
	for len(listenerPIDs(t, sender, schema)) > 0 {
		if time.Now().After(deadline) {
			t.Fatal("listener's connection still open 15s after its last subscription ended")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestWorkerListensOnOneConnection checks that a worker, which listens for
// wake-ups and for cancel requests, holds one listening connection.
func TestWorkerListensOnOneConnection(t *testing.T) {
	url := pgtest.URL(t)
	schema := pgtest.Schema(t, url)
	s := openForWorker(t, url, schema)
	startWorker(t, countingClient(t, s, nil), errand.WorkerConfig{PollInterval: time.Hour})
	if pids := listenerPIDs(t, s, schema); len(pids) != 1 {
		t.Errorf("listener backends %v of one worker, want one", pids)
	}
}
