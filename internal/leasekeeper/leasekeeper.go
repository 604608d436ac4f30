// Package leasekeeper renews the leases of the attempts a worker is running,
// all in one store call per tick, and cancels an attempt whose lease is lost
// or whose job an operator cancelled.
package leasekeeper

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
	"github.com/errandhq/errand/internal/clock"
)

// Keeper renews the leases of every attempt a Worker (or one WorkOne)
// is running, all with one JobHeartbeatMany call per tick, every third of the
// lease, instead of a goroutine, a ticker and a transaction per attempt. The
// store still fences each lease by its own token. An attempt whose lease the
// store reports lost, or that went a whole lease without a renewal, has its
// context cancelled with ErrLeaseLost. An attempt whose job an operator
// cancelled (the renewal's answer says so) has its context cancelled with
// ErrJobCancelled and stays held, so that its lease lives until its outcome
// is written. A cancel notification makes the keeper renew at once (see
// CheckNow) instead of at its next tick. A renewal that failed (the store
// away, as in a database failover) is tried again 100ms later, the wait
// doubling up to a second (or the tick, when sooner), so that a store back
// within the lease keeps it. Its ticker runs only while it holds
// leases, so an idle worker arms no heartbeat timer.
type Keeper struct {
	store  Heartbeater
	clock  errandtype.TimeSource
	logger *slog.Logger
	lease  time.Duration

	mu      sync.Mutex
	held    map[*Lease]struct{}
	armedAt time.Time // when the expiry timer fires; zero when disarmed

	wake   chan struct{} // buffered: the loop re-arms its timers
	urgent atomic.Bool   // CheckNow asked for a renewal at once
	cancel context.CancelFunc
	done   chan struct{}
}

// Lease is one running attempt's lease, as the keeper knows it. The caller
// fills Job, Renewed and Lose before Hold, and leaves it alone until
// Release.
type Lease struct {
	Job     *errandtype.Job
	Renewed time.Time   // last renewal sent (or the claim); guarded by Keeper.mu once held
	Lose    func(error) // cancels the attempt's context
	gone    bool        // released or lost; guarded by Keeper.mu
	// cancelled: the attempt's context was cancelled with ErrJobCancelled;
	// guarded by Keeper.mu.
	cancelled bool
}

// Heartbeater is the part of a store the keeper calls.
type Heartbeater interface {
	JobHeartbeatMany(ctx context.Context, params *errandstore.JobHeartbeatParams) ([]errandstore.HeartbeatResult, error)
}

// errShortHeartbeat reports a store that answered a heartbeat with the
// wrong number of results.
var errShortHeartbeat = errors.New("heartbeat: store returned a result count unlike the leases sent")

// New starts a keeper for leases of length lease, renewed in store and
// timed by clock. Call Stop when no attempt holds a lease any more.
func New(store Heartbeater, clock errandtype.TimeSource, logger *slog.Logger, lease time.Duration) *Keeper {
	ctx, cancel := context.WithCancel(context.Background())
	k := &Keeper{store: store, clock: clock, logger: logger, lease: lease, held: map[*Lease]struct{}{},
		wake: make(chan struct{}, 1), cancel: cancel, done: make(chan struct{})}
	go k.run(ctx)
	return k
}

// Stop ends the keeper and waits for it. An attempt still held is no longer
// renewed.
func (k *Keeper) Stop() {
	k.cancel()
	<-k.done
}

// Hold starts renewing h.Job's lease, last renewed (or claimed) at
// h.Renewed; h.lose is called at most once, with ErrLeaseLost, when the
// lease is lost. The caller owns h (an attempt holds its own), and must
// not touch it until release.
func (k *Keeper) Hold(h *Lease) {
	k.mu.Lock()
	first := len(k.held) == 0
	k.held[h] = struct{}{}
	// The loop re-arms when this lease must be watched sooner than it
	// watches now, or when it was idle.
	notify := first || k.armedAt.IsZero() || h.Renewed.Add(k.lease).Before(k.armedAt)
	k.mu.Unlock()
	if notify {
		k.poke()
	}
}

// Release stops renewing h's lease and returns when it was last renewed;
// it never waits for a store call.
func (k *Keeper) Release(h *Lease) time.Time {
	k.mu.Lock()
	h.gone = true
	delete(k.held, h)
	renewed, empty := h.Renewed, len(k.held) == 0
	k.mu.Unlock()
	if empty {
		k.poke() // disarm: an idle keeper holds no timer
	}
	return renewed
}

// Holds reports whether the keeper renews a lease on job id.
func (k *Keeper) Holds(id string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	for h := range k.held {
		if h.Job.ID == id {
			return true
		}
	}
	return false
}

// CheckNow makes the keeper renew every held lease at once, so that a cancel
// request a notification announced reaches its attempt without waiting for
// the next tick. The renewal's answer decides; the notification is a hint.
func (k *Keeper) CheckNow() {
	k.urgent.Store(true)
	k.poke()
}

func (k *Keeper) poke() {
	select {
	case k.wake <- struct{}{}:
	default:
	}
}

// run renews leases every third of the lease while any is held, and ends
// leases that went a whole lease without a renewal.
func (k *Keeper) run(ctx context.Context) {
	defer close(k.done)
	interval := k.lease / 3
	if interval <= 0 {
		interval = time.Millisecond
	}
	t := &keeperTimers{clock: k.clock, interval: interval}
	defer t.stop()
	for {
		t.arm(k.earliestEnd())
		select {
		case <-ctx.Done():
			return
		case <-k.wake:
			if k.urgent.Swap(false) {
				t.beaten(k.beat(ctx))
			}
		case <-t.expires:
			t.armedFor = time.Time{}
			k.expire()
		case <-t.tick:
			t.beaten(k.beat(ctx))
			k.expire()
		case <-t.retries:
			t.retries = nil
			t.beaten(k.beat(ctx))
			k.expire()
		}
	}
}

// earliestEnd returns the earliest end of a held lease, zero when none is
// held, and notes it as the end the keeper is armed for.
func (k *Keeper) earliestEnd() time.Time {
	k.mu.Lock()
	defer k.mu.Unlock()
	var earliest time.Time
	for h := range k.held {
		if end := h.Renewed.Add(k.lease); earliest.IsZero() || end.Before(earliest) {
			earliest = end
		}
	}
	k.armedAt = earliest
	return earliest
}

// keeperTimers are the lease keeper's ticker, running while a lease is
// held, and its timer for the earliest end of one.
type keeperTimers struct {
	clock    errandtype.TimeSource
	interval time.Duration
	ticker   errandtype.Ticker
	tick     <-chan time.Time
	expiry   errandtype.Timer
	expires  <-chan time.Time
	// armedFor is the end of a lease the expiry timer is armed for; zero
	// when it is not armed. The timer is armed as a duration from now, so
	// it is re-armed only when that end moves: each re-arming would put it
	// late by the time between reading the clock and arming it.
	armedFor time.Time
	// retry fires a renewal again, backoff after one failed; retries is nil
	// while none is due.
	retry   errandtype.Timer
	retries <-chan time.Time
	backoff time.Duration
}

// retryMin is the first wait before renewing again after a failed renewal:
// short, so that leases outlive a brief outage of the store (a failover).
// It doubles up to retryMax (or the tick, when sooner), so that a store
// that stays away is not hammered, and one that returns is found within a
// second.
const (
	retryMin = 100 * time.Millisecond
	retryMax = time.Second
)

// beaten arms the retry after a failed renewal, or disarms it after one
// that succeeded.
func (t *keeperTimers) beaten(ok bool) {
	if ok {
		t.backoff = 0
		if t.retry != nil {
			t.retry.Stop()
		}
		t.retries = nil
		return
	}
	t.backoff = min(max(2*t.backoff, retryMin), retryMax, t.interval)
	if t.retry == nil {
		t.retry = t.clock.NewTimer(t.backoff)
	} else {
		t.retry.Stop()
		t.retry.Reset(t.backoff)
	}
	t.retries = t.retry.C()
}

// arm runs the ticker and the expiry timer for a held lease ending first
// at earliest, or stops them when none is held (earliest zero).
func (t *keeperTimers) arm(earliest time.Time) {
	if earliest.IsZero() {
		t.beaten(true)
		if t.expiry != nil {
			t.expiry.Stop()
			t.armedFor = time.Time{}
		}
		if t.ticker != nil {
			t.ticker.Stop()
			t.ticker, t.tick = nil, nil
		}
		return
	}
	if t.ticker == nil {
		t.ticker = t.clock.NewTicker(t.interval)
		t.tick = t.ticker.C()
	}
	switch {
	case t.expiry == nil:
		t.expiry = t.clock.NewTimer(earliest.Sub(t.clock.Now()))
		t.expires = t.expiry.C()
	case !earliest.Equal(t.armedFor):
		t.expiry.Reset(earliest.Sub(t.clock.Now()))
	}
	t.armedFor = earliest
}

func (t *keeperTimers) stop() {
	if t.expiry != nil {
		t.expiry.Stop()
	}
	if t.ticker != nil {
		t.ticker.Stop()
	}
	if t.retry != nil {
		t.retry.Stop()
	}
}

// beat renews every held lease in one call, and reports whether the call
// succeeded. The call is bounded by the earliest end of a held lease, so
// that a store that hangs cannot keep a handler running past a lease
// another worker may take.
func (k *Keeper) beat(ctx context.Context) bool {
	held, leases, earliest := k.heldNow()
	if len(held) == 0 {
		return true
	}
	sent := k.clock.Now()
	callCtx, cancelCall := clock.WithDeadline(ctx, k.clock, earliest, nil)
	rs, err := k.store.JobHeartbeatMany(callCtx, &errandstore.JobHeartbeatParams{Leases: leases, Lease: k.lease})
	cancelCall()
	if ctx.Err() != nil {
		return true
	}
	if err == nil && len(rs) != len(held) {
		err = errShortHeartbeat
	}
	if err != nil {
		k.logger.Warn("heartbeat failed", "jobs", len(held), "err", err)
		return false // expire ends the leases that can wait no longer
	}
	lost, cancelled := k.renewed(held, rs, sent)
	for _, h := range cancelled {
		k.logger.Info("cancel requested; cancelling the handler", "job_id", h.Job.ID, "kind", h.Job.Kind, "attempt", h.Job.Attempt)
		h.Lose(errandtype.ErrJobCancelled)
	}
	for _, h := range lost {
		k.logger.Warn("lease lost", "job_id", h.Job.ID, "kind", h.Job.Kind, "attempt", h.Job.Attempt)
		h.Lose(errandtype.ErrLeaseLost)
	}
	return true
}

// heldNow returns the leases held now, and the earliest end of one.
func (k *Keeper) heldNow() ([]*Lease, []errandstore.JobLease, time.Time) {
	k.mu.Lock()
	defer k.mu.Unlock()
	held := make([]*Lease, 0, len(k.held))
	leases := make([]errandstore.JobLease, 0, len(k.held))
	var earliest time.Time
	for h := range k.held {
		held = append(held, h)
		leases = append(leases, errandstore.JobLease{ID: h.Job.ID, LeaseToken: *h.Job.LeaseToken})
		if end := h.Renewed.Add(k.lease); earliest.IsZero() || end.Before(earliest) {
			earliest = end
		}
	}
	return held, leases, earliest
}

// renewed applies the heartbeat sent at sent that answered rs for held:
// it returns the leases found lost, no longer held, and those whose jobs
// an operator cancelled.
func (k *Keeper) renewed(held []*Lease, rs []errandstore.HeartbeatResult, sent time.Time) (lost, cancelled []*Lease) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for i, h := range held {
		if h.gone {
			continue // the attempt ended meanwhile; its outcome decides
		}
		if rs[i].Err == nil {
			h.Renewed = sent
			if rs[i].CancelRequested && !h.cancelled {
				h.cancelled = true
				cancelled = append(cancelled, h)
			}
			continue
		}
		h.gone = true
		delete(k.held, h)
		lost = append(lost, h)
	}
	return lost, cancelled
}

// expire ends the leases not renewed for a whole lease.
func (k *Keeper) expire() {
	now := k.clock.Now()
	var lost []*Lease
	k.mu.Lock()
	for h := range k.held {
		if now.Sub(h.Renewed) >= k.lease {
			h.gone = true
			delete(k.held, h)
			lost = append(lost, h)
		}
	}
	k.mu.Unlock()
	for _, h := range lost {
		k.logger.Warn("lease lost", "job_id", h.Job.ID, "kind", h.Job.Kind, "attempt", h.Job.Attempt,
			"reason", "no renewal for a whole lease")
		h.Lose(errandtype.ErrLeaseLost)
	}
}
