package errand

// The outcome of an attempt, from the handler's return to the last thing
// that follows from it, in the order it happens:
//
//  1. classify: the attempt becomes the outcome to write (classify,
//     outcome, failed): succeeded, retry after the policy's backoff or the
//     handler's hint, snoozed, dead (permanent, exhausted), cancelled,
//     given back on a drain; a lost lease writes nothing.
//  2. write: fenced by the lease token, through the worker's outcome
//     batcher (see internal/completer). An attempt that needs nothing but
//     its write hands it over and moves on (recordLater); every other one
//     waits for it, retrying while the lease lasts (recordNow, record,
//     writeUntilLeaseEnds).
//  3. publish: the result takes what the write found, and subscribers,
//     the observer and the log learn it (recorded, publishResult).
//  4. follow-ups: the on-dead hook, the job's batch, its workflow
//     (afterOutcome), then the worker's own part: the circuit breaker, the
//     registry and counters, the queue's next due time (followUp).
//
// Attempts outside a Worker (WorkOne, remote workers) take the same path
// with a writer of their own.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"time"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
	"github.com/errandhq/errand/internal/clock"
)

// recordAttempt records the finished attempt a of a job holding a slot of
// slots, and gives the slot back once it is recorded and the handler has
// returned.
func (w *Worker) recordAttempt(ctx context.Context, slots *queueSlots, a *attempt) {
	if w.recordLater(ctx, a, slots) {
		return
	}
	defer slots.release()
	defer a.waitHandler() // the slot is the handler's until it returns
	w.recordNow(ctx, slots.queue, a)
}

// 1. Classify.

// classify returns what a finished attempt comes to: its result so far,
// and the outcome to write, nil when the lease was lost and nothing is to
// be written.
func (c *engine) classify(a *attempt) (*WorkResult, *errandstore.JobOutcome) {
	res, o := new(WorkResult), new(errandstore.JobOutcome)
	if !c.classifyInto(a, res, o) {
		return res, nil
	}
	return res, o
}

// classifyInto is classify filling res and o, which a caller may hold in
// one allocation of its own; it reports false for a lost lease.
func (c *engine) classifyInto(a *attempt, res *WorkResult, o *errandstore.JobOutcome) bool {
	job := a.job
	*res = WorkResult{JobID: &job.ID, Attempt: job.Attempt, Kind: job.Kind, Duration: a.took}
	if a.leaseErr != nil {
		res.Result = ResultLeaseLost
		return false
	}
	c.outcomeInto(a, o)
	if o.Error != nil {
		res.Class, res.Error = o.Error.Class, o.Error.Message
	}
	return true
}

// outcome turns a finished attempt into the outcome to record, applying the
// job's retry policy.
func (c *engine) outcome(a *attempt) *errandstore.JobOutcome {
	o := new(errandstore.JobOutcome)
	c.outcomeInto(a, o)
	return o
}

// outcomeInto is outcome, made in o.
func (c *engine) outcomeInto(a *attempt, o *errandstore.JobOutcome) {
	job := a.job
	*o = errandstore.JobOutcome{JobLease: errandstore.JobLease{ID: job.ID, LeaseToken: *job.LeaseToken}}
	var sealErr *SealError
	if a.err != nil {
		sealErr = sealError(a.err)
	}
	switch {
	case a.err == nil:
		o.Kind = errandstore.OutcomeSucceeded
		if k := c.kind(job.Kind); k != nil && k.DeleteOnSuccess {
			o.Delete = errandstore.DeletableOnSuccess(job)
		}
	case a.stopped:
		// The worker is shutting down, not the job failing: give the job
		// back without counting the attempt.
		o.Kind = errandstore.OutcomeInterrupted
		o.Error = &errandtype.AttemptError{Attempt: job.Attempt, Class: ClassInterrupted,
			Message: errandstore.CleanText("worker stopped before the attempt finished: "+a.err.Error(), errandstore.MaxMessageBytes)}
	case sealErr != nil:
		// Not the job's failure but this worker's want of a key: give it
		// back, attempt uncounted, for a worker that holds the key.
		o.Kind, o.Delay = errandstore.OutcomeInterrupted, CodecRetryDelay
		o.Error = &errandtype.AttemptError{Attempt: job.Attempt, Class: sealErr.class(),
			Message: errandstore.CleanText(sealErr.Error(), errandstore.MaxMessageBytes)}
	case a.cancelled:
		// An operator's cancel, whatever the handler returned on its way
		// out: the job ends cancelled, fenced like every outcome.
		msg := errandstore.CancelledByRequestMessage
		if a.abandoned {
			msg += fmt.Sprintf("; the handler ignored the cancellation and was abandoned at its %s timeout", c.kind(job.Kind).Timeout)
		}
		o.Kind = errandstore.OutcomeCancelled
		o.Error = &errandtype.AttemptError{Attempt: job.Attempt, Class: errandstore.ClassCancelled, Message: msg}
	default:
		c.failed(o, a)
	}
}

// sealError returns the *SealError in err's chain, or nil. Asked only of
// an error, so that a success does not allocate the target errors.As takes.
func sealError(err error) *SealError {
	var se *SealError
	if errors.As(err, &se) {
		return se
	}
	return nil
}

// failed makes o the outcome of a's failure: a snooze, a retry after the
// handler's hint or the policy's backoff, or, when permanent or on the
// final attempt, death.
func (c *engine) failed(o *errandstore.JobOutcome, a *attempt) {
	job := a.job
	je := classified(a.err)
	if a.timedOut {
		je = &JobError{class: ClassTimeout, err: fmt.Errorf("attempt exceeded its %s timeout: %w", c.kind(job.Kind).Timeout, a.err)}
	}
	if je.snooze > 0 {
		o.Kind = errandstore.OutcomeSnooze
		o.Delay = je.snooze
		return
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
}

// 2. Write.

// recordLater hands the outcome of a, a successful attempt of a job that
// needs nothing more than its outcome recorded (see onlyWrite), to the
// outcome batcher without waiting for it to be written, and reports
// whether it did. The rest (publish, follow-ups, and release, which frees
// the job's slot) runs once its batch is written, on the goroutine that
// wrote it (see laterOutcome.written); on a store that writes in parallel
// the slot frees at the handover instead, while the queue has an early
// token left, and the batcher wakes the claim loop as the batch's write
// starts (see ParallelWriter). The attempt's goroutine moves on at once, to
// the next job of its claim or to its end: a busy worker keeps no goroutine
// waiting for each outcome in flight, for the garbage collector to scan and
// the scheduler to wake.
func (w *Worker) recordLater(ctx context.Context, a *attempt, slots *queueSlots) bool {
	if !w.onlyWrite(a) {
		return false
	}
	w.running.Add(1) // Stop waits for the outcome as for the attempt
	l := &laterOutcome{w: w, ctx: ctx, a: a, slots: slots, early: slots.releaseEarly()}
	w.c.classifyInto(a, &l.res, &l.o) // onlyWrite: the lease holds
	if l.early {
		// Freed before the handover, so that the batcher, which wakes the
		// claim loop when it starts the write, never wakes it for a slot
		// not yet free.
		slots.Free()
	} else {
		slots.writing.Add(1)
	}
	err := w.outcomes.Submit(ctx, &l.o, a.renewed.Add(a.lease), l.early, l.written, slots)
	switch {
	case err == nil:
		return true
	case l.early:
		// Not handed over, and the slot already free: record it here,
		// holding the early token until it is.
		slots.Wake()
		w.recordNow(ctx, slots.queue, a)
		<-slots.early
		w.running.Done()
		return true
	default:
		slots.writing.Add(-1)
		w.running.Done()
		return false
	}
}

// onlyWrite reports whether a's outcome needs nothing but its write, so
// that recordLater may hand it over. Every other attempt (a failure, a lost
// lease, a job of a batch or a workflow or of a kind with a dependency,
// whose outcome leads to more writes, a child job, whose parent is told)
// is recorded by recordNow, waiting.
func (w *Worker) onlyWrite(a *attempt) bool {
	job := a.job
	return a.err == nil && a.leaseErr == nil && a.handlerDone == nil && !w.outcomes.Direct && !w.abandoned.Load() &&
		job.BatchID == nil && job.WorkflowID == nil && !w.breakers.guards(job.Kind) && childParent(job.ID) == ""
}

// laterOutcome is an outcome recordLater handed over, waiting for its
// batch's write.
type laterOutcome struct {
	w     *Worker
	ctx   context.Context
	a     *attempt
	o     errandstore.JobOutcome // the outcome handed over, and its result:
	res   WorkResult             // held here, one allocation for the three
	slots *queueSlots
	early bool // the slot went back at the handover; an early token is held
}

// written finishes the outcome once its batch's write returned r or err,
// on the batcher's writing goroutine, and reports whether the job's slot
// is to be given back (see completer.Batcher.Submit). A failed write is
// recorded again as recordNow records, on a goroutine of its own.
func (l *laterOutcome) written(r errandstore.OutcomeResult, err error) bool {
	w, a := l.w, l.a
	defer w.running.Done()
	if !l.early {
		l.slots.writing.Add(-1)
	}
	switch {
	case err == nil:
		w.c.recorded(l.ctx, a, &l.o, &l.res, r)
		w.followUp(l.ctx, l.slots.queue, a, &l.res, nil)
	case errors.Is(err, errAbandoned) || errors.Is(err, errandtype.ErrInvalid) || w.c.clock.Now().Sub(a.renewed) >= a.lease:
		// Nothing to try again, as record would find.
		a.endRun(nil, err)
		w.followUp(l.ctx, l.slots.queue, a, nil, fmt.Errorf("record outcome of job %s: %w", a.job.ID, err))
	default:
		// Retried while the lease lasts, on a goroutine of its own, which
		// frees what the job holds.
		a.writeFailed = true
		w.running.Go(func() {
			defer func() {
				if l.held() {
					l.slots.release()
				}
			}()
			w.recordNow(l.ctx, l.slots.queue, a)
		})
		return false
	}
	return l.held()
}

// held gives back what the job holds once its outcome is recorded, and
// reports whether that is its slot: an early token is given back here.
func (l *laterOutcome) held() bool {
	if l.early {
		<-l.slots.early
		return false
	}
	return true
}

// recordNow records a's outcome, waiting for the write and retrying it
// while the lease lasts, and follows it up.
func (w *Worker) recordNow(ctx context.Context, queue string, a *attempt) {
	res, err := w.c.record(ctx, a, w.outcomes.Write)
	w.followUp(ctx, queue, a, res, err)
}

// record writes an attempt's outcome with write (nil: one transaction per
// outcome) and builds its result. A lost lease writes nothing.
func (c *engine) record(ctx context.Context, a *attempt, write outcomeWriter) (*WorkResult, error) {
	job := a.job
	id := job.ID
	res, o := c.classify(a)
	if o == nil {
		c.publishResult(a, res)
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
		a.endRun(nil, err)
		return nil, fmt.Errorf("record outcome of job %s: %w", id, err)
	}
	c.recorded(ctx, a, o, res, r)
	return res, nil
}

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
		clock.Sleep(c.clock, min(backoff, left))
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
	return errandstore.OutcomeResult{State: job.State, AvailableAt: job.AvailableAt, Kind: job.Kind, BatchID: job.BatchID, WorkflowID: job.WorkflowID,
		Output: job.Output, LastError: job.LastError}
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
// of an attempt run outside a Worker. It reports the job to the waits on
// it, if any (see handedResult).
func (c *engine) writeOutcomeUntil(ctx context.Context, o *errandstore.JobOutcome, until time.Time) (errandstore.OutcomeResult, error) {
	ctx, cancel := clock.WithDeadline(ctx, c.clock, until, nil)
	defer cancel()
	return writeOutcome(ctx, c.store, o, c.watches.watching())
}

// writeOutcome records one outcome in a transaction of its own: every
// outcome not written in a worker's batch. follow asks the store for what
// the follow-ups of a remote outcome need (JobRecordOutcomesParams.Follow).
func writeOutcome(ctx context.Context, s errandstore.JobStore, o *errandstore.JobOutcome, follow bool) (errandstore.OutcomeResult, error) {
	rs, err := s.JobRecordOutcomes(ctx, &errandstore.JobRecordOutcomesParams{Outcomes: []*errandstore.JobOutcome{o}, Follow: follow})
	if err != nil {
		return errandstore.OutcomeResult{}, err
	}
	return rs[0], nil
}

// 3. Publish.

// recorded completes res with what writing o found, r, publishes it, and
// runs the follow-ups of the job's new state.
func (c *engine) recorded(ctx context.Context, a *attempt, o *errandstore.JobOutcome, res *WorkResult, r errandstore.OutcomeResult) {
	job := a.job
	if r.Err != nil {
		res.Result = ResultLeaseLost
		c.logger.Warn("lease lost", "job_id", job.ID, "kind", job.Kind, "attempt", job.Attempt, "outcome", string(o.Kind))
		c.publishResult(a, res)
		return
	}
	res.Result = resultOfState(r.State, o.Kind)
	if r.State == errandtype.StateRetrying || r.State == errandtype.StateQueued {
		at := r.AvailableAt
		res.AvailableAt = &at
	}
	if res.Result == ResultSnoozed {
		c.wakeIfSignalled(ctx, a)
	}
	c.publishResult(a, res)
	c.afterOutcome(ctx, job, res, handedResult(o, r))
}

// resultOfState names the result of an outcome of kind that left a job in
// state.
func resultOfState(state errandtype.JobState, kind errandstore.OutcomeKind) Result {
	switch state {
	case errandtype.StateSucceeded:
		return ResultSucceeded
	case errandtype.StateRetrying:
		return ResultRetrying
	case errandtype.StateDead:
		return ResultDead
	case errandtype.StateCancelled:
		return ResultCancelled
	case errandtype.StateQueued:
		if kind == errandstore.OutcomeInterrupted {
			return ResultInterrupted
		}
		return ResultSnoozed
	}
	return ""
}

// publishResult tells the observer and subscribers an attempt's result,
// logs it, and ends the attempt's span.
func (c *engine) publishResult(a *attempt, r *WorkResult) {
	job := a.job
	a.endRun(r, nil)
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

// 4. Follow-ups.

// afterOutcome runs what follows a recorded outcome: the dead job's hook,
// the completion of its batch and the advance of its workflow, and the
// wake of this process's waits on the job's end, handed handed when not
// nil. It costs nothing for a job outside a batch and a workflow whose
// kind has no hook.
func (c *engine) afterOutcome(ctx context.Context, job *errandtype.Job, res *WorkResult, handed *JobResult) {
	switch res.Result {
	case ResultDead:
		if c.hasDeadHook(job.Kind) {
			hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), batchCompleteTimeout)
			if _, err := c.fireDeadHook(hctx, job); err != nil {
				c.logger.Warn("on-dead hook failed; a worker's next look for dead jobs enqueues it", "job_id", job.ID, "err", err)
			}
			cancel()
		}
		c.afterMemberFinished(ctx, job)
		c.afterWorkflowJob(ctx, job)
	case ResultSucceeded, ResultCancelled:
		c.afterMemberFinished(ctx, job)
		c.afterWorkflowJob(ctx, job)
	}
	var state errandtype.JobState
	switch res.Result {
	case ResultSucceeded:
		state = errandtype.StateSucceeded
	case ResultDead:
		state = errandtype.StateDead
	case ResultCancelled:
		state = errandtype.StateCancelled
	default:
		return
	}
	c.watches.finished(job.ID, handed)
	c.afterChild(ctx, job, state)
}

// followUp does a worker's part once a's outcome was recorded as res, or
// failed to be with err: its circuit breaker, its registry and counters,
// and a wake-up of the queue when its next due job may have changed.
func (w *Worker) followUp(ctx context.Context, queue string, a *attempt, res *WorkResult, err error) {
	job := a.job
	if errors.Is(err, errAbandoned) {
		w.c.logger.Warn("worker abandoned the job; its lease will expire and another worker will run it",
			"job_id", job.ID, "kind", job.Kind, "attempt", job.Attempt)
		w.leftToLease(err)
		return
	}
	w.observeAdaptive(ctx, a, res)
	w.conc.observe(ctx, a, res)
	w.breakers.observe(ctx, a, res)
	if err != nil {
		w.c.logger.Error("record outcome failed; the lease will expire and the job run again",
			"job_id", job.ID, "err", err)
		w.leftToLease(err)
		return
	}
	w.noteResult(res)
	w.stats.countResult(res)
	if changesSchedule(job, res) || w.conc.limitsKind(job.Kind) {
		w.c.wakes.Wake([]string{queue})
	}
}

// changesSchedule reports whether recording res changed when a job of the
// queue next comes due: this worker's retry or snooze of job, or the end of
// a job with an ordering key, which may let the next job of that key run.
// The queue loop is woken to ask again. The next job of a key in another
// queue, or another process's, is found by that queue's poll.
func changesSchedule(job *errandtype.Job, res *WorkResult) bool {
	switch res.Result {
	case ResultRetrying, ResultSnoozed:
		return true
	case ResultSucceeded, ResultDead, ResultCancelled:
		return job.OrderingKey != nil
	}
	return false
}

// publish sends one event to every subscriber that wants it, never
// blocking the worker.
func (c *engine) publish(job *errandtype.Job, res *WorkResult) {
	c.subs.mu.Lock()
	defer c.subs.mu.Unlock()
	for s := range c.subs.subs {
		if len(s.results) > 0 && !slices.Contains(s.results, res.Result) {
			continue
		}
		select {
		case s.ch <- Event{WorkResult: *res, Job: job}:
		default:
			c.subs.dropped.Add(1)
		}
	}
}
