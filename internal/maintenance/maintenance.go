// Package maintenance runs a worker's candidacy for the cluster's
// leadership and the duties of the leader: sweeping expired leases and
// passed deadlines, pruning the worker registry and the turns of idle
// fairness keys, and the duties the root hands it (batches, workflows,
// retention).
package maintenance

import (
	"context"
	"log/slog"
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
// named Config.Name; the store grants it as a lease on its own clock, and the
// leader renews it every third of its TTL.
//
// A leader must stop before its lease ends, or two workers could believe
// they lead at once. The store's clock decides the lease, but the worker
// measures its own share on its monotonic clock: from the start of the last
// successful election call it leads for Config.TTL minus a third of it, the
// margin covering clock-rate differences and a store whose clock steps. A
// leader that cannot renew (the store fails, or another worker took over)
// stops at that point at the latest, whatever the store says.

// pruneEvery is how often the leader prunes the registry, and the turns of
// idle fairness keys.
const pruneEvery = 5 * time.Minute

// KeepEvery is how often the leader asks a [errandstore.TableKeeper] store
// whether its jobs table needs upkeep. Asking is one read of the
// database's table statistics; the upkeep itself runs on its own
// goroutine, so a long vacuum delays no sweep.
const KeepEvery = 5 * time.Second

// keepBackoffMax bounds the wait after upkeep that keeps failing.
const keepBackoffMax = 5 * time.Minute

// Store is the part of a store the leader calls.
type Store interface {
	errandstore.LeaderElector
	JobSweep(ctx context.Context, params *errandstore.JobSweepParams) (errandstore.SweepResult, error)
	WorkerPrune(ctx context.Context, params *errandstore.WorkerPruneParams) (int, error)
}

// Config is what a Leader takes from its worker.
type Config struct {
	Store Store
	// FairTurns, when the store keeps fairness turns, has them pruned too.
	FairTurns errandstore.FairTurnPruner
	// Keeper, when the store's jobs table needs upkeep, is asked for it
	// every KeepEvery.
	Keeper errandstore.TableKeeper
	Clock  errandtype.TimeSource
	Logger *slog.Logger
	ID     string // the worker's id: the holder of the lease
	Name   string // the leadership's name
	TTL    time.Duration
	// SweepInterval is how often the leader sweeps; AfterSweep runs after
	// each sweep, in order, while the worker still leads.
	SweepInterval time.Duration
	AfterSweep    []func(context.Context)
	// WorkerPruneAfter and FairTurnPruneAfter are how long a gone worker
	// and an idle fairness key are kept.
	WorkerPruneAfter, FairTurnPruneAfter time.Duration
	// Retention, when set, runs on election and every RetentionEvery.
	Retention      func(context.Context)
	RetentionEvery time.Duration
}

// New returns a candidate; Run campaigns.
func New(cfg Config) *Leader { return &Leader{cfg: cfg} }

// Leading reports whether the worker leads the cluster now: it holds the
// leadership lease and runs the sweeps and registry cleanup. It turns false
// before the lease ends when the worker cannot renew it.
func (w *Leader) Leading() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.leading && w.cfg.Clock.Now().Before(w.until)
}

// Leader is a worker's candidacy for the leadership, and the duties it
// runs while elected.
type Leader struct {
	cfg Config

	mu      sync.Mutex
	leading bool      // elected, until the worker's own end of the lease
	until   time.Time // that end, with a monotonic reading

	// Used by the lead goroutine only.
	elected    bool // won an election since it last saw another leader
	stopDuties context.CancelFunc
	duties     sync.WaitGroup
}

// Run campaigns for leadership until ctx ends, runs the leader's duties
// while elected, and resigns on the way out.
func (w *Leader) Run(ctx context.Context) {
	ttl := w.cfg.TTL
	every := ttl / 3
	margin := ttl / 3
	defer w.resign(ctx)
	t := w.cfg.Clock.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
		if until, ok := w.leadingUntil(); ok && !w.cfg.Clock.Now().Before(until) {
			w.stopLeading("could not renew the lease in time")
		}
		start := w.cfg.Clock.Now()
		deadline := start.Add(ttl)
		if until, ok := w.leadingUntil(); ok {
			// A call that would return after our share of the lease is
			// worthless: cut it off there.
			deadline = until
		}
		callCtx, cancel := clock.WithDeadline(ctx, w.cfg.Clock, deadline, nil)
		l, err := w.cfg.Store.LeaderElect(callCtx, &errandstore.LeaderElectParams{Name: w.cfg.Name, Holder: w.cfg.ID, TTL: ttl})
		cancel()
		if ctx.Err() != nil {
			return
		}
		next := every
		switch {
		case err == nil && l.Leading:
			w.elected = true
			w.startLeading(ctx, start.Add(ttl-margin))
		case err == nil:
			w.elected = false
			w.stopLeading("another worker leads", "leader", l.Holder)
		default:
			if _, leading := w.leadingUntil(); leading {
				w.cfg.Logger.Warn("renew leadership failed", "worker_id", w.cfg.ID, "err", err)
				next = every / 3 // try again well before the lease ends
			} else {
				w.cfg.Logger.Debug("leader election failed", "worker_id", w.cfg.ID, "err", err)
			}
		}
		if until, ok := w.leadingUntil(); ok {
			left := until.Sub(w.cfg.Clock.Now())
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
func (w *Leader) leadingUntil() (time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.until, w.leading
}

// startLeading records a successful election until until, and starts the
// leader's duties when the worker was not leading.
func (w *Leader) startLeading(ctx context.Context, until time.Time) {
	w.mu.Lock()
	was := w.leading
	w.leading, w.until = true, until
	w.mu.Unlock()
	if was {
		return
	}
	w.cfg.Logger.Info("leading", "worker_id", w.cfg.ID, "leader", w.cfg.Name)
	dctx, stop := context.WithCancel(ctx)
	w.stopDuties = stop
	w.duties.Go(func() { w.leaderDuties(dctx) })
}

// stopLeading ends the worker's leadership, when it had it, and logs why.
func (w *Leader) stopLeading(reason string, attrs ...any) {
	if w.endLeading() {
		w.cfg.Logger.Warn("no longer leading", append([]any{"worker_id", w.cfg.ID, "reason", reason}, attrs...)...)
	}
}

// endLeading clears the worker's leadership and waits for its duties to
// return. It reports whether the worker was leading.
func (w *Leader) endLeading() bool {
	w.mu.Lock()
	was := w.leading
	w.leading, w.until = false, time.Time{}
	w.mu.Unlock()
	if was {
		w.stopDuties()
		w.duties.Wait()
	}
	return was
}

// resign gives up leadership when the worker stops, so another worker can
// lead at once instead of waiting for the lease to expire. A worker that was
// ever elected resigns, even when it stopped leading by its own clock: the
// store may still hold its lease, and resigning a lease held by another
// worker changes nothing.
func (w *Leader) resign(ctx context.Context) {
	was := w.endLeading()
	if !w.elected {
		return
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), w.cfg.TTL)
	defer cancel()
	if err := w.cfg.Store.LeaderResign(rctx, &errandstore.LeaderResignParams{Name: w.cfg.Name, Holder: w.cfg.ID}); err != nil {
		w.cfg.Logger.Warn("resign leadership failed; another worker leads once the lease expires",
			"worker_id", w.cfg.ID, "err", err)
	}
	if was {
		w.cfg.Logger.Info("no longer leading", "worker_id", w.cfg.ID, "reason", "worker stopping")
	}
}

// leaderDuties runs what must happen once per cluster until ctx ends: the
// sweep every SweepInterval and registry cleanup every pruneEvery,
// each at once on election. The tickers start after the duties done on
// election, so that an armed sweep ticker means the leader waits for its
// next sweep (a fake clock's tests wait for that).
func (w *Leader) leaderDuties(ctx context.Context) {
	if w.cfg.Keeper != nil {
		var keep sync.WaitGroup
		defer keep.Wait()
		keep.Go(func() { w.keepLoop(ctx) })
	}
	w.sweep(ctx)
	w.prune(ctx)
	w.retain(ctx)
	sweep := w.cfg.Clock.NewTicker(w.cfg.SweepInterval)
	defer sweep.Stop()
	prune := w.cfg.Clock.NewTicker(pruneEvery)
	defer prune.Stop()
	var retain <-chan time.Time // nil without a retention policy: never fires
	if w.cfg.Retention != nil {
		t := w.cfg.Clock.NewTicker(w.cfg.RetentionEvery)
		defer t.Stop()
		retain = t.C()
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-sweep.C():
			w.sweep(ctx)
		case <-prune.C():
			w.prune(ctx)
		case <-retain:
			w.retain(ctx)
		}
	}
}

// sweep ends expired leases and passed deadlines, then runs AfterSweep.
func (w *Leader) sweep(ctx context.Context) {
	if !w.Leading() {
		return
	}
	r, err := w.cfg.Store.JobSweep(ctx, &errandstore.JobSweepParams{})
	switch {
	case err != nil && ctx.Err() == nil:
		w.cfg.Logger.Error("leader sweep failed", "worker_id", w.cfg.ID, "err", err)
	case err == nil && r.Retried+r.Dead > 0:
		w.cfg.Logger.Info("swept expired leases and deadlines", "worker_id", w.cfg.ID, "retrying", r.Retried, "dead", r.Dead)
	}
	for _, f := range w.cfg.AfterSweep {
		if w.Leading() {
			f(ctx)
		}
	}
}

// retain runs the retention duty, when there is one and the worker leads.
func (w *Leader) retain(ctx context.Context) {
	if w.cfg.Retention != nil && w.Leading() {
		w.cfg.Retention(ctx)
	}
}

// prune deletes the registry's long-gone workers and the turns of idle
// fairness keys.
func (w *Leader) prune(ctx context.Context) {
	if !w.Leading() {
		return
	}
	n, err := w.cfg.Store.WorkerPrune(ctx, &errandstore.WorkerPruneParams{OlderThan: w.cfg.WorkerPruneAfter})
	switch {
	case err != nil && ctx.Err() == nil:
		w.cfg.Logger.Error("prune worker registry failed", "worker_id", w.cfg.ID, "err", err)
	case err == nil && n > 0:
		w.cfg.Logger.Info("pruned worker registry", "worker_id", w.cfg.ID, "removed", n, "older_than", w.cfg.WorkerPruneAfter.String())
	}
	if p := w.cfg.FairTurns; p != nil {
		n, err := p.FairTurnPrune(ctx, &errandstore.FairTurnPruneParams{IdleFor: w.cfg.FairTurnPruneAfter})
		switch {
		case err != nil && ctx.Err() == nil:
			w.cfg.Logger.Error("prune fair turns failed", "worker_id", w.cfg.ID, "err", err)
		case err == nil && n > 0:
			w.cfg.Logger.Info("pruned the turns of idle fairness keys", "worker_id", w.cfg.ID, "removed", n, "idle_for", w.cfg.FairTurnPruneAfter.String())
		}
	}
}

// keepLoop asks the store for upkeep of its jobs table at once, then
// KeepEvery after each upkeep returns, until ctx ends. After a failure it
// waits twice as long as before, up to keepBackoffMax: an upkeep that
// fails the same way each time (a vacuum a statement timeout cuts off)
// would otherwise redo its work, and log it, every few seconds.
func (w *Leader) keepLoop(ctx context.Context) {
	t := w.cfg.Clock.NewTimer(KeepEvery)
	defer t.Stop()
	noted, wait := "", KeepEvery
	for {
		if w.Leading() {
			r, err := w.cfg.Keeper.TableKeep(ctx, &errandstore.TableKeepParams{})
			if err == nil {
				wait = KeepEvery
			}
			switch {
			case err != nil && ctx.Err() == nil:
				wait = min(2*wait, keepBackoffMax)
				w.cfg.Logger.Error("jobs table upkeep failed", "worker_id", w.cfg.ID, "err", err, "next_in", wait.String())
			case r.Done:
				w.cfg.Logger.Info("vacuumed the jobs table", "worker_id", w.cfg.ID, "dead_rows", r.Dead, "live_rows", r.Live, "took", r.Took.Round(time.Millisecond).String())
			case r.Note != "" && r.Note != noted:
				w.cfg.Logger.Warn("jobs table upkeep skipped", "worker_id", w.cfg.ID, "reason", r.Note, "dead_rows", r.Dead, "live_rows", r.Live)
			}
			noted = r.Note // said once, until it changes
		}
		t.Reset(wait)
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
	}
}
