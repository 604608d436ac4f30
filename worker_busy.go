package errand

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
	"github.com/errandhq/errand/internal/flow"
)

// maxClaimsInFlight is how many claims a busy queue keeps in flight at
// once. A queue whose last claim came back full is busy: its loop sends a
// claim for the slots that are free without waiting for the claim in
// flight to return, so that the slots an outcome write has just freed are
// claimed for while the previous claim's jobs are still on their way. On
// PostgreSQL the two claims run on two connections at once and keep the
// server busy while the worker runs the jobs of the last; on SQLite's one
// writer they run one after the other, as before. A worker draining a
// PostgreSQL queue at concurrency 1,000 did about a tenth more jobs per
// second with a second claim in flight (bench/HISTORY.md), and a third
// added nothing.
const maxClaimsInFlight = 2

// busyClaims are the claims a busy queue loop has sent and not received
// back yet. Each reserves the slots it claims for, so that the queue never
// holds more jobs than its slots, counting each claim in flight at its
// limit.
type busyClaims struct {
	n        int              // the queue's slots
	results  chan claimResult // room for maxClaimsInFlight
	inFlight int
	reserved int
	// short: a claim came back short (the queue ran dry) or failed; once
	// none is in flight, the loop sleeps as after any short claim,
	// waking on wake, the queue's wake-ups as they stood when that claim
	// was sent.
	short bool
	wake  <-chan struct{}
}

type claimResult struct {
	jobs  []*errandtype.Job
	err   error
	limit int
	sent  time.Time // the store's leases start no earlier than this
	wake  <-chan struct{}
	span  *trace.SpanContext // the claim's span (see claimSpan)
}

// room reports whether a claim for free slots may be sent now: the first
// at once, and a second beside it only for at least a quarter of the
// queue's slots, so that the claims stay large (a claim's cost on the
// store is mostly per statement, not per job).
func (b *busyClaims) room(free int) bool {
	switch {
	case free <= 0:
		return false
	case b.inFlight == 0:
		return true
	case b.inFlight >= maxClaimsInFlight:
		return false
	}
	return free >= max(1, b.n/4)
}

// freeingSoon reports whether a busy queue with free slots and no claim in
// flight should wait for more to free before it claims: when fewer than a
// quarter of its slots are free and the jobs whose outcomes are being
// written hold enough to make a quarter. Their slots free as the write
// ends, so one claim then takes them all, rather than a claim for the few
// free now and another behind it; the outcomes of those two claims would
// then be written apart, and the split would last. Slots held by running
// handlers never hold a claim back: they free when the handler returns,
// which may be a long time.
func (b *busyClaims) freeingSoon(free int, slots *queueSlots) bool {
	quarter := max(1, b.n/4)
	return free < quarter && free+int(slots.writing.Load()) >= quarter
}

// The next step of a queue loop after claimAhead.
const (
	aheadPlain = iota // no claim in flight: claim as an idle queue does
	aheadAgain        // loop again
	aheadStop         // the loop ends
)

// claimAhead is a busy queue loop's step: it sends a claim for the free
// slots when there is room (see maxClaimsInFlight), or waits for a slot to
// free or a claim to return and starts its jobs. After a short claim, once
// none is in flight, it sleeps the loop until its next wake-up, poll or
// due job, and marks it idle.
func (w *Worker) claimAhead(loopCtx, runCtx context.Context, b *busyClaims, slots *queueSlots, qc *flow.Claimer, poll Timer, idle *bool) int {
	free := b.n - len(slots.tokens) - b.reserved
	if b.room(free) && w.pipelines(loopCtx, qc, *idle) && loopCtx.Err() == nil {
		return w.sendAhead(loopCtx, b, slots, qc, free)
	}
	if b.inFlight > 0 {
		if step := w.receiveAhead(loopCtx, runCtx, b, slots, idle); step != aheadPlain {
			return step
		}
	}
	if !b.short {
		return aheadPlain
	}
	// The first short claim after work: ask when the next job comes due,
	// as the plain loop does, and sleep.
	b.short = false
	due := w.nextDue(loopCtx, slots.queue)
	if !w.sleepIdle(loopCtx, slots, poll, b.wake, due, &claimTicket{}) {
		return aheadStop
	}
	return aheadAgain
}

// sendAhead sends a claim for free slots, unless slots about to free make
// it worth waiting for them first (see freeingSoon).
func (w *Worker) sendAhead(loopCtx context.Context, b *busyClaims, slots *queueSlots, qc *flow.Claimer, free int) int {
	if b.inFlight == 0 && b.freeingSoon(free, slots) {
		if !slots.waitFreed(loopCtx) {
			return aheadStop
		}
		return aheadAgain
	}
	b.send(w, loopCtx, qc, slots.queue, free)
	return aheadAgain
}

// receiveAhead waits for a slot to free or a claim in flight to return,
// and starts its jobs. It returns aheadPlain when the claim came back
// short and none is left in flight: the loop is idle.
func (w *Worker) receiveAhead(loopCtx, runCtx context.Context, b *busyClaims, slots *queueSlots, idle *bool) int {
	select {
	case <-loopCtx.Done():
		return aheadStop
	case <-slots.freed:
		return aheadAgain
	case r := <-b.results:
		b.inFlight--
		b.reserved -= r.limit
		w.claimed(loopCtx, slots, len(r.jobs), r.err)
		w.startJobs(runCtx, slots, r.jobs, r.sent, r.span)
		if r.err == nil && len(r.jobs) == r.limit {
			*idle, b.short = false, false
			return aheadAgain
		}
		*idle, b.short, b.wake = true, true, r.wake
		if b.inFlight > 0 {
			return aheadAgain
		}
		return aheadPlain
	}
}

// send claims up to free jobs of queue on a goroutine of its own; the
// result arrives on b.results. Like every claim, it is not cancelled by a
// stop once sent (see drainClaims).
func (b *busyClaims) send(w *Worker, loopCtx context.Context, qc *flow.Claimer, queue string, free int) {
	b.inFlight++
	b.reserved += free
	wake := w.c.wakes.Chan(queue)
	sent := w.c.clock.Now()
	params := &errandstore.JobClaimParams{
		Queues: []string{queue},
		Kinds:  w.kinds,
		Limit:  free,
		Lease:  w.cfg.Lease,
		Owner:  w.cfg.Owner,
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(loopCtx), claimTimeout)
		traced := w.c.tracing.now()
		jobs, err := qc.Claim(ctx, w.c.store, params)
		cancel()
		span := w.c.claimSpan(traced, queue, w.cfg.Owner, len(jobs), err)
		w.c.wakes.ClaimReturned(queue)
		b.results <- claimResult{jobs: jobs, err: err, limit: free, sent: sent, wake: wake, span: span}
	}()
}

// drainClaims waits, as a queue loop ends, for the claims it still has in
// flight, and starts their jobs: a claim that was sent may have committed,
// and its jobs run (Stop waits for them) rather than wait out their
// leases.
func (w *Worker) drainClaims(runCtx context.Context, b *busyClaims, slots *queueSlots) {
	for ; b.inFlight > 0; b.inFlight-- {
		r := <-b.results
		w.startJobs(runCtx, slots, r.jobs, r.sent, r.span)
	}
}

// pipelines reports whether the queue's claims may be sent ahead (see
// maxClaimsInFlight): a plain claim of the worker's kinds, with no rate
// limit or retry budget to take tokens from first, no capacity shared by
// weight to acquire, no fairness turns and no circuit breaker in its way,
// by a queue that is not idle, while nothing is paused. Other claims are
// made one at a time, each after the last returned.
func (w *Worker) pipelines(ctx context.Context, qc *flow.Claimer, idle bool) bool {
	return !idle && len(w.gates) == 0 && !qc.Fairly() && !w.c.paused.any(ctx)
}
