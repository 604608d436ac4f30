package errand

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"time"
)

// errTimeout is the cancellation cause when an attempt passes its kind's
// timeout.
var errTimeout = errors.New("attempt timed out")

// attemptKey carries the running attempt in a handler's context.
type attemptKey struct{}

type attemptInfo struct {
	store Store
	job   *Job
}

// SetProgress records a checkpoint for the job running in ctx, fenced by its
// lease. A later attempt finds it in Job.Progress and can resume from there.
// It returns ErrLeaseLost when the worker no longer owns the job.
func SetProgress(ctx context.Context, v any) error {
	a, ok := ctx.Value(attemptKey{}).(*attemptInfo)
	if !ok {
		return errors.New("set progress: no errand job in this context")
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("set progress: %w", err)
	}
	if err := a.store.JobSetProgress(ctx, a.job.ID, *a.job.LeaseToken, b); err != nil {
		return fmt.Errorf("set progress: %w", err)
	}
	return nil
}

// attempt is one run of a handler on a claimed job.
type attempt struct {
	job      *Job
	err      error         // what the handler returned, or the recovered panic
	stack    string        // stack of a recovered panic
	leaseErr error         // ErrLeaseLost when a heartbeat found the lease gone
	timedOut bool          // the kind's timeout cancelled the handler
	stopped  bool          // the worker's own context ended (shutdown)
	took     time.Duration // wall time of the handler
}

// runAttempt runs the handler for a claimed job, renewing its lease every
// third of lease until the handler returns. A heartbeat that finds the lease
// lost cancels the handler's context.
func (c *Client) runAttempt(parent context.Context, job *Job, lease time.Duration) *attempt {
	a := &attempt{job: job}
	ctx, cancel := context.WithCancelCause(parent)
	defer cancel(nil)
	ctx = context.WithValue(ctx, attemptKey{}, &attemptInfo{store: c.store, job: job})

	k := c.kind(job.Kind)
	if k == nil || k.Handler == nil {
		a.err = WithClass(ClassUnknownKind, fmt.Errorf("no handler for kind %q", job.Kind))
		return a
	}
	hctx := ctx
	if k.Timeout > 0 {
		var stop context.CancelFunc
		hctx, stop = context.WithTimeoutCause(ctx, k.Timeout, errTimeout)
		defer stop()
	}

	var wg sync.WaitGroup
	hbDone := make(chan struct{})
	wg.Go(func() {
		if err := c.heartbeat(ctx, job, lease, hbDone); err != nil {
			cancel(err)
		}
	})

	start := time.Now()
	a.err, a.stack = callHandler(hctx, k.Handler, job)
	a.took = time.Since(start)
	close(hbDone)
	wg.Wait()

	if errors.Is(context.Cause(ctx), ErrLeaseLost) {
		a.leaseErr = ErrLeaseLost
	} else if context.Cause(hctx) == errTimeout {
		a.timedOut = true
	} else if a.err != nil && parent.Err() != nil {
		a.stopped = true
	}
	return a
}

// callHandler runs h, turning a panic into an error with its stack.
func callHandler(ctx context.Context, h Handler, job *Job) (err error, stack string) {
	defer func() {
		if r := recover(); r != nil {
			err = &JobError{Class: ClassPanic, Err: fmt.Errorf("panic: %v", r)}
			stack = string(debug.Stack())
		}
	}()
	return h.Work(ctx, job), ""
}

// heartbeat renews the job's lease every third of lease until done closes.
// It returns ErrLeaseLost when the store says the lease is gone, or when no
// renewal has succeeded for a whole lease (the store is unreachable, so the
// lease must be presumed expired).
func (c *Client) heartbeat(ctx context.Context, job *Job, lease time.Duration, done <-chan struct{}) error {
	interval := lease / 3
	if interval <= 0 {
		interval = time.Millisecond
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	renewed := time.Now()
	for {
		select {
		case <-done:
			return nil
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		rs, err := c.store.JobHeartbeatMany(ctx, &JobHeartbeatParams{
			Leases: []JobLease{{ID: job.ID, LeaseToken: *job.LeaseToken}},
			Lease:  lease,
		})
		switch {
		case err == nil && rs[0].Err == nil:
			renewed = time.Now()
		case err == nil:
			c.logger.Warn("lease lost", "job_id", job.ID, "kind", job.Kind, "attempt", job.Attempt)
			return ErrLeaseLost
		default:
			c.logger.Warn("heartbeat failed", "job_id", job.ID, "err", err)
			if time.Since(renewed) >= lease {
				c.logger.Warn("lease lost", "job_id", job.ID, "kind", job.Kind, "attempt", job.Attempt, "reason", "no renewal for a whole lease")
				return ErrLeaseLost
			}
		}
	}
}

// outcome turns a finished attempt into the outcome to record, applying the
// job's retry policy.
func (c *Client) outcome(a *attempt) *JobOutcome {
	job := a.job
	o := &JobOutcome{JobLease: JobLease{ID: job.ID, LeaseToken: *job.LeaseToken}}
	if a.err == nil && !a.timedOut {
		o.Kind = OutcomeSucceeded
		return o
	}
	if a.stopped {
		// The worker is shutting down, not the job failing: give the job
		// back without counting the attempt.
		o.Kind = OutcomeInterrupted
		o.Error = &AttemptError{Attempt: job.Attempt, Class: ClassInterrupted,
			Message: "worker stopped before the attempt finished: " + a.err.Error()}
		return o
	}
	je := classified(a.err)
	if a.timedOut {
		je = &JobError{Class: ClassTimeout, Err: fmt.Errorf("attempt exceeded its %s timeout", c.kind(job.Kind).Timeout)}
		if a.err != nil {
			je.Err = fmt.Errorf("attempt exceeded its %s timeout: %w", c.kind(job.Kind).Timeout, a.err)
		}
	}
	if je.Snooze > 0 {
		o.Kind = OutcomeSnooze
		o.Delay = je.Snooze
		return o
	}
	msg := je.Class
	if je.Err != nil {
		msg = je.Err.Error()
	}
	o.Error = &AttemptError{Attempt: job.Attempt, Class: je.Class, Message: msg, Stack: a.stack}
	switch {
	case je.Permanent, job.Attempt >= job.MaxAttempts:
		o.Kind = OutcomeDead
	case je.RetryAfter > 0:
		o.Kind = OutcomeRetry
		o.Delay = je.RetryAfter
	default:
		o.Kind = OutcomeRetry
		o.Delay = c.policyFor(job.Kind).delayFor(job)
	}
	return o
}

// WorkResult reports what one claimed job did.
type WorkResult struct {
	// Result is idle (nothing to claim), succeeded, retrying, dead, snoozed
	// or lease_lost.
	Result string `json:"result"`
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

// Results of WorkOne.
const (
	ResultIdle      = "idle"
	ResultSucceeded = "succeeded"
	ResultRetrying  = "retrying"
	ResultDead      = "dead"
	ResultSnoozed   = "snoozed"
	ResultLeaseLost = "lease_lost"
	ResultRequeued  = "interrupted"
)

// outcomeWriter records one outcome; a Worker batches them.
type outcomeWriter func(ctx context.Context, o *JobOutcome) (OutcomeResult, error)

// writeOutcome records one outcome in a transaction of its own.
func (c *Client) writeOutcome(ctx context.Context, o *JobOutcome) (OutcomeResult, error) {
	rs, err := c.store.JobRecordOutcomes(ctx, []*JobOutcome{o})
	if err != nil {
		return OutcomeResult{}, err
	}
	return rs[0], nil
}

// record writes an attempt's outcome with write (nil: one transaction per
// outcome) and builds its result. A lost lease writes nothing.
func (c *Client) record(ctx context.Context, a *attempt, write outcomeWriter) (*WorkResult, error) {
	job := a.job
	id := job.ID
	res := &WorkResult{JobID: &id, Attempt: job.Attempt, Kind: job.Kind, Duration: a.took}
	if a.leaseErr != nil {
		res.Result = ResultLeaseLost
		c.logOutcome(res)
		return res, nil
	}
	o := c.outcome(a)
	if o.Error != nil {
		res.Class, res.Error = o.Error.Class, o.Error.Message
	}
	if write == nil {
		write = c.writeOutcome
	}
	r, err := write(context.WithoutCancel(ctx), o)
	if err != nil {
		return nil, fmt.Errorf("record outcome of job %s: %w", id, err)
	}
	if r.Err != nil {
		res.Result = ResultLeaseLost
		c.logger.Warn("lease lost", "job_id", id, "kind", job.Kind, "attempt", job.Attempt, "outcome", string(o.Kind))
		c.logOutcome(res)
		return res, nil
	}
	switch r.State {
	case StateSucceeded:
		res.Result = ResultSucceeded
	case StateRetrying:
		res.Result = ResultRetrying
	case StateDead:
		res.Result = ResultDead
	case StateQueued:
		res.Result = ResultSnoozed
		if o.Kind == OutcomeInterrupted {
			res.Result = ResultRequeued
		}
	}
	if r.State == StateRetrying || r.State == StateQueued {
		at := r.AvailableAt
		res.AvailableAt = &at
	}
	c.logOutcome(res)
	return res, nil
}

func (c *Client) logOutcome(r *WorkResult) {
	attrs := []any{"job_id", *r.JobID, "kind", r.Kind, "attempt", r.Attempt, "duration", r.Duration.Round(time.Microsecond).String()}
	if r.Class != "" {
		attrs = append(attrs, "class", r.Class, "error", r.Error)
	}
	level := slog.LevelInfo
	if r.Result != ResultSucceeded && r.Result != ResultSnoozed {
		level = slog.LevelWarn
	}
	c.logger.Log(context.Background(), level, "job "+r.Result, attrs...)
}
