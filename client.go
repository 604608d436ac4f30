package errand

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/errandhq/errand/internal/ids"
)

// DefaultQueue is the queue of a job enqueued without one.
const DefaultQueue = "default"

// Config configures a Client. The zero value is a producer with the default
// retry budget.
type Config struct {
	// Kinds declares each kind's handler and policies. A producer-only
	// client may declare kinds without handlers to give their jobs a
	// kind-wide maximum of attempts.
	Kinds []Kind
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
}

// Kind declares how jobs of one kind run. Its settings sit next to its
// handler so a reader sees the whole policy in one place.
type Kind struct {
	// Name is the kind, as jobs carry it.
	Name string
	// Handler runs the jobs. Nil for a kind this client only enqueues.
	Handler Handler
	// MaxAttempts is the attempt budget of new jobs of this kind unless the
	// job sets its own. Zero means the Config's.
	MaxAttempts int
	// RetryPolicy is this kind's backoff. Nil means the Config's.
	RetryPolicy *RetryPolicy
	// Timeout bounds one attempt: past it the handler's context is
	// cancelled and the attempt fails with class "timeout". Zero means no
	// limit beyond the lease, which heartbeats keep alive.
	Timeout time.Duration
}

// Handler runs jobs of one kind. A nil error acknowledges the job; any other
// error is a failure, classified with [Permanent], [RetryAfter], [WithClass]
// or [Snooze], or retryable with class "error" when not.
//
// The context is cancelled when the attempt's timeout passes, when the
// worker loses the lease, or when a draining worker runs out of grace.
type Handler interface {
	Work(ctx context.Context, job *Job) error
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, job *Job) error

// Work calls f.
func (f HandlerFunc) Work(ctx context.Context, job *Job) error { return f(ctx, job) }

// Client enqueues, inspects and runs jobs through a Store. It is safe for
// concurrent use. When its store is a [Notifier], the client announces new
// jobs to other processes in the background: call [Client.Close] when done
// with it, before closing the store.
type Client struct {
	store       Store
	kinds       map[string]*Kind
	retry       *RetryPolicy
	maxAttempts int
	logger      *slog.Logger
	// allowUnknownKinds: enqueue kinds not in kinds (Config.AllowUnknownKinds).
	allowUnknownKinds bool
	clock             TimeSource // Config.Clock, or the system clock

	wakeMu sync.Mutex
	wakes  map[string]chan struct{} // per queue, closed by a wake-up; see wake.go

	notifier *queueNotifier // nil unless the store is a Notifier
}

// NewClient returns a client over store. It returns an error naming the
// field to fix when cfg is invalid.
func NewClient(store Store, cfg Config) (*Client, error) {
	if store == nil {
		return nil, &InputError{Field: "store", Message: "is nil; open one with sqlite.Open"}
	}
	c := &Client{
		store:       store,
		kinds:       make(map[string]*Kind, len(cfg.Kinds)),
		retry:       cfg.RetryPolicy,
		maxAttempts: cfg.MaxAttempts,
		logger:      cfg.Logger,

		allowUnknownKinds: cfg.AllowUnknownKinds,
		clock:             cfg.Clock,
	}
	if c.clock == nil {
		c.clock = systemTime{}
	}
	if c.retry == nil {
		c.retry = &RetryPolicy{}
	}
	if c.maxAttempts == 0 {
		c.maxAttempts = DefaultMaxAttempts
	}
	if c.maxAttempts < 0 || c.maxAttempts > MaxAttemptsLimit {
		return nil, &InputError{Field: "MaxAttempts", Message: fmt.Sprintf("must be 1 to %d (or 0 for the default)", MaxAttemptsLimit)}
	}
	if c.logger == nil {
		c.logger = slog.New(slog.DiscardHandler)
	}
	if n, ok := store.(Notifier); ok {
		c.notifier = newQueueNotifier(c, n)
	}
	for i := range cfg.Kinds {
		k := cfg.Kinds[i]
		if err := checkName("kind", k.Name); err != nil {
			return nil, err
		}
		if _, dup := c.kinds[k.Name]; dup {
			return nil, &InputError{Field: "Kinds", Message: fmt.Sprintf("kind %q is declared twice", k.Name)}
		}
		if k.MaxAttempts < 0 || k.MaxAttempts > MaxAttemptsLimit {
			return nil, &InputError{Field: "Kinds." + k.Name + ".MaxAttempts", Message: fmt.Sprintf("must be 1 to %d (or 0 for the default)", MaxAttemptsLimit)}
		}
		if k.Timeout < 0 {
			return nil, &InputError{Field: "Kinds." + k.Name + ".Timeout", Message: "must not be negative"}
		}
		c.kinds[k.Name] = &k
	}
	return c, nil
}

// Store returns the client's store.
func (c *Client) Store() Store { return c.store }

// EnqueueOpts are the optional settings of one job. The zero value enqueues
// into DefaultQueue, available now, with the kind's attempt budget.
type EnqueueOpts struct {
	// ID, when set, is the job's id: a duplicate returns the existing job.
	// Use the id of the business object the job serves (a payment id) so a
	// retried request cannot enqueue twice.
	ID string
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
	// UniqueKey, when set, is unique across all jobs, whatever their state:
	// a second enqueue with the same key returns the first job. Put a
	// period in the key ("digest:2026-11-29") for once-per-period jobs.
	UniqueKey string
	// OrderingKey groups jobs that must run one at a time, in the order
	// they were enqueued (a customer id, say): a job of the key waits while
	// another is running, or while an earlier one is queued or waiting out a
	// retry. A job that ends dead or cancelled no longer holds the rest
	// back.
	OrderingKey string
	// ArgsVersion is the schema version of the args. Default 1.
	ArgsVersion int
	// Tags are free-form labels for operators.
	Tags []string
}

// EnqueueParams describes one job for EnqueueMany.
type EnqueueParams struct {
	Kind string
	// Args is marshalled to JSON; a json.RawMessage or []byte is used as is
	// after validation. Nil means {}.
	Args any
	Opts EnqueueOpts
}

// EnqueueResult is the outcome of enqueueing one job.
type EnqueueResult = JobInsertResult

// Enqueue inserts one job in a transaction of its own.
func (c *Client) Enqueue(ctx context.Context, kind string, args any, opts *EnqueueOpts) (*EnqueueResult, error) {
	rs, err := c.EnqueueMany(ctx, []EnqueueParams{enqueueParams(kind, args, opts)})
	if err != nil {
		return nil, err
	}
	return &rs[0], nil
}

// EnqueueTx inserts one job inside tx, the caller's transaction: the job
// exists if and only if tx commits. On SQLite tx is a *sql.Tx from the
// database sqlite.Open returned. Call [Client.Wake] after tx commits, so
// that idle workers start the job at once rather than at their next poll.
func (c *Client) EnqueueTx(ctx context.Context, tx any, kind string, args any, opts *EnqueueOpts) (*EnqueueResult, error) {
	rs, err := c.EnqueueManyTx(ctx, tx, []EnqueueParams{enqueueParams(kind, args, opts)})
	if err != nil {
		return nil, err
	}
	return &rs[0], nil
}

// EnqueueMany inserts jobs in one transaction: all new jobs commit or none
// does. Results are in the order of params.
func (c *Client) EnqueueMany(ctx context.Context, params []EnqueueParams) ([]EnqueueResult, error) {
	ps, err := c.insertParams(params)
	if err != nil {
		return nil, err
	}
	rs, err := c.store.JobInsertMany(ctx, ps)
	if err != nil {
		return nil, fmt.Errorf("enqueue: %w", err)
	}
	var fresh []*JobInsertParams // a duplicate is no news to a worker
	for i, r := range rs {
		if !r.Duplicate {
			fresh = append(fresh, ps[i])
		}
	}
	if len(fresh) > 0 {
		c.Wake(queuesOf(fresh)...)
	}
	return rs, nil
}

// EnqueueManyTx inserts jobs inside the caller's transaction. Call
// [Client.Wake] after the transaction commits, so that idle workers start
// the jobs at once rather than at their next poll.
func (c *Client) EnqueueManyTx(ctx context.Context, tx any, params []EnqueueParams) ([]EnqueueResult, error) {
	ps, err := c.insertParams(params)
	if err != nil {
		return nil, err
	}
	rs, err := c.store.JobInsertManyTx(ctx, tx, ps)
	if err != nil {
		return nil, fmt.Errorf("enqueue: %w", err)
	}
	if c.notifier != nil {
		c.notifier.noteTx(queuesOf(ps))
	}
	return rs, nil
}

func enqueueParams(kind string, args any, opts *EnqueueOpts) EnqueueParams {
	p := EnqueueParams{Kind: kind, Args: args}
	if opts != nil {
		p.Opts = *opts
	}
	return p
}

func (c *Client) insertParams(params []EnqueueParams) ([]*JobInsertParams, error) {
	if len(params) == 0 {
		return nil, &InputError{Field: "jobs", Message: "nothing to enqueue"}
	}
	out := make([]*JobInsertParams, len(params))
	for i := range params {
		p, err := c.insertParam(&params[i])
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

func (c *Client) insertParam(p *EnqueueParams) (*JobInsertParams, error) {
	o := &p.Opts
	if err := checkName("kind", p.Kind); err != nil {
		return nil, err
	}
	if !c.allowUnknownKinds && len(c.kinds) > 0 && c.kinds[p.Kind] == nil {
		return nil, &InputError{Field: "kind", Message: fmt.Sprintf("%q is not one of this client's kinds (%s); fix the name, declare the kind in Config.Kinds, or set Config.AllowUnknownKinds for a client that enqueues for other programs", p.Kind, strings.Join(c.kindNames(), ", "))}
	}
	args, err := marshalArgs(p.Args)
	if err != nil {
		return nil, err
	}
	ip := &JobInsertParams{
		ID:          o.ID,
		Queue:       o.Queue,
		Kind:        p.Kind,
		Args:        args,
		ArgsVersion: o.ArgsVersion,
		Priority:    o.Priority,
		MaxAttempts: o.MaxAttempts,
		BackoffBase: o.BackoffBase,
		BackoffMax:  o.BackoffMax,
		RunAt:       o.RunAt,
		Delay:       o.Delay,
		MaxAge:      o.MaxAge,
		UniqueKey:   o.UniqueKey,
		OrderingKey: o.OrderingKey,
		Tags:        o.Tags,
	}
	if ip.ID == "" {
		ip.ID = ids.NewJobID()
	}
	if ip.Queue == "" {
		ip.Queue = DefaultQueue
	}
	if ip.ArgsVersion == 0 {
		ip.ArgsVersion = 1
	}
	if ip.MaxAttempts == 0 {
		ip.MaxAttempts = c.maxAttempts
		if k := c.kinds[p.Kind]; k != nil && k.MaxAttempts > 0 {
			ip.MaxAttempts = k.MaxAttempts
		}
	}
	if err := ip.Validate(); err != nil {
		return nil, err
	}
	return ip, nil
}

// maxArgsBytes bounds a job's args. Jobs should carry ids, not documents.
const maxArgsBytes = 1 << 20

func marshalArgs(args any) (json.RawMessage, error) {
	var b []byte
	switch a := args.(type) {
	case nil:
		b = []byte("{}")
	case json.RawMessage:
		b = a
	case []byte:
		b = a
	default:
		var err error
		if b, err = json.Marshal(args); err != nil {
			return nil, &InputError{Field: "args", Message: "cannot be encoded as JSON: " + err.Error()}
		}
	}
	if !json.Valid(b) {
		return nil, &InputError{Field: "args", Message: "is not valid JSON; pass an object such as {\"id\": 7}"}
	}
	if len(b) > maxArgsBytes {
		return nil, &InputError{Field: "args", Message: fmt.Sprintf("is %d bytes; keep args under %d bytes and pass ids, not documents", len(b), maxArgsBytes)}
	}
	return json.RawMessage(b), nil
}

// Get returns one job, or an error wrapping ErrNotFound.
func (c *Client) Get(ctx context.Context, id string) (*Job, error) {
	j, err := c.store.JobGet(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("get job %s: %w", id, err)
	}
	return j, nil
}

// List returns jobs matching params, in insertion order. To page, pass the
// Seq of the last job returned as AfterSeq.
func (c *Client) List(ctx context.Context, params *JobListParams) ([]*Job, error) {
	if params == nil {
		params = &JobListParams{}
	}
	for _, s := range params.States {
		if !s.Valid() {
			return nil, &InputError{Field: "state", Message: fmt.Sprintf("unknown state %q: use one of queued, running, retrying, succeeded, dead, cancelled", s)}
		}
	}
	if params.Limit < 0 {
		return nil, &InputError{Field: "limit", Message: "must be at least 1"}
	}
	js, err := c.store.JobList(ctx, params)
	if err != nil {
		return nil, fmt.Errorf("list jobs: %w", err)
	}
	return js, nil
}

// ReplayOpts record who replays a job and why.
type ReplayOpts struct {
	Operator string
	Reason   string
}

// Replay starts a new delivery cycle for a dead or cancelled job, keeping
// its id and error history, and records the operator and reason in the
// replay audit. Any other state returns a *StateError and writes nothing.
func (c *Client) Replay(ctx context.Context, id string, opts ReplayOpts) (*Job, error) {
	if strings.TrimSpace(opts.Operator) == "" {
		return nil, &InputError{Field: "operator", Message: "is empty; say who is replaying the job"}
	}
	if strings.TrimSpace(opts.Reason) == "" {
		return nil, &InputError{Field: "reason", Message: "is empty; say why the job is being replayed"}
	}
	if err := checkIdentifier("operator", opts.Operator, MaxIDBytes); err != nil {
		return nil, err
	}
	if err := checkReason(opts.Reason); err != nil {
		return nil, err
	}
	j, err := c.store.JobReplay(ctx, &JobReplayParams{ID: id, Operator: opts.Operator, Reason: opts.Reason})
	if err != nil {
		return nil, fmt.Errorf("replay job %s: %w", id, err)
	}
	return j, nil
}

// ReplayAudit returns the replays of one job, oldest first.
func (c *Client) ReplayAudit(ctx context.Context, id string) ([]ReplayRecord, error) {
	rs, err := c.store.JobReplayAudit(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("replay audit of job %s: %w", id, err)
	}
	return rs, nil
}

// Cancel cancels a queued or retrying job. Any other state returns a
// *StateError and writes nothing.
func (c *Client) Cancel(ctx context.Context, id string) (*Job, error) {
	j, err := c.store.JobCancel(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("cancel job %s: %w", id, err)
	}
	return j, nil
}

// Stats summarises every queue. Each queue's UnhandledKinds names the
// kinds of its waiting jobs that no live worker in the registry handles
// (see [KindHandled]): jobs that wait until one does, forever for a
// misspelt kind.
func (c *Client) Stats(ctx context.Context) ([]QueueStats, error) {
	s, err := c.store.QueueStats(ctx)
	if err != nil {
		return nil, fmt.Errorf("queue stats: %w", err)
	}
	ws, err := c.store.WorkerList(ctx, &WorkerListParams{})
	if err != nil {
		return nil, fmt.Errorf("queue stats: %w", err)
	}
	for i := range s {
		s[i].UnhandledKinds = unhandledKinds(&s[i], ws)
	}
	return s, nil
}

// kind returns the declared kind, or nil.
func (c *Client) kind(name string) *Kind { return c.kinds[name] }

// policyFor returns the retry policy of a kind.
func (c *Client) policyFor(kind string) *RetryPolicy {
	if k := c.kinds[kind]; k != nil && k.RetryPolicy != nil {
		return k.RetryPolicy
	}
	return c.retry
}

// kindNames lists the declared kinds, sorted.
func (c *Client) kindNames() []string {
	names := make([]string, 0, len(c.kinds))
	for name := range c.kinds {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// handlerKinds lists the kinds that have handlers.
func (c *Client) handlerKinds() []string {
	var ks []string
	for name, k := range c.kinds {
		if k.Handler != nil {
			ks = append(ks, name)
		}
	}
	return ks
}
