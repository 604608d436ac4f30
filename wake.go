package errand

import (
	"slices"
)

// Wake-ups (the mechanics are in internal/notifier). An idle queue loop of a Worker waits on a wake channel of its
// queue and on its poll timer, whichever comes first. Enqueues in the same
// process close the channels of their queues at once. Enqueues in other
// processes arrive through the store's optional [Notifier]: the enqueuing
// Client sends NotifyQueues after its transaction commits, coalesced (a
// lone Enqueue may have its INSERT announce itself: see insertMany), and
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
