package errand

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime/debug"
	"slices"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/errandhq/errand/errandtype"
)

// DefaultManyMax is the most jobs a many handler takes in one call when
// its ManyOpts say none.
const DefaultManyMax = 100

// ClassResultCount: a many handler returned a number of errors other than
// the number of jobs it was given, so no job's outcome is known. Every job
// of the call fails with it, retryable as the kind's policy says.
const ClassResultCount = "result_count"

// ManyOpts are the policies of a kind run by a many handler: its KindOpts,
// and how many jobs one call takes.
type ManyOpts struct {
	KindOpts
	// Max is the most jobs of the kind one call takes, 1 to
	// MaxConcurrency. Zero means DefaultManyMax. A call takes the jobs of
	// its kind that one claim returned, so a queue's slots bound it too.
	Max int
}

// ManyJob is one job of a call to a many handler: the job, its decoded
// args, and its own context.
type ManyJob[T JobArgs] struct {
	Job  *errandtype.Job
	Args T
	ctx  context.Context
}

// Context is this job's own context: it ends when the job's timeout
// passes, its lease is lost or it is cancelled, while the others of the
// call go on. It carries the job's attempt, for [SetProgress], [Step] and
// the like.
func (j *ManyJob[T]) Context() context.Context { return j.ctx }

// HandleMany registers fn as the handler of T's kind, called with up to
// opts.Max ready jobs of the kind at once: those one claim of a worker
// returned. fn returns one error per job, in the order of jobs: nil
// acknowledges it, any other error is its failure, classified as a single
// handler's is ([Permanent], [RetryAfter], [WithClass], [Snooze]). Each job
// keeps its own lease, heartbeat, attempt, timeout and outcome, and holds
// one of the worker's slots. A panic fails every job of the call with
// class "panic"; a result of the wrong length fails every job with class
// "result_count". Args are decoded as [Handle] decodes them; a job whose
// args do not decode is dead-lettered and left out of the call. fn's
// context ends when every job's context has ended. Outside a Worker's
// claims ([Client.WorkOne], jobs run as they are enqueued) fn is called
// with one job.
func HandleMany[T JobArgs](ks *Kinds, fn func(ctx context.Context, jobs []*ManyJob[T]) []error, opts *ManyOpts) {
	var zero T
	var o ManyOpts
	if opts != nil {
		o = *opts
	}
	if o.Max < 0 || o.Max > MaxConcurrency {
		ks.fail(&errandtype.InputError{Field: "Kinds." + zero.Kind() + ".Max", Message: fmt.Sprintf("must be 1 to %d (or 0 for %d)", MaxConcurrency, DefaultManyMax)})
		return
	}
	if o.Max == 0 {
		o.Max = DefaultManyMax
	}
	ks.add(zero.Kind(), &manyHandler[T]{fn: fn, max: o.Max}, &o.KindOpts)
}

// manyRunner is a handler that runs jobs claimed together in one call: the
// worker seats them in a group before their attempts start.
type manyRunner interface {
	Handler
	maxJobs() int
	// group returns a group for n jobs, whose call runs under parent.
	group(parent context.Context, n int) manyGroup
}

// manyGroup is a call's jobs as the worker sees them.
type manyGroup interface {
	// leave withdraws seat i from the call if its job has not joined: its
	// attempt ended without the handler (args that do not decode, a key
	// it lacks). The call starts once every seat has joined or left.
	leave(i int)
}

// manySeat is a job's place in a group, carried in its attempt's context.
type manySeat struct {
	g manyGroup
	i int
}

type manySeatKey struct{}

// manyHandler decodes each job's args into T and calls fn with the jobs
// of a group.
type manyHandler[T JobArgs] struct {
	fn  func(ctx context.Context, jobs []*ManyJob[T]) []error
	max int
}

func (h *manyHandler[T]) maxJobs() int { return h.max }

// checkArgs decodes raw, args of the handler's current version, into a T.
func (h *manyHandler[T]) checkArgs(raw json.RawMessage) (int, error) { return checkArgsAs[T](raw) }

// Work joins the job to its group's call, or, outside a group, calls fn
// with it alone.
func (h *manyHandler[T]) Work(ctx context.Context, job *errandtype.Job) error {
	seat, _ := ctx.Value(manySeatKey{}).(*manySeat)
	args, err := decodeArgs[T](job)
	if err != nil {
		if seat != nil {
			seat.g.leave(seat.i)
		}
		return err
	}
	mj := &ManyJob[T]{Job: job, Args: args, ctx: ctx}
	if seat == nil {
		errs := h.fn(ctx, []*ManyJob[T]{mj})
		if len(errs) != 1 {
			return resultCountError(job.Kind, len(errs), 1)
		}
		return errs[0]
	}
	return seat.g.(*manyCall[T]).join(seat.i, mj)
}

func (h *manyHandler[T]) group(parent context.Context, n int) manyGroup {
	return &manyCall[T]{h: h, parent: parent, seats: make([]manySeatState[T], n), waiting: n}
}

// resultCountError fails a job of a call whose handler returned got errors
// for n jobs.
func resultCountError(kind string, got, n int) error {
	return WithClass(ClassResultCount, fmt.Errorf("the handler of kind %q returned %d errors for %d jobs; return one error (or nil) per job, in their order", kind, got, n))
}

// manyCall is the jobs of one call to h.fn.
type manyCall[T JobArgs] struct {
	h       *manyHandler[T]
	parent  context.Context
	mu      sync.Mutex
	seats   []manySeatState[T]
	waiting int // seats neither joined nor left
}

type manySeatState[T JobArgs] struct {
	job    *ManyJob[T] // nil until joined
	left   bool
	result chan error
}

// join seats job at i and returns its error once the call has returned.
// The last job to join makes the call.
func (g *manyCall[T]) join(i int, job *ManyJob[T]) error {
	res := make(chan error, 1)
	g.mu.Lock()
	g.seats[i].job, g.seats[i].result = job, res
	g.waiting--
	last := g.waiting == 0
	g.mu.Unlock()
	if last {
		g.call()
	}
	return <-res
}

func (g *manyCall[T]) leave(i int) {
	g.mu.Lock()
	s := &g.seats[i]
	if s.job != nil || s.left {
		g.mu.Unlock()
		return
	}
	s.left = true
	g.waiting--
	last := g.waiting == 0
	g.mu.Unlock()
	if last {
		go g.call() // the leaving job's own outcome need not wait for it
	}
}

// call calls the handler with the jobs that joined, and gives each its
// error.
func (g *manyCall[T]) call() {
	var seats []*manySeatState[T]
	var jobs []*ManyJob[T]
	for i := range g.seats {
		if s := &g.seats[i]; s.job != nil {
			seats, jobs = append(seats, s), append(jobs, s.job)
		}
	}
	if len(jobs) == 0 {
		return
	}
	// The call's context ends when every job's has: one job's lost lease
	// or timeout must not cut the others short.
	ctx, cancel := context.WithCancel(g.parent)
	defer cancel()
	var ended sync.WaitGroup
	ended.Add(len(jobs))
	stops := make([]func() bool, len(jobs))
	for i, j := range jobs {
		stops[i] = context.AfterFunc(j.ctx, ended.Done)
	}
	go func() {
		ended.Wait()
		cancel()
	}()
	errs := g.run(ctx, jobs)
	for i, stop := range stops {
		if stop() {
			ended.Done() // the waiter must not outlive the call
		}
		seats[i].result <- errs[i]
	}
}

// run calls the handler, turning a panic, or a result of the wrong length,
// into an error for every job.
func (g *manyCall[T]) run(ctx context.Context, jobs []*ManyJob[T]) (errs []error) {
	defer func() {
		if r := recover(); r != nil {
			err := &panicked{err: &JobError{class: ClassPanic, err: fmt.Errorf("panic: %v", r)}, stack: string(debug.Stack())}
			errs = slices.Repeat([]error{err}, len(jobs))
		}
	}()
	errs = g.h.fn(ctx, jobs)
	if len(errs) != len(jobs) {
		err := resultCountError(jobs[0].Job.Kind, len(errs), len(jobs))
		errs = slices.Repeat([]error{err}, len(jobs))
	}
	return errs
}

// panicked is a panic recovered on another job's goroutine, with its
// stack: callHandler records it as the job's own.
type panicked struct {
	err   error
	stack string
}

func (p *panicked) Error() string { return p.err.Error() }
func (p *panicked) Unwrap() error { return p.err }

// manyKinds returns the kinds of handlers with many-runners, nil when none.
func (c *engine) manyKinds(kinds []string) map[string]manyRunner {
	var m map[string]manyRunner
	for _, name := range kinds {
		if r, ok := c.kind(name).handler.(manyRunner); ok {
			if m == nil {
				m = map[string]manyRunner{}
			}
			m[name] = r
		}
	}
	return m
}

// startMany starts the jobs of many kinds in jobs, a claim's, in groups of
// at most their handlers' Max, each job an attempt of its own in a slot of
// slots, and returns the other jobs.
func (w *Worker) startMany(runCtx context.Context, slots *queueSlots, jobs []*errandtype.Job, claimSent time.Time, span *trace.SpanContext) []*errandtype.Job {
	var rest []*errandtype.Job
	var kinds []string
	byKind := map[string][]*errandtype.Job{}
	for _, job := range jobs {
		if w.many[job.Kind] == nil {
			rest = append(rest, job)
			continue
		}
		if byKind[job.Kind] == nil {
			kinds = append(kinds, job.Kind)
		}
		byKind[job.Kind] = append(byKind[job.Kind], job)
	}
	for _, kind := range kinds {
		r := w.many[kind]
		for chunk := range slices.Chunk(byKind[kind], r.maxJobs()) {
			g := r.group(runCtx, len(chunk))
			for i, job := range chunk {
				seat := &manySeat{g: g, i: i}
				ctx := context.WithValue(runCtx, manySeatKey{}, seat)
				w.running.Go(func() {
					a := w.c.runAttempt(ctx, w.leases, job, w.cfg.Lease, claimSent, false, span)
					g.leave(i) // an attempt that ended without joining
					w.recordAttempt(runCtx, slots, a)
				})
			}
		}
	}
	return rest
}
