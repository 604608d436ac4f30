// Package notifier owns a client's wake-ups: the local wake channels its
// idle queue loops sleep on, the coalesced announcements of new jobs to
// workers in other processes, and the tally of those announcements that
// lets a worker skip their echoes.
package notifier

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
	"github.com/errandhq/errand/internal/clock"
)

// notifySpacing is the least time between the end of one announcement of a
// client and the start of the next. Queue names that come while one is in
// flight or within this spacing after it go out together in the next, so a
// flood of enqueues costs at most about a thousand NOTIFY transactions a
// second per client (each takes a cluster-wide lock at commit; see
// docs/design.md, "Storage decisions"), while a job enqueued a few
// milliseconds after the last is announced at once. Ten milliseconds here
// held a steady trickle's jobs back: enqueued 5 ms after the last one
// started, a job started in another process 4.3 ms after its commit
// (median) instead of 1.0 ms (BenchmarkWake, postgres/).
const notifySpacing = time.Millisecond

// notifyTimeout bounds one NotifyQueues call, so that a hung connection
// cannot hold Close for long. Like claimTimeout, it runs on real time.
const notifyTimeout = 5 * time.Second

// localClaimWait bounds how long an announcement waits for the claims of
// the idle queue loops its enqueue woke in this process (see Wake). Like
// notifyTimeout, it runs on real time.
const localClaimWait = 10 * time.Millisecond

// Wakes are the wake-up states of a client's queue loops in this process.
// The zero value is ready to use.
type Wakes struct {
	mu     sync.Mutex
	queues map[string]*queueWakes
}

// queueWakes is the wake-up state of one queue's loops in this process.
type queueWakes struct {
	ch      chan struct{} // closed at the next wake-up; nil until a loop asks for it
	idle    int           // loops sleeping in its idle sleep on ch
	claimed chan struct{} // closed when a claim returns; nil when nobody waits for one
}

// of returns queue's wake-up state; ws.mu must be held.
func (ws *Wakes) of(queue string) *queueWakes {
	if ws.queues == nil {
		ws.queues = make(map[string]*queueWakes)
	}
	w := ws.queues[queue]
	if w == nil {
		w = &queueWakes{}
		ws.queues[queue] = w
	}
	return w
}

// Chan returns a channel closed at the next wake-up of queue.
func (ws *Wakes) Chan(queue string) <-chan struct{} {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	w := ws.of(queue)
	if w.ch == nil {
		w.ch = make(chan struct{})
	}
	return w.ch
}

// Sleeping counts a loop of queue as sleeping in its idle sleep (n = 1) or no
// longer (n = -1).
func (ws *Wakes) Sleeping(queue string, n int) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	ws.of(queue).idle += n
}

// Asleep reports whether a loop of queue sleeps in its idle sleep.
func (ws *Wakes) Asleep(queue string) bool {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	w := ws.queues[queue]
	return w != nil && w.idle > 0
}

// ClaimReturned tells whoever waits for a claim of queue in this process
// (an announcement, see Notifier.Notify) that one has returned.
func (ws *Wakes) ClaimReturned(queue string) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if w := ws.queues[queue]; w != nil && w.claimed != nil {
		close(w.claimed)
		w.claimed = nil
	}
}

// Wake wakes this process's idle queue loops of queues, or of every
// queue when queues is empty. It returns, for each queue that had a loop
// asleep, a channel closed when that queue's next claim returns.
func (ws *Wakes) Wake(queues []string) []<-chan struct{} {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	var claims []<-chan struct{}
	wake := func(w *queueWakes) {
		if w.ch != nil {
			close(w.ch)
			w.ch = nil
		}
		if w.idle > 0 {
			if w.claimed == nil {
				w.claimed = make(chan struct{})
			}
			claims = append(claims, w.claimed)
		}
	}
	if len(queues) == 0 {
		for _, w := range ws.queues {
			wake(w)
		}
		return claims
	}
	for _, q := range queues {
		if w := ws.queues[q]; w != nil {
			wake(w)
		}
	}
	return claims
}

// Notifier sends a Client's NotifyQueues calls. Queue names gather in a
// pending set; a sender goroutine, which lives only while there is something
// to send, announces them and then waits notifySpacing before the next
// call, so a burst of enqueues costs a few notifications, not one each. The
// Client owns it: Close flushes it and waits for the sender.
type Notifier struct {
	n      errandstore.Notifier
	echoes *Echoes
	clock  errandtype.TimeSource
	logger *slog.Logger

	mu       sync.Mutex
	pending  map[string]struct{}
	claims   []<-chan struct{}   // local claims to wait for before sending pending
	txQueues map[string]struct{} // written by EnqueueManyTx since the last Wake
	sending  bool                // a sender goroutine, or an inline announcement, is running
	lastEnd  time.Time           // when the last inline announcement ended
	closed   bool
	closing  chan struct{} // closed by Close: the sender stops waiting
	sender   sync.WaitGroup

	// ClaimWait is localClaimWait; a test may lengthen it before the
	// first Notify.
	ClaimWait time.Duration
}

// New returns a notifier that announces queues through n, counting each
// announcement in echoes.
func New(n errandstore.Notifier, echoes *Echoes, clock errandtype.TimeSource, logger *slog.Logger) *Notifier {
	return &Notifier{
		n:        n,
		echoes:   echoes,
		clock:    clock,
		logger:   logger,
		pending:  map[string]struct{}{},
		txQueues: map[string]struct{}{},
		closing:  make(chan struct{}),

		ClaimWait: localClaimWait,
	}
}

// Notify schedules an announcement of queues, sent once each of claims is
// closed or localClaimWait has passed. It never blocks on the store.
func (qn *Notifier) Notify(queues []string, claims []<-chan struct{}) {
	if len(queues) == 0 {
		return
	}
	qn.mu.Lock()
	defer qn.mu.Unlock()
	if qn.closed {
		return
	}
	for _, q := range queues {
		qn.pending[q] = struct{}{}
	}
	qn.claims = append(qn.claims, claims...)
	if !qn.sending {
		qn.sending = true
		qn.sender.Go(qn.send)
	}
}

// Inline reserves the next announcement for an insert that makes it in its
// own commit (errandstore.JobInsertManyParams.Announce). It does when no
// announcement is pending or in flight and the last ended at least
// notifySpacing ago: a lone enqueue's NOTIFY then rides in its INSERT, one
// round trip sooner than after it, while a flood keeps the coalesced
// announcements, whose notifying commits are a millisecond apart. Call
// done once the insert returns, with whether the store announced queues;
// a Notify meanwhile waits for it.
func (qn *Notifier) Inline(queues []string) (done func(announced bool), ok bool) {
	qn.mu.Lock()
	defer qn.mu.Unlock()
	now := qn.clock.Now()
	if qn.closed || qn.sending || now.Sub(qn.lastEnd) < notifySpacing {
		return nil, false
	}
	qn.sending = true
	qn.sender.Add(1) // Close waits for the insert, and for what it holds back
	// Counted before it is sent, as send counts its own.
	qn.echoes.Add(queues, 1, now)
	return func(announced bool) {
		defer qn.sender.Done()
		now := qn.clock.Now()
		if !announced {
			qn.echoes.Add(queues, -1, now)
		}
		qn.mu.Lock()
		defer qn.mu.Unlock()
		if announced {
			qn.lastEnd = now
		}
		if len(qn.pending) == 0 {
			qn.sending = false
			return
		}
		qn.sender.Go(func() {
			if announced {
				qn.pause()
			}
			qn.send()
		})
	}, true
}

// NoteTx remembers queues written inside a caller's transaction, for the
// Wake that follows its commit.
func (qn *Notifier) NoteTx(queues []string) {
	qn.mu.Lock()
	defer qn.mu.Unlock()
	for _, q := range queues {
		qn.txQueues[q] = struct{}{}
	}
}

// TakeTxQueues returns the queues NoteTx noted since it was last called.
func (qn *Notifier) TakeTxQueues() []string {
	qn.mu.Lock()
	defer qn.mu.Unlock()
	qs := sortedNames(qn.txQueues)
	clear(qn.txQueues)
	return qs
}

// send announces the pending queues until none are left.
func (qn *Notifier) send() {
	for {
		qn.mu.Lock()
		queues := sortedNames(qn.pending)
		clear(qn.pending)
		claims := qn.claims
		qn.claims = nil
		if len(queues) == 0 {
			qn.sending = false
			qn.mu.Unlock()
			return
		}
		qn.mu.Unlock()
		qn.waitClaims(claims)

		// Counted before it is sent: the store may deliver it to this
		// process's listeners before NotifyQueues returns.
		qn.echoes.Add(queues, 1, qn.clock.Now())
		ctx, cancel := context.WithTimeout(context.Background(), notifyTimeout)
		err := qn.n.NotifyQueues(ctx, queues)
		cancel()
		if err != nil {
			qn.echoes.Add(queues, -1, qn.clock.Now())
			qn.logger.Warn("notify workers of new jobs failed; they will find them at their next poll",
				"queues", queues, "err", err)
		}
		qn.pause()
	}
}

// pause waits notifySpacing, or until the notifier is closing.
func (qn *Notifier) pause() {
	t := qn.clock.NewTimer(notifySpacing)
	select {
	case <-t.C():
	case <-qn.closing:
		t.Stop()
	}
}

// waitClaims waits until every channel of claims is closed, localClaimWait
// has passed, or the notifier is closing.
func (qn *Notifier) waitClaims(claims []<-chan struct{}) {
	if len(claims) == 0 {
		return
	}
	t := time.NewTimer(qn.ClaimWait)
	defer t.Stop()
	for _, ch := range claims {
		select {
		case <-ch:
		case <-t.C:
			return
		case <-qn.closing:
			return
		}
	}
}

// Close sends what is pending and waits for the sender to finish.
func (qn *Notifier) Close() {
	qn.mu.Lock()
	if !qn.closed {
		qn.closed = true
		close(qn.closing)
	}
	qn.mu.Unlock()
	qn.sender.Wait()
}

// Echoes counts, per queue, the announcements a client has sent. Each
// one follows a local wake-up of the same queues (see Client.Wake), so when
// the store delivers it back to a worker of this same client, its echo
// would only make the worker claim a second time for jobs it has claimed
// already. A worker skips as many notifications of a queue as the client
// sent, if they come within echoWindow of the last one sent. Notifications
// carry no sender, and a store may merge several into one delivery, so one
// from another process may be skipped in place of an echo: that job waits
// for the next wake-up or poll. The window bounds how long a miscount can
// last; a reconnect ("") resets the tally.
type Echoes struct {
	mu   sync.Mutex
	sent map[string]int64
	last map[string]time.Time // when the last announcement of a queue was sent
}

// echoWindow is how long after sending an announcement a client's workers
// take a notification of its queue for its echo. A store delivers an echo
// in about a millisecond; one that comes later only costs a claim.
const echoWindow = 100 * time.Millisecond

// Add counts n announcements of queues, sent at now (n < 0: sends that
// failed).
func (e *Echoes) Add(queues []string, n int64, now time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.sent == nil {
		e.sent, e.last = map[string]int64{}, map[string]time.Time{}
	}
	for _, q := range queues {
		e.sent[q] += n
		if n > 0 {
			e.last[q] = now
		}
	}
}

// Snapshot returns how many announcements of each queue were sent so far.
func (e *Echoes) Snapshot() map[string]int64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make(map[string]int64, len(e.sent))
	for q, n := range e.sent {
		out[q] = n
	}
	return out
}

// Echo reports whether a notification of queue, delivered at now to a
// listener that has taken seen of its echoes, is one: then it counts it in
// seen. Past the window, echoes still owed are forgotten.
func (e *Echoes) Echo(queue string, seen map[string]int64, now time.Time) bool {
	e.mu.Lock()
	sent, last := e.sent[queue], e.last[queue]
	e.mu.Unlock()
	if seen[queue] >= sent {
		return false
	}
	if now.Sub(last) > echoWindow {
		seen[queue] = sent
		return false
	}
	seen[queue]++
	return true
}

// sortedNames returns the names in set, sorted.
func sortedNames(set map[string]struct{}) []string {
	names := make([]string, 0, len(set))
	for n := range set {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Listen retries: a worker whose first subscription to the store's
// notifications fails (the database away as it starts) polls, and tries
// again after listenRetryMin, doubling up to listenRetryMax.
const (
	listenRetryMin = time.Second
	listenRetryMax = time.Minute
)

// Listener wakes a worker's queue loops on the store's notifications.
type Listener struct {
	Store   errandstore.Notifier
	Wakes   *Wakes
	Echoes  *Echoes
	Clock   errandtype.TimeSource
	Logger  *slog.Logger // with the worker's id
	Queues  []string     // the worker's queues
	Poll    time.Duration
	Skipped *atomic.Int64 // counts notifications skipped as echoes
}

// Listen subscribes to the store's notifications and wakes the queue loops
// on them until ctx ends (see wakeOnNotify), in goroutines started by goFn.
// When subscribing fails, the worker polls and tries again in the
// background, rather than polling for the rest of its life; once it
// listens, it wakes every queue, for the jobs whose notifications it missed.
func (l *Listener) Listen(ctx context.Context, goFn func(func())) {
	ch, err := l.Store.ListenQueues(ctx)
	if err == nil {
		goFn(func() { l.wakeOnNotify(ctx, ch) })
		return
	}
	l.Logger.Warn("listen for new jobs failed; polling, and trying again",
		"poll", l.Poll.String(), "retry", listenRetryMin.String(), "err", err)
	goFn(func() {
		for wait := listenRetryMin; ; wait = min(2*wait, listenRetryMax) {
			if clock.SleepCtx(ctx, l.Clock, wait) != nil {
				return
			}
			ch, err := l.Store.ListenQueues(ctx)
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				l.Logger.Debug("listen for new jobs failed again", "err", err)
				continue
			}
			l.Logger.Info("listening for new jobs")
			l.Wakes.Wake(l.Queues)
			l.wakeOnNotify(ctx, ch)
			return
		}
	})
}

// wakeOnNotify wakes the queue loops that the store's notifications name
// ("" names every queue) until the store closes the channel. When ctx ends
// it waits for that close, so Stop returns only after the store's listener
// has let go of its connection.
func (l *Listener) wakeOnNotify(ctx context.Context, ch <-chan string) {
	mine := make(map[string]bool, len(l.Queues))
	for _, q := range l.Queues {
		mine[q] = true
	}
	// Announcements sent before the worker listened have no echo here.
	seen := l.Echoes.Snapshot()
	for {
		select {
		case <-ctx.Done():
			for range ch {
			}
			return
		case q, ok := <-ch:
			if !ok {
				if ctx.Err() == nil {
					l.Logger.Warn("listener for new jobs closed; polling only", "poll", l.Poll.String())
				}
				return
			}
			switch {
			case q == "":
				// Echoes lost while the store reconnected never come.
				seen = l.Echoes.Snapshot()
				l.Wakes.Wake(l.Queues)
			case l.Echoes.Echo(q, seen, l.Clock.Now()):
				l.Skipped.Add(1)
			case mine[q]:
				l.Wakes.Wake([]string{q})
			}
		}
	}
}
