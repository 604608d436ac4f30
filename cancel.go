package errand

import (
	"context"
	"sync"
)

// Cancelling a running job. An operator's [Client.Cancel] of a running job
// records a cancel request (Job.CancelRequestedAt) in the store; the job
// stays running. The worker that holds it learns of the request in two
// ways:
//
//   - the lease renewal, which reads the request in the same statement
//     ([HeartbeatResult.CancelRequested]) every third of the lease: the
//     floor, which needs nothing but the store;
//   - a notification, when the store is a [CancelListener] and the worker
//     listens (not PollOnly): PostgreSQL's NOTIFY, sent in the cancel's
//     transaction, or on SQLite the commit itself, seen as the queue
//     wake-ups see it. The worker then renews its leases at once, and the
//     renewal's answer cancels the handler's context: in well under a
//     second on both stores.
//
// The handler's context is cancelled with cause [ErrJobCancelled]. When it
// returns, the attempt ends cancelled (state cancelled, a history entry of
// class cancelled), fenced by its lease token as every outcome is. A handler
// that returns nil finished its work, and the job is recorded as succeeded.
// A handler that ignores its context and has a timeout (KindOpts.Timeout)
// is abandoned at that timeout and the attempt ends cancelled without it;
// one without a timeout runs until it returns.

// cancelWatch is a Worker's subscription to its store's cancel
// notifications. It lives from Start until the worker's last lease is
// released, longer than the queue loops, so that a cancel reaches a job
// that runs on during a drain.
type cancelWatch struct {
	cancel context.CancelFunc
	done   sync.WaitGroup
}

// watchCancels listens for cancel requests and makes leases renew at once
// when one names a job it holds ("" names every job). It returns nil when
// the store cannot notify, the worker polls only, or listening fails (the
// renewal then delivers cancels on its own).
func (w *Worker) watchCancels(ctx context.Context) *cancelWatch {
	cl := w.c.caps.cancels
	if cl == nil || w.cfg.PollOnly || len(w.queues) == 0 {
		return nil
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	ch, err := cl.ListenCancels(ctx)
	if err != nil {
		cancel()
		w.c.logger.Warn("listen for cancel requests failed; cancels arrive with lease renewals", "worker_id", w.ID(), "err", err)
		return nil
	}
	cw := &cancelWatch{cancel: cancel}
	cw.done.Go(func() {
		for id := range ch {
			if id == "" || w.leases.Holds(id) {
				w.leases.CheckNow()
			}
		}
	})
	return cw
}

// stop ends the subscription and waits until the store has let go of it.
func (cw *cancelWatch) stop() {
	if cw == nil {
		return
	}
	cw.cancel()
	cw.done.Wait()
}
