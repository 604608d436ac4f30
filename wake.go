package errand

import (
	"context"
	"slices"
	"time"

	"github.com/errandhq/errand/errandstore"
)

// Wake-ups (the mechanics are in internal/notifier). An idle queue loop of a Worker waits on a wake channel of its
// queue and on its poll timer, whichever comes first. Enqueues in the same
// process close the channels of their queues at once. Enqueues in other
// processes arrive through the store's optional [Notifier]: the enqueuing
// Client sends NotifyQueues after its transaction commits, coalesced, and
// each Worker listens with ListenQueues. Polling stays the floor: a lost or
// unsupported notification delays a job by at most one poll interval.

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
	claims := c.wakes.Wake(queues)
	if c.notifier == nil {
		return
	}
	if len(queues) == 0 {
		queues = c.notifier.TakeTxQueues()
	}
	c.notifier.Notify(queues, claims)
}

// Close sends the cross-process wake-ups still pending and stops the
// client's background notifier, waiting for it. It does not close the
// store, and does not stop workers. After Close the client still enqueues,
// but no longer announces new jobs to other processes: their workers find
// them at their next poll. Close is idempotent and always returns nil.
// A client whose store is not a [Notifier] holds nothing to close.
func (c *Client[TTx]) Close() error {
	if c.notifier != nil {
		c.notifier.Close()
	}
	return nil
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
	n := w.c.caps.notifier
	if n == nil || w.cfg.PollOnly {
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
			w.c.wakes.Wake(w.queues)
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
	seen := w.c.echoes.Snapshot()
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
				seen = w.c.echoes.Snapshot()
				w.c.wakes.Wake(w.queues)
			case w.c.echoes.Echo(q, seen, w.c.clock.Now()):
				w.echoesSkipped.Add(1)
			case mine:
				w.c.wakes.Wake([]string{q})
			}
		}
	}
}
