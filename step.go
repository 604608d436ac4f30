package errand

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
	"github.com/errandhq/errand/internal/clock"
)

// Durable handlers. A handler written as ordinary Go code marks its units
// of work with [Step]: each step runs once, its result is recorded fenced
// by the attempt's lease, and every later attempt of the job (a retry, a
// crash taken over by another host, a replay) runs the handler again from
// the top, where every recorded step returns its result without running.
// [Sleep] ends the attempt and resumes the job when the time comes,
// without counting an attempt and without holding a worker's slot.
//
// Steps are matched to the record by their order and name: the handler
// must call the same steps in the same order for the same job. A recorded
// step whose name differs from the one the code now calls ends the job
// dead, with class [ClassNondeterministic], naming both; no other step
// runs. docs/durable.md says how to change the code of a handler whose jobs
// are under way.

// ClassNondeterministic is recorded when a durable handler's code no
// longer calls the steps its job recorded, in their order.
const ClassNondeterministic = "nondeterministic"

// reservedStepPrefix starts the names of the steps errand records itself
// (a sleep): a handler's own step may not take one.
const reservedStepPrefix = "errand."

const sleepStepName = errandstore.SleepStepName

// ErrStepsUnsupported reports a store that keeps no steps.
var ErrStepsUnsupported = errors.New("the store does not record steps (errandstore.StepStore)")

// steps is one attempt's view of its job's recorded steps.
type steps struct {
	mu       sync.Mutex
	loaded   bool
	recorded []errandtype.Step
	next     int  // the index of the next step the handler calls
	running  bool // a step's function is running
	// halt, once set, ends the attempt as this error whatever the handler
	// returns: a sleep's suspension, or the nondeterminism found.
	halt error
}

// stepOpts are a step's settings, made by StepOption.
type stepOpts struct {
	attempts int
	backoff  time.Duration
}

// StepOption sets how a step runs.
type StepOption func(*stepOpts)

// StepRetry runs a step's function up to attempts times within one attempt
// of the job, waiting backoff, doubled after each failure up to a minute,
// between tries. A permanent error ([Permanent]) is not retried. When every
// try fails the last error is returned, not recorded, and the step runs
// again in the job's next attempt.
func StepRetry(attempts int, backoff time.Duration) StepOption {
	return func(o *stepOpts) { o.attempts, o.backoff = max(attempts, 1), max(backoff, 0) }
}

// Step runs fn once for the job of the handler's ctx and records its
// result, as JSON, fenced by the attempt's lease; the handler's later
// attempts get the recorded result back without running fn. A permanent
// error from fn (see [Permanent]) is recorded too, and returned again,
// permanent, by every later attempt; any other error is returned and not
// recorded, so the step runs again in the job's next attempt.
//
// fn runs at least once and is recorded at most once: if the process dies
// after fn and before its result is recorded, the next attempt runs fn
// again. Give a remote side the key [StepKey] returns, so that it acts
// once. Call steps one at a time, in an order that the job's args and the
// results of earlier steps decide. When the attempt no longer holds the
// job's lease, Step returns an error wrapping ErrLeaseLost: return it.
func Step[T any](ctx context.Context, name string, fn func(ctx context.Context) (T, error), opts ...StepOption) (T, error) {
	var zero T
	a, err := stepAttempt(ctx, "step "+name)
	if err != nil {
		return zero, err
	}
	if strings.HasPrefix(name, reservedStepPrefix) {
		return zero, fmt.Errorf("step %q: names starting with %q are errand's own; choose another", name, reservedStepPrefix)
	}
	if err := errandstore.CheckJobStepName(name); err != nil {
		return zero, fmt.Errorf("step %q: %w", name, err)
	}
	idx, rec, err := a.stepLog().take(ctx, a, name)
	if err != nil {
		return zero, err
	}
	defer a.stepLog().done()
	if rec != nil {
		if rec.Error != "" {
			return zero, Permanent(fmt.Errorf("step %q (recorded): %s", name, rec.Error))
		}
		var v T
		raw, err := a.engine.open("step", rec.Result)
		if err != nil {
			return zero, a.stepLog().stop(err)
		}
		if err := json.Unmarshal(raw, &v); err != nil {
			return zero, a.stepLog().stop(Permanent(WithClass(ClassNondeterministic,
				fmt.Errorf("step %d %q: its recorded result %s does not decode into %T: %w", idx, name, rec.Result, v, err))))
		}
		return v, nil
	}
	o := stepOpts{attempts: 1}
	for _, opt := range opts {
		opt(&o)
	}
	v, ferr := runStep(ctx, a, &o, fn)
	step := errandtype.Step{Index: idx, Name: name}
	switch {
	case ferr == nil:
		b, err := json.Marshal(v)
		if err != nil {
			return zero, fmt.Errorf("step %q: its result: %w", name, err)
		}
		rewrite, err := errandstore.CheckProgress(b)
		if err != nil {
			return zero, fmt.Errorf("step %q: %w", name, err)
		}
		if rewrite {
			b = plainJSON(b)
		}
		if step.Result, err = a.engine.seal("step", b); err != nil {
			return zero, fmt.Errorf("step %q: %w", name, err)
		}
	case isPermanent(ferr):
		step.Error = errandstore.CleanText(ferr.Error(), errandstore.MaxMessageBytes)
	default:
		return zero, ferr
	}
	if err := a.recordStep(ctx, step); err != nil {
		return zero, err
	}
	return v, ferr
}

// runStep calls fn as o says: again after a failure that is not permanent,
// while tries are left and ctx lasts.
func runStep[T any](ctx context.Context, a *attemptInfo, o *stepOpts, fn func(context.Context) (T, error)) (T, error) {
	wait := o.backoff
	for try := 1; ; try++ {
		v, err := fn(ctx)
		if err == nil || try >= o.attempts || isPermanent(err) {
			return v, err
		}
		if serr := clock.SleepCtx(ctx, a.engine.clock, wait); serr != nil {
			return v, err
		}
		wait = min(2*wait, time.Minute)
	}
}

// isPermanent reports whether err asks for no retry.
func isPermanent(err error) bool {
	var je *JobError
	return errors.As(err, &je) && je.permanent
}

// StepKey returns a key for the effect of the step named name of the job
// of ctx: the same in every attempt of the job, different for each step
// and job. Pass it to a remote side as its idempotency key.
func StepKey(ctx context.Context, name string) string {
	a, ok := ctx.Value(attemptKey{}).(*attemptInfo)
	if !ok {
		return ""
	}
	return a.job.ID + "/" + name
}

// Sleep ends the attempt of the job of ctx and resumes the job d from the
// moment Sleep was first called, without counting an attempt: the worker's
// slot is free while it waits, and any host may resume it. The wake time
// is recorded as a step, so the attempt that resumes the job passes the
// same Sleep at once. Sleep returns an error that ends the attempt: return
// it. Whatever the handler returns after it, the attempt ends suspended,
// and no step after it runs.
func Sleep(ctx context.Context, d time.Duration) error {
	a, err := stepAttempt(ctx, "sleep")
	if err != nil {
		return err
	}
	if err := errandstore.CheckDelay("sleep", d); err != nil {
		return err
	}
	idx, rec, err := a.stepLog().take(ctx, a, sleepStepName)
	if err != nil {
		return err
	}
	defer a.stepLog().done()
	// The store's clock is the one leases and wake-ups keep: every host
	// that resumes the job compares the wake time with the same clock.
	now, err := a.store.Now(ctx)
	if err != nil {
		return fmt.Errorf("sleep: %w", err)
	}
	var until time.Time
	if rec != nil {
		var r sleepResult
		if err := json.Unmarshal(rec.Result, &r); err != nil {
			return a.stepLog().stop(Permanent(WithClass(ClassNondeterministic, fmt.Errorf("step %d: a recorded sleep of %s: %w", idx, rec.Result, err))))
		}
		until = r.Until
	} else {
		until = now.Add(max(d, 0)).Truncate(time.Microsecond)
		b, _ := json.Marshal(sleepResult{Until: until})
		if err := a.recordStep(ctx, errandtype.Step{Index: idx, Name: sleepStepName, Result: b}); err != nil {
			return err
		}
	}
	left := until.Sub(now)
	if left <= 0 {
		return nil
	}
	return a.stepLog().stop(&suspension{until: until, left: left})
}

// sleepResult is a recorded sleep.
type sleepResult struct {
	Until time.Time `json:"until"`
}

// suspension ends an attempt until a time, as a snooze of what was left
// of the sleep when it was found: the job wakes at until, or a moment after.
// A wait for a signal (wait, its name) is woken sooner by the signal:
// consumed is how many of its signals earlier waits took.
type suspension struct {
	until    time.Time
	left     time.Duration
	wait     string
	consumed int
}

func (s *suspension) Error() string {
	if s.wait != "" {
		return fmt.Sprintf("waiting for signal %q until %s", s.wait, s.until.UTC().Format(time.RFC3339Nano))
	}
	return "sleeping until " + s.until.UTC().Format(time.RFC3339Nano)
}

// jobError is the snooze that resumes the job at s.until.
func (s *suspension) jobError() error { return Snooze(s.left) }

// stepAttempt returns the attempt of ctx, or an error for doing what.
func stepAttempt(ctx context.Context, doing string) (*attemptInfo, error) {
	a, ok := ctx.Value(attemptKey{}).(*attemptInfo)
	if !ok {
		return nil, fmt.Errorf("%s: no errand job in this context; call it inside a handler", doing)
	}
	if a.engine.caps.steps == nil {
		return nil, fmt.Errorf("%s: %w", doing, ErrStepsUnsupported)
	}
	return a, nil
}

// stepLog returns the attempt's steps, made on first use: an attempt that
// takes no step costs nothing more.
func (a *attemptInfo) stepLog() *steps {
	if s := a.steps.Load(); s != nil {
		return s
	}
	a.steps.CompareAndSwap(nil, &steps{})
	return a.steps.Load()
}

// waiting returns the wait for a signal the attempt ended in, or nil.
func (a *attemptInfo) waiting() *suspension {
	s := a.steps.Load()
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if sp, ok := s.halt.(*suspension); ok && sp.wait != "" {
		return sp
	}
	return nil
}

// halted returns the error that ends the attempt whatever the handler
// returned, or nil.
func (a *attemptInfo) halted() error {
	s := a.steps.Load()
	if s == nil {
		return nil
	}
	return s.halted()
}

// take claims the next step's index for the step called name, with its
// record when one exists. It loads the job's steps on first use. A
// recorded step of another name ends the attempt as nondeterministic.
// Every successful take is followed by done.
func (s *steps) take(ctx context.Context, a *attemptInfo, name string) (int, *errandtype.Step, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.ready(ctx, a, "step "+strconv.Quote(name)); err != nil {
		return 0, nil, err
	}
	idx := s.next
	var rec *errandtype.Step
	if idx < len(s.recorded) {
		rec = &s.recorded[idx]
		if rec.Name != name {
			s.halt = Permanent(WithClass(ClassNondeterministic, fmt.Errorf(
				"step %d: the code calls %q where the job recorded %q; the handler no longer matches this job's steps", idx, name, rec.Name)))
			return 0, nil, s.halt
		}
	}
	s.next++
	s.running = true
	return idx, rec, nil
}

// ready checks, with s locked, that the next step may be taken for doing
// what: the attempt has not ended, no other step runs; and loads the job's
// recorded steps on first use.
func (s *steps) ready(ctx context.Context, a *attemptInfo, doing string) error {
	if s.halt != nil {
		return s.halt
	}
	if s.running {
		return fmt.Errorf("%s: another step of this job is running; call steps one at a time", doing)
	}
	if !s.loaded {
		rec, err := a.engine.caps.steps.JobSteps(ctx, &errandstore.JobStepsParams{ID: a.job.ID})
		if err != nil {
			return fmt.Errorf("steps of job %s: %w", a.job.ID, err)
		}
		s.recorded, s.loaded = rec, true
	}
	return nil
}

func (s *steps) done() {
	s.mu.Lock()
	s.running = false
	s.mu.Unlock()
}

// stop makes err the attempt's end, and returns it.
func (s *steps) stop(err error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.halt == nil {
		s.halt = err
	}
	return s.halt
}

// halted returns the error that ends the attempt whatever the handler
// returned, or nil.
func (s *steps) halted() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sp, ok := s.halt.(*suspension); ok {
		return sp.jobError()
	}
	return s.halt
}

// recordStep records step for the attempt, fenced by its lease.
func (a *attemptInfo) recordStep(ctx context.Context, step errandtype.Step) error {
	err := a.engine.writeStep(&errandstore.JobStepRecordParams{
		JobLease: errandstore.JobLease{ID: a.job.ID, LeaseToken: *a.job.LeaseToken}, Step: step})
	if err != nil {
		return fmt.Errorf("record step %d %q of job %s: %w", step.Index, step.Name, a.job.ID, err)
	}
	// Kept as recorded, for what later steps of this attempt read of it
	// (the signals earlier waits took).
	log := a.stepLog()
	log.mu.Lock()
	if step.Index == len(log.recorded) {
		log.recorded = append(log.recorded, step)
	}
	log.mu.Unlock()
	return nil
}

// Steps returns the recorded steps of job id, in order: what its durable
// handler has done (see [Step]), results opened as [Client.Get] opens args. A job without steps has none; an unknown
// job is an error wrapping ErrNotFound.
func (c *engine) Steps(ctx context.Context, id string) ([]errandtype.Step, error) {
	if c.caps.steps == nil {
		return nil, fmt.Errorf("steps of job %s: %w", id, ErrStepsUnsupported)
	}
	s, err := c.caps.steps.JobSteps(ctx, &errandstore.JobStepsParams{ID: id})
	if err != nil {
		return nil, fmt.Errorf("steps of job %s: %w", id, err)
	}
	for i := range s {
		if r, err := c.open("step", s[i].Result); err == nil {
			s[i].Result = r // a result the codec cannot open stays sealed, shown as such
		}
	}
	return s, nil
}

// ErrWaitTimedOut is returned by WaitFor when its timeout passed without
// the signal.
var ErrWaitTimedOut = errors.New("the wait for a signal timed out")

// WaitFor waits for the signal name sent to the job of ctx (with
// [Client.Signal], errand signal or the JSON API) and returns its value
// decoded into a T. The wait is durable: when the signal has not come, the
// attempt ends without counting, the worker's slot is free, and the job
// resumes when the signal comes, or at the timeout, on any host. Return
// the error WaitFor returns, as for [Sleep].
//
// A signal sent before the wait is kept for it. Each WaitFor of a name
// takes the next signal of that name, in the order they were sent. After
// timeout (none when it is 0) WaitFor returns an error wrapping
// ErrWaitTimedOut, recorded, so every later attempt gets it too; the
// handler decides what follows.
func WaitFor[T any](ctx context.Context, name string, timeout time.Duration) (T, error) {
	var zero T
	a, err := stepAttempt(ctx, "wait for "+name)
	if err != nil {
		return zero, err
	}
	if err := errandstore.CheckJobStepName(name); err != nil {
		return zero, fmt.Errorf("wait for %q: %w", name, err)
	}
	if err := errandstore.CheckDelay("timeout", timeout); err != nil {
		return zero, fmt.Errorf("wait for %q: %w", name, err)
	}
	now, err := a.store.Now(ctx)
	if err != nil {
		return zero, fmt.Errorf("wait for %q: %w", name, err)
	}
	// The wait's record: which signal, until when.
	w, err := a.waitRecord(ctx, name, now, timeout)
	if err != nil {
		return zero, err
	}
	// What came of it: the signal's value, or the timeout.
	log := a.stepLog()
	idx, rec, err := log.take(ctx, a, errandstore.SignalStepName)
	if err != nil {
		return zero, err
	}
	defer log.done()
	var got signalResult
	if rec != nil {
		if err := json.Unmarshal(rec.Result, &got); err != nil || got.Signal != name {
			return zero, log.stop(Permanent(WithClass(ClassNondeterministic,
				fmt.Errorf("step %d: the code waits for signal %q where the job recorded %s", idx, name, rec.Result))))
		}
	} else {
		consumed := log.signalsTaken(idx, name)
		sigs, err := a.engine.caps.steps.JobSignals(ctx, &errandstore.JobSignalsParams{ID: a.job.ID, Name: name})
		if err != nil {
			return zero, fmt.Errorf("wait for %q: %w", name, err)
		}
		switch {
		case len(sigs) > consumed:
			got = signalResult{Signal: name, Value: sigs[consumed].Value}
		case w.Until != nil && !now.Before(*w.Until):
			got = signalResult{Signal: name, TimedOut: true}
		default:
			until, left := now.Add(errandstore.MaxDelay), errandstore.MaxDelay
			if w.Until != nil {
				until, left = *w.Until, w.Until.Sub(now)
			}
			return zero, log.stop(&suspension{until: until, left: left, wait: name, consumed: consumed})
		}
		b, _ := json.Marshal(got)
		if err := a.recordStep(ctx, errandtype.Step{Index: idx, Name: errandstore.SignalStepName, Result: b}); err != nil {
			return zero, err
		}
	}
	if got.TimedOut {
		return zero, fmt.Errorf("wait for %q: %w", name, ErrWaitTimedOut)
	}
	var v T
	if err := json.Unmarshal(got.Value, &v); err != nil {
		return zero, Permanent(fmt.Errorf("signal %q: its value %s does not decode into %T: %w", name, got.Value, v, err))
	}
	return v, nil
}

// waitResult is a recorded wait.
type waitResult struct {
	Signal string     `json:"signal"`
	Until  *time.Time `json:"until,omitempty"`
}

// signalResult is what a recorded wait came to.
type signalResult struct {
	Signal   string          `json:"signal"`
	Value    json.RawMessage `json:"value,omitempty"`
	TimedOut bool            `json:"timed_out,omitempty"`
}

// waitRecord returns the wait's record for signal name, recording it (until
// now+timeout) when this is the wait's first attempt.
func (a *attemptInfo) waitRecord(ctx context.Context, name string, now time.Time, timeout time.Duration) (waitResult, error) {
	log := a.stepLog()
	idx, rec, err := log.take(ctx, a, errandstore.WaitStepName)
	if err != nil {
		return waitResult{}, err
	}
	defer log.done()
	var w waitResult
	if rec != nil {
		if err := json.Unmarshal(rec.Result, &w); err != nil || w.Signal != name {
			return w, log.stop(Permanent(WithClass(ClassNondeterministic,
				fmt.Errorf("step %d: the code waits for signal %q where the job recorded %s", idx, name, rec.Result))))
		}
		return w, nil
	}
	w.Signal = name
	if timeout > 0 {
		until := now.Add(timeout).Truncate(time.Microsecond)
		w.Until = &until
	}
	b, _ := json.Marshal(w)
	return w, a.recordStep(ctx, errandtype.Step{Index: idx, Name: errandstore.WaitStepName, Result: b})
}

// signalsTaken counts the signals of name that the waits recorded before
// step idx took.
func (s *steps) signalsTaken(idx int, name string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, st := range s.recorded[:min(idx, len(s.recorded))] {
		var r signalResult
		if st.Name == errandstore.SignalStepName && json.Unmarshal(st.Result, &r) == nil && r.Signal == name && !r.TimedOut {
			n++
		}
	}
	return n
}

// Signal sends the job id the signal name with value, as JSON, for its
// handler's [WaitFor]: kept until a wait takes it, and waking the job when
// it waits for it. A finished job is an error wrapping ErrWrongState: it
// would never read the signal.
func (c *engine) Signal(ctx context.Context, id, name string, value any) error {
	if c.caps.steps == nil {
		return fmt.Errorf("signal job %s: %w", id, ErrStepsUnsupported)
	}
	b, err := json.Marshal(value)
	if err != nil {
		return fmt.Errorf("signal job %s: its value: %w", id, err)
	}
	if rewrite, err := errandstore.CheckProgress(b); err == nil && rewrite {
		b = plainJSON(b)
	}
	r, err := c.caps.steps.JobSignal(ctx, &errandstore.JobSignalParams{ID: id, Name: name, Value: b})
	if err != nil {
		return wrapStoreError("signal job "+id, err)
	}
	if r.Woke {
		c.wakeQueues(r.Queue)
	}
	return nil
}

// wakeIfSignalled wakes the job of a, whose attempt ended waiting for a
// signal and was recorded so, when the signal came while the attempt was
// ending: sent while the job was still running, it found no wait to wake.
func (c *engine) wakeIfSignalled(ctx context.Context, a *attempt) {
	if w := a.info.waiting(); w != nil {
		c.wakeIfSignalCame(ctx, a.job, w.wait, w.consumed)
	}
}

// wakeIfSignalCame wakes job, waiting for signal name of which earlier
// waits took taken, when more have come.
func (c *engine) wakeIfSignalCame(ctx context.Context, job *errandtype.Job, name string, taken int) {
	ctx = context.WithoutCancel(ctx)
	sigs, err := c.caps.steps.JobSignals(ctx, &errandstore.JobSignalsParams{ID: job.ID, Name: name})
	if err == nil && len(sigs) > taken {
		var woke bool
		if woke, err = c.caps.steps.JobWake(ctx, &errandstore.JobWakeParams{ID: job.ID}); woke {
			c.wakeQueues(job.Queue)
		}
	}
	if err != nil {
		c.logger.Warn("could not check for a signal that came as the job began to wait; it wakes at its timeout, or at the next signal",
			"job_id", job.ID, "signal", name, "err", err)
	}
}

// Patched reports whether the job of ctx takes the new code of the change
// named id, so that a handler's steps can change while jobs are under way:
// true for a job that reaches this point for the first time (a new job, or
// one whose record stops before it), which records a marker step
// errand.patch; false for a job whose record passed this point without
// the marker, which ran the code before the change and goes on with it.
//
//	if v2, err := errand.Patched(ctx, "invoice-before-charge"); err != nil {
//		return err
//	} else if v2 {
//		// the new steps
//	} else {
//		// the old steps, until no job recorded before the change is left
//	}
//
// Keep the call after the old branch is gone: jobs that recorded the
// marker expect it there.
func Patched(ctx context.Context, id string) (bool, error) {
	a, err := stepAttempt(ctx, "patched "+id)
	if err != nil {
		return false, err
	}
	if err := errandstore.CheckJobStepName(id); err != nil {
		return false, fmt.Errorf("patched %q: %w", id, err)
	}
	log := a.stepLog()
	idx, recorded, err := log.patch(ctx, a, id)
	if err != nil || !recorded {
		return err == nil && idx >= 0, err
	}
	defer log.done()
	b, _ := json.Marshal(patchResult{Patch: id})
	if err := a.recordStep(ctx, errandtype.Step{Index: idx, Name: errandstore.PatchStepName, Result: b}); err != nil {
		return false, err
	}
	return true, nil
}

// patchResult is a recorded patch marker.
type patchResult struct {
	Patch string `json:"patch"`
}

// patch looks at the next step for the marker of patch id. It answers the
// marker's index when the record has it there (taken, recorded false), or
// when the record ends before it (taken, recorded true: the caller records
// it, then calls done), and -1 when the record has another step there
// (not taken: the old code goes on).
func (s *steps) patch(ctx context.Context, a *attemptInfo, id string) (idx int, record bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.ready(ctx, a, "patched "+strconv.Quote(id)); err != nil {
		return -1, false, err
	}
	idx = s.next
	if idx < len(s.recorded) {
		var p patchResult
		rec := s.recorded[idx]
		if rec.Name != errandstore.PatchStepName || json.Unmarshal(rec.Result, &p) != nil || p.Patch != id {
			return -1, false, nil
		}
		s.next++
		return idx, false, nil
	}
	s.next++
	s.running = true
	return idx, true, nil
}

// Suspension says, in words, what a waiting job's durable handler waits
// for, from its recorded steps: a sleep, a signal or a child; "" when the
// last step is none of those. Operators' views add it to what happens
// next.
func Suspension(steps []errandtype.Step) string {
	if len(steps) == 0 {
		return ""
	}
	last := steps[len(steps)-1]
	switch last.Name {
	case errandstore.SleepStepName:
		var r sleepResult
		if json.Unmarshal(last.Result, &r) == nil {
			return "its handler sleeps until " + r.Until.UTC().Format(time.RFC3339)
		}
	case errandstore.WaitStepName:
		var w waitResult
		if json.Unmarshal(last.Result, &w) != nil {
			return ""
		}
		until := "without a timeout"
		if w.Until != nil {
			until = "until " + w.Until.UTC().Format(time.RFC3339)
		}
		if child, ok := strings.CutPrefix(w.Signal, reservedStepPrefix+"child:"); ok {
			return fmt.Sprintf("its handler awaits child job %s, whose end wakes it", child)
		}
		return fmt.Sprintf("its handler waits for signal %q %s; the signal wakes it at once", w.Signal, until)
	}
	return ""
}

// ErrNoEvent is wrapped by GetEvent's error for an event not published
// within the wait.
var ErrNoEvent = errors.New("the job has not published the event")

// SetEvent publishes value, as JSON, under key for the job of ctx, fenced
// by its lease: callers read it with [Client.GetEvent] while the job runs
// or after (a progress figure, a link the job made, a question it asks). A
// later SetEvent of the key replaces it; an attempt that runs the handler
// again publishes it again.
func SetEvent(ctx context.Context, key string, value any) error {
	a, err := stepAttempt(ctx, "set event "+key)
	if err != nil {
		return err
	}
	b, err := json.Marshal(value)
	if err != nil {
		return fmt.Errorf("set event %s: its value: %w", key, err)
	}
	if rewrite, err := errandstore.CheckProgress(b); err == nil && rewrite {
		b = plainJSON(b)
	}
	err = a.engine.caps.steps.JobSetEvent(ctx, &errandstore.JobSetEventParams{
		JobLease: errandstore.JobLease{ID: a.job.ID, LeaseToken: *a.job.LeaseToken}, Key: key, Value: b})
	if err != nil {
		return fmt.Errorf("set event %s of job %s: %w", key, a.job.ID, err)
	}
	a.engine.watches.wake(eventKey(a.job.ID, key))
	return nil
}

// GetEvent returns the event key that job id published with [SetEvent],
// waiting up to wait for it to be published. One not published by then is
// an error wrapping ErrNoEvent.
func (c *engine) GetEvent(ctx context.Context, id, key string, wait time.Duration) (*errandtype.Event, error) {
	if c.caps.steps == nil {
		return nil, fmt.Errorf("event %s of job %s: %w", key, id, ErrStepsUnsupported)
	}
	var ev *errandtype.Event
	err := c.poll(ctx, wait, resultPoll, eventKey(id, key), func(any) (bool, error) {
		e, err := c.caps.steps.JobEvent(ctx, &errandstore.JobEventParams{ID: id, Key: key})
		if errors.Is(err, errandtype.ErrNotFound) {
			return false, nil
		}
		ev = e
		return err == nil, err
	})
	if err == nil && ev == nil {
		err = ErrNoEvent
	}
	if err != nil {
		return nil, fmt.Errorf("event %s of job %s: %w", key, id, err)
	}
	return ev, nil
}

// Stream returns a writer that appends what the handler of ctx writes to
// its job's output stream, each Write one chunk (a longer one split into
// chunks of errandstore.MaxStreamChunkBytes), fenced by the lease, for
// callers to read as it grows ([Client.ReadStream], the JSON API's
// server-sent events, the dashboard). Writes must be text (UTF-8); a
// stream holds at most errandstore.MaxStreamBytes and MaxStreamChunks,
// and a Write past them fails with an error naming the bound.
func Stream(ctx context.Context) io.Writer { return streamWriter{ctx: ctx} }

type streamWriter struct{ ctx context.Context }

func (w streamWriter) Write(p []byte) (int, error) {
	a, err := stepAttempt(w.ctx, "stream")
	if err != nil {
		return 0, err
	}
	written := 0
	for len(p) > 0 {
		n := min(len(p), errandstore.MaxStreamChunkBytes)
		for n < len(p) && n > 0 && !utf8.RuneStart(p[n]) {
			n-- // a chunk ends between characters
		}
		_, err := a.engine.caps.steps.JobStreamAppend(w.ctx, &errandstore.JobStreamAppendParams{
			JobLease: errandstore.JobLease{ID: a.job.ID, LeaseToken: *a.job.LeaseToken}, Data: string(p[:n])})
		if err != nil {
			return written, fmt.Errorf("stream of job %s: %w", a.job.ID, err)
		}
		written += n
		p = p[n:]
		a.engine.watches.wake(streamKey(a.job.ID))
	}
	return written, nil
}

// MaxStreamPage bounds the chunks ReadStream returns at once.
const MaxStreamPage = 1000

// streamPoll bounds the pause between ReadStream's reads while it waits.
const streamPoll = 250 * time.Millisecond

// ReadStream returns the chunks of job id's output stream after index
// after (-1 for all), at most limit (at most MaxStreamPage), and the job's
// state: a caller reads on from the last chunk's index until the job has
// finished and a read returns no chunk. With wait > 0, while there is no
// new chunk and the job has not finished, it waits up to wait for one: at
// once when this process's attempt writes it, otherwise by reading again
// at intervals up to a quarter of a second.
func (c *engine) ReadStream(ctx context.Context, id string, after, limit int, wait time.Duration) (*errandstore.StreamPage, error) {
	if c.caps.steps == nil {
		return nil, fmt.Errorf("stream of job %s: %w", id, ErrStepsUnsupported)
	}
	if limit <= 0 || limit > MaxStreamPage {
		limit = MaxStreamPage
	}
	var page *errandstore.StreamPage
	err := c.poll(ctx, wait, streamPoll, streamKey(id), func(any) (bool, error) {
		p, err := c.caps.steps.JobStream(ctx, &errandstore.JobStreamParams{ID: id, After: after, Limit: limit})
		page = p
		return err != nil || len(p.Chunks) > 0 || p.State.Terminal(), err
	})
	if err != nil {
		return nil, fmt.Errorf("stream of job %s: %w", id, err)
	}
	return page, nil
}

// stepWriter writes the steps of a client's attempts together: a step
// waits for the write in flight, if any, then goes in one transaction with
// every step that came meanwhile, as a database's group commit does. A
// flow's step costs one commit alone; a hundred flows' steps, a few.
type stepWriter struct {
	mu      sync.Mutex
	pending []*stepWrite
	writing bool
}

type stepWrite struct {
	p    *errandstore.JobStepRecordParams
	done chan error
}

const (
	// maxStepBatch bounds the steps of one write.
	maxStepBatch = 500
	// stepWriteTimeout bounds one write of steps; a step whose write fails
	// is not recorded, and its attempt sees the error.
	stepWriteTimeout = 30 * time.Second
)

// writeStep records p with the steps of the other attempts writing now,
// and returns what its write found for it.
func (c *engine) writeStep(p *errandstore.JobStepRecordParams) error {
	w := &c.stepw
	req := &stepWrite{p: p, done: make(chan error, 1)}
	w.mu.Lock()
	w.pending = append(w.pending, req)
	start := !w.writing
	w.writing = true
	w.mu.Unlock()
	if start {
		// No write in flight: this caller writes, without a goroutine's
		// hop, and hands what came meanwhile to one.
		c.writeSteps(req)
	}
	return <-req.done
}

// writeSteps writes the pending steps, a batch at a time: until own is
// answered, when own is not nil (and then hands the rest to another
// goroutine), or until none is left.
func (c *engine) writeSteps(own *stepWrite) {
	w := &c.stepw
	for {
		w.mu.Lock()
		n := min(len(w.pending), maxStepBatch)
		if n == 0 || own != nil && len(own.done) > 0 {
			if n > 0 {
				go c.writeSteps(nil)
			} else {
				w.writing = false
			}
			w.mu.Unlock()
			return
		}
		batch := w.pending[:n:n]
		w.pending = w.pending[n:]
		w.mu.Unlock()
		ps := make([]*errandstore.JobStepRecordParams, n)
		for i, r := range batch {
			ps[i] = r.p
		}
		ctx, cancel := context.WithTimeout(context.Background(), stepWriteTimeout)
		errs, err := c.caps.steps.JobStepRecordMany(ctx, ps)
		cancel()
		for i, r := range batch {
			if err != nil {
				r.done <- err
			} else {
				r.done <- errs[i]
			}
		}
	}
}
