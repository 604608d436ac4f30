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
	// Linger is how long a call that has fewer than Max jobs waits, from
	// the start of its first job, for jobs of the kind that the worker's
	// next claims return, 0 to MaxManyLinger. Zero: a call takes the jobs
	// of one claim. A call that reaches Max jobs starts at once. The jobs
	// waiting hold their slots and their leases, which the worker's
	// heartbeats renew, and their timeouts run: Linger must be shorter
	// than a Timeout.
	Linger time.Duration
}

// MaxManyLinger bounds [ManyOpts].Linger: a call waits to gather a few
// jobs more, not to hold work back.
const MaxManyLinger = time.Minute

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
	handleMany(ks, zero.Kind(), &manyHandler[T]{fn: fn, decode: decodeArgs[T], check: checkArgsAs[T]}, opts)
}

// HandleManyRaw registers fn as the handler of kind, called with up to
// opts.Max ready jobs of the kind at once as [HandleMany]'s is, each job's
// Args its args as stored (RawArgs: the JSON and its version), not
// decoded: the counterpart of [Kinds.HandleRaw] for a handler that passes
// the args on, to a command or another service, that decodes them itself.
func HandleManyRaw(ks *Kinds, kind string, fn func(ctx context.Context, jobs []*ManyJob[RawArgs]) []error, opts *ManyOpts) {
	raw := func(job *errandtype.Job) (RawArgs, error) {
		return RawArgs{KindName: job.Kind, JSON: job.Args, Version: job.ArgsVersion}, nil
	}
	handleMany(ks, kind, &manyHandler[RawArgs]{fn: fn, decode: raw}, opts)
}

// handleMany checks opts and registers h as the handler of kind.
func handleMany[T JobArgs](ks *Kinds, kind string, h *manyHandler[T], opts *ManyOpts) {
	var o ManyOpts
	if opts != nil {
		o = *opts
	}
	if o.Max < 0 || o.Max > MaxConcurrency {
		ks.fail(&errandtype.InputError{Field: "Kinds." + kind + ".Max", Message: fmt.Sprintf("must be 1 to %d (or 0 for %d)", MaxConcurrency, DefaultManyMax)})
		return
	}
	if o.Linger < 0 || o.Linger > MaxManyLinger {
		ks.fail(&errandtype.InputError{Field: "Kinds." + kind + ".Linger", Message: fmt.Sprintf("%v is out of range; give 0 to %v", o.Linger, MaxManyLinger)})
		return
	}
	if o.Linger > 0 && o.Timeout > 0 && o.Linger >= o.Timeout {
		ks.fail(&errandtype.InputError{Field: "Kinds." + kind + ".Linger", Message: fmt.Sprintf("%v is not shorter than the kind's Timeout %v, which counts from each job's start; shorten Linger", o.Linger, o.Timeout)})
		return
	}
	if o.Max == 0 {
		o.Max = DefaultManyMax
	}
	h.max, h.linger = o.Max, o.Linger
	ks.add(kind, h, &o.KindOpts)
}

// manyRunner is a handler that runs jobs claimed together in one call: the
// worker seats them in a group before their attempts start.
type manyRunner interface {
	Handler
	maxJobs() int
	lingerFor() time.Duration
	// group returns a group for n jobs, whose call runs under parent;
	// with n = 0, an open group that takes seats until it is closed or
	// full.
	group(parent context.Context, n int) manyGroup
}

// manyGroup is a call's jobs as the worker sees them.
type manyGroup interface {
	// leave withdraws seat i from the call if its job has not joined: its
	// attempt ended without the handler (args that do not decode, a key
	// it lacks). The call starts once every seat has joined or left.
	leave(i int)
	// seat adds a seat to an open group, false when it is closed or full.
	seat() (int, bool)
	// close takes no more seats: the call starts once every seat has
	// joined or left.
	close()
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
	fn     func(ctx context.Context, jobs []*ManyJob[T]) []error
	decode func(job *errandtype.Job) (T, error)
	// check decodes args of the handler's current version, for a replay
	// that replaces them; nil for raw args, which are taken as they are.
	check  func(raw json.RawMessage) (int, error)
	max    int
	linger time.Duration
}

func (h *manyHandler[T]) maxJobs() int             { return h.max }
func (h *manyHandler[T]) lingerFor() time.Duration { return h.linger }

// checkArgs decodes raw, args of the handler's current version, into a T;
// version 0 (keep the job's) for raw args.
func (h *manyHandler[T]) checkArgs(raw json.RawMessage) (int, error) {
	if h.check == nil {
		return 0, nil
	}
	return h.check(raw)
}

// Work joins the job to its group's call, or, outside a group, calls fn
// with it alone.
func (h *manyHandler[T]) Work(ctx context.Context, job *errandtype.Job) error {
	seat, _ := ctx.Value(manySeatKey{}).(*manySeat)
	args, err := h.decode(job)
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
	return &manyCall[T]{h: h, parent: parent, seats: make([]manySeatState[T], n), waiting: n, open: n == 0}
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
	waiting int  // seats neither joined nor left
	open    bool // takes more seats: lingering and not full
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
	last := g.waiting == 0 && !g.open
	g.mu.Unlock()
	if last {
		g.call()
	}
	return <-res
}

func (g *manyCall[T]) seat() (int, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.open {
		return 0, false
	}
	g.seats = append(g.seats, manySeatState[T]{})
	g.waiting++
	if len(g.seats) == g.h.max {
		g.open = false // full: the call starts once its jobs join
	}
	return len(g.seats) - 1, true
}

func (g *manyCall[T]) close() {
	g.mu.Lock()
	if !g.open {
		g.mu.Unlock()
		return
	}
	g.open = false
	last := g.waiting == 0
	g.mu.Unlock()
	if last {
		go g.call() // called from a timer: the joined jobs wait for it
	}
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
	last := g.waiting == 0 && !g.open
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
	g.mu.Lock() // a lingering group's seats grew under it; none is added now
	for i := range g.seats {
		if s := &g.seats[i]; s.job != nil {
			seats, jobs = append(seats, s), append(jobs, s.job)
		}
	}
	g.mu.Unlock()
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

// checkLingers refuses a Linger of half the worker's lease or more: the
// jobs waiting keep their leases only by heartbeats, and one missed must
// not lose them.
func checkLingers(many map[string]manyRunner, lease time.Duration) error {
	for kind, r := range many {
		if l := r.lingerFor(); l > 0 && l >= lease/2 {
			return &errandtype.InputError{Field: "Kinds." + kind + ".Linger", Message: fmt.Sprintf("%v is not under half the worker's Lease %v; shorten Linger or lengthen Lease", l, lease)}
		}
	}
	return nil
}

// startMany starts the jobs of many kinds in jobs, a claim's, in groups of
// at most their handlers' Max (or in the kind's lingering group), each job
// an attempt of its own in a slot of slots, and returns the other jobs.
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
	start := func(g manyGroup, i int, job *errandtype.Job) {
		ctx := context.WithValue(runCtx, manySeatKey{}, &manySeat{g: g, i: i})
		w.running.Go(func() {
			a := w.c.runAttempt(ctx, w.leases, job, w.cfg.Lease, claimSent, false, span)
			g.leave(i) // an attempt that ended without joining
			w.recordAttempt(runCtx, slots, a)
		})
	}
	for _, kind := range kinds {
		r := w.many[kind]
		if r.lingerFor() > 0 {
			for _, job := range byKind[kind] {
				g, i := w.lingering.seat(runCtx, w.c.clock, kind, r)
				start(g, i, job)
			}
			continue
		}
		for chunk := range slices.Chunk(byKind[kind], r.maxJobs()) {
			g := r.group(runCtx, len(chunk))
			for i, job := range chunk {
				start(g, i, job)
			}
		}
	}
	return rest
}

// lingerGroups are a worker's open groups, at most one per kind: the
// jobs of a kind with a Linger that its claims returned since the group's
// first, until the group is full or its Linger has passed.
type lingerGroups struct {
	mu   sync.Mutex
	open map[string]*lingerGroup
}

type lingerGroup struct {
	g     manyGroup
	timer errandtype.Timer // closes g once the kind's Linger has passed
}

// seat seats a job of kind in its open group, opening one when there is
// none or it is closed or full.
func (l *lingerGroups) seat(runCtx context.Context, clock errandtype.TimeSource, kind string, r manyRunner) (manyGroup, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if lg := l.open[kind]; lg != nil {
		if i, ok := lg.g.seat(); ok {
			return lg.g, i
		}
		lg.timer.Stop()
	}
	g := r.group(runCtx, 0)
	i, _ := g.seat()
	if l.open == nil {
		l.open = map[string]*lingerGroup{}
	}
	l.open[kind] = &lingerGroup{g: g, timer: clock.AfterFunc(r.lingerFor(), g.close)}
	return g, i
}

// closeAll starts the calls of every open group: once claiming has
// stopped no job will join them.
func (l *lingerGroups) closeAll() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for kind, lg := range l.open {
		lg.timer.Stop()
		lg.g.close()
		delete(l.open, kind)
	}
}
