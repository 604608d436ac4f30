package errand

import (
	"context"
	"errors"
	"time"

	"github.com/errandhq/errand/errandtype"
	"github.com/errandhq/errand/internal/schedule"
)

// UnbatchOutcomes makes w write each outcome in a transaction of its own, as
// workers did before outcome batching, so that a benchmark can compare the
// two in one run. Call it before Start.
func UnbatchOutcomes(w *Worker) { w.unbatched = true }

// SetLocalClaimWait sets how long c's announcements wait for the claims of
// the idle queue loops their enqueues woke here (localClaimWait), so that a
// test can tell waiting for the claim from running out of time. Call it
// before c enqueues.
func SetLocalClaimWait[TTx any](c *Client[TTx], d time.Duration) {
	if c.notifier != nil {
		c.notifier.ClaimWait = d
	}
}

// SetWallClock makes w read now as its wall clock when it reports its
// clock to the registry, so that a test can play a host whose clock is off.
// Call it before Start.
func SetWallClock(w *Worker, now func() time.Time) { w.reg.WallClock = now }

// ScheduleRunner drives a worker's scheduler pass by pass, as a test
// moves a fake clock.
type ScheduleRunner struct{ sc *schedule.Scheduler }

// NewScheduleRunner returns the scheduler a Worker of c with schedules ss
// would run.
func NewScheduleRunner[TTx any](c *Client[TTx], ss []*Schedule) (*ScheduleRunner, error) {
	sc, err := newScheduler(c.engine, ss)
	if err != nil {
		return nil, err
	}
	return &ScheduleRunner{sc}, nil
}

// Register records the schedules, as a starting worker does.
func (r *ScheduleRunner) Register(ctx context.Context) error { return r.sc.Register(ctx) }

// Fire fires every due tick and returns the earliest next fire time.
// A schedule that failed is an error.
func (r *ScheduleRunner) Fire(ctx context.Context) (time.Time, error) {
	next, failed, err := r.sc.Fire(ctx)
	if err == nil && failed {
		err = errors.New("a schedule failed; see the log")
	}
	return next, err
}

// EchoesSkipped returns how many of the store's notifications w skipped as
// echoes of its own client's announcements.
func EchoesSkipped(w *Worker) int64 { return w.echoesSkipped.Load() }

// RateLimitSpec is the bucket rule of a rate limit, defaults applied.
func RateLimitSpec(l RateLimit) (errandtype.LimiterSpec, error) { return l.Spec() }

// WaitingForCapacity returns how many of w's queue loops wait for a slot of
// its shared capacity (MaxWorkers); 0 without one.
func WaitingForCapacity(w *Worker) int {
	if w.share == nil {
		return 0
	}
	return w.share.Waiting()
}

// ScanDeadHooks runs one look of the dead-hook scanner a Worker of c would
// run, as a worker that has just started: it looks from the cursors kept
// in the store, or from the first death of a kind without one.
// It returns how many dead jobs without a hook it found.
func ScanDeadHooks[TTx any](ctx context.Context, c *Client[TTx]) (int, error) {
	s := c.newDeadHookScanner(time.Hour)
	if s == nil {
		return 0, errors.New("no hooked kinds, or the store is not a DeadHookStore")
	}
	return s.Scan(ctx)
}

// CompleteOpenBatches runs the leader's batch pass once and returns how
// many batches it completed.
func CompleteOpenBatches[TTx any](ctx context.Context, c *Client[TTx]) (int, error) {
	return c.completeBatches(ctx, nil)
}

// RetryBudgetSpec is the bucket rule of a retry budget, defaults applied.
func RetryBudgetSpec(b RetryBudget) (errandtype.LimiterSpec, error) { return b.Spec() }

// AdvanceOpenWorkflows runs the leader's workflow pass once and returns how
// many workflows it changed.
func AdvanceOpenWorkflows[TTx any](ctx context.Context, c *Client[TTx]) (int, error) {
	return c.advanceWorkflows(ctx, nil)
}

// OutsideProbes counts the probes c's claims outside a Worker keep track of.
func OutsideProbes[TTx any](c *Client[TTx]) int {
	g := c.outsideGate(context.Background())
	if g == nil {
		return 0
	}
	return g.Probes()
}
