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
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtest"
	"github.com/errandhq/errand/errandtype"
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
	// failListens: this many ListenQueues calls fail first.
	failListens atomic.Int64
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

var _ errandstore.Notifier = (*notifyingStore)(nil)

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
	if s.hub.failListens.Add(-1) >= 0 {
		return nil, errors.New("listen: connection refused")
	}
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

// notifyProcess opens the SQLite file at path as a separate process on the
// same machine would, with the hub's notifications and clock for its time,
// and returns a client whose "ping" handler sends each job's id to ran
// (when ran is not nil).
func notifyProcess(t *testing.T, path string, hub *notifyHub, clock *errandtest.Clock, ran chan<- string) (*errand.Client[*sql.Tx], *notifyingStore) {
	t.Helper()
	s, err := sqlite.Open(context.Background(), path, &sqlite.Options{Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	ns := &notifyingStore{Store: s, hub: hub}
	c, err := errand.NewClient(ns, &errand.Config{Clock: clock, Kinds: kindsOf([]testKind{{
		Name: "ping",
		Handler: errand.HandlerFunc(func(ctx context.Context, j *errandtype.Job) error {
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

// idleWorker starts a worker of c, whose clock is clock, that polls once an
// hour, and waits until each of its queues has looked for work once and
// gone idle. The tests never move the clock that far: only a wake-up can
// make the worker look again.
func idleWorker(t *testing.T, c *errand.Client[*sql.Tx], clock *errandtest.Clock, cfg errand.WorkerConfig) *errand.Worker {
	t.Helper()
	cfg.PollInterval = time.Hour
	w, err := c.NewWorker(&cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Stop(context.Background()) })
	queues := max(1, len(cfg.Queues))
	blockUntilAt(t, clock, clock.Now().Add(time.Hour), queues)
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
	clock := newTestClock()
	ran := make(chan string, 10)
	producer, _ := notifyProcess(t, path, hub, clock, nil)
	consumer, _ := notifyProcess(t, path, hub, clock, ran)
	// The worker polls hourly: only the notification can start the job.
	idleWorker(t, consumer, clock, errand.WorkerConfig{})
	if n := hub.listens.Load(); n != 1 {
		t.Fatalf("worker listened %d times, want 1", n)
	}
	r, err := producer.Enqueue(ctx, errand.RawArgs{KindName: "ping"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	waitRan(t, ran, r.Job.ID, clockWait)
}

// TestNotifyAfterEnqueueTx: Wake after committing a transaction that used
// EnqueueTx announces the queues that transaction wrote to.
func TestNotifyAfterEnqueueTx(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "errand.db")
	hub := newNotifyHub()
	clock := newTestClock()
	ran := make(chan string, 10)
	producer, ps := notifyProcess(t, path, hub, clock, nil)
	consumer, _ := notifyProcess(t, path, hub, clock, ran)
	idleWorker(t, consumer, clock, errand.WorkerConfig{Queues: map[string]int{"mail": 1}})

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
	producer, _ = notifyProcess(t, path, hub, clock, nil)
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
	waitRan(t, ran, r.Job.ID, clockWait)
}

// TestNotifyCoalescesBurst: a burst of single enqueues within one
// coalescing window sends one notification at once and at most one more,
// and a failing notification fails no enqueue.
func TestNotifyCoalescesBurst(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "errand.db")
	hub := newNotifyHub()
	// The clock stands still: the whole burst falls in the first window.
	clock := newTestClock()
	producer, _ := notifyProcess(t, path, hub, clock, nil)
	const n = 100
	for range n {
		if _, err := producer.Enqueue(ctx, errand.RawArgs{KindName: "ping"}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := producer.Close(); err != nil { // flushes what is pending
		t.Fatal(err)
	}
	// One at the first enqueue, and one at Close for the rest, unless the
	// sender first ran after the last enqueue.
	sent := hub.notifies.Load()
	if sent < 1 || sent > 2 {
		t.Fatalf("%d enqueues in one window sent %d notifications, want 1 or 2", n, sent)
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
	failing, _ := notifyProcess(t, path, hub, clock, nil)
	if _, err := failing.Enqueue(ctx, errand.RawArgs{KindName: "ping"}, nil); err != nil {
		t.Fatalf("enqueue failed with the notification: %v", err)
	}
	failing.Close()
	if got := hub.notifies.Load(); got != sent+1 {
		t.Errorf("the failing notification was tried %d times, want once", got-sent)
	}
}

// TestPollOnlyIgnoresNotifier: a PollOnly worker does not listen, so a
// notification reaches it not at all, and its poll finds the job.
func TestPollOnlyIgnoresNotifier(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "errand.db")
	hub := newNotifyHub()
	clock := newTestClock()
	ran := make(chan string, 10)
	producer, _ := notifyProcess(t, path, hub, clock, nil)
	consumer, _ := notifyProcess(t, path, hub, clock, ran)
	w := idleWorker(t, consumer, clock, errand.WorkerConfig{PollOnly: true})
	if n := hub.listens.Load(); n != 0 {
		t.Fatalf("a PollOnly worker listened %d times", n)
	}
	r, err := producer.Enqueue(ctx, errand.RawArgs{KindName: "ping"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	producer.Close()
	if hub.notifies.Load() == 0 {
		t.Fatal("the producer sent no notification")
	}
	clock.Advance(time.Hour)
	waitRan(t, ran, r.Job.ID, clockWait)
	// Claimed at the poll, an hour on: no notification started it.
	if j := getJob(t, consumer, r.Job.ID); !j.AttemptedAt.Equal(r.Job.CreatedAt.Add(time.Hour)) {
		t.Errorf("job claimed at %v, want at the poll an hour after the enqueue at %v", j.AttemptedAt, r.Job.CreatedAt)
	}
	if st := w.Stats(); st.Claims != 2 || st.IdleClaims != 1 {
		t.Errorf("stats %+v, want the idle claim at start and the poll's", st)
	}
}

// TestListenReconnectWakesEveryQueue: the empty name a store delivers after
// reconnecting makes every queue look for work.
func TestListenReconnectWakesEveryQueue(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "errand.db")
	hub := newNotifyHub()
	clock := newTestClock()
	ran := make(chan string, 10)
	consumer, _ := notifyProcess(t, path, hub, clock, ran)
	idleWorker(t, consumer, clock, errand.WorkerConfig{Queues: map[string]int{"a": 1, "b": 1}})

	// A producer that announces nothing, like one whose notification was
	// lost while the listener was disconnected. The worker polls hourly
	// and the clock stands still: only the reconnect can start the jobs.
	silent := newClient(t, openStoreAt(t, path, clock), &errand.Config{Clock: clock})
	ids := map[string]bool{}
	for _, q := range []string{"a", "b"} {
		r, err := silent.Enqueue(ctx, errand.RawArgs{KindName: "ping"}, &errand.EnqueueOpts{Queue: q})
		if err != nil {
			t.Fatal(err)
		}
		ids[r.Job.ID] = true
	}
	hub.deliver("")
	deadline := time.After(clockWait)
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
	clock := newTestClock()
	for i, want := range []int64{1, 1} {
		producer, _ := notifyProcess(t, path, hub, clock, nil)
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

// TestOwnNotificationDoesNotWakeTwice: an enqueue wakes its own process's
// worker at once; the store's delivery of the same announcement back to
// that worker must not make it claim a second time. Another process's
// announcement, delivered after it, still wakes the worker.
func TestOwnNotificationDoesNotWakeTwice(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "errand.db")
	hub := newNotifyHub()
	clock := newTestClock()
	ran := make(chan string, 10)
	c, _ := notifyProcess(t, path, hub, clock, ran)
	producer, _ := notifyProcess(t, path, hub, clock, nil)
	// Two queues, each its own loop, so that the two notifications below
	// cannot merge into one wake-up.
	w := idleWorker(t, c, clock, errand.WorkerConfig{Queues: map[string]int{"a": 5, "b": 5}})
	own, err := c.Enqueue(ctx, errand.RawArgs{KindName: "ping"}, &errand.EnqueueOpts{Queue: "a"})
	if err != nil {
		t.Fatal(err)
	}
	waitRan(t, ran, own.Job.ID, clockWait)
	// Close flushes the announcement: the hub has delivered its echo to
	// the worker's listener when Close returns.
	c.Close()
	// The other process's announcement reaches the listener after the
	// echo: once its job ran, the echo has been handled.
	other, err := producer.Enqueue(ctx, errand.RawArgs{KindName: "ping"}, &errand.EnqueueOpts{Queue: "b"})
	if err != nil {
		t.Fatal(err)
	}
	waitRan(t, ran, other.Job.ID, clockWait)
	if n := hub.notifies.Load(); n != 2 {
		t.Fatalf("%d notifications sent, want 2 (one per enqueue)", n)
	}
	if got := errand.EchoesSkipped(w); got != 1 {
		t.Fatalf("worker skipped %d echoes of its own announcements, want 1", got)
	}
	// a: the first look and the local wake-up; b: the first look and the
	// other process's announcement. The echo added no claim.
	workerWaitFor(t, clockWait, func() bool { return w.Stats().Claims >= 4 })
	if err := w.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if s := w.Stats(); s.Claims != 4 {
		t.Fatalf("worker claimed %d times, want 4: the echo of its own announcement woke it again", s.Claims)
	}
}

// A worker whose first subscription to notifications fails, the database
// away as it starts, polls and tries again a second later; once it
// listens, it looks at every queue for the jobs whose notifications it
// missed, and notifications wake it again.
func TestListenRetriedAfterFailedStart(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "errand.db")
	hub := newNotifyHub()
	clock := newTestClock()
	ran := make(chan string, 10)
	producer, _ := notifyProcess(t, path, hub, clock, nil)
	consumer, _ := notifyProcess(t, path, hub, clock, ran)
	hub.failListens.Store(1)
	w, err := consumer.NewWorker(&errand.WorkerConfig{PollInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Stop(context.Background()) })
	// The queue's poll, and the listen's retry.
	blockUntilAt(t, clock, clock.Now().Add(time.Hour), 1)
	blockUntilAt(t, clock, clock.Now().Add(time.Second), 1)
	missed, err := producer.Enqueue(ctx, errand.RawArgs{KindName: "ping"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case id := <-ran:
		t.Fatalf("job %s started with the worker not listening and its poll an hour away", id)
	case <-time.After(50 * time.Millisecond):
	}
	clock.Advance(time.Second)
	waitRan(t, ran, missed.Job.ID, clockWait)
	if n := hub.listens.Load(); n != 2 {
		t.Fatalf("worker listened %d times, want 2", n)
	}
	r, err := producer.Enqueue(ctx, errand.RawArgs{KindName: "ping"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	waitRan(t, ran, r.Job.ID, clockWait)
}
