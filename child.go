package errand

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
)

// Children. A durable handler enqueues child jobs with [Child] and waits
// for them with [Await] (fan-out, then fan-in). A child's id is its
// parent's, ".child.", and its name, so the handler's later attempts find
// it enqueued already. When a child finishes, its worker sends the parent a
// signal (errand.child:ID) with the child's state and output, which wakes
// the parent's Await; an Await that finds no signal also reads the child
// itself, and looks again every few minutes, for a child that ended
// without an attempt (cancelled while waiting, past its deadline).

const childInfix = ".child"

// childRecheck bounds how long an Await sleeps between looks at a child
// that sent no signal.
const childRecheck = 5 * time.Minute

// ChildJobID is the id of the child job named name of job parentID.
func ChildJobID(parentID, name string) string { return parentID + childInfix + "." + name }

// childParent returns the parent's id of a child job's id, or "".
func childParent(id string) string {
	i := strings.LastIndex(id, childInfix+".")
	if i <= 0 || i+len(childInfix)+1 == len(id) {
		return ""
	}
	return id[:i]
}

// childSignal is the name of the signal a child sends its parent.
func childSignal(id string) string { return reservedStepPrefix + "child:" + id }

// ErrChildFailed is wrapped by Await's error for a child that ended dead
// or cancelled.
var ErrChildFailed = errors.New("the child job did not succeed")

// childResult is what a finished child tells its parent.
type childResult struct {
	State  errandtype.JobState `json:"state"`
	Output json.RawMessage     `json:"output,omitempty"`
}

// Child enqueues args as a child of the job of ctx, named name (as a
// workflow step's name: no spaces, no dots), and returns its id,
// [ChildJobID]. Calling it again for the same name, in a later attempt,
// finds the child enqueued and enqueues nothing. opts may not give an ID.
func Child(ctx context.Context, name string, args JobArgs, opts *EnqueueOpts) (string, error) {
	a, err := stepAttempt(ctx, "child "+name)
	if err != nil {
		return "", err
	}
	if err := errandstore.CheckChildName(name); err != nil {
		return "", fmt.Errorf("child %q: %w", name, err)
	}
	o := EnqueueOpts{}
	if opts != nil {
		if opts.ID != "" {
			return "", fmt.Errorf("child %q: leave EnqueueOpts.ID empty; a child's id is %s", name, ChildJobID(a.job.ID, name))
		}
		o = *opts
	}
	c := a.engine
	id := ChildJobID(a.job.ID, name)
	ip, err := c.ownInsertParam(ctx, &EnqueueParams{Args: args, Opts: &o}, id)
	if err != nil {
		return "", fmt.Errorf("child %q: %w", name, err)
	}
	rs, err := c.store.JobInsertMany(ctx, &errandstore.JobInsertManyParams{Jobs: []*errandstore.JobInsertParams{ip}})
	if err != nil {
		return "", fmt.Errorf("child %q: %w", name, err)
	}
	if !rs[0].Duplicate {
		c.wakeQueues(ip.Queue)
		if c.observer != nil {
			c.observer.JobsEnqueued([]*errandtype.Job{rs[0].Job})
		}
	}
	return id, nil
}

// Await waits for the child job id of the job of ctx (see [Child]) to
// finish, and returns its output (see [SetOutput]) decoded into a T; a
// child that ended dead or cancelled is an error wrapping ErrChildFailed.
// The wait is durable, as [WaitFor]'s: the attempt ends without counting
// and the job resumes when the child finishes. What it found is recorded as
// a step, so later attempts get it back. A child of a kind with
// DeleteOnSuccess has no output to give: T's zero value.
func Await[T any](ctx context.Context, id string) (T, error) {
	var zero T
	a, err := stepAttempt(ctx, "await "+id)
	if err != nil {
		return zero, err
	}
	if childParent(id) != a.job.ID {
		return zero, fmt.Errorf("await %s: not a child of job %s; enqueue it with errand.Child", id, a.job.ID)
	}
	// A wait for the child's signal, then what came of it: two steps, as
	// WaitFor's, so that the signal wakes the job as it wakes a WaitFor.
	if _, err := a.waitRecord(ctx, childSignal(id), time.Time{}, 0); err != nil {
		return zero, err
	}
	log := a.stepLog()
	idx, rec, err := log.take(ctx, a, errandstore.AwaitStepName)
	if err != nil {
		return zero, err
	}
	defer log.done()
	var got awaitResult
	if rec != nil {
		if err := json.Unmarshal(rec.Result, &got); err != nil || got.Child != id {
			return zero, log.stop(Permanent(WithClass(ClassNondeterministic,
				fmt.Errorf("step %d: the code awaits child %s where the job recorded %s", idx, id, rec.Result))))
		}
	} else {
		r, done, err := a.childOutcome(ctx, id)
		if err != nil {
			return zero, fmt.Errorf("await %s: %w", id, err)
		}
		if !done {
			return zero, log.stop(&suspension{until: a.engine.clock.Now().Add(childRecheck), left: childRecheck, wait: childSignal(id)})
		}
		got = awaitResult{Child: id, childResult: r}
		b, _ := json.Marshal(got)
		if err := a.recordStep(ctx, errandtype.Step{Index: idx, Name: errandstore.AwaitStepName, Result: b}); err != nil {
			return zero, err
		}
	}
	if got.State != errandtype.StateSucceeded {
		return zero, Permanent(fmt.Errorf("child %s ended %s: %w", id, got.State, ErrChildFailed))
	}
	var v T
	if len(got.Output) == 0 {
		return v, nil
	}
	out, err := a.engine.open("output", got.Output)
	if err != nil {
		return zero, fmt.Errorf("child %s: %w", id, err)
	}
	if err := json.Unmarshal(out, &v); err != nil {
		return zero, Permanent(fmt.Errorf("child %s: its output %s does not decode into %T: %w", id, got.Output, v, err))
	}
	return v, nil
}

// awaitResult is a recorded Await.
type awaitResult struct {
	Child string `json:"child"`
	childResult
}

// childOutcome returns what child id came to, and whether it has
// finished: from its signal, or else from the child itself.
func (a *attemptInfo) childOutcome(ctx context.Context, id string) (childResult, bool, error) {
	sigs, err := a.engine.caps.steps.JobSignals(ctx, &errandstore.JobSignalsParams{ID: a.job.ID, Name: childSignal(id)})
	if err != nil {
		return childResult{}, false, err
	}
	if len(sigs) > 0 {
		var r childResult
		err := json.Unmarshal(sigs[len(sigs)-1].Value, &r)
		return r, err == nil, err
	}
	j, err := a.store.JobGet(ctx, &errandstore.JobGetParams{ID: id})
	if err != nil {
		return childResult{}, false, err // a child gone without its signal
	}
	if !j.State.Terminal() {
		return childResult{}, false, nil
	}
	return childResult{State: j.State, Output: j.Output}, true, nil
}

// afterChild tells the parent of job, a child that finished in state, what
// it came to, waking the parent's Await.
func (c *engine) afterChild(ctx context.Context, job *errandtype.Job, state errandtype.JobState) {
	parent := childParent(job.ID)
	if parent == "" || c.caps.steps == nil {
		return
	}
	ctx = context.WithoutCancel(ctx)
	r := childResult{State: state}
	if j, err := c.store.JobGet(ctx, &errandstore.JobGetParams{ID: job.ID}); err == nil {
		r.Output = j.Output
	}
	b, _ := json.Marshal(r)
	if err := c.Signal(ctx, parent, childSignal(job.ID), json.RawMessage(b)); err != nil &&
		!errors.Is(err, errandtype.ErrNotFound) && !errors.Is(err, errandtype.ErrWrongState) {
		c.logger.Warn("could not tell a child's parent that it finished; the parent looks again within minutes",
			"job_id", job.ID, "parent_id", parent, "err", err)
	}
}

// ErrNotFinished is wrapped by Result's error for a job that has not
// finished within the wait.
var ErrNotFinished = errors.New("the job has not finished")

// JobResult is what a finished job came to.
type JobResult struct {
	ID    string              `json:"id"`
	State errandtype.JobState `json:"state"`
	// Output is what its handler recorded with SetOutput, if anything.
	Output json.RawMessage `json:"output,omitempty"`
	// LastError is its last attempt's failure, for a dead or cancelled job.
	LastError *errandtype.LastError `json:"last_error,omitempty"`
}

// clone is a copy of r that shares no memory with it: one is handed to
// every wait on the job.
func (r *JobResult) clone() *JobResult {
	c := *r
	c.Output = bytes.Clone(r.Output)
	if r.LastError != nil {
		e := *r.LastError
		c.LastError = &e
	}
	return &c
}

// handedResult is the result a wait on the job of outcome o, whose write
// returned r, is handed in this process instead of reading the job: what
// the write reported of the job it left finished (with Follow; see
// [errandstore.OutcomeResult]). It is nil, and the wait reads the job, when
// the write did not report it, left the job unfinished or deleted it (a
// read then finds no job).
func handedResult(o *errandstore.JobOutcome, r errandstore.OutcomeResult) *JobResult {
	if r.Err != nil || r.Kind == "" || o.Delete || !r.State.Terminal() {
		return nil
	}
	return &JobResult{ID: o.ID, State: r.State, Output: r.Output, LastError: r.LastError}
}

// resultPoll bounds the pause between Result's reads of a job.
const resultPoll = time.Second

// Result returns what job id came to once it has finished (succeeded, dead
// or cancelled). With wait > 0 it waits for that up to wait, learning it as
// soon as this process's workers finish the job, and otherwise reading the
// job at growing intervals up to a second; a job not finished by then
// is an error wrapping ErrNotFinished. An unknown job wraps ErrNotFound.
func (c *engine) Result(ctx context.Context, id string, wait time.Duration) (*JobResult, error) {
	var res *JobResult
	var state errandtype.JobState
	first := true
	err := c.poll(ctx, wait, resultPoll, finishKey(id), func(handed any) (bool, error) {
		// What the outcome's committed write of a worker of this process
		// reported spares the read (see handedResult).
		if h, ok := handed.(*JobResult); ok && h.ID == id {
			res = h.clone()
			return true, nil
		}
		// A job this process started eagerly and still runs is not
		// finished (unless its lease ran out): the wait, watching already,
		// begins without a read, which would only slow the attempt down.
		// Its end wakes the wait; a poll reads the job otherwise.
		if first {
			first = false
			if wait > 0 && c.eager.running(id) {
				return false, nil
			}
		}
		j, err := c.store.JobGet(ctx, &errandstore.JobGetParams{ID: id})
		if err != nil {
			return false, err
		}
		state = j.State
		if j.State.Terminal() {
			res = &JobResult{ID: j.ID, State: j.State, Output: j.Output, LastError: j.LastError}
		}
		return res != nil, nil
	})
	if err == nil && res == nil {
		err = fmt.Errorf("it is %s: %w", state, ErrNotFinished)
	}
	if err != nil {
		return nil, fmt.Errorf("result of job %s: %w", id, err)
	}
	return res, nil
}
