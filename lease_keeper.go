package errand

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
	"github.com/errandhq/errand/internal/clock"
)

// leaseKeeper renews the leases of every attempt a Worker (or one WorkOne)
// is running, all with one JobHeartbeatMany call per tick, every third of the
// lease, instead of a goroutine, a ticker and a transaction per attempt. The
// store still fences each lease by its own token. An attempt whose lease the
// store reports lost, or that went a whole lease without a renewal, has its
// context cancelled with ErrLeaseLost. An attempt whose job an operator
// cancelled (the renewal's answer says so) has its context cancelled with
// ErrJobCancelled and stays held, so that its lease lives until its outcome
// is written. A cancel notification makes the keeper renew at once (see
// checkNow) instead of at its next tick. Its ticker runs only while it holds
// leases, so an idle worker arms no heartbeat timer.
type leaseKeeper struct {
	c     *engine
	lease time.Duration

	mu      sync.Mutex
	held    map[*heldLease]struct{}
	armedAt time.Time // when the expiry timer fires; zero when disarmed

	wake   chan struct{} // buffered: the loop re-arms its timers
	urgent atomic.Bool   // checkNow asked for a renewal at once
	cancel context.CancelFunc
	done   chan struct{}
}

// heldLease is one running attempt's lease, as the keeper knows it.
type heldLease struct {
	job     *errandtype.Job
	renewed time.Time   // last renewal sent (or the claim); guarded by leaseKeeper.mu
	lose    func(error) // cancels the attempt's context
	gone    bool        // released or lost; guarded by leaseKeeper.mu
	// cancelled: the attempt's context was cancelled with ErrJobCancelled;
	// guarded by leaseKeeper.mu.
	cancelled bool
}

// errShortHeartbeat reports a store that answered a heartbeat with the
// wrong number of results.
var errShortHeartbeat = errors.New("heartbeat: store returned a result count unlike the leases sent")

// newLeaseKeeper starts a keeper for leases of length lease. Call stop when
// no attempt holds a lease any more.
func (c *engine) newLeaseKeeper(lease time.Duration) *leaseKeeper {
	ctx, cancel := context.WithCancel(context.Background())
	k := &leaseKeeper{c: c, lease: lease, held: map[*heldLease]struct{}{},
		wake: make(chan struct{}, 1), cancel: cancel, done: make(chan struct{})}
	go k.run(ctx)
	return k
}

// stop ends the keeper and waits for it. An attempt still held is no longer
// renewed.
func (k *leaseKeeper) stop() {
	k.cancel()
	<-k.done
}

// hold starts renewing h.job's lease, last renewed (or claimed) at
// h.renewed; h.lose is called at most once, with ErrLeaseLost, when the
// lease is lost. The caller owns h (an attempt holds its own), and must
// not touch it until release.
func (k *leaseKeeper) hold(h *heldLease) {
	k.mu.Lock()
	first := len(k.held) == 0
	k.held[h] = struct{}{}
	// The loop re-arms when this lease must be watched sooner than it
	// watches now, or when it was idle.
	notify := first || k.armedAt.IsZero() || h.renewed.Add(k.lease).Before(k.armedAt)
	k.mu.Unlock()
	if notify {
		k.poke()
	}
}

// release stops renewing h's lease and returns when it was last renewed;
// it never waits for a store call.
func (k *leaseKeeper) release(h *heldLease) time.Time {
	k.mu.Lock()
	h.gone = true
	delete(k.held, h)
	renewed, empty := h.renewed, len(k.held) == 0
	k.mu.Unlock()
	if empty {
		k.poke() // disarm: an idle keeper holds no timer
	}
	return renewed
}

// holds reports whether the keeper renews a lease on job id.
func (k *leaseKeeper) holds(id string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	for h := range k.held {
		if h.job.ID == id {
			return true
		}
	}
	return false
}

// checkNow makes the keeper renew every held lease at once, so that a cancel
// request a notification announced reaches its attempt without waiting for
// the next tick. The renewal's answer decides; the notification is a hint.
func (k *leaseKeeper) checkNow() {
	k.urgent.Store(true)
	k.poke()
}

func (k *leaseKeeper) poke() {
	select {
	case k.wake <- struct{}{}:
	default:
	}
}

// run renews leases every third of the lease while any is held, and ends
// leases that went a whole lease without a renewal.
func (k *leaseKeeper) run(ctx context.Context) {
	defer close(k.done)
	interval := k.lease / 3
	if interval <= 0 {
		interval = time.Millisecond
	}
	t := &keeperTimers{clock: k.c.clock, interval: interval}
	defer t.stop()
	for {
		t.arm(k.earliestEnd())
		select {
		case <-ctx.Done():
			return
		case <-k.wake:
			if k.urgent.Swap(false) {
				k.beat(ctx)
			}
		case <-t.expires:
			t.armedFor = time.Time{}
			k.expire()
		case <-t.tick:
			k.beat(ctx)
			k.expire()
		}
	}
}

// earliestEnd returns the earliest end of a held lease, zero when none is
// held, and notes it as the end the keeper is armed for.
func (k *leaseKeeper) earliestEnd() time.Time {
	k.mu.Lock()
	defer k.mu.Unlock()
	var earliest time.Time
	for h := range k.held {
		if end := h.renewed.Add(k.lease); earliest.IsZero() || end.Before(earliest) {
			earliest = end
		}
	}
	k.armedAt = earliest
	return earliest
}

// keeperTimers are the lease keeper's ticker, running while a lease is
// held, and its timer for the earliest end of one.
type keeperTimers struct {
	clock    TimeSource
	interval time.Duration
	ticker   Ticker
	tick     <-chan time.Time
	expiry   Timer
	expires  <-chan time.Time
	// armedFor is the end of a lease the expiry timer is armed for; zero
	// when it is not armed. The timer is armed as a duration from now, so
	// it is re-armed only when that end moves: each re-arming would put it
	// late by the time between reading the clock and arming it.
	armedFor time.Time
}

// arm runs the ticker and the expiry timer for a held lease ending first
// at earliest, or stops them when none is held (earliest zero).
func (t *keeperTimers) arm(earliest time.Time) {
	if earliest.IsZero() {
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
}

// beat renews every held lease in one call. The call is bounded by the
// earliest end of a held lease, so that a store that hangs cannot keep a
// handler running past a lease another worker may take.
func (k *leaseKeeper) beat(ctx context.Context) {
	held, leases, earliest := k.heldNow()
	if len(held) == 0 {
		return
	}
	sent := k.c.clock.Now()
	callCtx, cancelCall := clock.WithDeadline(ctx, k.c.clock, earliest, nil)
	rs, err := k.c.store.JobHeartbeatMany(callCtx, &errandstore.JobHeartbeatParams{Leases: leases, Lease: k.lease})
	cancelCall()
	if ctx.Err() != nil {
		return
	}
	if err == nil && len(rs) != len(held) {
		err = errShortHeartbeat
	}
	if err != nil {
		k.c.logger.Warn("heartbeat failed", "jobs", len(held), "err", err)
		return // expire ends the leases that can wait no longer
	}
	lost, cancelled := k.renewed(held, rs, sent)
	for _, h := range cancelled {
		k.c.logger.Info("cancel requested; cancelling the handler", "job_id", h.job.ID, "kind", h.job.Kind, "attempt", h.job.Attempt)
		h.lose(ErrJobCancelled)
	}
	for _, h := range lost {
		k.c.logger.Warn("lease lost", "job_id", h.job.ID, "kind", h.job.Kind, "attempt", h.job.Attempt)
		h.lose(errandtype.ErrLeaseLost)
	}
}

// heldNow returns the leases held now, and the earliest end of one.
func (k *leaseKeeper) heldNow() ([]*heldLease, []errandstore.JobLease, time.Time) {
	k.mu.Lock()
	defer k.mu.Unlock()
	held := make([]*heldLease, 0, len(k.held))
	leases := make([]errandstore.JobLease, 0, len(k.held))
	var earliest time.Time
	for h := range k.held {
		held = append(held, h)
		leases = append(leases, errandstore.JobLease{ID: h.job.ID, LeaseToken: *h.job.LeaseToken})
		if end := h.renewed.Add(k.lease); earliest.IsZero() || end.Before(earliest) {
			earliest = end
		}
	}
	return held, leases, earliest
}

// renewed applies the heartbeat sent at sent that answered rs for held:
// it returns the leases found lost, no longer held, and those whose jobs
// an operator cancelled.
func (k *leaseKeeper) renewed(held []*heldLease, rs []errandstore.HeartbeatResult, sent time.Time) (lost, cancelled []*heldLease) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for i, h := range held {
		if h.gone {
			continue // the attempt ended meanwhile; its outcome decides
		}
		if rs[i].Err == nil {
			h.renewed = sent
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
func (k *leaseKeeper) expire() {
	now := k.c.clock.Now()
	var lost []*heldLease
	k.mu.Lock()
	for h := range k.held {
		if now.Sub(h.renewed) >= k.lease {
			h.gone = true
			delete(k.held, h)
			lost = append(lost, h)
		}
	}
	k.mu.Unlock()
	for _, h := range lost {
		k.c.logger.Warn("lease lost", "job_id", h.job.ID, "kind", h.job.Kind, "attempt", h.job.Attempt,
			"reason", "no renewal for a whole lease")
		h.lose(errandtype.ErrLeaseLost)
	}
}
