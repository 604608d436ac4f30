package errand

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
	"github.com/errandhq/errand/internal/clock"
	"github.com/errandhq/errand/internal/leasekeeper"
)

// errTimeout is the cancellation cause when an attempt passes its kind's
// timeout.
var errTimeout = errors.New("attempt timed out")

// attemptKey carries the running attempt in a handler's context.
type attemptKey struct{}

type attemptInfo struct {
	store     errandstore.Store
	workflows errandstore.WorkflowStore // nil: the store keeps no workflows
	engine    *engine
	job       *errandtype.Job
	steps     atomic.Pointer[steps] // made by the attempt's first step (see Step)
}

// SetProgress records a checkpoint for the job running in ctx, fenced by its
// lease: v, as JSON. Every later attempt finds it in Job.Progress and
// resumes from there (see [Checkpoint]); operators see it in the job's
// record. It returns an error wrapping ErrLeaseLost when the worker no
// longer owns the job: stop, since another attempt may be running it.
func SetProgress(ctx context.Context, v any) error {
	a, ok := ctx.Value(attemptKey{}).(*attemptInfo)
	if !ok {
		return errors.New("set progress: no errand job in this context")
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("set progress: %w", err)
	}
	rewrite, err := errandstore.CheckProgress(b)
	if err != nil {
		return fmt.Errorf("set progress: %w", err)
	}
	if rewrite {
		b = plainJSON(b)
	}
	if b, err = a.engine.seal("progress", b); err != nil {
		return fmt.Errorf("set progress: %w", err)
	}
	if len(b) > errandstore.MaxArgsBytes {
		return fmt.Errorf("set progress: %w", &errandtype.InputError{Field: "progress", Message: fmt.Sprintf("is %d bytes once sealed; keep a checkpoint under %d bytes", len(b), errandstore.MaxArgsBytes)})
	}
	if err := a.store.JobSetProgress(ctx, &errandstore.JobSetProgressParams{ID: a.job.ID, LeaseToken: *a.job.LeaseToken, Progress: b}); err != nil {
		return fmt.Errorf("set progress: %w", err)
	}
	return nil
}

// attempt is one run of a handler on a claimed job.
type attempt struct {
	job      *errandtype.Job
	err      error  // what the handler returned, or the recovered panic
	stack    string // stack of a recovered panic
	leaseErr error  // ErrLeaseLost when a heartbeat found the lease gone
	timedOut bool   // the kind's timeout cancelled the handler
	// throttled: the service turned the attempt away, which the kind's
	// adaptive rate limit answers, not its circuit breaker.
	throttled bool
	stopped   bool // the worker's own context ended (shutdown)
	// cancelled: an operator cancelled the job while the handler ran.
	cancelled bool
	// abandoned: the handler ignored the cancellation past its kind's
	// timeout; the attempt ended without it, and handlerDone is closed
	// when it finally returns.
	abandoned bool
	// writeFailed: a write of the outcome failed, and may have committed
	// all the same (see writeUntilLeaseEnds).
	writeFailed bool
	handlerDone chan struct{}
	lease       time.Duration // the claim's lease
	renewed     time.Time     // when the lease was last renewed (or claimed)
	took        time.Duration // wall time of the handler

	// Kept here, so that an attempt costs one allocation for them: what
	// the handler's context carries, and the lease keeper's record.
	info attemptInfo
	held leasekeeper.Lease

	// run is the attempt's errand.run span, ended once its outcome is
	// recorded; nil with tracing off (see tracing.go). A pointer, not the
	// span itself, so that the attempt keeps its allocation size class.
	run *runSpan
}

// runAttempt runs the handler for a claimed job while leases renews its
// lease (with those of the other attempts it holds) every third of lease,
// until the handler returns. A heartbeat that finds the lease lost cancels
// the handler's context.
// claimSent is when the claim was sent: the lease is timed from then, never
// later than the store's own start of it. claim is the claim's span, for
// the attempt's span to link to (nil: none; see startRun).
func (c *engine) runAttempt(parent context.Context, leases *leasekeeper.Keeper, job *errandtype.Job, lease time.Duration, claimSent time.Time, fresh bool, claim *trace.SpanContext) *attempt {
	a := &attempt{job: job, lease: lease, renewed: claimSent}
	if c.observer != nil {
		c.observer.JobStarted(job)
	}
	ctx, cancel := context.WithCancelCause(parent)
	defer cancel(nil)
	ctx, a.run = c.startRun(ctx, job, claim)
	a.info = attemptInfo{store: c.store, workflows: c.caps.workflows, engine: c, job: job}
	if fresh {
		a.info.steps.Store(&steps{loaded: true}) // nothing to read
	}
	ctx = context.WithValue(ctx, attemptKey{}, &a.info)

	k := c.kind(job.Kind)
	if k == nil || k.handler == nil {
		a.err = WithClass(ClassUnknownKind, fmt.Errorf("no handler for kind %q", job.Kind))
		return a
	}
	if err := c.openJob(job); err != nil {
		a.err = err // given back, never run on sealed bytes (see outcome)
		return a
	}
	hctx := ctx
	stopTimer := func() bool { return false }
	if k.Timeout > 0 {
		var stop context.CancelFunc
		hctx, stop = clock.WithTimeout(ctx, c.clock, k.Timeout, errTimeout)
		defer stop()
		stopTimer = func() bool { stop(); return context.Cause(hctx) == errTimeout }
	}

	// Read before the lease is held, so that a test that waits for its
	// heartbeats to be scheduled on its fake clock, and then moves it,
	// moves it after.
	start := c.clock.Now()
	// Heartbeats stop the moment the handler returns, even in the middle of
	// a store call, so a slow store never delays the outcome.
	a.held = leasekeeper.Lease{Job: job, Renewed: a.renewed, Lose: cancel}
	leases.Hold(&a.held)

	if k.Timeout > 0 {
		a.err, a.stack = c.callHandlerUntilCancelled(ctx, hctx, k, job, a)
	} else {
		a.err, a.stack = callHandler(hctx, k.handler, job)
	}
	a.took = c.clock.Now().Sub(start)
	a.handlerReturned()
	if halt := a.info.halted(); halt != nil {
		a.err, a.stack = halt, "" // a sleep, or steps that no longer match
	}
	timedOut := stopTimer()
	a.renewed = leases.Release(&a.held)

	switch {
	case a.err == nil:
		// Success is recorded whatever a heartbeat presumed: the write is
		// fenced, so the store decides whether this worker still owns it.
		// A handler that finished its work despite a cancel request
		// succeeded: the record says what happened.
	case errors.Is(context.Cause(ctx), errandtype.ErrLeaseLost):
		a.leaseErr = errandtype.ErrLeaseLost
	case errors.Is(context.Cause(ctx), ErrJobCancelled):
		a.cancelled = true
	case timedOut:
		a.timedOut = true
	case parent.Err() != nil && (errors.Is(a.err, context.Canceled) || errors.Is(a.err, context.DeadlineExceeded)):
		// The worker is stopping and the handler gave up because of it.
		// A handler that failed on its own account is recorded as such.
		a.stopped = true
	}
	return a
}

// callHandlerUntilCancelled runs the handler of kind k, which has a
// Timeout, and returns what it returned, as callHandler does. When its job
// is cancelled (ctx's cause is ErrJobCancelled) and the handler is still
// running at its timeout, having ignored the cancellation, it stops waiting:
// it returns ErrJobCancelled, marks the attempt abandoned, and leaves
// a.handlerDone to be closed when the handler returns. The attempt then
// ends cancelled and its lease with it, so whatever the handler still
// writes under the lease is refused; Go cannot stop the goroutine, so the
// worker keeps its slot until it returns (see attempt.waitHandler).
func (c *engine) callHandlerUntilCancelled(ctx, hctx context.Context, k *kind, job *errandtype.Job, a *attempt) (error, string) {
	var (
		err   error
		stack string
		done  = make(chan struct{})
	)
	go func() {
		defer close(done)
		err, stack = callHandler(hctx, k.handler, job)
	}()
	timer := c.clock.NewTimer(k.Timeout)
	defer timer.Stop()
	expired, ctxDone := timer.C(), ctx.Done()
	for {
		select {
		case <-done:
			return err, stack
		case <-expired:
			expired = nil
		case <-ctxDone:
			ctxDone = nil
		}
		if expired == nil && errors.Is(context.Cause(ctx), ErrJobCancelled) {
			c.logger.Error("handler ignored its job's cancellation past its timeout; the attempt ends cancelled without it, and its slot stays taken until it returns",
				"job_id", job.ID, "kind", job.Kind, "attempt", job.Attempt, "timeout", k.Timeout.String())
			a.abandoned, a.handlerDone = true, done
			return fmt.Errorf("handler still running at its %s timeout: %w", k.Timeout, ErrJobCancelled), ""
		}
	}
}

// waitHandler returns when the attempt's handler has returned: at once,
// unless the attempt was abandoned at its timeout after a cancel.
func (a *attempt) waitHandler() {
	if a.handlerDone != nil {
		<-a.handlerDone
	}
}

// callHandler runs h, turning a panic into an error with its stack.
func callHandler(ctx context.Context, h Handler, job *errandtype.Job) (err error, stack string) {
	defer func() {
		if r := recover(); r != nil {
			err = &JobError{class: ClassPanic, err: fmt.Errorf("panic: %v", r)}
			stack = string(debug.Stack())
		}
	}()
	err = h.Work(ctx, job)
	if p, ok := err.(*panicked); ok {
		return p.err, p.stack // a many handler's panic, on another job's goroutine
	}
	return err, ""
}
