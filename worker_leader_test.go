package errand_test

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtest"
	"github.com/errandhq/errand/errandtype"
	"github.com/errandhq/errand/sqlite"
)

// testLeaderTTL is the leadership's TTL in these tests, on a fake clock: a
// worker elects every third of it, and leads for two thirds of it after the
// start of its last successful election.
const testLeaderTTL = 15 * time.Second

// flakyLeaderStore is a real SQLite store whose leadership renewals fail
// once failing is set, as when a leader is cut off from its database.
type flakyLeaderStore struct {
	*sqlite.Store
	failing atomic.Bool
}

func (s *flakyLeaderStore) LeaderElect(ctx context.Context, p *errandstore.LeaderElectParams) (*errandtype.Leader, error) {
	if s.failing.Load() {
		return nil, errors.New("elect leader: connection reset")
	}
	return s.Store.LeaderElect(ctx, p)
}

// leaderProcess opens the SQLite file at path as a separate worker process
// on the same machine would, with clock for its time, and starts a worker
// that serves queue "work" and competes for leadership with cfg's TTL
// (default testLeaderTTL). Its polls, registry heartbeats and sweeps come
// hourly unless cfg says otherwise, so that the only timers due within the
// TTL are its elections (and the sweeps a test asks for), and no claim
// sweeps behind the leader's back. It returns once the worker has made its
// first claim, so that it claims no more unless woken or an hour on.
func leaderProcess(t *testing.T, path string, clock *errandtest.Clock, cfg errand.WorkerConfig) (*errand.Worker, *flakyLeaderStore) {
	t.Helper()
	s, err := sqlite.Open(context.Background(), path, &sqlite.Options{Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	fs := &flakyLeaderStore{Store: s}
	c, err := errand.NewClient(fs, &errand.Config{Clock: clock, Kinds: kindsOf([]testKind{{
		Name:    "noop",
		Handler: errand.HandlerFunc(func(context.Context, *errandtype.Job) error { return nil }),
	}})})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Queues = map[string]int{"work": 1}
	cfg.PollInterval = time.Hour
	cfg.HeartbeatInterval = time.Hour
	if cfg.LeaderTTL == 0 {
		cfg.LeaderTTL = testLeaderTTL
	}
	if cfg.SweepInterval == 0 {
		cfg.SweepInterval = time.Hour
	}
	w, err := c.NewWorker(&cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Stop(context.Background()) })
	// Its first claim finds "work" empty; the next waits for the hourly
	// poll. (Its poll timer is no signal here: the sweep ticker and the
	// other processes' timers may be armed for the same hour.)
	workerWaitFor(t, clockWait, func() bool { return w.Stats().Claims >= 1 })
	return w, fs
}

func leaders(ws ...*errand.Worker) []*errand.Worker {
	var ls []*errand.Worker
	for _, w := range ws {
		if w.Leading() {
			ls = append(ls, w)
		}
	}
	return ls
}

func TestLeadershipOneAtATimeAndHandover(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "errand.db")
	clock := newTestClock()
	a, _ := leaderProcess(t, path, clock, errand.WorkerConfig{})
	b, _ := leaderProcess(t, path, clock, errand.WorkerConfig{})
	observer := newClient(t, openStoreAt(t, path, clock), &errand.Config{})
	every := testLeaderTTL / 3

	// Both have held their first election once both wait for the next.
	blockUntilAt(t, clock, clock.Now().Add(every), 2)
	ls := leaders(a, b)
	if len(ls) != 1 {
		t.Fatalf("%d workers lead after the first elections, want 1", len(ls))
	}
	first := ls[0]
	// Over two TTLs (six renewals), never two leaders, and no change.
	for i := range 6 {
		clock.Advance(every)
		blockUntilAt(t, clock, clock.Now().Add(every), 2)
		if ls := leaders(a, b); len(ls) != 1 || ls[0] != first {
			t.Fatalf("election %d: leaders %v, want only the first leader %s", i+2, ls, first.ID())
		}
	}
	l, err := observer.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if l.Holder != first.ID() || l.Name != errand.LeaderName {
		t.Errorf("store's leader %+v, want %s", l, first.ID())
	}

	other := b
	if first == b {
		other = a
	}
	if err := first.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if first.Leading() {
		t.Error("a stopped worker still leads")
	}
	// A clean stop resigns: the other worker takes over at its next
	// election, a third of the TTL on, not when the lease would have
	// expired, a whole TTL on.
	clock.Advance(every)
	blockUntilAt(t, clock, clock.Now().Add(every), 1)
	if !other.Leading() {
		t.Fatal("the other worker does not lead after the leader resigned")
	}
	if l, err := observer.Leader(ctx); err != nil || l.Holder != other.ID() {
		t.Errorf("store's leader %+v (%v), want %s", l, err, other.ID())
	}
}

// TestLeaderStopsBeforeLeaseEndsWhenRenewalFails: a leader that cannot
// renew gives up a third of the TTL before the store's lease ends, so no
// other worker can be elected while it still believes it leads.
func TestLeaderStopsBeforeLeaseEndsWhenRenewalFails(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "errand.db")
	clock := newTestClock()
	elected := clock.Now()
	w, fs := leaderProcess(t, path, clock, errand.WorkerConfig{})
	observer := openStoreAt(t, path, clock)
	every := testLeaderTTL / 3
	blockUntilAt(t, clock, elected.Add(every), 1)
	if !w.Leading() {
		t.Fatal("a lone worker does not lead")
	}

	// Every renewal from now on fails. The worker leads on until two
	// thirds of the TTL after its election, by its own clock...
	fs.failing.Store(true)
	clock.Set(elected.Add(testLeaderTTL - every - time.Microsecond))
	if !w.Leading() {
		t.Fatal("the worker stopped leading before its share of the lease ended")
	}
	clock.Set(elected.Add(testLeaderTTL - every))
	if w.Leading() {
		t.Fatal("still leading two thirds of the TTL after the last election, with renewals failing")
	}
	// ...while the store still holds its lease for a third of the TTL.
	l, err := observer.LeaderGet(ctx, &errandstore.LeaderGetParams{Name: errand.LeaderName})
	if err != nil {
		t.Fatalf("the lease ended before the leader stopped leading: %v", err)
	}
	if l.Holder != w.ID() || !l.Until.Equal(elected.Add(testLeaderTTL)) {
		t.Fatalf("store's leader %s until %v, want the cut-off worker %s until %v", l.Holder, l.Until, w.ID(), elected.Add(testLeaderTTL))
	}

	// The lease then expires in the store, and the worker has not led
	// meanwhile.
	clock.Set(elected.Add(testLeaderTTL))
	if _, err := observer.LeaderGet(ctx, &errandstore.LeaderGetParams{Name: errand.LeaderName}); !errors.Is(err, errandtype.ErrNotFound) {
		t.Fatalf("leader after the lease's end: %v, want ErrNotFound", err)
	}
	if w.Leading() {
		t.Fatal("the worker leads again while its renewals fail")
	}

	// Once the store answers again, the worker is elected again at one of
	// its next elections.
	fs.failing.Store(false)
	advanceUntil(t, clock, every, w.Leading)
}

// advanceUntil moves clock on by step until cond holds, giving the code
// under test a moment to react after each step.
func advanceUntil(t *testing.T, clock *errandtest.Clock, step time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(clockWait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %s of real time; clock at %v, armed %v", clockWait, clock.Now(), clock.Armed())
		}
		clock.Advance(step)
		for end := time.Now().Add(100 * time.Millisecond); !cond() && time.Now().Before(end); {
			time.Sleep(time.Millisecond)
		}
	}
}

// TestLeaderSweepsQueueNobodyClaims: the leader recovers an expired lease
// in a queue no worker serves, with no claim to sweep it.
func TestLeaderSweepsQueueNobodyClaims(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "errand.db")
	clock := newTestClock()
	start := clock.Now()
	// A TTL of an hour: the worker leads throughout without renewing.
	// PollOnly: the other process's commits below would otherwise wake it
	// to claim, and this test counts its claims.
	const sweepEvery = 10 * time.Second
	w, _ := leaderProcess(t, path, clock, errand.WorkerConfig{LeaderTTL: time.Hour, SweepInterval: sweepEvery, PollOnly: true})
	// Leading, its sweep on election done and the next scheduled.
	blockUntilAt(t, clock, start.Add(sweepEvery), 1)
	if !w.Leading() {
		t.Fatal("a lone worker does not lead")
	}

	// Another process enqueues into "orphans" and claims two jobs there
	// under a lease of a minute, then dies.
	st := openStoreAt(t, path, clock)
	producer := newClient(t, st, &errand.Config{})
	retried := enqueue(t, producer, "noop", &errand.EnqueueOpts{Queue: "orphans", MaxAttempts: 3})
	final := enqueue(t, producer, "noop", &errand.EnqueueOpts{Queue: "orphans", MaxAttempts: 1})
	claimed, err := st.JobClaimMany(ctx, &errandstore.JobClaimParams{Queues: []string{"orphans"}, Limit: 2, Lease: time.Minute, Owner: "dead-process"})
	if err != nil || len(claimed) != 2 {
		t.Fatalf("claim: %d jobs, %v", len(claimed), err)
	}
	claims := w.Stats().Claims

	// The lease ends a minute on, at a sweep.
	clock.Set(start.Add(time.Minute))
	workerWaitFor(t, clockWait, func() bool {
		return getJob(t, producer, retried.ID).State == errandtype.StateRetrying && getJob(t, producer, final.ID).State == errandtype.StateDead
	})
	if got := w.Stats().Claims; got != claims {
		t.Fatalf("the worker claimed %d times meanwhile; the sweep must not depend on a claim", got-claims)
	}
	for _, id := range []string{retried.ID, final.ID} {
		j := getJob(t, producer, id)
		if cs := classes(j.Errors); len(cs) != 1 || cs[0] != errandstore.ClassLeaseExpired {
			t.Errorf("job %s history %v, want one lease_expired entry", id, cs)
		}
	}
}

// TestLeaderPrunesStoppedWorkers: the leader deletes registry rows of
// workers stopped longer than WorkerPruneAfter, and keeps the rest.
func TestLeaderPrunesStoppedWorkers(t *testing.T) {
	ctx := context.Background()
	clock := newTestClock()
	path := filepath.Join(t.TempDir(), "errand.db")
	st := openStoreAt(t, path, clock)
	for _, id := range []string{"old", "recent"} {
		if _, err := st.WorkerRegister(ctx, &errandstore.WorkerRegisterParams{ID: id, HeartbeatInterval: time.Second}); err != nil {
			t.Fatal(err)
		}
		if err := st.WorkerStop(ctx, &errandstore.WorkerStopParams{ID: id}); err != nil {
			t.Fatal(err)
		}
		clock.Advance(2 * time.Hour)
	}
	clock.Advance(errand.WorkerPruneAfter - 3*time.Hour) // old: stopped 24h+1h ago; recent: 24h-1h ago

	c := newClient(t, st, &errand.Config{Clock: clock, Kinds: kindsOf([]testKind{{Name: "task",
		Handler: errand.HandlerFunc(func(context.Context, *errandtype.Job) error { return nil })}})})
	// The clock stands still: the worker leads from its first election on,
	// and prunes at once.
	w, err := c.NewWorker(&errand.WorkerConfig{PollInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer w.Stop(ctx)
	workerWaitFor(t, clockWait, func() bool { return registryRecord(t, c, "old") == nil })
	if registryRecord(t, c, "recent") == nil || registryRecord(t, c, w.ID()) == nil {
		t.Error("the leader pruned a worker it should have kept")
	}
	if !w.Leading() {
		t.Error("a worker pruned without leading")
	}
}

func TestWorkerConfigLeadership(t *testing.T) {
	c := handlerClient(t, openStore(t, nil), func(context.Context, *errandtype.Job) error { return nil })
	for _, cfg := range []*errand.WorkerConfig{
		{LeaderTTL: -time.Second},
		{LeaderTTL: 10 * time.Millisecond},
		{SweepInterval: -time.Second},
		{SweepInterval: time.Microsecond},
	} {
		_, err := c.NewWorker(cfg)
		var ie *errandtype.InputError
		if !errors.As(err, &ie) {
			t.Errorf("NewWorker(%+v): %v, want an InputError", cfg, err)
		}
	}
}

// pruneWatchStore reports each prune of fair turns its leader makes.
type pruneWatchStore struct {
	errandstore.TxStore[*sql.Tx]
	pruner errandstore.FairTurnPruner
	pruned chan int
}

func (s *pruneWatchStore) FairTurnPrune(ctx context.Context, p *errandstore.FairTurnPruneParams) (int, error) {
	n, err := s.pruner.FairTurnPrune(ctx, p)
	if err == nil {
		select {
		case s.pruned <- n:
		default:
		}
	}
	return n, err
}

// TestLeaderPrunesIdleFairTurns: the leader deletes the turn of a fairness
// key with no waiting job that no claim served for FairTurnPruneAfter, and
// keeps the turn of a key whose job waits.
func TestLeaderPrunesIdleFairTurns(t *testing.T) {
	eachJobStore(t, func(t *testing.T, st errandstore.TxStore[*sql.Tx], clock *errandtest.Clock) {
		ctx := context.Background()
		fair := st.(errandstore.FairClaimer)
		raw := newClient(t, st, &errand.Config{Clock: clock, AllowUnknownKinds: true})
		for _, key := range []string{"idle", "busy", "busy"} {
			enqueue(t, raw, "tenant_job", &errand.EnqueueOpts{Queue: "tenants", FairnessKey: key})
		}
		js, err := fair.JobClaimFair(ctx, &errandstore.JobClaimParams{Queues: []string{"tenants"}, Limit: 2, Lease: time.Minute, Owner: "w"})
		if err != nil || len(js) != 2 {
			t.Fatalf("fair claim: %d jobs, %v; want 2", len(js), err)
		}
		for _, j := range js {
			if _, err := raw.Ack(ctx, j.ID, *j.LeaseToken); err != nil {
				t.Fatal(err)
			}
		}
		clock.Advance(errand.FairTurnPruneAfter + time.Minute)

		ws := &pruneWatchStore{TxStore: st, pruner: st.(errandstore.FairTurnPruner), pruned: make(chan int, 1)}
		c := newClient(t, ws, &errand.Config{Clock: clock, Kinds: kindsOf([]testKind{{Name: "task",
			Handler: errand.HandlerFunc(func(context.Context, *errandtype.Job) error { return nil })}})})
		w, err := c.NewWorker(&errand.WorkerConfig{PollInterval: time.Hour, PollOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Start(ctx); err != nil {
			t.Fatal(err)
		}
		defer w.Stop(ctx)
		select {
		case n := <-ws.pruned:
			if n != 1 {
				t.Fatalf("the leader pruned %d turns; want 1, the idle key's", n)
			}
		case <-time.After(time.Minute):
			t.Fatal("the leader did not prune the fair turns")
		}
		if n, err := st.(errandstore.FairTurnPruner).FairTurnPrune(ctx, &errandstore.FairTurnPruneParams{IdleFor: errand.FairTurnPruneAfter}); err != nil || n != 0 {
			t.Fatalf("prune after the leader's: %d, %v; want 0 (busy's turn kept)", n, err)
		}
	})
}
