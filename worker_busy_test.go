package errand_test

import (
	"context"
	"database/sql"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
)

// gatedClaims is a store whose claims the test can hold at a gate: while
// holding, each JobClaimMany is reported on arrived and waits for its
// release (or its error) before it claims from the real store.
type gatedClaims struct {
	errandstore.TxStore[*sql.Tx]
	holding    atomic.Bool
	arrived    chan *gatedClaim
	over       chan struct{} // closed when the test ends: held claims fail
	inFlight   atomic.Int32  // claims inside JobClaimMany now
	mostAtOnce atomic.Int32
}

type gatedClaim struct {
	limit   int
	release chan error // nil: claim; an error: fail with it
}

func newGatedClaims(s errandstore.TxStore[*sql.Tx]) *gatedClaims {
	return &gatedClaims{TxStore: s, arrived: make(chan *gatedClaim, 16), over: make(chan struct{})}
}

func (g *gatedClaims) JobClaimMany(ctx context.Context, p *errandstore.JobClaimParams) ([]*errandtype.Job, error) {
	n := g.inFlight.Add(1)
	defer g.inFlight.Add(-1)
	for {
		most := g.mostAtOnce.Load()
		if n <= most || g.mostAtOnce.CompareAndSwap(most, n) {
			break
		}
	}
	if g.holding.Load() {
		c := &gatedClaim{limit: p.Limit, release: make(chan error, 1)}
		g.arrived <- c
		select {
		case err := <-c.release:
			if err != nil {
				return nil, err
			}
		case <-g.over:
			return nil, errors.New("the test is over")
		}
	}
	return g.TxStore.JobClaimMany(ctx, p)
}

// The limiter store of the store underneath, for workers with rate limits.
func (g *gatedClaims) limiter() errandstore.LimiterStore { return g.TxStore.(errandstore.LimiterStore) }

func (g *gatedClaims) LimiterTake(ctx context.Context, p *errandstore.LimiterTakeParams) ([]errandstore.LimiterGrant, error) {
	return g.limiter().LimiterTake(ctx, p)
}

func (g *gatedClaims) LimiterGive(ctx context.Context, p *errandstore.LimiterGiveParams) error {
	return g.limiter().LimiterGive(ctx, p)
}

func (g *gatedClaims) LimiterList(ctx context.Context, p *errandstore.LimiterListParams) ([]*errandtype.LimiterRecord, error) {
	return g.limiter().LimiterList(ctx, p)
}

func (g *gatedClaims) LimiterAdjust(ctx context.Context, p *errandstore.LimiterAdjustParams) (*errandstore.LimiterAdjustResult, error) {
	return g.limiter().LimiterAdjust(ctx, p)
}

// next returns the next claim to arrive at the gate, or fails the test
// after wait.
func (g *gatedClaims) next(t *testing.T, wait time.Duration, what string) *gatedClaim {
	t.Helper()
	select {
	case c := <-g.arrived:
		return c
	case <-time.After(wait):
		t.Fatalf("%s: no claim arrived within %s", what, wait)
		return nil
	}
}

// busyQueueTest is a worker of one queue of 8 slots over 40 jobs whose
// handlers run until the test finishes them, on a gated store.
type busyQueueTest struct {
	t       *testing.T
	gate    *gatedClaims
	c       *errand.Client[*sql.Tx]
	started chan string
	finish  chan struct{}
	quit    chan struct{}
	ids     []string
}

const (
	busySlots, busyJobs = 8, 40
	busyPoll            = 300 * time.Millisecond
	maxBusyClaims       = 2 // errand's maxClaimsInFlight
)

func newBusyQueueTest(t *testing.T, cfg *errand.WorkerConfig) (*busyQueueTest, *errand.Worker) {
	b := &busyQueueTest{t: t, started: make(chan string, busyJobs), finish: make(chan struct{}, busyJobs), quit: make(chan struct{})}
	b.gate = newGatedClaims(openStore(t, nil))
	b.c = newClient(t, b.gate, &errand.Config{Kinds: kindsOf([]testKind{{Name: "step",
		Handler: errand.HandlerFunc(func(ctx context.Context, j *errandtype.Job) error {
			b.started <- j.ID
			select {
			case <-b.finish:
			case <-b.quit:
			}
			return nil
		})}})})
	for range busyJobs {
		b.ids = append(b.ids, enqueue(t, b.c, "step", nil).ID)
	}
	if cfg == nil {
		cfg = &errand.WorkerConfig{}
	}
	cfg.Queues = map[string]int{errand.DefaultQueue: busySlots}
	cfg.PollInterval = busyPoll
	w, err := b.c.NewWorker(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		close(b.gate.over) // a test that failed holding claims does not hang its Stop
		close(b.quit)
		w.Stop(context.Background())
	})
	return b, w
}

// waitStarted waits for n more jobs to start.
func (b *busyQueueTest) waitStarted(n int) {
	b.t.Helper()
	for range n {
		select {
		case <-b.started:
		case <-time.After(clockWait):
			b.t.Fatalf("a job did not start within %s", clockWait)
		}
	}
}

// finishAll lets every handler return at once from now on.
func (b *busyQueueTest) finishAll() {
	go func() {
		for {
			select {
			case b.finish <- struct{}{}:
			case <-b.quit:
				return
			}
		}
	}()
}

// finishJobs lets n running handlers return.
func (b *busyQueueTest) finishJobs(n int) {
	for range n {
		b.finish <- struct{}{}
	}
}

// running counts the jobs running in the store.
func (b *busyQueueTest) running() int {
	b.t.Helper()
	js, err := b.c.List(context.Background(), &errand.ListOpts{States: []errandtype.JobState{errandtype.StateRunning}})
	if err != nil {
		b.t.Fatal(err)
	}
	return len(js)
}

// TestBusyQueueClaimsAhead: a queue whose claims come back full sends a
// claim for its free slots without waiting for the claim in flight, two
// at most, and the claims in flight never ask for more than the slots its
// running jobs leave free; every job still runs exactly once.
func TestBusyQueueClaimsAhead(t *testing.T) {
	b, _ := newBusyQueueTest(t, nil)
	b.waitStarted(busySlots) // the first claim, full
	b.gate.holding.Store(true)

	// Half the jobs end: their slots free, and a claim goes out for them.
	b.finishJobs(busySlots / 2)
	first := b.gate.next(t, clockWait, "after half the slots freed")
	// The rest end while that claim is held: a second claim goes out
	// beside it, for slots the first did not ask for.
	b.finishJobs(busySlots / 2)
	second := b.gate.next(t, clockWait, "while a busy queue's claim was held")
	if got := b.running(); first.limit+second.limit+got > busySlots {
		t.Errorf("claims in flight for %d and %d jobs with %d running; want at most %d in all", first.limit, second.limit, got, busySlots)
	}
	if n := b.gate.inFlight.Load(); n != 2 {
		t.Errorf("%d claims in flight, want 2", n)
	}
	// No third claim: there is no more room.
	select {
	case c := <-b.gate.arrived:
		t.Fatalf("a third claim (for %d jobs) was sent beside two in flight", c.limit)
	case <-time.After(100 * time.Millisecond):
	}

	first.release <- nil
	second.release <- nil
	b.gate.holding.Store(false)
	go func() {
		for range busyJobs - busySlots {
			select {
			case b.finish <- struct{}{}:
			case <-b.quit:
				return
			}
		}
	}()
	workerWaitFor(t, clockWait, func() bool {
		for _, id := range b.ids {
			if getJob(t, b.c, id).State != errandtype.StateSucceeded {
				return false
			}
		}
		return true
	})
	for _, id := range b.ids {
		if j := getJob(t, b.c, id); j.Attempt != 1 {
			t.Errorf("job %s ran %d times, want once", id, j.Attempt)
		}
	}
	if most := b.gate.mostAtOnce.Load(); most > 2 {
		t.Errorf("%d claims were in flight at once, want at most 2", most)
	}
}

// TestBusyQueueClaimsOneAtATimeUnderLimits: a queue whose claims take
// rate-limit tokens or shared capacity first claims one at a time, as
// each claim needs what the last left.
func TestBusyQueueClaimsOneAtATimeUnderLimits(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  *errand.WorkerConfig
	}{
		{"rate limit", &errand.WorkerConfig{RateLimits: []errand.RateLimit{{Queue: errand.DefaultQueue, Limit: 1000, Per: time.Second, Burst: 1000}}}},
		{"weights", &errand.WorkerConfig{MaxWorkers: busySlots, QueueWeights: map[string]int{errand.DefaultQueue: 1}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, _ := newBusyQueueTest(t, tc.cfg)
			b.waitStarted(busySlots)
			b.gate.holding.Store(true)
			b.finishJobs(busySlots / 2)
			first := b.gate.next(t, clockWait, "after half the slots freed")
			b.finishJobs(busySlots / 2)
			select {
			case c := <-b.gate.arrived:
				t.Fatalf("a second claim (for %d jobs) was sent beside one in flight", c.limit)
			case <-time.After(200 * time.Millisecond):
			}
			first.release <- nil
			// The next claim, for the slots freed meanwhile, follows.
			b.gate.next(t, clockWait, "after the first claim returned").release <- nil
		})
	}
}

// TestBusyQueueStopRunsClaimsInFlight: a claim in flight when the worker
// stops is not abandoned: its jobs run and are recorded before Stop
// returns, rather than wait out their leases.
func TestBusyQueueStopRunsClaimsInFlight(t *testing.T) {
	b, w := newBusyQueueTest(t, nil)
	b.waitStarted(busySlots)
	b.gate.holding.Store(true)
	b.finishJobs(busySlots)
	held := []*gatedClaim{b.gate.next(t, clockWait, "after every slot freed")}
	stopped := make(chan error, 1)
	go func() { stopped <- w.Stop(context.Background()) }()
	// The jobs the held claims return start after the stop began; they
	// finish at once.
	b.finishAll()
	select {
	case c := <-b.gate.arrived:
		held = append(held, c)
	case <-time.After(100 * time.Millisecond):
	}
	claimed := 0
	for _, c := range held {
		claimed += c.limit
		c.release <- nil
	}
	select {
	case err := <-stopped:
		if err != nil {
			t.Fatalf("stop: %v", err)
		}
	case <-time.After(clockWait):
		t.Fatal("stop did not return")
	}
	if got := b.running(); got != 0 {
		t.Errorf("%d jobs left running after stop, want none", got)
	}
	succeeded := 0
	for _, id := range b.ids {
		if getJob(t, b.c, id).State == errandtype.StateSucceeded {
			succeeded++
		}
	}
	if want := busySlots + claimed; succeeded != want {
		t.Errorf("%d jobs succeeded, want the first %d and the %d claimed while stopping", succeeded, busySlots, claimed)
	}
}

// TestBusyQueueClaimErrorSleeps: a busy queue's failed claims are logged
// and the queue sleeps before it claims again (100ms, doubling while claims
// fail, at most its poll); nothing is lost.
func TestBusyQueueClaimErrorSleeps(t *testing.T) {
	b, w := newBusyQueueTest(t, nil)
	b.waitStarted(busySlots)
	b.gate.holding.Store(true)
	b.finishJobs(busySlots)
	// Fail the claim that comes, and the one beside it if it was in
	// flight already.
	b.gate.next(t, clockWait, "after every slot freed").release <- errors.New("connection reset")
	failed := time.Now()
	var next *gatedClaim
	for failures := 1; next == nil; {
		c := b.gate.next(t, clockWait, "after a failed claim")
		if failures == maxBusyClaims || time.Since(failed) > busyPoll/2 {
			next = c
			break
		}
		// Sent before the failure: it fails too.
		c.release <- errors.New("connection reset")
		failed = time.Now()
		failures++
	}
	if waited := time.Since(failed); waited < 100*time.Millisecond*8/10 {
		t.Errorf("claimed again %v after a failed claim, want the retry's sleep (100ms, doubling) first", waited)
	}
	next.release <- nil
	b.gate.holding.Store(false)
	b.finishAll()
	workerWaitFor(t, clockWait, func() bool {
		for _, id := range b.ids {
			if getJob(t, b.c, id).State != errandtype.StateSucceeded {
				return false
			}
		}
		return true
	})
	if st := w.Stats(); st.Claims < 3 {
		t.Errorf("stats %+v: want the claims before and after the failure counted", st)
	}
}
