// Package completer records the outcomes of a worker's attempts in batches,
// one store call for every outcome waiting, each still fenced by its own
// lease token, and gives back the queue slots a written batch frees.
package completer

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
	"github.com/errandhq/errand/internal/clock"
)

// maxOutcomeBatch bounds how many outcomes one transaction records. Batches
// fill only while a write is in flight, so the bound matters under load
// alone: there, batches of 500 against 100 raised the work throughput of
// the bench/ comparison by a fifth on both stores (a statement and a
// commit per 500 jobs, not per 100), and batches of 1,000 added nothing.
const maxOutcomeBatch = 500

// Batcher records the outcomes of a Worker's attempts in batches: a
// single goroutine takes every outcome waiting for it (up to
// maxOutcomeBatch) and writes them with one JobRecordOutcomes call, so a
// worker running many short jobs commits once per batch instead of once per
// job (commits are what a store runs out of first; see docs/design.md, "Storage decisions").
// The store still fences each outcome by its own lease token. A lone
// outcome waits to be written only while other jobs of the worker are
// still running, and then no longer than outcomeLinger (see there); with
// a write in flight, outcomes batch up behind it. Under load, up to
// maxOutcomeWrites full batches are written at once.
type Batcher[S Slots] struct {
	Config
	reqs chan outcomeRequest[S]
	done chan struct{}
	// waiting counts the outcomes the batcher has taken and not yet
	// answered: with stats.running, the jobs held, it tells whether other
	// jobs are still running (see outcomeLinger). An outcome is counted
	// when the batcher takes it, not when it is handed over, so that the
	// batcher never finds a job ended whose outcome it has not seen: a
	// batch written without that outcome would free its slot alone, and
	// the claim for it alone would split the jobs of later claims into
	// writes of their own for as long as the queue stays busy.
	waiting atomic.Int64
}

type outcomeRequest[S Slots] struct {
	o     *errandstore.JobOutcome
	reply chan outcomeReply // buffered: the batcher never blocks on a sender
	// done, when not nil, is called with the outcome's result instead of
	// a reply, and reports whether the job's slot in slots is to be given
	// back: see submit.
	done  func(errandstore.OutcomeResult, error) bool
	slots S
	// detached: the job's slot was given back at the handover, so the
	// outcome does not count among those of jobs still held (waiting).
	detached bool
}

// answer hands the result of req's outcome to its sender, and reports
// whether req's slot is to be given back.
func (req *outcomeRequest[S]) answer(b *Batcher[S], r errandstore.OutcomeResult, err error) bool {
	if !req.detached {
		b.waiting.Add(-1)
	}
	if req.done != nil {
		var none S
		return req.done(r, err) && req.slots != none
	}
	req.reply <- outcomeReply{r: r, err: err}
	return false
}

type outcomeReply struct {
	r   errandstore.OutcomeResult
	err error
}

// outcomeQueue is how many outcomes may wait to be taken by the batcher
// while it holds a full batch of its own (see start). A job finishing
// hands its outcome over at once unless that many are already waiting:
// without the room, a burst of finishing jobs (the batch of a claim)
// found the batcher busy every time, and each paid for a timer to bound
// its wait.
const outcomeQueue = maxOutcomeBatch

// Config is what a Batcher takes from its worker.
type Config struct {
	Store Recorder
	// Running counts the jobs the worker holds (see outcomeLinger);
	// Writes counts the store calls that recorded outcomes.
	Running, Writes *atomic.Int64
	Direct          bool // no batching: each caller writes its own outcome
	// Timeout bounds one write. A write that hangs (a connection cut off
	// without a reset) would otherwise hold up every later outcome, and
	// Stop with them; after the timeout the caller retries it on another
	// connection while the lease lasts.
	Timeout time.Duration
	Clock   errandtype.TimeSource // times the timeout
	// Abandoned, when set, makes flush write nothing (see Worker.Abandon).
	Abandoned *atomic.Bool
	// Follow, when set, is asked before each write whether the store is to
	// report what JobRecordOutcomesParams.Follow asks for.
	Follow func() bool
}

// params are the parameters of a write of outcomes.
func (b *Batcher[S]) params(outcomes []*errandstore.JobOutcome) *errandstore.JobRecordOutcomesParams {
	return &errandstore.JobRecordOutcomesParams{Outcomes: outcomes, Follow: b.Follow != nil && b.Follow()}
}

// Recorder is the part of a store the batcher calls.
type Recorder interface {
	JobRecordOutcomes(ctx context.Context, params *errandstore.JobRecordOutcomesParams) ([]errandstore.OutcomeResult, error)
}

// Slots are the slots of one queue of a worker, which a written outcome
// may give back (Free) and whose claim loop it wakes (Wake): a pointer,
// its zero value for none. A type parameter rather than an interface
// value, so that an outcome in a batch stays one word smaller.
type Slots interface {
	comparable
	Free()
	Wake()
}

// ErrAbandoned answers the outcomes of a worker that abandoned its jobs.
var ErrAbandoned = errors.New("worker abandoned its jobs")

// New returns a batcher; Start runs it.
func New[S Slots](cfg Config) *Batcher[S] {
	return &Batcher[S]{Config: cfg, reqs: make(chan outcomeRequest[S], outcomeQueue), done: make(chan struct{})}
}

// maxOutcomeWrites bounds how many batches are written at once. A second
// write starts only while one is in flight and a full batch waits, that is
// when the outcomes arrive faster than one connection records them: on
// PostgreSQL the writes then overlap their round trips (a busy worker was
// measured waiting on its one outcome writer with every batch full, its pool
// mostly idle). A lone or partial batch still waits for the write in flight,
// gathering more outcomes meanwhile, so a lightly loaded worker writes as few
// batches as before. Two leaves the default pool of four connections room
// for claims and heartbeats. On SQLite, whose one writer serialises them, the
// overlapping writes are the same full batches in the same order of
// commits: nothing changes. Concurrent batches never hold the same job (a
// lease has one outcome), and each store locks a batch's rows in id order,
// so two writes cannot deadlock.
const maxOutcomeWrites = 2

// outcomeLinger is the longest a lone outcome waits for others to join its
// batch, and it waits only while other jobs of the worker are still
// running (held, and their outcomes not handed over): the jobs of one
// claim that finish together then go in one write, and free their slots
// for one claim, rather than the first alone and the rest behind it. In
// the bench/ comparison (5,000 no-op jobs, alternated with the code before)
// work at 10 jobs at once went from 4.5–4.9k to 5.4–5.6k jobs/s on
// PostgreSQL and from 6.9–7.1k to 10.6–10.8k on SQLite, at 50 from
// 12.7–13.8k to 16.6–16.9k on PostgreSQL. It runs on real time, as the
// claim's timeout does: a wait this short is no decision for a test's
// clock to hold back.
const outcomeLinger = 200 * time.Microsecond

// Start runs the batcher until stop. ctx carries values to the store; its
// cancellation is ignored, since a recorded outcome is what lets a job move
// on without waiting for its lease to expire.
func (b *Batcher[S]) Start(ctx context.Context) {
	l := &batchLoop[S]{
		b:       b,
		ctx:     context.WithoutCancel(ctx),
		written: make(chan []outcomeRequest[S], maxOutcomeWrites),
		reqs:    b.reqs,
		linger:  time.NewTimer(outcomeLinger),
	}
	l.linger.Stop()
	go func() {
		defer close(b.done)
		for l.reqs != nil || len(l.batch) > 0 || l.inFlight > 0 {
			// The outcomes already handed over join the batch at once,
			// before the batcher decides whether to write it.
			l.takeWaiting()
			full := len(l.batch) == maxOutcomeBatch
			wait := l.shouldLinger(full)
			if len(l.batch) > 0 && !wait && (l.inFlight == 0 || full && l.inFlight < maxOutcomeWrites) {
				l.writeBatch()
				full = false
			}
			l.next(full)
		}
	}()
}

// batchLoop is the state of the batcher's goroutine.
type batchLoop[S Slots] struct {
	b   *Batcher[S]
	ctx context.Context
	// A write that ends hands its batch back, emptied, on written, to be
	// filled again (spare): a batch has room for maxOutcomeBatch, and
	// allocating one per write would cost more than the few outcomes it
	// often holds.
	written  chan []outcomeRequest[S]
	spare    [][]outcomeRequest[S]
	inFlight int
	batch    []outcomeRequest[S]
	reqs     chan outcomeRequest[S] // nil once closed
	linger   *time.Timer
	// lingering: the timer runs; lingered: it ran out for this batch.
	lingering, lingered bool
}

// add puts req in the batch.
func (l *batchLoop[S]) add(req outcomeRequest[S]) {
	if !req.detached {
		l.b.waiting.Add(1)
	}
	if l.batch == nil {
		if n := len(l.spare); n > 0 {
			l.batch, l.spare = l.spare[n-1], l.spare[:n-1]
		} else {
			l.batch = make([]outcomeRequest[S], 0, maxOutcomeBatch)
		}
	}
	l.batch = append(l.batch, req)
}

// takeWaiting adds the outcomes waiting to be taken, while the batch has
// room.
func (l *batchLoop[S]) takeWaiting() {
	for len(l.batch) < maxOutcomeBatch && l.reqs != nil && len(l.reqs) > 0 {
		req, ok := <-l.reqs
		if !ok {
			l.reqs = nil
			return
		}
		l.add(req)
	}
}

// shouldLinger reports whether a lone batch waits for others to join it
// (see outcomeLinger), and arms or stops the timer to match.
func (l *batchLoop[S]) shouldLinger(full bool) bool {
	wait := len(l.batch) > 0 && l.inFlight == 0 && !full && !l.lingered && l.reqs != nil && l.b.othersRunning()
	if wait && !l.lingering {
		l.linger.Reset(outcomeLinger)
		l.lingering = true
	}
	if !wait && l.lingering {
		l.linger.Stop()
		l.lingering = false
	}
	return wait
}

// writeBatch starts the batch's write on a goroutine of its own.
func (l *batchLoop[S]) writeBatch() {
	l.inFlight++
	wakeDetached(l.batch)
	go func(batch []outcomeRequest[S]) {
		l.b.flush(l.ctx, batch)
		clear(batch) // drop the outcomes and their callbacks
		l.written <- batch[:0]
	}(l.batch)
	l.batch, l.lingered = nil, false
}

// next waits for an outcome, a write's end, or the linger's; a full batch
// takes no outcome (back-pressure: senders wait until a write ends).
func (l *batchLoop[S]) next(full bool) {
	in := l.reqs
	if full {
		in = nil
	}
	var ranOut <-chan time.Time
	if l.lingering {
		ranOut = l.linger.C
	}
	select {
	case req, ok := <-in:
		if !ok {
			l.reqs = nil
			return
		}
		l.add(req)
	case done := <-l.written:
		l.inFlight--
		l.spare = append(l.spare, done)
	case <-ranOut:
		l.lingering, l.lingered = false, true
	}
}

// wakeDetached wakes the claim loops of the queues whose jobs gave their
// slots back when they handed over an outcome of batch (detached), as the
// batch's write starts: their next claim goes out beside the write, for
// every slot the batch's jobs freed, rather than one claim for each job
// as it finished.
func wakeDetached[S Slots](batch []outcomeRequest[S]) {
	var none, last S
	for i := range batch {
		if s := batch[i].slots; batch[i].detached && s != none && s != last {
			s.Wake()
			last = s
		}
	}
}

// othersRunning reports whether the worker holds jobs whose outcomes the
// batcher has not taken yet.
func (b *Batcher[S]) othersRunning() bool {
	return b.Running.Load() > b.waiting.Load()
}

// Write is the Worker's outcomeWriter: it hands o to the batcher and waits
// for the batch that holds it to be written; after Abandon it writes
// nothing. It stops waiting for the
// batcher to take o at until (or when ctx ends); once taken, o is written
// under the batcher's own timeout.
func (b *Batcher[S]) Write(ctx context.Context, o *errandstore.JobOutcome, until time.Time) (errandstore.OutcomeResult, error) {
	if b.Abandoned != nil && b.Abandoned.Load() {
		return errandstore.OutcomeResult{}, ErrAbandoned
	}
	if b.Direct {
		b.Writes.Add(1)
		dctx, cancelDeadline := clock.WithDeadline(ctx, b.Clock, until, nil)
		defer cancelDeadline()
		wctx, cancel := clock.WithTimeout(dctx, b.Clock, b.Timeout, nil)
		defer cancel()
		rs, err := b.Store.JobRecordOutcomes(wctx, b.params([]*errandstore.JobOutcome{o}))
		if err != nil {
			return errandstore.OutcomeResult{}, err
		}
		return rs[0], nil
	}
	req := outcomeRequest[S]{o: o, reply: make(chan outcomeReply, 1)}
	if err := b.hand(ctx, req, until); err != nil {
		return errandstore.OutcomeResult{}, err
	}
	rep := <-req.reply
	return rep.r, rep.err
}

// Submit hands o to the batcher as Write does, but does not wait for it to
// be written: done is called with its result, on the goroutine that wrote
// its batch, so it must not block. When done reports true, the job's slot
// in slots is given back too, once every outcome of the batch has been
// answered: the slots a batch frees are freed together, and the claim
// loops woken after, for each to fill them with one claim. An error means
// that o was not taken (the lease ended, or ctx did, before the batcher
// had room) and done will not be called. A Worker submits the
// outcomes of the attempts that need nothing more than to be recorded, so
// that their goroutines end with their handlers instead of waiting, by the
// hundred, for their batches.
func (b *Batcher[S]) Submit(ctx context.Context, o *errandstore.JobOutcome, until time.Time, detached bool, done func(errandstore.OutcomeResult, error) bool, slots S) error {
	return b.hand(ctx, outcomeRequest[S]{o: o, done: done, slots: slots, detached: detached}, until)
}

// hand gives req to the batcher, waiting for room until the lease ends
// (until) or ctx does.
func (b *Batcher[S]) hand(ctx context.Context, req outcomeRequest[S], until time.Time) error {
	select {
	case b.reqs <- req:
		// Taken at once: no timer was needed.
		return nil
	default:
	}
	// The batcher is busy (a full batch waits for a write to end, and
	// outcomeQueue more wait to be taken): wait, but not past the lease.
	// A timer, not a context with a deadline: this wait is common under
	// load, and a timer costs fewer allocations than a derived context.
	t := b.Clock.NewTimer(until.Sub(b.Clock.Now()))
	select {
	case b.reqs <- req:
		t.Stop()
		return nil
	case <-t.C():
		return context.DeadlineExceeded
	case <-ctx.Done():
		t.Stop()
		return context.Cause(ctx)
	}
}

// Stop ends the batcher once every outcome handed to it is written. The
// caller must make sure no write is in progress or will start: the Worker
// calls it after all its jobs have returned.
func (b *Batcher[S]) Stop() {
	close(b.reqs)
	<-b.done
}

// flush writes one batch and replies to every sender.
func (b *Batcher[S]) flush(ctx context.Context, batch []outcomeRequest[S]) {
	if b.Abandoned != nil && b.Abandoned.Load() {
		b.answer(batch, nil, ErrAbandoned)
		return
	}
	outcomes := make([]*errandstore.JobOutcome, len(batch))
	for i, req := range batch {
		outcomes[i] = req.o
	}
	wctx, cancel := clock.WithTimeout(ctx, b.Clock, b.Timeout, nil)
	rs, err := b.Store.JobRecordOutcomes(wctx, b.params(outcomes))
	cancel()
	b.Writes.Add(1)
	if err != nil && len(batch) > 1 && errors.Is(err, errandtype.ErrInvalid) {
		// A store rejects a whole batch for one malformed outcome; write
		// them one by one so that only that outcome fails.
		for _, req := range batch {
			b.flush(ctx, []outcomeRequest[S]{req})
		}
		return
	}
	b.answer(batch, rs, err)
}

// answer replies to every sender of batch with its result in rs, or err,
// then gives back the slots the answers free, and wakes their claim loops
// after: one claim per queue for them all.
func (b *Batcher[S]) answer(batch []outcomeRequest[S], rs []errandstore.OutcomeResult, err error) {
	var freed []S // a job's queue for each slot to give back
	for i := range batch {
		var r errandstore.OutcomeResult
		if err == nil {
			r = rs[i]
		}
		if batch[i].answer(b, r, err) {
			freed = append(freed, batch[i].slots)
		}
	}
	for _, s := range freed {
		s.Free()
	}
	for i, s := range freed {
		if i == 0 || s != freed[i-1] {
			s.Wake()
		}
	}
}
