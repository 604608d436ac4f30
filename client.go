package errand

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
	"github.com/errandhq/errand/internal/flow"
	"github.com/errandhq/errand/internal/ids"
	"github.com/errandhq/errand/internal/notifier"
	"github.com/errandhq/errand/internal/registry"
)

// DefaultQueue is the queue of a job enqueued without one.
const DefaultQueue = "default"

// Config configures a Client. The zero value is a producer with the default
// retry budget.
type Config struct {
	// Kinds are the kinds this client knows: their handlers, for a worker,
	// and their policies. Build it with [NewKinds] and [Handle]. A client
	// that declares kinds refuses to enqueue any other (see
	// AllowUnknownKinds).
	Kinds *Kinds
	// RetryPolicy is the backoff for kinds that declare none. Nil means
	// equal jitter from DefaultBackoffBase to DefaultBackoffMax.
	RetryPolicy *RetryPolicy
	// MaxAttempts is the attempt budget for kinds that declare none. Zero
	// means DefaultMaxAttempts.
	MaxAttempts int
	// Logger receives one line per job outcome. Nil discards.
	Logger *slog.Logger
	// AllowUnknownKinds lets a client that declares Kinds enqueue kinds it
	// does not declare, for a program that also enqueues work other
	// programs run. Without it such an enqueue is an error, so that a typo
	// in a kind fails at once instead of waiting forever for a worker. A
	// client that declares no kinds (a producer only) accepts any kind.
	AllowUnknownKinds bool
	// Clock is the time of the client and its workers: polls, lease
	// renewals, timeouts, leadership and registry heartbeats. Nil means the
	// system clock. Tests pass a fake one (errandtest.Clock), the same one
	// they give the store, so that leases and timers agree.
	Clock TimeSource
	// Observer, when set, is told about the jobs this client enqueues and
	// the attempts its workers start and finish, for metrics (see
	// errandhttp.NewMetrics). Nil observes nothing.
	Observer Observer
	// Breakers are the circuit breaker policies of dependencies that
	// kinds name (see [KindOpts].Dependency), by dependency. A dependency
	// without one takes the defaults of [BreakerPolicy].
	Breakers map[string]*errandtype.BreakerPolicy
	// TracerProvider makes the client's enqueues and its workers' claims
	// and attempts OpenTelemetry spans, and an attempt a child of the
	// trace that enqueued its job (see docs/tracing.md). Nil means the
	// global provider (otel.GetTracerProvider): no spans, and no cost,
	// until the application sets one.
	TracerProvider trace.TracerProvider
	// Codec, when set, seals the args, outputs and checkpoints this client
	// writes, and opens them for its workers and readers, so that they are
	// unreadable at rest without its keys (see [AESGCM] and
	// docs/encryption.md). Nil stores them as plain JSON; a job sealed by
	// another client is then given back, never run or dead-lettered.
	Codec Codec
}

// Client enqueues, inspects and runs jobs through a store. It is safe for
// concurrent use. When its store is a [Notifier], the client announces new
// jobs to other processes in the background: call [Client.Close] when done
// with it, before closing the store.
//
// TTx is the store's transaction type (see [TxStore]): *sql.Tx for
// errand/sqlite, pgx.Tx for errand/postgres. [Client.EnqueueTx] and [Once]
// take only that type, so that passing a transaction the store cannot join
// does not compile.
type Client[TTx any] struct {
	*engine
	txStore errandstore.TxStore[TTx]
	txCaps  txCapabilities[TTx] // resolved in NewClient
}

// engine is the part of a Client that does not depend on the transaction
// type: the store, the kinds, the logger, the wake-ups, and running and
// recording attempts. A Worker holds it.
type engine struct {
	store       errandstore.Store
	caps        capabilities // the store's optional interfaces, resolved in NewClient
	kinds       map[string]*kind
	retry       *RetryPolicy
	maxAttempts int
	logger      *slog.Logger
	// allowUnknownKinds: enqueue kinds not in kinds (Config.AllowUnknownKinds).
	allowUnknownKinds bool
	clock             TimeSource                           // Config.Clock, or the system clock
	observer          Observer                             // Config.Observer; nil: none
	absorbObserver    AbsorbObserver                       // observer, when it hears of absorbed enqueues
	breakers          map[string]*errandtype.BreakerPolicy // Config.Breakers
	tracing           tracing                              // Config.TracerProvider; see tracing.go
	codec             Codec                                // Config.Codec; nil: plain; see codec.go

	wakes notifier.Wakes // per queue; see internal/notifier

	notifier *notifier.Notifier // nil unless the store is a Notifier
	echoes   notifier.Echoes    // this client's own announcements

	subs subscribers // see subscribe.go

	remotes registry.Remotes // remote workers seen by Claim, written at most once per heartbeat
	outside outsideClaims    // breakers and fair modes of claims outside a Worker; see remote_flow.go

	stepw   stepWriter  // the steps of this client's attempts; see step.go
	watches watches     // this process's waits on its own work; see watch.go
	eager   eagerQueues // workers' queues that may take eager jobs; see eager.go
	paused  pauseView   // the store's pauses; see pause.go
}

// NewClient returns a client over store. It returns an error naming the
// field to fix when cfg is invalid. TTx is inferred from the store:
// errand.NewClient(sqliteStore, cfg) returns a *Client[*sql.Tx].
func NewClient[TTx any](store errandstore.TxStore[TTx], cfg *Config) (*Client[TTx], error) {
	if cfg == nil {
		cfg = &Config{}
	}
	if store == nil {
		return nil, &errandtype.InputError{Field: "store", Message: "is nil; open one with sqlite.Open"}
	}
	c := &engine{
		store:       store,
		caps:        resolveCapabilities(store),
		kinds:       map[string]*kind{},
		retry:       cfg.RetryPolicy,
		maxAttempts: cfg.MaxAttempts,
		logger:      cfg.Logger,

		allowUnknownKinds: cfg.AllowUnknownKinds,
		clock:             cfg.Clock,
		observer:          cfg.Observer,
		absorbObserver:    asAbsorbObserver(cfg.Observer),
		tracing:           newTracing(cfg.TracerProvider),
		codec:             cfg.Codec,
	}
	if c.clock == nil {
		c.clock = systemTime{}
	}
	if err := c.retry.check("RetryPolicy"); err != nil {
		return nil, err
	}
	if c.retry == nil {
		c.retry = &RetryPolicy{}
	}
	if c.maxAttempts == 0 {
		c.maxAttempts = DefaultMaxAttempts
	}
	if c.maxAttempts < 0 || c.maxAttempts > errandtype.MaxAttemptsLimit {
		return nil, &errandtype.InputError{Field: "MaxAttempts", Message: fmt.Sprintf("must be 1 to %d (or 0 for the default)", errandtype.MaxAttemptsLimit)}
	}
	if c.logger == nil {
		c.logger = slog.New(slog.DiscardHandler)
	}
	c.paused = pauseView{store: c.caps.pauses, clock: c.clock, logger: c.logger}
	if err := checkBreakers(cfg.Breakers); err != nil {
		return nil, err
	}
	c.breakers = cfg.Breakers
	if c.caps.notifier != nil {
		c.notifier = notifier.New(c.caps.notifier, &c.echoes, c.clock, c.logger)
	}
	if cfg.Kinds != nil {
		if cfg.Kinds.err != nil {
			return nil, cfg.Kinds.err
		}
		for name, k := range cfg.Kinds.m {
			c.kinds[name] = k
		}
	}
	return &Client[TTx]{engine: c, txStore: store, txCaps: resolveTxCapabilities(store)}, nil
}

// Store returns the client's store.
func (c *Client[TTx]) Store() errandstore.TxStore[TTx] { return c.txStore }

// EnqueueOpts are the optional settings of one job. The zero value enqueues
// into DefaultQueue, available now, with the kind's attempt budget.
type EnqueueOpts struct {
	// ID, when set, is the job's id: a duplicate returns the existing job,
	// if it is the job this enqueue would have made, and is an
	// *IDConflictError naming the fields that differ otherwise (see
	// FirstWins). Use the id of the business object the job serves (a
	// payment id) so a retried request cannot enqueue twice. The shapes of
	// the ids errand gives its own jobs are refused: "B.callback",
	// "W.step.S", "W.undo.S" and "J.dead.N".
	ID string
	// FirstWins makes a duplicate ID return the existing job, with
	// Duplicate set, even when it differs from the one this enqueue would
	// have made: the first enqueue of an id wins. It needs an ID.
	FirstWins bool
	// Queue defaults to DefaultQueue.
	Queue string
	// Priority orders claims within a queue: lower runs first. Default 0.
	Priority int
	// Delay makes the job available that long after enqueue.
	Delay time.Duration
	// RunAt makes the job available at that time. Set Delay or RunAt, not
	// both.
	RunAt time.Time
	// MaxAttempts overrides the kind's attempt budget.
	MaxAttempts int
	// BackoffBase and BackoffMax override the kind's retry policy.
	BackoffBase time.Duration
	BackoffMax  time.Duration
	// MaxAge gives the job a deadline MaxAge after enqueue: past it the job
	// dies with class "expired" instead of running.
	MaxAge time.Duration
	// StartBy, when not zero, is the time by which the job must have
	// started: a job not started by then never starts and dies with class
	// "start_by", kept apart from MaxAge's "expired". It bounds the first
	// start only (retries after a start are not bound by it); a replay
	// clears it. It must be after RunAt when both are set.
	StartBy time.Time
	// UniqueKey, when set, is unique across all jobs, whatever their state:
	// a second enqueue with the same key returns the first job. It is
	// short for Unique: &UniqueOpts{Key: UniqueKey}; set one or the other.
	UniqueKey string
	// Unique, when set, makes the job unique by key within a scope of
	// states and, optionally, a time window: see [UniqueOpts]. A duplicate
	// enqueue returns the job that holds the key, with Duplicate set.
	Unique *UniqueOpts
	// Debounce, when set, folds this enqueue into the pending job of its
	// key and kind (debounce, last-wins) or into the key's job of the last
	// window (throttle, first-wins): see [DebounceOpts]. It takes no ID or
	// unique key, and, last-wins, no Delay or RunAt.
	Debounce *DebounceOpts
	// OrderingKey groups jobs that must run one at a time, in the order
	// they were enqueued (a customer id, say): a job of the key waits while
	// another is running, or while an earlier one is queued or waiting out a
	// retry. A job that ends cancelled no longer holds the rest back; one
	// that ends dead does not either, unless OrderingOnDead says hold.
	OrderingKey string
	// OrderingOnDead says whether the job, should it end dead, holds its
	// ordering key until it is replayed or cancelled; the default is the
	// kind's choice ([KindOpts]), else release.
	OrderingOnDead OrderingOnDead
	// FairnessKey names who the job is for (a tenant, an account, a
	// customer id) so that workers share its queue fairly among keys: one
	// key's burst of thousands of jobs does not delay another key's job
	// behind it. A worker claims such a queue round-robin across keys
	// within each priority; jobs without a key share one turn. Unlike
	// OrderingKey it does not serialize: jobs of one key still run
	// concurrently. Empty: no key.
	FairnessKey string
	// Tags are free-form labels for operators.
	Tags []string
	// Metadata is a JSON object kept with the job for its producers and
	// consumers rather than its handler: a trace context, the custom
	// fields of a Faktory job. It is not part of the job's identity: a
	// duplicate id or unique key returns the existing job and its
	// metadata. At most 64 KiB; null or {} is none.
	Metadata json.RawMessage
	// Eager starts the job at once on a Worker of this client, in this
	// process, if one of its queues is idle with a slot free: the
	// enqueue's own transaction claims the job for it, so the job starts
	// without a claim and a commit of its own, and the returned job is
	// running. Otherwise (no idle worker of the job's queue and kind, a
	// job not yet due or held by its ordering key, a worker whose claims
	// pass weights, rate limits, retry budgets or breakers) the job is
	// enqueued as without Eager. An eager job may start ahead of jobs
	// waiting in its queue. It applies to a job enqueued alone with
	// Enqueue or EnqueueMany, not in a transaction of yours, a batch or
	// a workflow. See docs/durable.md.
	Eager bool
}

// EnqueueParams describes one job for EnqueueMany.
type EnqueueParams struct {
	// Args are the job's args; their type names the kind.
	Args JobArgs
	// Opts are the job's options; nil for the defaults.
	Opts *EnqueueOpts
}

// EnqueueResult is the outcome of enqueueing one job.
type EnqueueResult struct {
	// Job is the new job, or the existing one when Duplicate.
	Job *errandtype.Job
	// Duplicate reports that a job with the same ID existed (the same job,
	// or any with FirstWins), or one held the unique key (see
	// [UniqueOpts]): Job is that job, unchanged, and nothing was enqueued.
	// It is set too when Absorbed.
	Duplicate bool
	// Absorbed reports that the job's debounce key folded it into Job
	// (see [DebounceOpts]): nothing was enqueued, and Job, last-wins, now
	// has this enqueue's args and a later start.
	Absorbed bool
}

// Enqueue inserts one job in a transaction of its own. The kind is the
// args' (see [JobArgs]).
func (c *Client[TTx]) Enqueue(ctx context.Context, args JobArgs, opts *EnqueueOpts) (*EnqueueResult, error) {
	rs, err := c.EnqueueMany(ctx, []EnqueueParams{{Args: args, Opts: opts}})
	if err != nil {
		return nil, err
	}
	return &rs[0], nil
}

// EnqueueTx inserts one job inside tx, the caller's transaction: the job
// exists if and only if tx commits. On SQLite tx is a *sql.Tx from the
// database sqlite.Open returned. Call [Client.Wake] after tx commits, so
// that idle workers start the job at once rather than at their next poll.
// After an error, roll tx back.
func (c *Client[TTx]) EnqueueTx(ctx context.Context, tx TTx, args JobArgs, opts *EnqueueOpts) (*EnqueueResult, error) {
	rs, err := c.EnqueueManyTx(ctx, tx, []EnqueueParams{{Args: args, Opts: opts}})
	if err != nil {
		return nil, err
	}
	return &rs[0], nil
}

// EnqueueMany inserts jobs in one transaction: all new jobs commit or none
// does. Results are in the order of params. A job whose id names a
// different job (an *IDConflictError) refuses the whole call, as bad input
// does: nothing is written.
func (c *Client[TTx]) EnqueueMany(ctx context.Context, params []EnqueueParams) ([]EnqueueResult, error) {
	ctx, span := c.startEnqueue(ctx, len(params))
	rs, err := c.enqueueMany(ctx, params)
	endEnqueue(span, onlyJob(rs), err)
	return rs, err
}

func (c *Client[TTx]) enqueueMany(ctx context.Context, params []EnqueueParams) ([]EnqueueResult, error) {
	params, eager := takeEager(params)
	ps, err := c.insertParams(ctx, params)
	if err != nil {
		return nil, err
	}
	var rs []errandstore.JobInsertResult
	started, tried, announced := false, false, false
	if eager {
		var r errandstore.JobInsertResult
		r, tried, started, err = c.enqueueEager(ctx, ps[0])
		if err != nil {
			return nil, fmt.Errorf("enqueue: %w", err)
		}
		rs = []errandstore.JobInsertResult{r}
		if err := c.checkJobConflicts(ps, rs); err != nil {
			return nil, err
		}
	}
	if !tried {
		if rs, announced, err = c.insertMany(ctx, ps); err != nil {
			return nil, err
		}
	}
	var fresh []*errandstore.JobInsertParams // a duplicate, or a job started, is no news to a worker
	for i, r := range rs {
		if !r.Duplicate && !started {
			fresh = append(fresh, ps[i])
		}
	}
	switch {
	case len(fresh) == 0:
	case announced:
		c.wakes.Wake(queuesOf(fresh))
	default:
		c.Wake(queuesOf(fresh)...)
	}
	c.observeInserts(rs)
	return c.enqueueResults(rs), nil
}

// takeEager returns params with the Eager option of a job enqueued alone
// taken out, and whether it was set; elsewhere Eager is refused (see
// ownInsertParam).
func takeEager(params []EnqueueParams) ([]EnqueueParams, bool) {
	if len(params) != 1 || params[0].Opts == nil || !params[0].Opts.Eager || params[0].Opts.Debounce != nil {
		return params, false
	}
	o := *params[0].Opts
	o.Eager = false
	return []EnqueueParams{{Args: params[0].Args, Opts: &o}}, true
}

// EnqueueManyTx inserts jobs inside the caller's transaction. Inside
// [Client.InTx] workers are woken after the commit; otherwise call
// [Client.Wake] after the transaction commits, so that idle workers start
// the jobs at once rather than at their next poll. After an error (an
// *IDConflictError is found once the other jobs are inserted), roll the
// transaction back.
func (c *Client[TTx]) EnqueueManyTx(ctx context.Context, tx TTx, params []EnqueueParams) ([]EnqueueResult, error) {
	ctx, span := c.startEnqueue(ctx, len(params))
	rs, err := c.enqueueManyTx(ctx, tx, params)
	endEnqueue(span, onlyJob(rs), err)
	return rs, err
}

func (c *Client[TTx]) enqueueManyTx(ctx context.Context, tx TTx, params []EnqueueParams) ([]EnqueueResult, error) {
	ps, err := c.insertParams(ctx, params)
	if err != nil {
		return nil, err
	}
	rs, err := c.txStore.JobInsertManyTx(ctx, tx, &errandstore.JobInsertManyParams{Jobs: ps})
	if err != nil {
		return nil, fmt.Errorf("enqueue: %w", err)
	}
	if err := c.checkJobConflicts(ps, rs); err != nil {
		return nil, err
	}
	if w, ok := ctx.Value(txWakesKey{}).(*txWakes); ok && w.c == c.engine {
		w.add(queuesOf(ps))
		if c.observer != nil {
			w.addInserts(rs)
		}
	} else {
		if c.notifier != nil {
			c.notifier.NoteTx(queuesOf(ps))
		}
		c.observeInserts(rs)
	}
	return c.enqueueResults(rs), nil
}

// insertMany inserts ps in a transaction of its own. A conflict is found
// only once the other jobs are inserted: when there may be one among
// several jobs, they are inserted in a transaction the conflict rolls
// back; otherwise in the store's own, which a lone duplicate leaves
// unwritten.
//
// It reports whether the store announced a lone job's queue in the
// insert's commit, which it asks for when no announcement of this client
// is on its way and no loop of that queue sleeps in this process: that one
// is woken at once, and an announcement sent beside its claim slows it
// (see Wake).
func (c *Client[TTx]) insertMany(ctx context.Context, ps []*errandstore.JobInsertParams) ([]errandstore.JobInsertResult, bool, error) {
	p := &errandstore.JobInsertManyParams{Jobs: ps}
	if len(ps) == 1 || !errandstore.MayConflict(ps) {
		announced := false
		if len(ps) == 1 && c.notifier != nil && !c.wakes.Asleep(ps[0].Queue) {
			var done func(bool)
			if done, p.Announce = c.notifier.Inline([]string{ps[0].Queue}); p.Announce {
				defer func() { done(announced) }() // even on a panic: the notifier waits for it
			}
		}
		rs, err := c.store.JobInsertMany(ctx, p)
		announced = err == nil && len(rs) == 1 && rs[0].Announced
		if err != nil {
			return nil, false, fmt.Errorf("enqueue: %w", err)
		}
		return rs, announced, c.checkJobConflicts(ps, rs)
	}
	var rs []errandstore.JobInsertResult
	var conflict error
	err := c.txStore.InTx(ctx, func(ctx context.Context, tx TTx) error {
		var err error
		if rs, err = c.txStore.JobInsertManyTx(ctx, tx, p); err != nil {
			return err
		}
		conflict = c.checkJobConflicts(ps, rs)
		return conflict
	})
	if conflict != nil {
		return nil, false, conflict
	}
	if err != nil {
		return nil, false, fmt.Errorf("enqueue: %w", err)
	}
	return rs, false, nil
}

// InTx runs fn in a transaction on the store's database and commits it, or
// rolls it back when fn returns an error or panics. Jobs that fn enqueues
// with [Client.EnqueueTx] (passing it fn's ctx) commit or vanish with the
// application's writes in tx; after the commit, InTx wakes the workers of
// their queues, so nobody has to remember [Client.Wake]:
//
//	err := client.InTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
//		if err := debit(ctx, tx, paymentID); err != nil {
//			return err
//		}
//		_, err := client.EnqueueTx(ctx, tx, ReceiptArgs{PaymentID: paymentID}, nil)
//		return err
//	})
func (c *Client[TTx]) InTx(ctx context.Context, fn func(ctx context.Context, tx TTx) error) error {
	w := &txWakes{c: c.engine, queues: map[string]struct{}{}}
	if err := c.txStore.InTx(context.WithValue(ctx, txWakesKey{}, w), fn); err != nil {
		return err
	}
	if qs := setNames(w.queues); len(qs) > 0 {
		c.Wake(qs...)
	}
	if len(w.inserts) > 0 {
		c.observeInserts(w.inserts)
	}
	return nil
}

// txWakesKey carries the queues an InTx transaction enqueued into.
type txWakesKey struct{}

// txWakes collects, for one InTx call of one client, the queues to wake
// once the transaction commits.
type txWakes struct {
	c      *engine
	mu     sync.Mutex
	queues map[string]struct{}
	// inserts are the transaction's enqueues, for the client's Observer.
	inserts []errandstore.JobInsertResult
}

func (w *txWakes) add(queues []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, q := range queues {
		w.queues[q] = struct{}{}
	}
}

// addJobs records jobs a transaction inserted (none a duplicate).
func (w *txWakes) addJobs(jobs []*errandtype.Job) {
	rs := make([]errandstore.JobInsertResult, len(jobs))
	for i, j := range jobs {
		rs[i].Job = j
	}
	w.addInserts(rs)
}

func (w *txWakes) addInserts(rs []errandstore.JobInsertResult) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.inserts = append(w.inserts, rs...)
}

// observeInserts tells the client's Observer of the jobs rs inserted and,
// when it is an AbsorbObserver, of the enqueues a debounce key folded.
func (c *engine) observeInserts(rs []errandstore.JobInsertResult) {
	if c.observer == nil {
		return
	}
	c.observer.JobsEnqueued(freshJobs(rs))
	if c.absorbObserver == nil {
		return
	}
	var folded []*errandtype.Job
	for _, r := range rs {
		if r.Absorbed {
			folded = append(folded, r.Job)
		}
	}
	if len(folded) > 0 {
		c.absorbObserver.JobsAbsorbed(folded)
	}
}

// freshJobs returns the jobs of rs that were inserted, not duplicates.
func freshJobs(rs []errandstore.JobInsertResult) []*errandtype.Job {
	out := make([]*errandtype.Job, 0, len(rs))
	for _, r := range rs {
		if !r.Duplicate {
			out = append(out, r.Job)
		}
	}
	return out
}

func (c *engine) enqueueResults(rs []errandstore.JobInsertResult) []EnqueueResult {
	out := make([]EnqueueResult, len(rs))
	for i, r := range rs {
		if c.codec != nil && r.Job != nil {
			c.openForReader(r.Job) // the caller sees what it enqueued, as Get shows it
		}
		out[i] = EnqueueResult{Job: r.Job, Duplicate: r.Duplicate, Absorbed: r.Absorbed}
	}
	return out
}

func (c *engine) insertParams(ctx context.Context, params []EnqueueParams) ([]*errandstore.JobInsertParams, error) {
	if len(params) == 0 {
		return nil, &errandtype.InputError{Field: "jobs", Message: "nothing to enqueue"}
	}
	out := make([]*errandstore.JobInsertParams, len(params))
	for i := range params {
		p, err := c.insertParam(ctx, &params[i])
		if err != nil {
			if len(params) > 1 {
				return nil, fmt.Errorf("job %d: %w", i, err)
			}
			return nil, err
		}
		out[i] = p
	}
	return out, nil
}

// CheckEnqueue reports what Enqueue would refuse in a job of args with
// opts, without a store: all that a client that declares no kinds refuses
// (a client that declares kinds also refuses a kind it does not know). A
// command line or a form can check its input with it before it opens, and
// so perhaps creates, a database.
func CheckEnqueue(args JobArgs, opts *EnqueueOpts) error {
	params, _ := takeEager([]EnqueueParams{{Args: args, Opts: opts}})
	_, err := checkingEngine().insertParam(context.Background(), &params[0])
	return err
}

// CheckEnqueueBatch is CheckEnqueue for EnqueueBatch: what it would refuse
// in params and opts, without a store.
func CheckEnqueueBatch(params []EnqueueParams, opts *BatchOpts) error {
	_, err := checkingEngine().batchParams(context.Background(), params, opts)
	return err
}

// CheckEnqueueWorkflow is CheckEnqueue for EnqueueWorkflow: what it would
// refuse in steps and opts, without a store.
func CheckEnqueueWorkflow(steps []WorkflowStep, opts *WorkflowOpts) error {
	_, err := checkingEngine().workflowParams(context.Background(), steps, opts)
	return err
}

// checkingEngine is the engine of a client that declares no kinds and has
// no store, for the Check functions: turning an enqueue's input into a
// store's params touches no store.
func checkingEngine() *engine { return &engine{maxAttempts: DefaultMaxAttempts} }

func (c *engine) insertParam(ctx context.Context, p *EnqueueParams) (*errandstore.JobInsertParams, error) {
	return c.ownInsertParam(ctx, p, "")
}

// ownInsertParam is insertParam for a job errand enqueues itself under id,
// in one of the shapes a caller may not give (see checkCallerJobID), in
// place of the id in p's options. With id empty the job is the caller's.
func (c *engine) ownInsertParam(ctx context.Context, p *EnqueueParams, id string) (*errandstore.JobInsertParams, error) {
	kind, err := c.checkKind(p.Args)
	if err != nil {
		return nil, err
	}
	o := p.Opts
	if o == nil {
		o = &EnqueueOpts{}
	}
	args, err := marshalArgs(p.Args)
	if err != nil {
		return nil, err
	}
	if args, err = c.sealArgs(args); err != nil {
		return nil, err
	}
	if err := errandstore.CheckFirstWins(o.FirstWins, o.ID, "job"); err != nil {
		return nil, err
	}
	meta, err := errandstore.CheckMetadata(o.Metadata)
	if err != nil {
		return nil, err
	}
	// The one place every enqueue passes, so that each job, a batch's, a
	// workflow's step template or a child, joins the enqueue's trace. A
	// caller's metadata at its limit keeps its room, and the job no trace.
	if traced := withTraceContext(ctx, meta); len(traced) <= errandstore.MaxMetadataBytes {
		meta = traced
	}
	if o.Debounce != nil && (o.Eager || id != "") {
		return nil, &errandtype.InputError{Field: "Debounce", Message: "folds a job into a pending one, so it cannot start at once (Eager) or be a job errand names (a child, an on-dead job); leave it out here"}
	}
	if o.Eager {
		return nil, &errandtype.InputError{Field: "Eager", Message: "starts a job enqueued alone with Enqueue or EnqueueMany, outside your transaction, a batch or a workflow; leave it out here"}
	}
	ip := &errandstore.JobInsertParams{
		ArgsChecked: true,
		CallerID:    id == "" && o.ID != "",
		FirstWins:   o.FirstWins,
		// Left to the defaults, they resolve per client: not compared.
		MaxAttemptsGiven: o.MaxAttempts != 0,
		HoldGiven:        o.OrderingOnDead != 0,
		ID:               o.ID,
		Queue:            o.Queue,
		Kind:             kind,
		Args:             args,
		ArgsVersion:      argsVersion(p.Args),
		Priority:         o.Priority,
		MaxAttempts:      o.MaxAttempts,
		BackoffBase:      o.BackoffBase,
		BackoffMax:       o.BackoffMax,
		RunAt:            o.RunAt,
		Delay:            o.Delay,
		MaxAge:           o.MaxAge,
		StartBy:          o.StartBy,
		UniqueKey:        o.UniqueKey,
		OrderingKey:      o.OrderingKey,
		FairnessKey:      o.FairnessKey,
		Tags:             o.Tags,
		Debounce:         o.Debounce.storeDebounce(),
		Metadata:         meta,
	}
	if err := c.applyKeys(ip, o); err != nil {
		return nil, err
	}
	if err := c.applyDefaults(ip, id); err != nil {
		return nil, err
	}
	if err := ip.Validate(); err != nil {
		return nil, err
	}
	if id != "" {
		// Made of a valid id, so valid, but it may be longer than
		// MaxIDBytes: an on-dead job's id is its job's and ".dead.N".
		ip.ID = id
	}
	ip.Checked = true
	return ip, nil
}

// checkKind returns the kind of args, checked against the client's kinds.
func (c *engine) checkKind(args JobArgs) (string, error) {
	if args == nil {
		return "", &errandtype.InputError{Field: "args", Message: "are nil; pass a value of an args type, which names the kind"}
	}
	kind := args.Kind()
	if err := errandstore.CheckName("kind", kind); err != nil {
		return "", err
	}
	if !c.allowUnknownKinds && len(c.kinds) > 0 && c.kinds[kind] == nil {
		return "", &errandtype.InputError{Field: "kind", Message: fmt.Sprintf("%q is not one of this client's kinds (%s); fix the name, declare the kind in Config.Kinds, or set Config.AllowUnknownKinds for a client that enqueues for other programs", kind, strings.Join(c.kindNames(), ", "))}
	}
	return kind, nil
}

// applyKeys sets ip's unique key and its ordering key's choice on a dead
// job from o.
func (c *engine) applyKeys(ip *errandstore.JobInsertParams, o *EnqueueOpts) error {
	if u := o.Unique; u != nil {
		if o.UniqueKey != "" {
			return &errandtype.InputError{Field: "unique_key", Message: "is set twice, as UniqueKey and as Unique.Key; keep Unique"}
		}
		if u.Key == "" {
			return &errandtype.InputError{Field: "unique_key", Message: "Unique is set without a Key; give the key"}
		}
		ip.UniqueKey, ip.UniqueScope, ip.UniqueWindow = u.Key, u.Scope, u.Window
	}
	if o.OrderingOnDead > OrderingHoldOnDead {
		return &errandtype.InputError{Field: "ordering_on_dead", Message: fmt.Sprintf("%s is not a choice; use OrderingReleaseOnDead or OrderingHoldOnDead", o.OrderingOnDead)}
	}
	if o.OrderingKey != "" {
		var kindChoice OrderingOnDead
		if k := c.kinds[ip.Kind]; k != nil {
			kindChoice = k.OrderingOnDead
		}
		ip.OrderingHold = o.OrderingOnDead.holds(kindChoice)
	}
	return nil
}

// applyDefaults gives ip an id (a new one for errand's own id, set by the
// caller once the rest is checked), the default queue and the kind's or
// client's attempts.
func (c *engine) applyDefaults(ip *errandstore.JobInsertParams, id string) error {
	if id != "" || ip.ID == "" {
		ip.ID = ids.NewJobID()
	} else if err := checkCallerJobID("id", ip.ID); err != nil {
		return err
	}
	if ip.Queue == "" {
		ip.Queue = DefaultQueue
	}
	if ip.MaxAttempts == 0 {
		ip.MaxAttempts = c.maxAttempts
		if k := c.kinds[ip.Kind]; k != nil && k.MaxAttempts > 0 {
			ip.MaxAttempts = k.MaxAttempts
		}
	}
	return nil
}

func marshalArgs(args JobArgs) (json.RawMessage, error) {
	var b []byte
	if raw, ok := args.(RawArgs); ok {
		b, _ = raw.MarshalJSON() // kept as given, once checked below
	} else {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false) // "<" stays "<": args are data, not HTML
		if err := enc.Encode(args); err != nil {
			return nil, &errandtype.InputError{Field: "args", Message: "cannot be encoded as JSON: " + err.Error()}
		}
		b = bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	}
	if !json.Valid(b) {
		return nil, &errandtype.InputError{Field: "args", Message: "is not valid JSON; pass an object such as {\"id\": 7}"}
	}
	if len(b) > errandstore.MaxArgsBytes {
		return nil, &errandtype.InputError{Field: "args", Message: fmt.Sprintf("is %d bytes; keep args under %d bytes and pass ids, not documents", len(b), errandstore.MaxArgsBytes)}
	}
	b, err := plainChecked("args", b, errandstore.MaxArgsBytes)
	if err != nil {
		return nil, err
	}
	return json.RawMessage(b), nil
}

// Get returns one job, or an error wrapping ErrNotFound.
func (c *Client[TTx]) Get(ctx context.Context, id string) (*errandtype.Job, error) {
	j, err := c.store.JobGet(ctx, &errandstore.JobGetParams{ID: id})
	if err != nil {
		return nil, fmt.Errorf("get job %s: %w", id, err)
	}
	c.openForReader(j)
	if j.State.Waiting() {
		h, err := c.breakerHolds(ctx)
		if err != nil {
			return nil, fmt.Errorf("get job %s: %w", id, err)
		}
		h.holdJobs(j)
	}
	return j, nil
}

// ListOpts filter and page a listing. Zero fields do not filter.
type ListOpts struct {
	// States keeps jobs in any of these states.
	States []errandtype.JobState
	// Queue and Kind keep jobs of that queue and kind.
	Queue string
	Kind  string
	// AfterSeq starts the listing after the job with this Seq: pass the
	// last Seq of a page to get the next one.
	AfterSeq int64
	// Limit bounds the page; zero means 100.
	Limit int
	// ArgsHas keeps jobs whose args hold this JSON object's fields:
	// {"user_id": 42} keeps jobs whose args have user_id 42. Values are
	// scalars or such objects, matched at their paths; arrays and empty
	// objects are refused. OutputHas does the same for the output a
	// handler recorded. See docs/search.md.
	ArgsHas, OutputHas json.RawMessage
	// Tags keeps jobs that have every one of these tags.
	Tags []string
	// Class keeps jobs whose last error has this class: "start_by" lists
	// the jobs that did not start by their start-by time.
	Class string
	// Absorbed keeps jobs that folded in later enqueues of their debounce
	// key (Job.Absorbed > 0).
	Absorbed bool
	// Aged keeps jobs whose priority aging lowered while they waited
	// (Job.BasePriority set).
	Aged bool
}

// List returns jobs matching opts (nil for all), in insertion order. To
// page, pass the Seq of the last job returned as AfterSeq.
func (c *Client[TTx]) List(ctx context.Context, opts *ListOpts) ([]*errandtype.Job, error) {
	if opts == nil {
		opts = &ListOpts{}
	}
	for _, s := range opts.States {
		if !s.Valid() {
			return nil, &errandtype.InputError{Field: "state", Message: fmt.Sprintf("unknown state %q: use one of %s", s, errandtype.StateNames())}
		}
	}
	if opts.Limit < 0 {
		return nil, &errandtype.InputError{Field: "limit", Message: "must be at least 1"}
	}
	// A filter no job could match is a mistake to report, not an empty
	// page: a queue or kind that breaks the naming rules never had a job.
	if opts.Queue != "" {
		if err := errandstore.CheckName("queue", opts.Queue); err != nil {
			return nil, err
		}
	}
	if opts.Kind != "" {
		if err := errandstore.CheckName("kind", opts.Kind); err != nil {
			return nil, err
		}
	}
	if c.codec != nil && (opts.ArgsHas != nil || opts.OutputHas != nil) {
		// Sealed values match nothing in the database: say so rather
		// than return an empty page.
		return nil, &errandtype.InputError{Field: "args_has", Message: "this client seals args and outputs (Config.Codec), so the database cannot search them; filter by kind, queue, state or tag"}
	}
	params := &errandstore.JobListParams{States: opts.States, Queue: opts.Queue, Kind: opts.Kind, AfterSeq: opts.AfterSeq, Limit: opts.Limit,
		ArgsHas: opts.ArgsHas, OutputHas: opts.OutputHas, Tags: opts.Tags, Class: opts.Class, Absorbed: opts.Absorbed, Aged: opts.Aged}
	if err := params.Validate(); err != nil {
		return nil, err
	}
	js, err := c.store.JobList(ctx, params)
	if err != nil {
		return nil, fmt.Errorf("list jobs: %w", err)
	}
	c.openForReader(js...)
	if slices.ContainsFunc(js, func(j *errandtype.Job) bool { return j.State.Waiting() }) {
		h, err := c.breakerHolds(ctx)
		if err != nil {
			return nil, fmt.Errorf("list jobs: %w", err)
		}
		h.holdJobs(js...)
	}
	return js, nil
}

// ReplayOpts record who replays a job and why, and optionally its
// corrected args.
type ReplayOpts struct {
	// Operator and Reason are required: they go to the audit.
	Operator string
	Reason   string
	// Args, when not nil, replaces the job's args (raw JSON) in the same
	// transaction as the replay: the fix-and-replay case, for a job that
	// died of bad input. It is checked as an enqueue checks args (valid
	// JSON, size, text every store keeps) and, when this client handles
	// the job's kind with [Handle], must decode into the kind's args type.
	// The audit record keeps the old args and the new. Corrected args also
	// clear the job's checkpoint: progress made over the old args says
	// nothing about the new ones.
	Args json.RawMessage
	// Restart clears the job's checkpoint (Job.Progress), so that the
	// replay starts from the beginning. Without it, and without Args, the
	// replay resumes from the last checkpoint, as a retry does: replaying a
	// cancelled or dead import goes on where it stopped.
	Restart bool
	// FromStep, when not nil, forks a durable handler's job from that step
	// (see [Step]): the steps before it keep their results, it and those
	// after it run again. It cannot be given with Restart or Args, which
	// clear every step. The audit records it.
	FromStep *int
}

// Replay starts a new delivery cycle for a dead or cancelled job, keeping
// its id, error history and, unless opts.Restart or opts.Args, its
// checkpoint, and records the operator and reason in the audit. Any other
// state returns a *StateError and writes nothing.
//
// A workflow's step or compensation replayed resumes its workflow (see
// [Client.EnqueueWorkflow]); corrected args keep the field "workflow"
// errand set in the old ones. A step of a workflow that has enqueued a
// compensation, or was rerun, returns a *[WorkflowCompensatedError] (also
// a *StateError) and writes nothing: rerun the workflow
// ([Client.RerunWorkflow]) once it has failed, replaying first the dead
// compensation that holds it, if any.
func (c *Client[TTx]) Replay(ctx context.Context, id string, opts *ReplayOpts) (*errandtype.Job, error) {
	if opts == nil {
		opts = &ReplayOpts{}
	}
	if err := errandstore.CheckOperatorAction(opts.Operator, opts.Reason, "replaying the job"); err != nil {
		return nil, err
	}
	old, err := c.store.JobGet(ctx, &errandstore.JobGetParams{ID: id})
	if err != nil {
		return nil, fmt.Errorf("replay job %s: %w", id, err)
	}
	var args json.RawMessage
	var version int
	if opts.Args != nil {
		if args, version, err = c.checkReplayArgs(old.Kind, opts.Args); err != nil {
			return nil, err
		}
		if args, err = keepWorkflowField(old, args); err != nil {
			return nil, err
		}
		if args, err = c.sealArgs(args); err != nil {
			return nil, err
		}
	}
	j, err := c.store.JobReplay(ctx, &errandstore.JobReplayParams{ID: id, Operator: opts.Operator, Reason: opts.Reason, Args: args, ArgsVersion: version,
		ClearProgress: opts.Restart || args != nil, FromStep: opts.FromStep})
	if err != nil {
		c.explainReplayRefusal(ctx, err)
		return nil, fmt.Errorf("replay job %s: %w", id, err)
	}
	c.afterWorkflowJob(ctx, j)
	c.openForReader(j)
	return j, nil
}

// checkReplayArgs validates corrected args for a job of kind as an enqueue
// validates args, and returns them compacted.
//
// It also returns the args version to record with them: the version the
// kind's handler decodes, which the args were checked as (0, keep the
// job's, when this client has no typed handler for the kind).
func (c *engine) checkReplayArgs(kind string, raw json.RawMessage) (json.RawMessage, int, error) {
	if len(raw) == 0 || !json.Valid(raw) {
		return nil, 0, &errandtype.InputError{Field: "args", Message: "is not valid JSON; pass an object such as {\"id\": 7}"}
	}
	b := errandstore.CompactJSON(raw)
	if len(b) > errandstore.MaxArgsBytes {
		return nil, 0, &errandtype.InputError{Field: "args", Message: fmt.Sprintf("is %d bytes; keep args under %d bytes and pass ids, not documents", len(b), errandstore.MaxArgsBytes)}
	}
	b, err := plainChecked("args", b, errandstore.MaxArgsBytes)
	if err != nil {
		return nil, 0, err
	}
	version := 0
	if k := c.kinds[kind]; k != nil {
		if ck, ok := k.handler.(argsChecker); ok {
			v, err := ck.checkArgs(b)
			if err != nil {
				return nil, 0, &errandtype.InputError{Field: "args", Message: fmt.Sprintf("do not decode as %s args: %v; fix the JSON", kind, err)}
			}
			version = v
		}
	}
	return b, version, nil
}

// ReplayAudit returns the replays of one job, oldest first.
func (c *Client[TTx]) ReplayAudit(ctx context.Context, id string) ([]errandtype.ReplayRecord, error) {
	rs, err := c.store.JobReplayAudit(ctx, &errandstore.JobReplayAuditParams{JobID: id})
	if err != nil {
		return nil, fmt.Errorf("replay audit of job %s: %w", id, err)
	}
	return rs, nil
}

// CancelOpts record who cancels a job and why. Both are required.
type CancelOpts struct {
	Operator string
	Reason   string
}

// Cancel cancels a job and records the operator and reason in the audit. A
// queued or retrying job is cancelled at once. A running job gets a cancel
// request (the returned job is still running, with CancelRequestedAt set):
// its worker cancels the handler's context with cause [ErrJobCancelled],
// within a fraction of a second when the store is a [CancelListener] and at
// the next lease renewal otherwise, and the attempt ends cancelled (see
// [Job.CancelPending]). Cancelling a job whose request is pending returns it
// unchanged. A finished job returns a *StateError and writes nothing; a
// missing operator or reason is an *InputError.
func (c *Client[TTx]) Cancel(ctx context.Context, id string, opts *CancelOpts) (*errandtype.Job, error) {
	if opts == nil {
		opts = &CancelOpts{}
	}
	if err := errandstore.CheckOperatorAction(opts.Operator, opts.Reason, "cancelling the job"); err != nil {
		return nil, err
	}
	j, err := c.store.JobCancel(ctx, &errandstore.JobCancelParams{ID: id, Operator: opts.Operator, Reason: opts.Reason})
	if err != nil {
		return nil, fmt.Errorf("cancel job %s: %w", id, err)
	}
	c.afterMemberFinished(ctx, j)
	c.afterWorkflowJob(ctx, j)
	if j.State == errandtype.StateCancelled {
		c.watches.finished(j.ID, nil)
		c.afterChild(ctx, j, j.State)
	}
	c.openForReader(j)
	return j, nil
}

// Stats summarises every queue. Each queue's UnhandledKinds names the
// kinds of its waiting jobs that no live worker in the registry handles
// (see [KindHandled]): jobs that wait until one does, forever for a
// misspelt kind. BreakerHeldKinds names those an open circuit breaker holds
// back (see [BreakerHolds]), which are not in OldestReadyAgeSeconds.
func (c *Client[TTx]) Stats(ctx context.Context) ([]errandtype.QueueStats, error) {
	s, err := c.store.QueueStats(ctx, &errandstore.QueueStatsParams{})
	if err != nil {
		return nil, fmt.Errorf("queue stats: %w", err)
	}
	ws, err := c.store.WorkerList(ctx, &errandstore.WorkerListParams{})
	if err != nil {
		return nil, fmt.Errorf("queue stats: %w", err)
	}
	h, err := c.breakerHolds(ctx)
	if err != nil {
		return nil, fmt.Errorf("queue stats: %w", err)
	}
	for i := range s {
		s[i].UnhandledKinds = unhandledKinds(&s[i], ws)
	}
	h.holdStats(s)
	ps, err := c.Pauses(ctx)
	if err != nil {
		return nil, fmt.Errorf("queue stats: %w", err)
	}
	pauseStats(s, ps)
	return s, nil
}

// kind returns the declared kind, or nil.
func (c *engine) kind(name string) *kind { return c.kinds[name] }

// policyFor returns the retry policy of a kind.
func (c *engine) policyFor(kind string) *RetryPolicy {
	if k := c.kinds[kind]; k != nil && k.RetryPolicy != nil {
		return k.RetryPolicy
	}
	return c.retry
}

// kindNames lists the declared kinds, sorted.
func (c *engine) kindNames() []string {
	names := make([]string, 0, len(c.kinds))
	for name := range c.kinds {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// handlerKinds lists the kinds that have handlers.
func (c *engine) handlerKinds() []string {
	var ks []string
	for name, k := range c.kinds {
		if k.handler != nil {
			ks = append(ks, name)
		}
	}
	return ks
}

// unhandledKinds lists the kinds waiting in q that no worker of workers
// handles (see [KindHandled]), with how many jobs of each wait, by kind.
func unhandledKinds(q *errandtype.QueueStats, workers []*errandtype.WorkerRecord) []errandtype.KindCount {
	out := []errandtype.KindCount{}
	for kind, n := range q.WaitingByKind {
		if n > 0 && !KindHandled(workers, q.Queue, kind) {
			out = append(out, errandtype.KindCount{Kind: kind, Waiting: n})
		}
	}
	slices.SortFunc(out, func(a, b errandtype.KindCount) int { return strings.Compare(a.Kind, b.Kind) })
	return out
}

// templateOf returns the template of ip, a job's checked insert parameters.
func templateOf(ip *errandstore.JobInsertParams) *errandstore.JobTemplate {
	return &errandstore.JobTemplate{
		Kind: ip.Kind, Queue: ip.Queue, Args: ip.Args, ArgsVersion: ip.ArgsVersion,
		Priority: ip.Priority, MaxAttempts: ip.MaxAttempts,
		BackoffBaseUS: ip.BackoffBase.Microseconds(), BackoffMaxUS: ip.BackoffMax.Microseconds(),
		MaxAgeUS: ip.MaxAge.Microseconds(), DelayUS: ip.Delay.Microseconds(),
		OrderingKey: ip.OrderingKey, OrderingHold: ip.OrderingHold, FairnessKey: ip.FairnessKey, Tags: ip.Tags,
		Metadata: ip.Metadata,
	}
}

// subscribers fans events out to every subscription of a client.
type subscribers struct {
	mu      sync.Mutex
	subs    map[*subscription]struct{}
	dropped atomic.Int64
}

// subscription is one Subscribe call's channel and the results it wants.
type subscription struct {
	ch      chan Event
	results []Result // empty: every result
}

// maxOutsideQueues bounds how many queues' fair modes a client remembers;
// past it the memory is cleared, and a queue with fairness keys costs one
// plain claim to be found fair again.
const maxOutsideQueues = 1000

// outsideClaims is what a client keeps for the claims made outside a
// Worker.
type outsideClaims struct {
	gateOnce sync.Once
	gate     *breakerGate // nil: no kind names a dependency (or no store keeps breakers)

	mu     sync.Mutex
	queues map[string]*flow.Claimer

	adaptive flow.Collectors // the adaptive limits' collectors of remote workers; see remote_limits.go
}

// setNames returns the names in set, sorted.
func setNames(set map[string]struct{}) []string {
	names := make([]string, 0, len(set))
	for n := range set {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// queuesOf lists the distinct queues of ps.
func queuesOf(ps []*errandstore.JobInsertParams) []string {
	set := make(map[string]struct{}, 1)
	for _, p := range ps {
		set[p.Queue] = struct{}{}
	}
	return setNames(set)
}

// checkBreakers validates Config.Breakers.
func checkBreakers(m map[string]*errandtype.BreakerPolicy) error {
	for dep, p := range m {
		if err := errandstore.CheckName("Breakers key", dep); err != nil {
			return err
		}
		if p == nil {
			return &errandtype.InputError{Field: "Breakers." + dep, Message: "is nil; give a BreakerPolicy (its zero value takes the defaults)"}
		}
		if err := p.Validate("Breakers." + dep); err != nil {
			return err
		}
	}
	return nil
}
