package errand

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
	"github.com/errandhq/errand/internal/completer"
	"github.com/errandhq/errand/internal/flow"
	"github.com/errandhq/errand/internal/growstack"
	"github.com/errandhq/errand/internal/leasekeeper"
	"github.com/errandhq/errand/internal/maintenance"
	"github.com/errandhq/errand/internal/notifier"
	"github.com/errandhq/errand/internal/registry"
	"github.com/errandhq/errand/internal/schedule"
)

// DefaultPollInterval is how often an idle worker looks for jobs it was not
// woken for and could not foresee: jobs enqueued by other processes, and
// jobs another process's finished job released. Scheduled jobs and retries
// coming due wake it when they are due.
const DefaultPollInterval = time.Second

// WorkerConfig configures a long-running Worker.
type WorkerConfig struct {
	// Queues maps each queue to work to the most jobs from it that run at
	// once. Each queue has its own slots, so a flood of slow jobs in one
	// cannot starve another. Default: {"default": 10}.
	Queues map[string]int
	// MaxWorkers, when positive, bounds the jobs the worker runs at once
	// over all its queues, each queue still within its own slots. While
	// the queues together have more ready work than that, freed capacity
	// goes to them by QueueWeights; a queue without ready work leaves its
	// share to the others. Zero, the default: each queue has only its own
	// slots.
	MaxWorkers int
	// QueueWeights shares MaxWorkers among the queues of Queues when they
	// are all busy: with critical 6, default 3 and low 1, starts split
	// 6:3:1, and the lowest weight still gets its share, never starved. A
	// queue without a weight has weight 1. Needs MaxWorkers.
	QueueWeights map[string]int
	// Lease is each claim's lease, renewed every third of it while the
	// handler runs. Default: DefaultLease.
	Lease time.Duration
	// PollInterval is how often an idle queue looks for work it was not
	// woken for. An idle queue also sleeps no longer than until its next
	// scheduled or retrying job comes due. Default: DefaultPollInterval;
	// at least MinInterval.
	PollInterval time.Duration
	// PollOnly turns off listening for the store's wake-ups (see
	// [Notifier]), leaving polling alone to find jobs from other
	// processes: for PostgreSQL behind a pooler in transaction mode, where
	// LISTEN is unavailable, or for a SQLite worker that should not check
	// the file for other processes' commits while idle.
	PollOnly bool
	// HeartbeatInterval is how often the worker records in the worker
	// registry that it is alive, with its running and completed counts.
	// After WorkerMissedHeartbeats intervals without one the registry shows
	// it as gone. Default: DefaultWorkerHeartbeat; at least MinInterval.
	HeartbeatInterval time.Duration
	// Owner is the worker's id: its row in the worker registry and the
	// lease_owner of its claims. Give each running Worker its own.
	// Default: host:pid:random.
	Owner string
	// LeaderTTL is the lease of the cluster's leadership, which every
	// Worker competes for: the leader sweeps expired leases between claims
	// and prunes the worker registry. A leader renews every third of it and
	// stops leading after two thirds of it without a renewal, before its
	// lease ends. Default: DefaultLeaderTTL; at least 30ms.
	LeaderTTL time.Duration
	// SweepInterval is how often the leader sweeps expired leases and
	// passed deadlines, so a job whose worker died is recovered even when no
	// worker claims from its queue. Default: DefaultSweepInterval; at
	// least MinInterval.
	SweepInterval time.Duration
	// Schedules are recurring jobs this worker enqueues on every tick (see
	// [NewSchedule]): one job per tick however many workers run the same
	// schedule, in this process or others. Their kinds need not be handled
	// by this worker, only known to its client. The store must be a
	// [ScheduleStore]. A worker without schedules does no scheduling work.
	Schedules []*Schedule
	// Retention, when not nil, is applied by the leader every
	// Retention.Interval (and once on election): finished jobs older than
	// its ages are deleted, as [Client.Prune] deletes them. Nil, the
	// default, deletes nothing: how long to keep jobs is the operator's
	// decision.
	Retention *RetentionPolicy
	// PriorityAging, by queue, raises the priority of the queue's waiting
	// jobs with their wait so that low priority never starves (see
	// [PriorityAging]). The leader applies it after each sweep, so every
	// worker that may lead should carry the same map: it is a property of
	// the queue, not of a worker. The store must be a
	// [errandstore.PriorityAger].
	PriorityAging map[string]PriorityAging
	// RateLimits cap how many jobs of a queue or a kind start per
	// interval across the cluster (see [RateLimit]); RetryBudgets cap a
	// kind's retries to a fraction of its first attempts (see
	// [RetryBudget]). Both are held in the store, which must be a
	// [LimiterStore]. Each must name a queue this worker works or a kind
	// it handles. A worker without them makes no call for them.
	RateLimits   []RateLimit
	RetryBudgets []RetryBudget
	// ConcurrencyLimits cap how many jobs of a kind, or of the kinds
	// that declare a dependency, run at once across the cluster (see
	// [ConcurrencyLimit]). Each must bind a kind this worker handles, and
	// each kind one limit at most; the store must be an
	// [errandstore.ConcurrencyClaimer] and a [LimiterStore].
	ConcurrencyLimits []ConcurrencyLimit
}

// Worker runs jobs from one or more queues until stopped. It claims only as
// many jobs as it has free slots, so one process never hoards work that
// others could run. Create it with [Client.NewWorker].
type Worker struct {
	c      *engine
	cfg    WorkerConfig
	queues []string
	kinds  []string

	mu        sync.Mutex
	state     int // 0 new, 1 started, 2 stopped
	stopLoops context.CancelFunc
	stopRun   context.CancelFunc
	loops     sync.WaitGroup
	running   sync.WaitGroup
	done      chan struct{}

	outcomes  *completer.Batcher[*queueSlots] // records outcomes in batches; see internal/completer
	leases    *leasekeeper.Keeper             // renews running jobs' leases in batches; see internal/leasekeeper
	cancels   *cancelWatch                    // nil unless the store notifies cancels; see cancel.go
	unbatched bool                            // write each outcome alone (benchmarks set it to compare)
	abandoned atomic.Bool                     // set by Abandon: record nothing more
	// left counts the jobs whose outcome, or hand-back, was not recorded:
	// they wait out their leases. lastLeft is why the last one was not.
	left     atomic.Int64
	lastLeft atomic.Pointer[error]
	// echoesSkipped counts notifications skipped as echoes of this client's
	// own announcements (see notifier.Echoes).
	echoesSkipped atomic.Int64
	stats         workerCounters
	share         *flow.Share           // nil without MaxWorkers; see internal/flow
	weights       map[string]int        // each queue's weight; nil without MaxWorkers
	reg           registry.Registration // heartbeats and the last job finished
	leader        *maintenance.Leader   // see internal/maintenance
	scheduler     *schedule.Scheduler   // nil without schedules; see schedule.go
	flow          *flow.Limits          // nil without limits; see internal/flow
	breakers      *breakerGate          // nil when the store keeps no breakers; see breaker.go
	conc          *concGate             // nil without concurrency limits; see concurrency_limit.go
	gates         claimGates            // what a claim passes; see claim_gates.go
	many          map[string]manyRunner // kinds run by many handlers; nil when none (see many.go)
	lingering     lingerGroups          // calls of many handlers waiting for more jobs
	// parallelWrites: the store writes outcomes in parallel, so a job's
	// slot may free at its outcome's handover (see ParallelWriter).
	parallelWrites bool
}

// NewWorker returns a worker for the kinds this client has handlers for.
// A client without handlers may still run a worker that only fires
// Schedules and applies Retention: it claims no job, registers with no
// queue, and competes for the leadership like any other.
func (c *Client[TTx]) NewWorker(config *WorkerConfig) (*Worker, error) {
	var cfg WorkerConfig
	if config != nil {
		cfg = *config
	}
	kinds := c.handlerKinds()
	if len(kinds) == 0 && len(cfg.Schedules) == 0 && cfg.Retention == nil {
		return nil, &errandtype.InputError{Field: "Kinds", Message: "no kind has a handler; declare at least one Kind with a Handler (or give the worker Schedules or a Retention policy to run)"}
	}
	sort.Strings(kinds)
	queues, err := checkQueues(&cfg)
	if err != nil {
		return nil, err
	}
	if len(kinds) == 0 {
		queues = nil // nothing to claim: no queue loop runs
	}
	weights, err := checkWeights(&cfg)
	if err != nil {
		return nil, err
	}
	if err := checkWorkerTimes(&cfg); err != nil {
		return nil, err
	}
	if cfg.Retention != nil {
		r := *cfg.Retention
		cfg.Retention = &r // defaults go on a copy, not the caller's policy
		if err := checkRetention(cfg.Retention); err != nil {
			return nil, err
		}
	}
	cfg.PriorityAging = maps.Clone(cfg.PriorityAging) // the caller may change its map later
	if err := checkPriorityAging(c.engine, cfg.PriorityAging); err != nil {
		return nil, err
	}
	w := &Worker{c: c.engine, cfg: cfg, queues: queues, kinds: kinds, done: make(chan struct{}), weights: weights}
	if err := w.build(); err != nil {
		return nil, err
	}
	w.leader = w.newLeader()
	return w, nil
}

// checkQueues applies the default to cfg.Queues, checks it, and returns
// its queues, sorted.
func checkQueues(cfg *WorkerConfig) ([]string, error) {
	if len(cfg.Queues) == 0 {
		cfg.Queues = map[string]int{DefaultQueue: 10}
	}
	var queues []string
	for q, n := range cfg.Queues {
		if err := errandstore.CheckName("queue", q); err != nil {
			return nil, err
		}
		if n < 1 || n > MaxConcurrency {
			return nil, &errandtype.InputError{Field: "Queues", Message: fmt.Sprintf("queue %q has concurrency %d; give 1 to %d", q, n, MaxConcurrency)}
		}
		queues = append(queues, q)
	}
	sort.Strings(queues)
	return queues, nil
}

// checkWorkerTimes applies the defaults of cfg's lease, intervals and
// owner, and checks them.
func checkWorkerTimes(cfg *WorkerConfig) error {
	if cfg.Lease == 0 {
		cfg.Lease = DefaultLease
	}
	if err := checkLease("Lease", cfg.Lease); err != nil {
		return err
	}
	if cfg.PollInterval == 0 {
		cfg.PollInterval = DefaultPollInterval
	}
	if err := errandstore.CheckInterval("PollInterval", cfg.PollInterval, "1s"); err != nil {
		return err
	}
	if cfg.HeartbeatInterval == 0 {
		cfg.HeartbeatInterval = DefaultWorkerHeartbeat
	}
	if err := errandstore.CheckInterval("HeartbeatInterval", cfg.HeartbeatInterval, "5s"); err != nil {
		return err
	}
	if cfg.Owner == "" {
		cfg.Owner = DefaultOwner()
	} else if err := errandstore.CheckIdentifier("Owner", cfg.Owner, errandstore.MaxIDBytes); err != nil {
		return err
	}
	return checkLeaderConfig(cfg)
}

// build resolves, once, what the worker's config asks of the store: its
// limits, circuit breakers and schedules, and the claim gates they make.
func (w *Worker) build() error {
	c, cfg := w.c, &w.cfg
	limits, err := newFlowLimits(c, cfg, w.kinds)
	if err != nil {
		return err
	}
	w.flow = limits
	if w.weights != nil {
		w.share = flow.NewShare(cfg.MaxWorkers, w.weights, cfg.Queues)
	}
	if w.breakers, err = newBreakerGate(c, w.kinds); err != nil {
		return err
	}
	if w.conc, err = newConcGate(c, cfg, w.kinds); err != nil {
		return err
	}
	w.gates = w.claimGates()
	w.many = c.manyKinds(w.kinds)
	if err := checkLingers(w.many, cfg.Lease); err != nil {
		return err
	}
	if c.caps.parallel != nil {
		w.parallelWrites = c.caps.parallel.WritesInParallel()
	}
	if len(cfg.Schedules) > 0 {
		if w.scheduler, err = newScheduler(c, cfg.Schedules); err != nil {
			return err
		}
	}
	return nil
}

// Start registers the worker in the worker registry and begins claiming and
// running jobs, listening for the store's wake-ups unless PollOnly, and
// competing for the cluster's leadership. It returns at once; the work goes
// on until Stop is called or ctx ends. A worker that cannot register does
// not start. Cancelling ctx is an abrupt stop:
// running handlers are cancelled and their jobs given back. Use Stop for a
// graceful drain.
func (w *Worker) Start(ctx context.Context) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.state != 0 {
		return errors.New("start worker: already started")
	}
	if err := w.register(ctx); err != nil {
		return err
	}
	w.c.declareDependencies(ctx, w.breakers)
	w.state = 1
	loopCtx, stopLoops := context.WithCancel(ctx)
	runCtx, stopRuns := context.WithCancel(context.WithoutCancel(ctx))
	w.stopLoops, w.stopRun = stopLoops, stopRuns
	go func() {
		// An ended ctx stops everything at once: running handlers are
		// cancelled, their jobs given back, and the worker cleaned up as
		// by a Stop whose grace is already over.
		select {
		case <-ctx.Done():
			stopRuns()
			_ = w.Stop(ctx)
		case <-w.done:
		}
	}()
	w.outcomes = completer.New[*queueSlots](completer.Config{Store: w.c.store, Running: &w.stats.running, Writes: &w.stats.outcomeWrites,
		Direct: w.unbatched, Timeout: w.cfg.Lease, Clock: w.c.clock, Abandoned: &w.abandoned, Follow: w.c.watches.watching})
	w.outcomes.Start(ctx)
	w.leases = leasekeeper.New(w.c.store, w.c.clock, w.c.logger, w.cfg.Lease)
	w.cancels = w.watchCancels(ctx)
	// Listen before the first claim, so no notification falls between them;
	// a worker that claims nothing does not listen.
	if len(w.queues) > 0 {
		w.listen(loopCtx)
	}
	w.loops.Go(func() { w.leader.Run(loopCtx) })
	if w.scheduler != nil {
		w.loops.Go(func() { w.scheduler.Run(loopCtx) })
	}
	if hooks := w.c.newDeadHookScanner(w.cfg.SweepInterval); hooks != nil {
		w.loops.Go(func() { hooks.Run(loopCtx) })
	}
	for _, q := range w.queues {
		w.loops.Go(func() { w.runQueue(loopCtx, runCtx, q, w.cfg.Queues[q]) })
	}
	return nil
}

// Stop drains the worker: it stops claiming at once, lets running jobs finish
// until ctx ends (the grace period), then cancels what is left and gives
// those jobs back (queued, available at once, the interrupted attempt not
// counted). The registry shows it draining from the start (a heartbeat sent
// at once) until it stops. A leader resigns as soon as claiming stops, so
// another worker takes over without waiting for the lease to expire. Stop
// returns when every job has been recorded, and marks the worker stopped in
// the registry. Stop is idempotent.
//
// Stop returns nil when every job it held finished or was given back, also
// when ctx ended first: giving jobs back is what the grace period's end
// promises. It returns an error only when a job was left to its lease (its
// outcome or its hand-back could not be recorded, the store unreachable,
// or [Worker.Abandon] was called): the job runs again once the lease
// expires. The error says how many, wrapping ctx's error when ctx ended,
// e.g. "stop: 1 job left to its lease: context deadline exceeded", and the
// error that kept the last one from being recorded otherwise.
func (w *Worker) Stop(ctx context.Context) error {
	w.mu.Lock()
	switch w.state {
	case 0:
		w.state = 2
		w.mu.Unlock()
		close(w.done)
		return nil
	case 2:
		w.mu.Unlock()
		<-w.done
		return nil
	}
	w.state = 2
	w.mu.Unlock()

	leftBefore := w.left.Load()
	w.stopLoops()
	w.reg.MarkDraining()
	w.loops.Wait()
	w.lingering.closeAll()
	finished := make(chan struct{})
	go func() {
		w.running.Wait()
		close(finished)
	}()
	select {
	case <-finished:
	case <-ctx.Done():
		w.c.logger.Warn("grace period over; giving running jobs back")
		w.stopRun()
		<-finished
	}
	w.stopRun()
	// Every job has returned, its outcome handed to the batcher and
	// written: nothing can send to it any more, and no lease is held.
	w.cancels.stop()
	w.leases.Stop()
	w.outcomes.Stop()
	w.reg.Deregister(ctx)
	close(w.done)
	return w.stopErr(ctx, w.left.Load()-leftBefore)
}

// stopErr is Stop's error when n jobs were left to their leases.
func (w *Worker) stopErr(ctx context.Context, n int64) error {
	if n == 0 {
		return nil
	}
	what := "1 job left to its lease"
	if n > 1 {
		what = fmt.Sprintf("%d jobs left to their leases", n)
	}
	cause := context.Cause(ctx)
	if cause == nil {
		cause = *w.lastLeft.Load()
	}
	return fmt.Errorf("stop: %s: %w", what, cause)
}

// leftToLease notes a job whose outcome was not recorded, for err.
func (w *Worker) leftToLease(err error) {
	w.lastLeft.Store(&err)
	w.left.Add(1)
}

// errAbandoned is what recording an outcome returns after Abandon.
var errAbandoned = completer.ErrAbandoned

// Abandon makes the worker record nothing more: outcomes of jobs still
// running are not written, so their leases expire and other workers run them
// again, exactly as if this process had died. A process about to exit at once
// (on a second signal) calls it before it kills its handlers, so that the
// kill is not recorded as the jobs' failure. Abandon does not stop the
// worker; Stop still does.
func (w *Worker) Abandon() { w.abandoned.Store(true) }

// Done is closed when the worker has stopped.
func (w *Worker) Done() <-chan struct{} { return w.done }

// minDueWait is the shortest sleep until a job comes due.
const minDueWait = time.Millisecond

// nextDue returns when, on this process's monotonic clock, the next job of
// queue comes due, or the zero time when none waits or the store cannot
// say (the poll covers it). The store answers with a duration on its own
// clock, so a skewed wall clock here does not matter.
func (w *Worker) nextDue(ctx context.Context, queue string) time.Time {
	next, err := w.c.store.JobNextDue(ctx, w.nextDueParams(queue))
	return w.dueAt(ctx, queue, w.c.clock.Now(), next, err)
}

// nextDueParams asks when the next job of queue that this worker handles
// comes due.
func (w *Worker) nextDueParams(queue string) *errandstore.JobNextDueParams {
	return &errandstore.JobNextDueParams{Queues: []string{queue}, Kinds: w.kinds}
}

// dueAt is nextDue's answer from the store's, asked no earlier than asked
// on this process's clock.
func (w *Worker) dueAt(ctx context.Context, queue string, asked time.Time, next errandstore.JobNextDueResult, err error) time.Time {
	wait, ok := next.Wait, next.Found
	if err != nil {
		if ctx.Err() == nil {
			w.c.logger.Warn("ask when the next job is due failed; polling", "queue", queue, "err", err)
		}
		return time.Time{}
	}
	if !ok {
		return time.Time{}
	}
	return asked.Add(wait)
}

// runQueue claims and runs jobs of one queue with at most n at once. An
// idle queue sleeps until a wake-up, its poll interval, or the time its next
// scheduled or retrying job comes due, whichever comes first. A busy one
// keeps claims in flight (see claimAhead) unless its claims pass gates.
func (w *Worker) runQueue(loopCtx, runCtx context.Context, queue string, n int) {
	slots := w.newQueueSlots(queue, n)
	if len(w.gates) == 0 && w.c.caps.insertClaim != nil {
		slots.eager, slots.runCtx = &eagerGate{}, runCtx
		w.c.eager.add(slots)
		defer w.c.eager.remove(slots)
	}
	poll := w.c.clock.NewTimer(0)
	defer poll.Stop()
	claimer := &flow.Claimer{Fair: w.c.caps.fair, Due: w.c.caps.nextDue} // fair claims while the queue has fairness keys
	idle := false                                                        // the last claim came up short
	busy := busyClaims{n: n, results: make(chan claimResult, maxClaimsInFlight)}
	defer w.drainClaims(runCtx, &busy, slots)
	for {
		if busy.inFlight > 0 || w.pipelines(loopCtx, claimer, idle) {
			switch w.claimAhead(loopCtx, runCtx, &busy, slots, claimer, poll, &idle) {
			case aheadStop:
				return
			case aheadAgain:
				continue
			}
		}
		free := n - len(slots.tokens)
		if free == 0 {
			if !slots.waitFreed(loopCtx) {
				return
			}
			continue
		}
		kinds, paused := w.c.paused.filter(loopCtx, queue, w.kinds)
		if paused {
			if !w.waitPaused(loopCtx, poll, queue) {
				return
			}
			continue
		}
		t := &claimTicket{queue: queue, kinds: kinds, limit: free}
		switch w.gates.admit(loopCtx, t) {
		case admitStop:
			return
		case admitHeld:
			if !w.waitForTokens(loopCtx, poll, t.wait) {
				return
			}
			continue
		}
		t.wake = w.c.wakes.Chan(queue)
		jobs, due, err := w.claimThroughGates(loopCtx, t, claimer, idle)
		w.claimed(loopCtx, slots, len(jobs), err)
		w.startJobs(runCtx, slots, jobs, t.sent, t.span)
		if t.more(jobs, err) {
			idle = false
			continue // there may be more
		}
		if !idle {
			// The first short claim after work: ask now. A job that came
			// due between the claim and this question waits for a wake-up
			// or the next poll, as every job did before.
			due = w.nextDue(loopCtx, queue)
			idle = true
		}
		if !w.sleepIdle(loopCtx, slots, poll, t.wake, due, t) {
			return
		}
	}
}

// newQueueSlots returns the n slots of queue.
func (w *Worker) newQueueSlots(queue string, n int) *queueSlots {
	slots := &queueSlots{w: w, queue: queue, tokens: make(chan struct{}, n), freed: make(chan struct{}, 1)}
	if w.parallelWrites {
		slots.early = make(chan struct{}, n)
	}
	return slots
}

// Claim retries: after a failed claim the queue loop claims again after
// claimRetryMin, doubling with each failure in a row, and never later than
// its poll interval. A claim fails mostly because the store lost its
// connection (a restart, a failover, an idle-connection killer), and the
// first claim after a reconnect often fails on a connection the pool has not
// yet found dead; waiting a whole poll interval there would leave the jobs
// whose wake-ups were lost meanwhile waiting too.
const claimRetryMin = 100 * time.Millisecond

// claimRetryWait is how long a queue loop waits after failed claims in a
// row.
func claimRetryWait(failed int) time.Duration {
	return claimRetryMin << min(failed-1, 16)
}

// sleepIdle sleeps an idle queue loop until a wake-up, its poll interval,
// due (when not zero), or the retry of a failed claim, whichever comes
// first, and reports false when the loop should end instead.
func (w *Worker) sleepIdle(loopCtx context.Context, slots *queueSlots, poll Timer, wake <-chan struct{}, due time.Time, t *claimTicket) bool {
	queue := slots.queue
	wait := w.cfg.PollInterval
	if slots.failedClaims > 0 {
		wait = min(wait, claimRetryWait(slots.failedClaims))
	}
	if !due.IsZero() {
		// The floor keeps a store clock that stands still (a test's)
		// from spinning the loop on a job forever a moment away.
		wait = min(wait, max(due.Sub(w.c.clock.Now()), minDueWait))
	}
	wait = w.gates.idleWait(t, wait)
	slots.setEager(true) // before the poll is armed: a test waits for that
	defer slots.setEager(false)
	poll.Reset(wait)
	w.c.wakes.Sleeping(queue, 1)
	defer w.c.wakes.Sleeping(queue, -1)
	select {
	case <-loopCtx.Done():
		return false
	case <-wake:
		// Disarmed while the queue works, so that an armed poll
		// means an idle queue (a fake clock's tests wait for that).
		poll.Stop()
	case <-poll.C():
	}
	return true
}

// claimed logs a failed claim of the slots' queue and counts a successful
// one, and counts the failed claims in a row. Of the claims that fail in a
// row, while the database is down say, it logs the 1st, 2nd, 4th, 8th...
// at level Error (the others at Debug), and the success that ends them: a
// few lines an outage, however long, rather than one a poll.
func (w *Worker) claimed(loopCtx context.Context, slots *queueSlots, jobs int, err error) {
	if err != nil && loopCtx.Err() == nil {
		slots.failedClaims++
		level := slog.LevelDebug
		if n := slots.failedClaims; n&(n-1) == 0 {
			level = slog.LevelError
		}
		w.c.logger.Log(loopCtx, level, "claim failed; retrying", "queue", slots.queue,
			"failed_in_a_row", slots.failedClaims, "err", err)
	}
	if err == nil {
		if slots.failedClaims > 0 {
			w.c.logger.Info("claims succeed again", "queue", slots.queue, "failed_in_a_row", slots.failedClaims)
		}
		slots.failedClaims = 0
		w.stats.claims.Add(1)
		if jobs == 0 {
			w.stats.idleClaims.Add(1)
		}
	}
}

// startJobs runs the jobs a claim sent at claimSent returned, each in a
// slot of slots, each at once whatever the others do (see claimedJobs).
// span is the claim's span (see claimSpan).
func (w *Worker) startJobs(runCtx context.Context, slots *queueSlots, jobs []*errandtype.Job, claimSent time.Time, span *trace.SpanContext) {
	if len(jobs) == 0 {
		return
	}
	// Counted before any starts, so that the first to finish sees the
	// others running (see completer.Batcher).
	w.stats.running.Add(int64(len(jobs)))
	for range jobs {
		slots.tokens <- struct{}{}
	}
	if w.many != nil {
		if jobs = w.startMany(runCtx, slots, jobs, claimSent, span); len(jobs) == 0 {
			return
		}
	}
	cj := &claimedJobs{jobs: jobs, span: span}
	cj.spare.Store(true)
	w.running.Go(func() { w.runClaimed(runCtx, slots, cj, claimSent) })
}

// claimedJobs are the jobs of one claim, taken in order by the goroutines
// that run them. A goroutine takes a job, and before it runs it makes sure
// another goroutine has been started to take the next one (the spare),
// unless one has been started and has not taken a job yet: so each job
// starts as soon as a goroutine is scheduled for it, however long the jobs
// before it run, as if each had a goroutine of its own. A goroutine whose
// job ends takes the next job not yet taken, if any, so jobs that end at
// once (no-op handlers, jobs that fail fast) run one after another on the
// goroutines already running, and a claim of 500 such jobs starts a few
// goroutines instead of 500: a busy PostgreSQL worker measured 2–3 µs
// less CPU per job, about a sixth (bench/HISTORY.md), in the goroutine's
// start, its stack and its scheduling. Handlers that wait (on I/O, or
// for each other) each get a goroutine of their own, as before.
type claimedJobs struct {
	jobs []*errandtype.Job
	span *trace.SpanContext // the claim's span
	next atomic.Int64       // index of the next job to take
	// spare is set while a goroutine started to take a job has not yet
	// taken one; it is cleared by that goroutine as it starts.
	spare atomic.Bool
}

// take returns the next job not yet taken, or nil, and whether jobs are
// left after it.
func (cj *claimedJobs) take() (job *errandtype.Job, more bool) {
	i := cj.next.Add(1) - 1
	if i >= int64(len(cj.jobs)) {
		return nil, false
	}
	return cj.jobs[i], i+1 < int64(len(cj.jobs))
}

// runClaimed runs jobs of cj on the calling goroutine, started as cj's
// spare, until none is left to take.
func (w *Worker) runClaimed(runCtx context.Context, slots *queueSlots, cj *claimedJobs, claimSent time.Time) {
	cj.spare.Store(false)
	grown := false
	for {
		job, more := cj.take()
		if job == nil {
			return
		}
		if more && cj.spare.CompareAndSwap(false, true) {
			w.running.Go(func() { w.runClaimed(runCtx, slots, cj, claimSent) })
		}
		if !grown {
			// At once to the size a handler's JSON decode reaches:
			// growing there, from deep frames, was a sixth of a
			// busy worker's CPU (see internal/growstack).
			growstack.Grow()
			grown = true
		}
		w.runJob(runCtx, slots, job, claimSent, false, cj.span)
	}
}

// runJob runs one attempt of job, in a slot of slots, and records it.
// fresh: the claim inserted job, which has recorded nothing yet. claim is
// the claim's span.
func (w *Worker) runJob(runCtx context.Context, slots *queueSlots, job *errandtype.Job, claimSent time.Time, fresh bool, claim *trace.SpanContext) {
	a := w.c.runAttempt(runCtx, w.leases, job, w.cfg.Lease, claimSent, fresh, claim)
	w.recordAttempt(runCtx, slots, a)
}

// queueSlots are the slots of one queue of a Worker: a token in tokens for
// each job the queue holds, and freed to wake its claim loop when a job
// gives its slot back.
type queueSlots struct {
	w      *Worker
	queue  string
	tokens chan struct{}
	freed  chan struct{}
	// early, when not nil, holds a token for each job whose slot was
	// given back before its outcome was written (see ParallelWriter): at
	// most one per slot, so that the queue holds at most twice its slots.
	early chan struct{}
	// writing counts the jobs that hold a slot and whose outcome is with
	// the outcome batcher: their slots free when its write ends.
	writing atomic.Int64
	// failedClaims counts the queue's claims that failed in a row; the
	// queue loop alone uses it.
	failedClaims int
	// eager, when not nil, lets eager jobs take free slots while the loop
	// sleeps (see eager.go); runCtx is what they run under.
	eager  *eagerGate
	runCtx context.Context
}

// releaseEarly takes an early token for a job whose outcome is about to
// be handed over, and reports whether it got one.
func (s *queueSlots) releaseEarly() bool {
	if s.early == nil {
		return false
	}
	select {
	case s.early <- struct{}{}:
		return true
	default:
		return false
	}
}

// Free gives a job's slot back without waking the claim loop: the outcome
// batcher frees the slots of a batch first and wakes the loop after, so
// that it claims for all of them at once.
func (s *queueSlots) Free() {
	s.w.stats.running.Add(-1)
	if s.w.share != nil {
		s.w.share.Release(s.queue)
	}
	<-s.tokens
}

// waitFreed waits for a slot to free, and reports false when ctx ended
// first.
func (s *queueSlots) waitFreed(ctx context.Context) bool {
	select {
	case <-ctx.Done():
		return false
	case <-s.freed:
		return true
	}
}

// Wake wakes the claim loop to the slots freed.
func (s *queueSlots) Wake() {
	select {
	case s.freed <- struct{}{}:
	default:
	}
}

// release gives a job's slot back and wakes the claim loop.
func (s *queueSlots) release() {
	s.Free()
	s.Wake()
}

// CheckWorker reports what NewWorker, of a client made with cfg, would
// refuse in config, without a store: a command line can check its flags
// before it opens, and so perhaps creates, a database. The store is taken
// to keep limits, breakers and schedules, as errand/sqlite and
// errand/postgres do.
func CheckWorker(cfg *Config, config *WorkerConfig) error {
	c, err := NewClient[struct{}](capableStore{}, cfg)
	if err != nil {
		return err
	}
	_, err = c.NewWorker(config)
	return err
}

// capableStore stands for a store with every capability a worker may
// need, in a check that reads and writes nothing: NewClient and NewWorker
// keep a store, and ask what it can do, but call none of its methods.
type capableStore struct {
	errandstore.TxStore[struct{}]
	errandstore.LimiterStore
	errandstore.BreakerStore
	errandstore.ScheduleStore
	errandstore.ConcurrencyClaimer
}

// ID returns the worker's id: its row in the registry ([Client.Workers]) and
// the lease_owner of the jobs it claims.
func (w *Worker) ID() string { return w.cfg.Owner }

// listen subscribes to the store's notifications, when it has them and the
// worker is not PollOnly (see notifier.Listener).
func (w *Worker) listen(ctx context.Context) {
	n := w.c.caps.notifier
	if n == nil || w.cfg.PollOnly {
		return
	}
	l := &notifier.Listener{Store: n, Wakes: &w.c.wakes, Echoes: &w.c.echoes, Clock: w.c.clock,
		Logger: w.c.logger.With("worker_id", w.ID()), Queues: w.queues, Poll: w.cfg.PollInterval,
		Skipped: &w.echoesSkipped}
	l.Listen(ctx, w.loops.Go)
}
