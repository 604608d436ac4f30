package errand

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strconv"
	"time"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
)

// errTimeout is the cancellation cause when an attempt passes its kind's
// timeout.
var errTimeout = errors.New("attempt timed out")

// attemptKey carries the running attempt in a handler's context.
type attemptKey struct{}

type attemptInfo struct {
	store errandstore.Store
	job   *errandtype.Job
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
	stopped  bool   // the worker's own context ended (shutdown)
	// cancelled: an operator cancelled the job while the handler ran.
	cancelled bool
	// abandoned: the handler ignored the cancellation past its kind's
	// timeout; the attempt ended without it, and handlerDone is closed
	// when it finally returns.
	abandoned   bool
	handlerDone chan struct{}
	lease       time.Duration // the claim's lease
	renewed     time.Time     // when the lease was last renewed (or claimed)
	took        time.Duration // wall time of the handler
	// writeFailed: a write of the outcome failed, and may have committed
	// all the same (see writeUntilLeaseEnds).
	writeFailed bool

	// Kept here, so that an attempt costs one allocation for them: what
	// the handler's context carries, and the lease keeper's record.
	info attemptInfo
	held heldLease
}

// runAttempt runs the handler for a claimed job while leases renews its
// lease (with those of the other attempts it holds) every third of lease,
// until the handler returns. A heartbeat that finds the lease lost cancels
// the handler's context.
// claimSent is when the claim was sent: the lease is timed from then, never
// later than the store's own start of it.
func (c *engine) runAttempt(parent context.Context, leases *leaseKeeper, job *errandtype.Job, lease time.Duration, claimSent time.Time) *attempt {
	a := &attempt{job: job, lease: lease, renewed: claimSent}
	if c.observer != nil {
		c.observer.JobStarted(job)
	}
	ctx, cancel := context.WithCancelCause(parent)
	defer cancel(nil)
	a.info = attemptInfo{store: c.store, job: job}
	ctx = context.WithValue(ctx, attemptKey{}, &a.info)

	k := c.kind(job.Kind)
	if k == nil || k.handler == nil {
		a.err = WithClass(ClassUnknownKind, fmt.Errorf("no handler for kind %q", job.Kind))
		return a
	}
	hctx := ctx
	stopTimer := func() bool { return false }
	if k.Timeout > 0 {
		var stop context.CancelFunc
		hctx, stop = withTimeout(ctx, c.clock, k.Timeout, errTimeout)
		defer stop()
		stopTimer = func() bool { stop(); return context.Cause(hctx) == errTimeout }
	}

	// Read before the lease is held, so that a test that waits for its
	// heartbeats to be scheduled on its fake clock, and then moves it,
	// moves it after.
	start := c.clock.Now()
	// Heartbeats stop the moment the handler returns, even in the middle of
	// a store call, so a slow store never delays the outcome.
	a.held = heldLease{job: job, renewed: a.renewed, lose: cancel}
	leases.hold(&a.held)

	if k.Timeout > 0 {
		a.err, a.stack = c.callHandlerUntilCancelled(ctx, hctx, k, job, a)
	} else {
		a.err, a.stack = callHandler(hctx, k.handler, job)
	}
	a.took = c.clock.Now().Sub(start)
	timedOut := stopTimer()
	a.renewed = leases.release(&a.held)

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
	return h.Work(ctx, job), ""
}

// outcome turns a finished attempt into the outcome to record, applying the
// job's retry policy.
func (c *engine) outcome(a *attempt) *errandstore.JobOutcome {
	job := a.job
	o := &errandstore.JobOutcome{JobLease: errandstore.JobLease{ID: job.ID, LeaseToken: *job.LeaseToken}}
	if a.err == nil {
		o.Kind = errandstore.OutcomeSucceeded
		return o
	}
	if a.stopped {
		// The worker is shutting down, not the job failing: give the job
		// back without counting the attempt.
		o.Kind = errandstore.OutcomeInterrupted
		o.Error = &errandtype.AttemptError{Attempt: job.Attempt, Class: ClassInterrupted,
			Message: errandstore.CleanText("worker stopped before the attempt finished: "+a.err.Error(), errandstore.MaxMessageBytes)}
		return o
	}
	if a.cancelled {
		// An operator's cancel, whatever the handler returned on its way
		// out: the job ends cancelled, fenced like every outcome.
		msg := CancelledByRequestMessage
		if a.abandoned {
			msg += fmt.Sprintf("; the handler ignored the cancellation and was abandoned at its %s timeout", c.kind(job.Kind).Timeout)
		}
		o.Kind = errandstore.OutcomeCancelled
		o.Error = &errandtype.AttemptError{Attempt: job.Attempt, Class: errandstore.ClassCancelled, Message: msg}
		return o
	}
	je := classified(a.err)
	if a.timedOut {
		je = &JobError{class: ClassTimeout, err: fmt.Errorf("attempt exceeded its %s timeout", c.kind(job.Kind).Timeout)}
		if a.err != nil {
			je.err = fmt.Errorf("attempt exceeded its %s timeout: %w", c.kind(job.Kind).Timeout, a.err)
		}
	}
	if je.snooze > 0 {
		o.Kind = errandstore.OutcomeSnooze
		o.Delay = je.snooze
		return o
	}
	if !errandstore.ValidClass(je.class) {
		je.class = ClassError // a zero JobError names no class
	}
	msg := je.class
	if je.err != nil {
		msg = je.err.Error()
	}
	// Messages and stacks come from handlers and commands: clean them into
	// text that every store keeps, so that no failure is lost for a byte.
	o.Error = &errandtype.AttemptError{Attempt: job.Attempt, Class: je.class,
		Message: errandstore.CleanText(msg, errandstore.MaxMessageBytes), Stack: errandstore.CleanText(a.stack, MaxStackBytes)}
	switch {
	case je.permanent, job.Attempt >= job.MaxAttempts:
		o.Kind = errandstore.OutcomeDead
	case je.retryAfter > 0:
		o.Kind = errandstore.OutcomeRetry
		o.Delay = je.retryAfter
	default:
		o.Kind = errandstore.OutcomeRetry
		o.Delay = c.policyFor(job.Kind).delayFor(job)
	}
	return o
}

// WorkResult reports what one claimed job did.
type WorkResult struct {
	// Result is what became of the attempt.
	Result Result `json:"result"`
	// JobID is the claimed job, or null when idle.
	JobID *string `json:"job_id"`
	// Attempt is the claimed attempt, or 0 when idle.
	Attempt int `json:"attempt"`
	// Kind is the job's kind.
	Kind string `json:"kind,omitempty"`
	// Class is the failure class when the attempt failed.
	Class string `json:"class,omitempty"`
	// Error is the failure message when the attempt failed.
	Error string `json:"error,omitempty"`
	// AvailableAt is when a retried or snoozed job runs next.
	AvailableAt *time.Time `json:"available_at,omitempty"`
	// Duration is how long the handler ran.
	Duration time.Duration `json:"-"`
}

// Result is what became of one claim: the state its outcome moved the job
// to, or why nothing was recorded.
type Result string

const (
	// ResultIdle: there was nothing to claim.
	ResultIdle Result = "idle"
	// ResultSucceeded: the handler returned nil; the job succeeded.
	ResultSucceeded Result = "succeeded"
	// ResultRetrying: the attempt failed and the job waits out its backoff.
	ResultRetrying Result = "retrying"
	// ResultDead: the attempt failed for good; the job is dead.
	ResultDead Result = "dead"
	// ResultSnoozed: the handler snoozed; the job is queued again, the
	// attempt not counted.
	ResultSnoozed Result = "snoozed"
	// ResultLeaseLost: the worker lost the job's lease; nothing was
	// recorded, and the job is another worker's now.
	ResultLeaseLost Result = "lease_lost"
	// ResultInterrupted: a stopping worker gave the job back, queued and
	// available at once, the attempt not counted.
	ResultInterrupted Result = "interrupted"
	// ResultCancelled: an operator cancelled the job while it ran; the
	// attempt ended and the job is cancelled.
	ResultCancelled Result = "cancelled"
)

// writeUntilLeaseEnds writes an outcome, retrying a failed write (a dropped
// connection, a locked database) with backoff for as long as the lease may
// still be live. Retrying is safe because the write is fenced: once the lease
// is gone the store answers ErrLeaseLost instead. Giving up early would let
// the lease expire on an attempt that finished, and on a final attempt turn a
// success into a dead job.
//
// A failed write may have committed all the same (the connection dropped
// after the commit, before the answer): its retry then finds the lease
// ended, by this very outcome. So when a retry answers ErrLeaseLost, the
// job is read once more, and an outcome found recorded as this attempt's
// (see outcomeLanded) is reported as recorded, not as a lost lease.
func (c *engine) writeUntilLeaseEnds(ctx context.Context, a *attempt, o *errandstore.JobOutcome, write outcomeWriter) (errandstore.OutcomeResult, error) {
	backoff := 50 * time.Millisecond
	failures := 0
	for {
		r, err := write(ctx, o, a.renewed.Add(a.lease))
		if err == nil && a.writeFailed && errors.Is(r.Err, errandtype.ErrLeaseLost) {
			return c.recordedBefore(ctx, a, o, r), nil
		}
		if err == nil && failures > 0 {
			c.logger.Info("outcome recorded after failed writes", "job_id", a.job.ID, "outcome", string(o.Kind), "failed_writes", failures)
		}
		if err == nil || errors.Is(err, errAbandoned) || errors.Is(err, errandtype.ErrInvalid) {
			return r, err
		}
		a.writeFailed = true
		failures++
		left := a.lease - c.clock.Now().Sub(a.renewed)
		if left <= 0 {
			return r, err
		}
		// The first failure is a warning; the retries that follow it,
		// every 50ms to 2s while the database is away, say nothing new.
		level := slog.LevelDebug
		if failures == 1 {
			level = slog.LevelWarn
		}
		c.logger.Log(ctx, level, "record outcome failed; retrying while the lease lasts", "job_id", a.job.ID,
			"outcome", string(o.Kind), "lease_left", left.Round(time.Millisecond).String(), "failed_writes", failures, "err", err)
		sleep(c.clock, min(backoff, left))
		backoff = min(2*backoff, 2*time.Second)
	}
}

// recordedBefore is the result of an outcome whose retry found the lease
// lost, lost, after an earlier write of it failed: the job as recorded
// when that write committed after all, lost otherwise.
func (c *engine) recordedBefore(ctx context.Context, a *attempt, o *errandstore.JobOutcome, lost errandstore.OutcomeResult) errandstore.OutcomeResult {
	job, err := c.store.JobGet(ctx, &errandstore.JobGetParams{ID: a.job.ID})
	if err != nil {
		c.logger.Warn("could not read the job to learn whether its outcome was recorded; reporting the lease lost",
			"job_id", a.job.ID, "err", err)
		return lost
	}
	if !outcomeLanded(job, a.job, o) {
		return lost
	}
	c.logger.Info("outcome recorded by a write whose answer was lost", "job_id", a.job.ID, "outcome", string(o.Kind))
	return errandstore.OutcomeResult{State: job.State, AvailableAt: job.AvailableAt, Kind: job.Kind, BatchID: job.BatchID, WorkflowID: job.WorkflowID}
}

// outcomeLanded reports whether job, read after claimed's lease was found
// ended, holds outcome o as claimed's attempt recorded it. An outcome that
// did not land leaves the job running under claimed's lease until the lease
// expires; what ends it then (a sweep for the expired lease, or its
// deadline) appends an error of its own. So the job holds o when its
// attempt is claimed's (one less for a snooze, which gives the attempt
// back), its state is o's (or cancelled, for an outcome a cancel request
// overrides), and, for an outcome that appends an error, the last error is
// o's. A job that has moved on since (claimed again, replayed) is not
// recognised, and the lease is reported lost.
func outcomeLanded(job, claimed *errandtype.Job, o *errandstore.JobOutcome) bool {
	attempt := claimed.Attempt
	if !o.Kind.CountsAttempt() {
		attempt--
	}
	if job.Attempt != attempt {
		return false
	}
	cancelled := job.State == errandtype.StateCancelled && o.Kind.YieldsToCancel() && job.CancelRequestedAt != nil
	if job.State != o.Kind.State() && !cancelled {
		return false
	}
	if !o.Kind.AppendsError() {
		return true
	}
	if len(job.Errors) == 0 {
		return false
	}
	e := job.Errors[len(job.Errors)-1]
	return e.Replay == job.Replays && e.Attempt == o.Error.Attempt && e.Class == o.Error.Class && e.Message == o.Error.Message
}

// outcomeWriter records one outcome, giving up at until (when the lease
// ends, on the engine's clock); a Worker batches them. The deadline is
// passed rather than set on ctx so that a writer that does not wait (a
// batcher with room) sets no timer for it.
type outcomeWriter func(ctx context.Context, o *errandstore.JobOutcome, until time.Time) (errandstore.OutcomeResult, error)

// writeOutcomeUntil is writeOutcome giving up at until: the outcomeWriter
// of an attempt run outside a Worker.
func (c *engine) writeOutcomeUntil(ctx context.Context, o *errandstore.JobOutcome, until time.Time) (errandstore.OutcomeResult, error) {
	ctx, cancel := withDeadline(ctx, c.clock, until, nil)
	defer cancel()
	return c.writeOutcome(ctx, o)
}

// writeOutcome records one outcome in a transaction of its own.
func (c *engine) writeOutcome(ctx context.Context, o *errandstore.JobOutcome) (errandstore.OutcomeResult, error) {
	rs, err := c.store.JobRecordOutcomes(ctx, &errandstore.JobRecordOutcomesParams{Outcomes: []*errandstore.JobOutcome{o}})
	if err != nil {
		return errandstore.OutcomeResult{}, err
	}
	return rs[0], nil
}

// record writes an attempt's outcome with write (nil: one transaction per
// outcome) and builds its result. A lost lease writes nothing.
func (c *engine) record(ctx context.Context, a *attempt, write outcomeWriter) (*WorkResult, error) {
	job := a.job
	id := job.ID
	res, o := c.startRecord(a)
	if o == nil {
		c.logOutcome(job, res)
		return res, nil
	}
	if write == nil {
		write = c.writeOutcomeUntil
	}
	r, err := c.writeUntilLeaseEnds(context.WithoutCancel(ctx), a, o, write)
	if errors.Is(err, errandtype.ErrInvalid) && o.Error != nil {
		// The store refused a value of the outcome (its text, say). That is
		// a bug in the value, not an outage: retrying it would fail until
		// the lease ran out and lose the outcome. Record it once more with
		// its text spelled in ASCII, so the class and the message survive.
		c.logger.Error("store refused the outcome's text; recording it in ASCII", "job_id", id, "err", err)
		plain := *o.Error
		plain.Message = errandstore.CleanText(strconv.QuoteToASCII(o.Error.Message), errandstore.MaxMessageBytes)
		plain.Stack = errandstore.CleanText(strconv.QuoteToASCII(o.Error.Stack), MaxStackBytes)
		o.Error = &plain
		res.Error = plain.Message
		r, err = c.writeUntilLeaseEnds(context.WithoutCancel(ctx), a, o, write)
	}
	if err != nil {
		return nil, fmt.Errorf("record outcome of job %s: %w", id, err)
	}
	c.endRecord(ctx, a, o, res, r)
	return res, nil
}

// startRecord begins recording a finished attempt: its result so far, and
// the outcome to write, nil when the lease was lost and nothing is to be
// written.
func (c *engine) startRecord(a *attempt) (*WorkResult, *errandstore.JobOutcome) {
	job := a.job
	res := &WorkResult{JobID: &job.ID, Attempt: job.Attempt, Kind: job.Kind, Duration: a.took}
	if a.leaseErr != nil {
		res.Result = ResultLeaseLost
		return res, nil
	}
	o := c.outcome(a)
	if o.Error != nil {
		res.Class, res.Error = o.Error.Class, o.Error.Message
	}
	return res, o
}

// endRecord completes res with what writing o found, r, and tells the
// attempt's subscribers and observer.
func (c *engine) endRecord(ctx context.Context, a *attempt, o *errandstore.JobOutcome, res *WorkResult, r errandstore.OutcomeResult) {
	job := a.job
	if r.Err != nil {
		res.Result = ResultLeaseLost
		c.logger.Warn("lease lost", "job_id", job.ID, "kind", job.Kind, "attempt", job.Attempt, "outcome", string(o.Kind))
		c.logOutcome(job, res)
		return
	}
	res.Result = resultOfState(r.State, o.Kind)
	if r.State == errandtype.StateRetrying || r.State == errandtype.StateQueued {
		at := r.AvailableAt
		res.AvailableAt = &at
	}
	c.logOutcome(job, res)
	c.afterOutcome(ctx, job, res) // on-dead hooks and batches: see ondead.go
}

// logOutcome logs an attempt's result and tells subscribers.
func (c *engine) logOutcome(job *errandtype.Job, r *WorkResult) {
	if c.observer != nil {
		c.observer.JobFinished(job, r)
	}
	c.publish(job, r)
	level := slog.LevelInfo
	if r.Result != ResultSucceeded && r.Result != ResultSnoozed {
		level = slog.LevelWarn
	}
	// Asked first, so that a logger that drops the line (the default
	// discards every line) costs no formatting per job.
	if !c.logger.Enabled(context.Background(), level) {
		return
	}
	attrs := []any{"job_id", *r.JobID, "kind", r.Kind, "attempt", r.Attempt, "duration", r.Duration.Round(time.Microsecond).String()}
	if r.Class != "" {
		attrs = append(attrs, "class", r.Class, "error", r.Error)
	}
	c.logger.Log(context.Background(), level, "job "+string(r.Result), attrs...)
}
