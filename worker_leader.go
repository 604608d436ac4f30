package errand

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
	"github.com/errandhq/errand/internal/clock"
)

// Leadership: some work must run once per cluster, not once per worker:
// sweeping expired leases between claims (so a job whose worker died is
// recovered even when nobody claims from its queue) and pruning the worker
// registry. Every long-running Worker is a candidate for the leadership
// named LeaderName; the store grants it as a lease on its own clock, and the
// leader renews it every third of its TTL.
//
// A leader must stop before its lease ends, or two workers could believe
// they lead at once. The store's clock decides the lease, but the worker
// measures its own share on its monotonic clock: from the start of the last
// successful election call it leads for LeaderTTL minus a third of it, the
// margin covering clock-rate differences and a store whose clock steps. A
// leader that cannot renew (the store fails, or another worker took over)
// stops at that point at the latest, whatever the store says.

// LeaderName is the leadership the Workers of one store compete for.
const LeaderName = "errand"

// DefaultLeaderTTL is how long a leader's lease lasts unless renewed.
const DefaultLeaderTTL = 15 * time.Second

// DefaultSweepInterval is how often the leader sweeps expired leases and
// passed deadlines.
const DefaultSweepInterval = 5 * time.Second

// WorkerPruneAfter is how long the leader keeps stopped and gone workers in
// the registry, from their last sign of life, before deleting them.
const WorkerPruneAfter = 24 * time.Hour

// workerPruneEvery is how often the leader prunes the registry, and the
// turns of idle fairness keys.
const workerPruneEvery = 5 * time.Minute

// FairTurnPruneAfter is how long a fairness key with no waiting job keeps
// its turn (see [FairTurnPruner]) after a fair claim last served it; then
// the leader deletes it. A key that comes back after that counts as served
// longest ago, which it was.
const FairTurnPruneAfter = time.Hour

// minLeaderTTL keeps the election interval (a third of the TTL) meaningful.
const minLeaderTTL = 30 * time.Millisecond

// Leader returns the current holder of the cluster's leadership (a worker
// id, see [Worker.ID]), or an error wrapping ErrNotFound when no worker
// leads.
func (c *Client[TTx]) Leader(ctx context.Context) (*errandtype.Leader, error) {
	l, err := c.store.LeaderGet(ctx, &errandstore.LeaderGetParams{Name: LeaderName})
	if err != nil {
		return nil, fmt.Errorf("get leader: %w", err)
	}
	return l, nil
}

// Leading reports whether the worker leads the cluster now: it holds the
// leadership lease and runs the sweeps and registry cleanup. It turns false
// before the lease ends when the worker cannot renew it.
func (w *Worker) Leading() bool {
	w.leader.mu.Lock()
	defer w.leader.mu.Unlock()
	return w.leader.leading && w.c.clock.Now().Before(w.leader.until)
}

// workerLeadership is a Worker's candidacy.
type workerLeadership struct {
	mu      sync.Mutex
	leading bool      // elected, until the worker's own end of the lease
	until   time.Time // that end, with a monotonic reading

	// Used by the lead goroutine only.
	elected    bool // won an election since it last saw another leader
	stopDuties context.CancelFunc
	duties     sync.WaitGroup
}

// lead campaigns for leadership until ctx ends, runs the leader's duties
// while elected, and resigns on the way out.
func (w *Worker) lead(ctx context.Context) {
	ttl := w.cfg.LeaderTTL
	every := ttl / 3
	margin := ttl / 3
	defer w.resign(ctx)
	t := w.c.clock.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
		if until, ok := w.leadingUntil(); ok && !w.c.clock.Now().Before(until) {
			w.stopLeading("could not renew the lease in time")
		}
		start := w.c.clock.Now()
		deadline := start.Add(ttl)
		if until, ok := w.leadingUntil(); ok {
			// A call that would return after our share of the lease is
			// worthless: cut it off there.
			deadline = until
		}
		callCtx, cancel := clock.WithDeadline(ctx, w.c.clock, deadline, nil)
		l, err := w.c.store.LeaderElect(callCtx, &errandstore.LeaderElectParams{Name: LeaderName, Holder: w.ID(), TTL: ttl})
		cancel()
		if ctx.Err() != nil {
			return
		}
		next := every
		switch {
		case err == nil && l.Leading:
			w.leader.elected = true
			w.startLeading(ctx, start.Add(ttl-margin))
		case err == nil:
			w.leader.elected = false
			w.stopLeading("another worker leads", "leader", l.Holder)
		default:
			if _, leading := w.leadingUntil(); leading {
				w.c.logger.Warn("renew leadership failed", "worker_id", w.ID(), "err", err)
				next = every / 3 // try again well before the lease ends
			} else {
				w.c.logger.Debug("leader election failed", "worker_id", w.ID(), "err", err)
			}
		}
		if until, ok := w.leadingUntil(); ok {
			left := until.Sub(w.c.clock.Now())
			if left <= 0 {
				w.stopLeading("could not renew the lease in time")
			} else {
				next = min(next, left)
			}
		}
		t.Reset(next)
	}
}

// leadingUntil returns the end of the worker's lease when it believes it
// leads.
func (w *Worker) leadingUntil() (time.Time, bool) {
	w.leader.mu.Lock()
	defer w.leader.mu.Unlock()
	return w.leader.until, w.leader.leading
}

// startLeading records a successful election until until, and starts the
// leader's duties when the worker was not leading.
func (w *Worker) startLeading(ctx context.Context, until time.Time) {
	w.leader.mu.Lock()
	was := w.leader.leading
	w.leader.leading, w.leader.until = true, until
	w.leader.mu.Unlock()
	if was {
		return
	}
	w.c.logger.Info("leading", "worker_id", w.ID(), "leader", LeaderName)
	dctx, stop := context.WithCancel(ctx)
	w.leader.stopDuties = stop
	w.leader.duties.Go(func() { w.leaderDuties(dctx) })
}

// stopLeading ends the worker's leadership, when it had it, and logs why.
func (w *Worker) stopLeading(reason string, attrs ...any) {
	if w.endLeading() {
		w.c.logger.Warn("no longer leading", append([]any{"worker_id", w.ID(), "reason", reason}, attrs...)...)
	}
}

// endLeading clears the worker's leadership and waits for its duties to
// return. It reports whether the worker was leading.
func (w *Worker) endLeading() bool {
	w.leader.mu.Lock()
	was := w.leader.leading
	w.leader.leading, w.leader.until = false, time.Time{}
	w.leader.mu.Unlock()
	if was {
		w.leader.stopDuties()
		w.leader.duties.Wait()
	}
	return was
}

// resign gives up leadership when the worker stops, so another worker can
// lead at once instead of waiting for the lease to expire. A worker that was
// ever elected resigns, even when it stopped leading by its own clock: the
// store may still hold its lease, and resigning a lease held by another
// worker changes nothing.
func (w *Worker) resign(ctx context.Context) {
	was := w.endLeading()
	if !w.leader.elected {
		return
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), w.cfg.LeaderTTL)
	defer cancel()
	if err := w.c.store.LeaderResign(rctx, &errandstore.LeaderResignParams{Name: LeaderName, Holder: w.ID()}); err != nil {
		w.c.logger.Warn("resign leadership failed; another worker leads once the lease expires",
			"worker_id", w.ID(), "err", err)
	}
	if was {
		w.c.logger.Info("no longer leading", "worker_id", w.ID(), "reason", "worker stopping")
	}
}

// leaderDuties runs what must happen once per cluster until ctx ends: the
// sweep every SweepInterval and registry cleanup every workerPruneEvery,
// each at once on election. The tickers start after the duties done on
// election, so that an armed sweep ticker means the leader waits for its
// next sweep (a fake clock's tests wait for that).
func (w *Worker) leaderDuties(ctx context.Context) {
	w.leaderSweep(ctx)
	w.leaderBatches(ctx)
	w.leaderWorkflows(ctx)
	w.leaderPrune(ctx)
	w.leaderRetention(ctx)
	sweep := w.c.clock.NewTicker(w.cfg.SweepInterval)
	defer sweep.Stop()
	prune := w.c.clock.NewTicker(workerPruneEvery)
	defer prune.Stop()
	var retain <-chan time.Time // nil without a retention policy: never fires
	if w.cfg.Retention != nil {
		t := w.c.clock.NewTicker(w.cfg.Retention.Interval)
		defer t.Stop()
		retain = t.C()
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-sweep.C():
			w.leaderSweep(ctx)
			w.leaderBatches(ctx)   // see batch.go
			w.leaderWorkflows(ctx) // see workflow.go
		case <-prune.C():
			w.leaderPrune(ctx)
		case <-retain:
			w.leaderRetention(ctx)
		}
	}
}

func (w *Worker) leaderSweep(ctx context.Context) {
	if !w.Leading() {
		return
	}
	r, err := w.c.store.JobSweep(ctx, &errandstore.JobSweepParams{})
	switch {
	case err != nil && ctx.Err() == nil:
		w.c.logger.Error("leader sweep failed", "worker_id", w.ID(), "err", err)
	case err == nil && r.Retried+r.Dead > 0:
		w.c.logger.Info("swept expired leases and deadlines", "worker_id", w.ID(), "retrying", r.Retried, "dead", r.Dead)
	}
}

func (w *Worker) leaderPrune(ctx context.Context) {
	if !w.Leading() {
		return
	}
	n, err := w.c.store.WorkerPrune(ctx, &errandstore.WorkerPruneParams{OlderThan: WorkerPruneAfter})
	switch {
	case err != nil && ctx.Err() == nil:
		w.c.logger.Error("prune worker registry failed", "worker_id", w.ID(), "err", err)
	case err == nil && n > 0:
		w.c.logger.Info("pruned worker registry", "worker_id", w.ID(), "removed", n, "older_than", WorkerPruneAfter.String())
	}
	if p, ok := w.c.store.(errandstore.FairTurnPruner); ok {
		n, err := p.FairTurnPrune(ctx, &errandstore.FairTurnPruneParams{IdleFor: FairTurnPruneAfter})
		switch {
		case err != nil && ctx.Err() == nil:
			w.c.logger.Error("prune fair turns failed", "worker_id", w.ID(), "err", err)
		case err == nil && n > 0:
			w.c.logger.Info("pruned the turns of idle fairness keys", "worker_id", w.ID(), "removed", n, "idle_for", FairTurnPruneAfter.String())
		}
	}
}

// checkLeaderConfig applies the leadership defaults and validates them.
func checkLeaderConfig(cfg *WorkerConfig) error {
	if cfg.LeaderTTL == 0 {
		cfg.LeaderTTL = DefaultLeaderTTL
	}
	if cfg.LeaderTTL < minLeaderTTL {
		return &errandtype.InputError{Field: "LeaderTTL", Message: fmt.Sprintf("must be at least %s, e.g. 15s", minLeaderTTL)}
	}
	if cfg.SweepInterval == 0 {
		cfg.SweepInterval = DefaultSweepInterval
	}
	return errandstore.CheckInterval("SweepInterval", cfg.SweepInterval, "5s")
}
