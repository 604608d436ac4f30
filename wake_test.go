package errand_test

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/sqlite"
)

// notifyHub stands in for PostgreSQL's LISTEN/NOTIFY: every notifyingStore
// on the hub delivers the queues any of them announces to all listeners, as
// separate processes on one database would see them.
type notifyHub struct {
	mu        sync.Mutex
	listeners map[chan string]struct{}

	notifies atomic.Int64 // NotifyQueues calls
	listens  atomic.Int64 // ListenQueues calls
	fail     atomic.Bool  // NotifyQueues returns an error
}

func newNotifyHub() *notifyHub {
	return &notifyHub{listeners: map[chan string]struct{}{}}
}

// deliver sends q to every listener, as a store does after reconnecting
// when q is "".
func (h *notifyHub) deliver(q string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for ch := range h.listeners {
		select {
		case ch <- q:
		default: // a full listener misses it: polling is the floor
		}
	}
}

// notifyingStore is a real SQLite store with the Notifier capability of a
// notifyHub.
type notifyingStore struct {
	*sqlite.Store
	hub *notifyHub
}

var _ errand.Notifier = (*notifyingStore)(nil)

func (s *notifyingStore) NotifyQueues(ctx context.Context, queues []string) error {
	s.hub.notifies.Add(1)
	if s.hub.fail.Load() {
		return errors.New("notify: connection refused")
	}
	for _, q := range queues {
		s.hub.deliver(q)
	}
	return nil
}

func (s *notifyingStore) ListenQueues(ctx context.Context) (<-chan string, error) {
	s.hub.listens.Add(1)
	ch := make(chan string, 1024)
	s.hub.mu.Lock()
	s.hub.listeners[ch] = struct{}{}
	s.hub.mu.Unlock()
	go func() {
		<-ctx.Done()
		s.hub.mu.Lock()
		delete(s.hub.listeners, ch)
		close(ch)
		s.hub.mu.Unlock()
	}()
	return ch, nil
}

// notifyProcess opens the SQLite file at path as a separate process would,
// with the hub's notifications, and returns a client whose "ping" handler
// sends each job's id to ran (when ran is not nil).
func notifyProcess(t *testing.T, path string, hub *notifyHub, ran chan<- string) (*errand.Client[*sql.Tx], *notifyingStore) {
	t.Helper()
	s, err := sqlite.Open(context.Background(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	ns := &notifyingStore{Store: s, hub: hub}
	c, err := errand.NewClient(ns, errand.Config{Kinds: kindsOf([]testKind{{
		Name: "ping",
		Handler: errand.HandlerFunc(func(ctx context.Context, j *errand.Job) error {
			if ran != nil {
				ran <- j.ID
			}
			return nil
		}),
	}})})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, ns
}

// idleWorker starts a worker that polls once an hour, and waits until each
// of its queues has looked for work once and gone idle.
func idleWorker(t *testing.T, c *errand.Client[*sql.Tx], cfg errand.WorkerConfig) *errand.Worker {
	t.Helper()
	cfg.PollInterval = time.Hour
	w, err := c.NewWorker(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Stop(context.Background()) })
	queues := max(1, len(cfg.Queues))
	workerWaitFor(t, 10*time.Second, func() bool { return w.Stats().IdleClaims >= int64(queues) })
	return w
}

func waitRan(t *testing.T, ran <-chan string, id string, limit time.Duration) {
	t.Helper()
	deadline := time.After(limit)
	for {
		select {
		case got := <-ran:
			if got == id {
				return
			}
		case <-deadline:
			t.Fatalf("job %s did not start within %s", id, limit)
		}
	}
}

func TestNotifyWakesWorkerInAnotherProcess(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "errand.db")
	hub := newNotifyHub()
	ran := make(chan string, 10)
	producer, _ := notifyProcess(t, path, hub, nil)
	consumer, _ := notifyProcess(t, path, hub, ran)
	// The poll interval is an hour: only the notification can start the
	// job in time.
	idleWorker(t, consumer, errand.WorkerConfig{})
	if n := hub.listens.Load(); n != 1 {
		t.Fatalf("worker listened %d times, want 1", n)
	}
	r, err := producer.Enqueue(ctx, errand.RawArgs{KindName: "ping"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	waitRan(t, ran, r.Job.ID, 10*time.Second)
}

// TestNotifyAfterEnqueueTx: Wake after committing a transaction that used
// EnqueueTx announces the queues that transaction wrote to.
func TestNotifyAfterEnqueueTx(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "errand.db")
	hub := newNotifyHub()
	ran := make(chan string, 10)
	producer, ps := notifyProcess(t, path, hub, nil)
	consumer, _ := notifyProcess(t, path, hub, ran)
	idleWorker(t, consumer, errand.WorkerConfig{Queues: map[string]int{"mail": 1}})

	tx, err := ps.DB().BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	r, err := producer.EnqueueTx(ctx, tx, errand.RawArgs{KindName: "ping"}, &errand.EnqueueOpts{Queue: "mail"})
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := producer.Close(); err != nil { // nothing pending yet: the transaction announced nothing
		t.Fatal(err)
	}
	if n := hub.notifies.Load(); n != 0 {
		t.Fatalf("%d notifications before Wake, want none: a transaction cannot announce its own commit", n)
	}

	// A fresh client: Close above ended the first one's notifier.
	producer, _ = notifyProcess(t, path, hub, nil)
	tx, err = ps.DB().BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	r, err = producer.EnqueueTx(ctx, tx, errand.RawArgs{KindName: "ping"}, &errand.EnqueueOpts{Queue: "mail"})
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	producer.Wake()
	waitRan(t, ran, r.Job.ID, 10*time.Second)
}

// TestNotifyCoalescesBurst: a burst of single enqueues sends far fewer
// notifications than jobs, and a failing notification fails no enqueue.
func TestNotifyCoalescesBurst(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "errand.db")
	hub := newNotifyHub()
	producer, _ := notifyProcess(t, path, hub, nil)
	// A wider window than the default keeps the test meaningful on a
	// machine slow enough (the race detector, shared cores) that single
	// enqueues come further apart than the default window.
	errand.SetNotifyCoalesce(producer, 50*time.Millisecond)
	start := time.Now()
	const n = 100
	for range n {
		if _, err := producer.Enqueue(ctx, errand.RawArgs{KindName: "ping"}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := producer.Close(); err != nil { // flushes what is pending
		t.Fatal(err)
	}
	sent := hub.notifies.Load()
	t.Logf("%d enqueues in %s sent %d notifications", n, time.Since(start).Round(time.Millisecond), sent)
	if sent == 0 || sent >= n {
		t.Fatalf("%d enqueues sent %d notifications, want at least one and fewer than %d", n, sent, n)
	}
	// Close is idempotent; a closed client still enqueues, silently.
	if err := producer.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := producer.Enqueue(ctx, errand.RawArgs{KindName: "ping"}, nil); err != nil {
		t.Fatal(err)
	}
	if got := hub.notifies.Load(); got != sent {
		t.Errorf("a closed client sent %d more notifications", got-sent)
	}

	hub.fail.Store(true)
	failing, _ := notifyProcess(t, path, hub, nil)
	if _, err := failing.Enqueue(ctx, errand.RawArgs{KindName: "ping"}, nil); err != nil {
		t.Fatalf("enqueue failed with the notification: %v", err)
	}
	failing.Close()
	if got := hub.notifies.Load(); got != sent+1 {
		t.Errorf("the failing notification was tried %d times, want once", got-sent)
	}
}

func TestPollOnlyIgnoresNotifier(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "errand.db")
	hub := newNotifyHub()
	ran := make(chan string, 10)
	producer, _ := notifyProcess(t, path, hub, nil)
	consumer, _ := notifyProcess(t, path, hub, ran)
	w := idleWorker(t, consumer, errand.WorkerConfig{PollOnly: true})
	if n := hub.listens.Load(); n != 0 {
		t.Fatalf("a PollOnly worker listened %d times", n)
	}
	if _, err := producer.Enqueue(ctx, errand.RawArgs{KindName: "ping"}, nil); err != nil {
		t.Fatal(err)
	}
	producer.Close()
	if hub.notifies.Load() == 0 {
		t.Fatal("the producer sent no notification")
	}
	select {
	case id := <-ran:
		t.Fatalf("a PollOnly worker started job %s before its next poll", id)
	case <-time.After(300 * time.Millisecond):
	}
	if st := w.Stats(); st.Claims != st.IdleClaims || st.Claims != 1 {
		t.Errorf("stats %+v, want the one idle claim at start", st)
	}
}

// TestListenReconnectWakesEveryQueue: the empty name a store delivers after
// reconnecting makes every queue look for work.
func TestListenReconnectWakesEveryQueue(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "errand.db")
	hub := newNotifyHub()
	ran := make(chan string, 10)
	consumer, _ := notifyProcess(t, path, hub, ran)
	idleWorker(t, consumer, errand.WorkerConfig{Queues: map[string]int{"a": 1, "b": 1}})

	// A producer that announces nothing, like one whose notification was
	// lost while the listener was disconnected.
	silent := newClient(t, openStoreAt(t, path, nil), errand.Config{})
	ids := map[string]bool{}
	for _, q := range []string{"a", "b"} {
		r, err := silent.Enqueue(ctx, errand.RawArgs{KindName: "ping"}, &errand.EnqueueOpts{Queue: q})
		if err != nil {
			t.Fatal(err)
		}
		ids[r.Job.ID] = true
	}
	select {
	case id := <-ran:
		t.Fatalf("job %s started without a wake-up", id)
	case <-time.After(200 * time.Millisecond):
	}
	hub.deliver("")
	deadline := time.After(10 * time.Second)
	for len(ids) > 0 {
		select {
		case id := <-ran:
			delete(ids, id)
		case <-deadline:
			t.Fatalf("jobs %v did not start after the reconnect", ids)
		}
	}
}

// TestNotifySkipsDuplicates: an enqueue that finds its job already there
// announces nothing.
func TestNotifySkipsDuplicates(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "errand.db")
	hub := newNotifyHub()
	for i, want := range []int64{1, 1} {
		producer, _ := notifyProcess(t, path, hub, nil)
		r, err := producer.Enqueue(ctx, errand.RawArgs{KindName: "ping"}, &errand.EnqueueOpts{ID: "pay_1"})
		if err != nil {
			t.Fatal(err)
		}
		producer.Close()
		if r.Duplicate != (i == 1) {
			t.Fatalf("enqueue %d: duplicate %v", i, r.Duplicate)
		}
		if got := hub.notifies.Load(); got != want {
			t.Fatalf("after enqueue %d: %d notifications, want %d", i, got, want)
		}
	}
}
