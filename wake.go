package errand

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/errandhq/errand/errandstore"
)

// Wake-ups. An idle queue loop of a Worker waits on a wake channel of its
// queue and on its poll timer, whichever comes first. Enqueues in the same
// process close the channels of their queues at once. Enqueues in other
// processes arrive through the store's optional [Notifier]: the enqueuing
// Client sends NotifyQueues after its transaction commits, coalesced, and
// each Worker listens with ListenQueues. Polling stays the floor: a lost or
// unsupported notification delays a job by at most one poll interval.

// notifyCoalesce is how long the client's notifier gathers queue names after
// sending a notification before it sends the next. The first enqueue after a
// quiet spell is announced at once; a burst is announced about once per
// window, because a NOTIFY costs PostgreSQL a cluster-wide lock at commit
// (see docs/design.md, "Storage decisions").
const notifyCoalesce = 10 * time.Millisecond

// notifyTimeout bounds one NotifyQueues call, so that a hung connection
// cannot hold Close for long. Like claimTimeout, it runs on real time.
const notifyTimeout = 5 * time.Second

// localClaimWait bounds how long an announcement waits for the claims of
// the idle queue loops its enqueue woke in this process (see Wake). Like
// notifyTimeout, it runs on real time.
const localClaimWait = 10 * time.Millisecond

// queueWakes is the wake-up state of one queue's loops in this process.
type queueWakes struct {
	ch      chan struct{} // closed at the next wake-up; nil until a loop asks for it
	idle    int           // loops sleeping in sleepIdle on ch
	claimed chan struct{} // closed when a claim returns; nil when nobody waits for one
}

// wakesOf returns queue's wake-up state; c.wakeMu must be held.
func (c *engine) wakesOf(queue string) *queueWakes {
	if c.wakes == nil {
		c.wakes = make(map[string]*queueWakes)
	}
	w := c.wakes[queue]
	if w == nil {
		w = &queueWakes{}
		c.wakes[queue] = w
	}
	return w
}

// wakeChan returns a channel closed at the next wake-up of queue.
func (c *engine) wakeChan(queue string) <-chan struct{} {
	c.wakeMu.Lock()
	defer c.wakeMu.Unlock()
	w := c.wakesOf(queue)
	if w.ch == nil {
		w.ch = make(chan struct{})
	}
	return w.ch
}

// sleeping counts a loop of queue as sleeping in sleepIdle (n = 1) or no
// longer (n = -1).
func (c *engine) sleeping(queue string, n int) {
	c.wakeMu.Lock()
	defer c.wakeMu.Unlock()
	c.wakesOf(queue).idle += n
}

// claimReturned tells whoever waits for a claim of queue in this process
// (an announcement, see Wake) that one has returned.
func (c *engine) claimReturned(queue string) {
	c.wakeMu.Lock()
	defer c.wakeMu.Unlock()
	if w := c.wakes[queue]; w != nil && w.claimed != nil {
		close(w.claimed)
		w.claimed = nil
	}
}

// wakeLocal wakes this process's idle queue loops of queues, or of every
// queue when queues is empty. It returns, for each queue that had a loop
// asleep, a channel closed when that queue's next claim returns.
func (c *engine) wakeLocal(queues []string) []<-chan struct{} {
	c.wakeMu.Lock()
	defer c.wakeMu.Unlock()
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
		for _, w := range c.wakes {
			wake(w)
		}
		return claims
	}
	for _, q := range queues {
		if w := c.wakes[q]; w != nil {
			wake(w)
		}
	}
	return claims
}

// Wake tells idle workers to look for jobs in queues now, or in every queue
// when none is named. Enqueue and EnqueueMany call it themselves after their
// transaction commits. Call it after committing a transaction that used
// EnqueueTx or EnqueueManyTx; otherwise workers find the jobs at their next
// poll.
//
// It wakes this process's workers at once. When the store is a [Notifier]
// that sends announcements (PostgreSQL; on SQLite the commit itself is the
// announcement), it also announces the queues to workers in other processes,
// in the background and coalesced with other announcements; with no queue
// named, it announces the queues that EnqueueTx and EnqueueManyTx have
// written to since the last Wake. Wake never blocks on the store, and a
// failed announcement is logged, not returned: polling finds the jobs.
//
// When Wake wakes a queue loop of this process that was asleep, the
// announcement waits for that queue's next claim here to return, at most
// 10 ms. Sent beside that claim, the announcement's commit and its
// delivery slowed the claim the job waits for: on PostgreSQL a lone job
// took about a third longer to start (bench/HISTORY.md). Other processes
// hear of the job up to that much later; a busy loop (no slot free) is not
// woken, and its queue is announced at once.
func (c *Client[TTx]) Wake(queues ...string) {
	queues = slices.DeleteFunc(slices.Clone(queues), func(q string) bool { return q == "" })
	claims := c.wakeLocal(queues)
	if c.notifier == nil {
		return
	}
	if len(queues) == 0 {
		queues = c.notifier.takeTxQueues()
	}
	c.notifier.notify(queues, claims)
}

// Close sends the cross-process wake-ups still pending and stops the
// client's background notifier, waiting for it. It does not close the
// store, and does not stop workers. After Close the client still enqueues,
// but no longer announces new jobs to other processes: their workers find
// them at their next poll. Close is idempotent and always returns nil.
// A client whose store is not a [Notifier] holds nothing to close.
func (c *Client[TTx]) Close() error {
	if c.notifier != nil {
		c.notifier.close()
	}
	return nil
}

// queueNotifier sends a Client's NotifyQueues calls. Queue names gather in a
// pending set; a sender goroutine, which lives only while there is something
// to send, announces them and then waits notifyCoalesce before the next
// call, so a burst of enqueues costs a few notifications, not one each. The
// Client owns it: Close flushes it and waits for the sender.
type queueNotifier struct {
	n      errandstore.Notifier
	client *engine

	mu       sync.Mutex
	pending  map[string]struct{}
	claims   []<-chan struct{}   // local claims to wait for before sending pending
	txQueues map[string]struct{} // written by EnqueueManyTx since the last Wake
	sending  bool                // a sender goroutine is running
	closed   bool
	closing  chan struct{} // closed by close: the sender stops waiting
	sender   sync.WaitGroup

	claimWait time.Duration // localClaimWait; a test may lengthen it
}

func newQueueNotifier(c *engine, n errandstore.Notifier) *queueNotifier {
	return &queueNotifier{
		n:        n,
		client:   c,
		pending:  map[string]struct{}{},
		txQueues: map[string]struct{}{},
		closing:  make(chan struct{}),

		claimWait: localClaimWait,
	}
}

// notify schedules an announcement of queues, sent once each of claims is
// closed or localClaimWait has passed. It never blocks on the store.
func (qn *queueNotifier) notify(queues []string, claims []<-chan struct{}) {
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

// noteTx remembers queues written inside a caller's transaction, for the
// Wake that follows its commit.
func (qn *queueNotifier) noteTx(queues []string) {
	qn.mu.Lock()
	defer qn.mu.Unlock()
	for _, q := range queues {
		qn.txQueues[q] = struct{}{}
	}
}

func (qn *queueNotifier) takeTxQueues() []string {
	qn.mu.Lock()
	defer qn.mu.Unlock()
	qs := setNames(qn.txQueues)
	clear(qn.txQueues)
	return qs
}

// send announces the pending queues until none are left.
func (qn *queueNotifier) send() {
	for {
		qn.mu.Lock()
		queues := setNames(qn.pending)
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
		qn.client.echoes.add(queues, 1, qn.client.clock.Now())
		ctx, cancel := context.WithTimeout(context.Background(), notifyTimeout)
		err := qn.n.NotifyQueues(ctx, queues)
		cancel()
		if err != nil {
			qn.client.echoes.add(queues, -1, qn.client.clock.Now())
			qn.client.logger.Warn("notify workers of new jobs failed; they will find them at their next poll",
				"queues", queues, "err", err)
		}
		t := qn.client.clock.NewTimer(notifyCoalesce)
		select {
		case <-t.C():
		case <-qn.closing:
			t.Stop()
		}
	}
}

// waitClaims waits until every channel of claims is closed, localClaimWait
// has passed, or the notifier is closing.
func (qn *queueNotifier) waitClaims(claims []<-chan struct{}) {
	if len(claims) == 0 {
		return
	}
	t := time.NewTimer(qn.claimWait)
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

// close sends what is pending and waits for the sender to finish.
func (qn *queueNotifier) close() {
	qn.mu.Lock()
	if !qn.closed {
		qn.closed = true
		close(qn.closing)
	}
	qn.mu.Unlock()
	qn.sender.Wait()
}

// setNames returns the names in set, sorted.
func setNames(set map[string]struct{}) []string {
	names := make([]string, 0, len(set))
	for n := range set {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// queuesOf lists the distinct queues of ps.
func queuesOf(ps []*errandstore.JobInsertParams) []string {
	set := make(map[string]struct{}, 1)
	for _, p := range ps {
		set[p.Queue] = struct{}{}
	}
	return setNames(set)
}

// notifyEchoes counts, per queue, the announcements a client has sent. Each
// one follows a local wake-up of the same queues (see Client.Wake), so when
// the store delivers it back to a worker of this same client, its echo
// would only make the worker claim a second time for jobs it has claimed
// already. A worker skips as many notifications of a queue as the client
// sent, if they come within echoWindow of the last one sent. Notifications
// carry no sender, and a store may merge several into one delivery, so one
// from another process may be skipped in place of an echo: that job waits
// for the next wake-up or poll. The window bounds how long a miscount can
// last; a reconnect ("") resets the tally.
type notifyEchoes struct {
	mu   sync.Mutex
	sent map[string]int64
	last map[string]time.Time // when the last announcement of a queue was sent
}

// echoWindow is how long after sending an announcement a client's workers
// take a notification of its queue for its echo. A store delivers an echo
// in about a millisecond; one that comes later only costs a claim.
const echoWindow = 100 * time.Millisecond

func (e *notifyEchoes) add(queues []string, n int64, now time.Time) {
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

// snapshot returns how many announcements of each queue were sent so far.
func (e *notifyEchoes) snapshot() map[string]int64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make(map[string]int64, len(e.sent))
	for q, n := range e.sent {
		out[q] = n
	}
	return out
}

// echo reports whether a notification of queue, delivered at now to a
// listener that has taken seen of its echoes, is one: then it counts it in
// seen. Past the window, echoes still owed are forgotten.
func (e *notifyEchoes) echo(queue string, seen map[string]int64, now time.Time) bool {
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

// Listen retries: a worker whose first subscription to the store's
// notifications fails (the database away as it starts) polls, and tries
// again after listenRetryMin, doubling up to listenRetryMax.
const (
	listenRetryMin = time.Second
	listenRetryMax = time.Minute
)

// listen subscribes to the store's notifications, when it has them and the
// worker is not PollOnly, and wakes the queue loops on them until ctx ends
// (see wakeOnNotify). When subscribing fails, the worker polls and tries
// again in the background, rather than polling for the rest of its life;
// once it listens, it wakes every queue, for the jobs whose notifications
// it missed.
func (w *Worker) listen(ctx context.Context) {
	n, ok := w.c.store.(errandstore.Notifier)
	if !ok || w.cfg.PollOnly {
		return
	}
	ch, err := n.ListenQueues(ctx)
	if err == nil {
		w.loops.Go(func() { w.wakeOnNotify(ctx, ch) })
		return
	}
	w.c.logger.Warn("listen for new jobs failed; polling, and trying again", "worker_id", w.ID(),
		"poll", w.cfg.PollInterval.String(), "retry", listenRetryMin.String(), "err", err)
	w.loops.Go(func() {
		for wait := listenRetryMin; ; wait = min(2*wait, listenRetryMax) {
			if sleepCtx(ctx, w.c.clock, wait) != nil {
				return
			}
			ch, err := n.ListenQueues(ctx)
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				w.c.logger.Debug("listen for new jobs failed again", "worker_id", w.ID(), "err", err)
				continue
			}
			w.c.logger.Info("listening for new jobs", "worker_id", w.ID())
			w.c.wakeLocal(w.queues)
			w.wakeOnNotify(ctx, ch)
			return
		}
	})
}

// wakeOnNotify wakes the queue loops that the store's notifications name
// ("" names every queue) until the store closes the channel. When ctx ends
// it waits for that close, so Stop returns only after the store's listener
// has let go of its connection.
func (w *Worker) wakeOnNotify(ctx context.Context, ch <-chan string) {
	// Announcements sent before the worker listened have no echo here.
	seen := w.c.echoes.snapshot()
	for {
		select {
		case <-ctx.Done():
			for range ch {
			}
			return
		case q, ok := <-ch:
			if !ok {
				if ctx.Err() == nil {
					w.c.logger.Warn("listener for new jobs closed; polling only", "worker_id", w.ID(),
						"poll", w.cfg.PollInterval.String())
				}
				return
			}
			switch _, mine := w.cfg.Queues[q]; {
			case q == "":
				// Echoes lost while the store reconnected never come.
				seen = w.c.echoes.snapshot()
				w.c.wakeLocal(w.queues)
			case w.c.echoes.echo(q, seen, w.c.clock.Now()):
				w.echoesSkipped.Add(1)
			case mine:
				w.c.wakeLocal([]string{q})
			}
		}
	}
}
