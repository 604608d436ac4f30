package errand

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
)

// JobArgs is a job's arguments: a type that names the kind of the jobs that
// carry it, so that a kind and its args cannot disagree. Its value is stored
// as JSON.
//
//	type ReceiptArgs struct {
//		PaymentID string `json:"payment_id"`
//	}
//
//	func (ReceiptArgs) Kind() string { return "send_receipt" }
type JobArgs interface {
	Kind() string
}

// VersionedArgs is JobArgs whose JSON has a schema version other than 1.
// Jobs carry the version they were enqueued with; a handler decodes versions
// up to its type's, upgrading older ones (see [ArgsUpgrader]) and
// dead-lettering newer ones with class "unknown_version" instead of guessing
// at their meaning, as during a rolling deploy.
type VersionedArgs interface {
	JobArgs
	ArgsVersion() int
}

// ArgsUpgrader is JobArgs that can read the JSON of its own older versions:
// UpgradeArgs returns args of version from rewritten as the current version.
// Without it, older args decode into the current type as they are.
type ArgsUpgrader interface {
	JobArgs
	UpgradeArgs(from int, args json.RawMessage) (json.RawMessage, error)
}

// RawArgs are args given as JSON with their kind named at run time: for
// producers that relay jobs they do not define (a command line, an HTTP
// API, another language's worker). Prefer a JobArgs type of your own.
type RawArgs struct {
	// KindName is the kind of the job.
	KindName string
	// JSON is the args document. Nil means {}.
	JSON json.RawMessage
	// Version is the args version. Zero means 1.
	Version int
}

// Kind implements JobArgs.
func (r RawArgs) Kind() string { return r.KindName }

// ArgsVersion implements VersionedArgs.
func (r RawArgs) ArgsVersion() int {
	if r.Version == 0 {
		return 1
	}
	return r.Version
}

// MarshalJSON returns the args document as it is.
func (r RawArgs) MarshalJSON() ([]byte, error) {
	if r.JSON == nil {
		return []byte("{}"), nil
	}
	return r.JSON, nil
}

// argsVersion is the version args declare, 1 unless they are VersionedArgs.
func argsVersion(args JobArgs) int {
	if v, ok := args.(VersionedArgs); ok {
		return v.ArgsVersion()
	}
	return 1
}

// KindOpts are the policies of one kind. The zero value takes the client's.
type KindOpts struct {
	// MaxAttempts is the attempt budget of new jobs of this kind unless a
	// job sets its own. Zero means Config.MaxAttempts.
	MaxAttempts int
	// RetryPolicy is this kind's backoff. Nil means Config.RetryPolicy.
	RetryPolicy *RetryPolicy
	// Timeout bounds one attempt: past it the handler's context is
	// cancelled and the attempt fails with class "timeout". Zero means no
	// limit beyond the lease, which heartbeats keep alive.
	Timeout time.Duration
	// OrderingOnDead is what a dead job of this kind with an ordering key
	// does to the jobs behind it, unless the job says otherwise
	// ([EnqueueOpts.OrderingOnDead]): release them (the default) or hold
	// them until it is replayed or cancelled. It is fixed at enqueue.
	OrderingOnDead OrderingOnDead
	// Dependency names what this kind's jobs call ("smtp", "payments-api"),
	// which several kinds may share: its circuit breaker stops workers
	// claiming them while it is down (see [BreakerPolicy]), cluster-wide,
	// without using their attempts; so it stops [Client.WorkOne] and the
	// claims of remote workers through this client ([Client.Claim]). A
	// kind only remote workers run may be declared with no handler to
	// name its dependency. Empty: no breaker.
	Dependency string
	// OnDead, when set, names the job to enqueue each time a job of this
	// kind is dead-lettered, by any path: a compensation or a
	// notification. The hook job's id is [DeadHookJobID], so one death
	// enqueues one. Only a Worker with this kind's handler enqueues it;
	// see [OnDeadFunc].
	OnDead OnDeadFunc
	// DeleteOnSuccess deletes a job of this kind in the write that records
	// its success, instead of keeping it as succeeded until retention
	// prunes it: the way Graphile Worker, Faktory and Sidekiq treat a
	// finished job, and the cheapest acknowledgment errand has (on
	// PostgreSQL a delete writes no index entry, where marking the job
	// succeeded writes four). Once deleted, a job is gone from lists,
	// stats, insights and replay, and its id may be enqueued again, as
	// after retention; so do not set it where a repeated enqueue of the
	// same id must stay a duplicate after the job ran (OnDead hook kinds,
	// batch callbacks). Jobs that are read after they succeed are kept
	// whatever this says: members of a batch or a workflow, and jobs
	// whose unique key holds while succeeded. Failed, dead and cancelled
	// jobs are always kept. It applies to jobs a Worker or WorkOne runs;
	// remote workers' acknowledgments keep the job.
	DeleteOnSuccess bool
}

// Handler runs jobs of one kind whatever their args: what [Handle] builds
// from a typed function, and what [Kinds.HandleRaw] takes for kinds known
// only at run time. A nil error acknowledges the job; any other error is a
// failure, classified with [Permanent], [RetryAfter], [WithClass] or
// [Snooze], or retryable with class "error" when not.
//
// The context is cancelled when the attempt's timeout passes, when the
// worker loses the lease, or when a draining worker runs out of grace.
type Handler interface {
	Work(ctx context.Context, job *errandtype.Job) error
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, job *errandtype.Job) error

// Work calls f.
func (f HandlerFunc) Work(ctx context.Context, job *errandtype.Job) error { return f(ctx, job) }

// Kinds is the set of kinds a client knows, each with its policies and, for
// a worker, its handler. Build it with [NewKinds], [Handle], [Declare] and
// [Kinds.HandleRaw]; a mistake (a kind declared twice, a bad name) is
// returned by [NewClient].
type Kinds struct {
	m   map[string]*kind
	err error // the first mistake, reported by NewClient
}

// kind is one entry of Kinds.
type kind struct {
	name    string
	handler Handler // nil for a kind only enqueued
	KindOpts
}

// NewKinds returns an empty set of kinds.
func NewKinds() *Kinds { return &Kinds{m: map[string]*kind{}} }

// Handle registers fn as the handler of T's kind, with its policies (nil
// for the client's). The worker decodes each job's args into a T, after
// checking its version against T's (see [VersionedArgs]); args that do not
// decode dead-letter the job with class "invalid_args".
func Handle[T JobArgs](ks *Kinds, fn func(ctx context.Context, job *errandtype.Job, args T) error, opts *KindOpts) {
	var zero T
	ks.add(zero.Kind(), &typedHandler[T]{fn: fn}, opts)
}

// Declare declares T's kind without a handler, so that a client that only
// enqueues it gives its jobs the kind's policies (its attempt budget).
func Declare[T JobArgs](ks *Kinds, opts *KindOpts) {
	var zero T
	ks.add(zero.Kind(), nil, opts)
}

// HandleRaw registers h for the kind named kind: for handlers whose kinds
// are known only at run time, such as commands a worker runs for a kind. A
// nil h declares the kind without a handler, as Declare does. Prefer
// [Handle].
func (ks *Kinds) HandleRaw(kind string, h Handler, opts *KindOpts) {
	ks.add(kind, h, opts)
}

func (ks *Kinds) add(name string, h Handler, opts *KindOpts) {
	if err := errandstore.CheckName("kind", name); err != nil {
		ks.fail(err)
		return
	}
	k := &kind{name: name, handler: h}
	if opts != nil {
		k.KindOpts = *opts
	}
	field := "Kinds." + name
	switch {
	case ks.m[name] != nil:
		ks.fail(&errandtype.InputError{Field: "Kinds", Message: fmt.Sprintf("kind %q is declared twice", name)})
	case k.MaxAttempts < 0 || k.MaxAttempts > errandtype.MaxAttemptsLimit:
		ks.fail(&errandtype.InputError{Field: field + ".MaxAttempts", Message: fmt.Sprintf("must be 1 to %d (or 0 for the client's)", errandtype.MaxAttemptsLimit)})
	case k.Timeout < 0:
		ks.fail(&errandtype.InputError{Field: field + ".Timeout", Message: "must not be negative"})
	case k.OrderingOnDead > OrderingHoldOnDead:
		ks.fail(&errandtype.InputError{Field: field + ".OrderingOnDead", Message: fmt.Sprintf("%s is not a choice; use OrderingReleaseOnDead or OrderingHoldOnDead", k.OrderingOnDead)})
	case k.Dependency != "" && errandstore.CheckName(field+".Dependency", k.Dependency) != nil:
		ks.fail(errandstore.CheckName(field+".Dependency", k.Dependency))
	case k.RetryPolicy.check(field+".RetryPolicy") != nil:
		ks.fail(k.RetryPolicy.check(field + ".RetryPolicy"))
	default:
		ks.m[name] = k
	}
}

func (ks *Kinds) fail(err error) {
	if ks.err == nil {
		ks.err = err
	}
}

// names lists the kinds, sorted.
func (ks *Kinds) names() []string {
	var names []string
	for name := range ks.m {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// Classes of failures in decoding a job's args. Both are permanent: running
// the job again cannot change its args.
const (
	// ClassUnknownVersion: the job's args_version is newer than the
	// handler knows, as when a newer producer enqueued it during a rolling
	// deploy. Replay it once a worker that knows the version is running.
	ClassUnknownVersion = "unknown_version"
	// ClassInvalidArgs: the args did not decode into the handler's type, or
	// an upgrade from an older version failed.
	ClassInvalidArgs = "invalid_args"
)

// typedHandler decodes a job's args into T and calls fn.
type typedHandler[T JobArgs] struct {
	fn func(ctx context.Context, job *errandtype.Job, args T) error
}

// argsChecker is a handler that can tell whether raw args would decode.
type argsChecker interface {
	// checkArgs decodes raw as args of the handler's current version and
	// returns that version.
	checkArgs(raw json.RawMessage) (int, error)
}

// checkArgs decodes raw, args of the handler's current version, into a T.
func (h *typedHandler[T]) checkArgs(raw json.RawMessage) (int, error) { return checkArgsAs[T](raw) }

// checkArgsAs decodes raw, args of T's current version, into a T, and
// returns that version.
func checkArgsAs[T JobArgs](raw json.RawMessage) (int, error) {
	var args T
	return argsVersion(args), json.Unmarshal(raw, &args)
}

func (h *typedHandler[T]) Work(ctx context.Context, job *errandtype.Job) error {
	args, err := decodeArgs[T](job)
	if err != nil {
		return err
	}
	return h.fn(ctx, job, args)
}

// decodeArgs decodes job's args into a T, after checking their version
// against T's and upgrading older ones.
func decodeArgs[T JobArgs](job *errandtype.Job) (T, error) {
	var args T
	version := argsVersion(args)
	raw := job.Args
	switch {
	case job.ArgsVersion > version:
		return args, Permanent(WithClass(ClassUnknownVersion, fmt.Errorf(
			"args_version %d is newer than this handler knows (%d); run a worker that knows it, then replay the job",
			job.ArgsVersion, version)))
	case job.ArgsVersion < version:
		if up, ok := any(args).(ArgsUpgrader); ok {
			b, err := up.UpgradeArgs(job.ArgsVersion, raw)
			if err != nil {
				return args, Permanent(WithClass(ClassInvalidArgs, fmt.Errorf("upgrade args from version %d to %d: %w", job.ArgsVersion, version, err)))
			}
			raw = b
		}
	}
	if err := json.Unmarshal(raw, &args); err != nil {
		return args, Permanent(WithClass(ClassInvalidArgs, fmt.Errorf("decode args (version %d) into %T: %w", job.ArgsVersion, args, err)))
	}
	return args, nil
}

// OnDeadFunc returns the job to enqueue because job was dead-lettered, or
// nil args for none. job is the dead job as it was claimed or read (its
// last error may not be on it yet when a worker found it dead itself: use
// its id to read it again if the hook needs the history). The hook job's
// id is [DeadHookJobID] whatever opts say; other options apply. The
// hook's kind must be one the client may enqueue: declare it (with
// [Declare], or a handler) in the worker's Kinds.
type OnDeadFunc func(job *errandtype.Job) (JobArgs, *EnqueueOpts)
