package errand_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
)

// claimWatchStore is a notifyingStore that reports each claim, and may hold
// it, before it returns: the order of a process's own claims and its
// announcements, which a test cannot see from outside.
type claimWatchStore struct {
	*notifyingStore
	claimed func() // called as each claim returns, after hold
	hold    func() // called before each claim; may block
}

func (s *claimWatchStore) JobClaimMany(ctx context.Context, p *errandstore.JobClaimParams) ([]*errandtype.Job, error) {
	if s.hold != nil {
		s.hold()
	}
	jobs, err := s.notifyingStore.JobClaimMany(ctx, p)
	if s.claimed != nil {
		s.claimed()
	}
	return jobs, err
}

// watchedProcess is notifyProcess on a claimWatchStore.
func watchedProcess(t *testing.T, ws *claimWatchStore, handler errand.HandlerFunc) *errand.Client[*sql.Tx] {
	t.Helper()
	clock := newTestClock()
	c, err := errand.NewClient[*sql.Tx](ws, &errand.Config{Clock: clock, Kinds: kindsOf([]testKind{{Name: "ping", Handler: handler}})})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	idleWorker(t, c, clock, errand.WorkerConfig{Queues: map[string]int{errand.DefaultQueue: 1}})
	return c
}

// TestNotifyWaitsForLocalClaim: an enqueue that wakes an idle queue loop of
// its own process announces the queue to other processes only once that
// loop's claim has returned, so that the announcement does not compete with
// the claim the job waits for.
func TestNotifyWaitsForLocalClaim(t *testing.T) {
	path := filepath.Join(t.TempDir(), "errand.db")
	hub := newNotifyHub()
	_, ns := notifyProcess(t, path, hub, newTestClock(), nil)
	var (
		mu     sync.Mutex
		events []string
		armed  bool
	)
	notified := make(chan struct{}, 1)
	record := func(e string) {
		mu.Lock()
		defer mu.Unlock()
		if armed {
			events = append(events, e)
		}
	}
	ws := &claimWatchStore{notifyingStore: &notifyingStore{Store: ns.Store, hub: hub}}
	// Each claim waits for an announcement, for 200 ms at most: a
	// notifier that does not wait for the claim is then seen to announce
	// first, whatever the two goroutines' timing.
	ws.hold = func() {
		mu.Lock()
		a := armed
		mu.Unlock()
		if a {
			select {
			case <-notified:
				record("notify seen by the claim")
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
	ws.claimed = func() { record("claim returned") }
	listen := make(chan string, 16)
	hub.mu.Lock()
	hub.listeners[listen] = struct{}{}
	hub.mu.Unlock()
	ran := make(chan string, 1)
	c := watchedProcess(t, ws, func(ctx context.Context, j *errandtype.Job) error {
		ran <- j.ID
		return nil
	})
	errand.SetLocalClaimWait(c, time.Minute) // only the claim can release it
	go func() {
		for range listen {
			record("notified")
			select {
			case notified <- struct{}{}:
			default:
			}
		}
	}()
	mu.Lock()
	armed = true
	mu.Unlock()
	r, err := c.Enqueue(context.Background(), errand.RawArgs{KindName: "ping"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	waitRan(t, ran, r.Job.ID, clockWait)
	deadline := time.Now().Add(clockWait)
	for {
		mu.Lock()
		got := append([]string(nil), events...)
		mu.Unlock()
		if len(got) >= 2 {
			if got[0] != "claim returned" || got[1] != "notified" {
				t.Fatalf("events %q, want the local claim to return before the announcement", got)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("events %q after %s, want a claim and an announcement", got, clockWait)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestNotifyDoesNotWaitForever: a local claim that does not return holds
// the announcement back no longer than its bound; other processes still
// hear of the job.
func TestNotifyDoesNotWaitForever(t *testing.T) {
	path := filepath.Join(t.TempDir(), "errand.db")
	hub := newNotifyHub()
	_, ns := notifyProcess(t, path, hub, newTestClock(), nil)
	gate := make(chan struct{})
	var once sync.Once
	release := func() { once.Do(func() { close(gate) }) }
	defer release()
	var armed atomic.Bool
	ws := &claimWatchStore{notifyingStore: &notifyingStore{Store: ns.Store, hub: hub}}
	ws.hold = func() {
		if armed.Load() {
			<-gate
		}
	}
	listen := make(chan string, 16)
	hub.mu.Lock()
	hub.listeners[listen] = struct{}{}
	hub.mu.Unlock()
	c := watchedProcess(t, ws, func(context.Context, *errandtype.Job) error { return nil })
	armed.Store(true) // from now on every claim waits for the gate
	if _, err := c.Enqueue(context.Background(), errand.RawArgs{KindName: "ping"}, nil); err != nil {
		t.Fatal(err)
	}
	select {
	case q := <-listen:
		if q != errand.DefaultQueue {
			t.Fatalf("announced %q, want %q", q, errand.DefaultQueue)
		}
	case <-time.After(clockWait):
		t.Fatalf("no announcement within %s while the local claim was held", clockWait)
	}
	release()
}

// TestNotifyDoesNotWaitForBusyLoop: a queue loop that is busy (all its
// slots taken) is not woken by an enqueue, so the announcement goes at
// once: another process may have the free slot.
func TestNotifyDoesNotWaitForBusyLoop(t *testing.T) {
	path := filepath.Join(t.TempDir(), "errand.db")
	hub := newNotifyHub()
	other, ns := notifyProcess(t, path, hub, newTestClock(), nil)
	ws := &claimWatchStore{notifyingStore: &notifyingStore{Store: ns.Store, hub: hub}}
	listen := make(chan string, 16)
	hub.mu.Lock()
	hub.listeners[listen] = struct{}{}
	hub.mu.Unlock()
	started := make(chan string, 2)
	gate := make(chan struct{})
	var once sync.Once
	release := func() { once.Do(func() { close(gate) }) }
	defer release()
	c := watchedProcess(t, ws, func(ctx context.Context, j *errandtype.Job) error {
		started <- j.ID
		<-gate
		return nil
	})
	errand.SetLocalClaimWait(c, time.Hour) // a wait would outlast the test
	// Another process's job takes the queue's one slot here, through its
	// announcement (c's own notifier stays unused until the job below).
	first, err := other.Enqueue(context.Background(), errand.RawArgs{KindName: "ping"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	waitRan(t, started, first.Job.ID, clockWait)
	select {
	case <-listen: // the other process's announcement
	case <-time.After(clockWait):
		t.Fatalf("the other process's announcement did not arrive within %s", clockWait)
	}
	// The slot is taken: the loop waits for the slot, not for a wake-up.
	if _, err := c.Enqueue(context.Background(), errand.RawArgs{KindName: "ping"}, nil); err != nil {
		t.Fatal(err)
	}
	select {
	case <-listen:
	case <-time.After(clockWait):
		t.Fatalf("no announcement within %s while the only local slot was busy", clockWait)
	}
	release()
}
