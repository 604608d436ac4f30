package errand

import (
	"context"
	"fmt"
	"time"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
	"github.com/errandhq/errand/internal/ids"
)

// Batches: fan-out and fan-in. [Client.EnqueueBatch] enqueues jobs as one
// batch, in one transaction (or the caller's, with EnqueueBatchTx), with a
// callback job to enqueue once every member is finished: succeeded, dead or
// cancelled. The callback job's args are the callback's own with the field
// "batch" set to the [BatchResult]: how many members succeeded, died and
// were cancelled.
//
// Exactly once: the callback job has a fixed id, "BATCH.callback", and is
// inserted in the transaction that marks the batch completed, a
// compare-and-set on completed_at. Detection is then free to be
// at-least-once and racy:
//
//   - a worker that records a member's last outcome (succeeded or dead)
//     asks the store to complete the member's batch at once;
//   - cancelling a member through the Client does the same;
//   - the leader completes every open batch whose members are all finished
//     on each sweep, which catches the paths no worker sees (a lease swept to
//     dead on the final attempt, a deadline passed, a cancel made directly on
//     the store, a worker that crashed between the outcome and the check).
//
// A batch completes once. Replaying a member after that does not reopen the
// batch or enqueue the callback again: [Batch].Final keeps the counts of
// the completion while [Batch].Counts follow the members.

// batchCompleteTimeout bounds the completion check that follows an outcome:
// a slow store must not hold a worker's slot, and the leader's pass catches
// a check that gave up.
const batchCompleteTimeout = 30 * time.Second

// BatchOpts are the options of a batch. The zero value is a batch with a
// generated id and no callback.
type BatchOpts struct {
	// ID, when set, is the batch's id: a duplicate returns the existing
	// batch and enqueues nothing, so a retried request cannot enqueue a
	// batch twice. An existing batch that differs from the one this
	// enqueue would have made is an *IDConflictError instead, unless
	// FirstWins. At most MaxBatchIDBytes, and not ending in ".step" or
	// ".undo" (the callback's id would have a workflow job's shape).
	ID string
	// FirstWins makes a duplicate ID return the existing batch even when
	// it differs (see [EnqueueOpts].FirstWins). It needs an ID. A batch's
	// jobs must be new, so their own options may not set it.
	FirstWins bool
	// Callback, when set, is the job enqueued once every member is
	// finished. Its args must marshal to a JSON object: errand sets its
	// field "batch" to the [BatchResult], so declare one in the args type:
	//
	//	type ImportDone struct {
	//		ImportID int                `json:"import_id"`
	//		Batch    errandstore.BatchResult `json:"batch"`
	//	}
	Callback JobArgs
	// CallbackOpts are the callback job's options; nil for the defaults.
	// ID, RunAt, StartBy and UniqueKey must be empty: the callback's id is
	// "BATCH.callback" and it runs when the batch completes (Delay after
	// it, when set).
	CallbackOpts *EnqueueOpts
}

// EnqueueBatch enqueues jobs as one batch in a transaction of its own (see
// [BatchOpts]). Either the batch and all its jobs commit or nothing does. A
// job whose id or unique key is taken is an *InputError: a batch's jobs are
// its own. The store must be a [BatchStore].
func (c *Client[TTx]) EnqueueBatch(ctx context.Context, params []EnqueueParams, opts *BatchOpts) (*errandstore.BatchInsertResult, error) {
	ctx, span := c.startEnqueue(ctx, len(params))
	res, err := c.enqueueBatch(ctx, params, opts)
	if span != nil && res != nil {
		span.SetAttributes(attrBatchID.String(res.Batch.ID))
	}
	endEnqueue(span, nil, err)
	return res, err
}

func (c *Client[TTx]) enqueueBatch(ctx context.Context, params []EnqueueParams, opts *BatchOpts) (*errandstore.BatchInsertResult, error) {
	bs := c.caps.batches
	if bs == nil {
		return nil, fmt.Errorf("enqueue batch: %w", errNoBatchStore)
	}
	p, err := c.batchParams(ctx, params, opts)
	if err != nil {
		return nil, err
	}
	res, err := bs.BatchInsert(ctx, p)
	if err != nil {
		return nil, wrapStoreError("enqueue batch", err)
	}
	if err := c.batchDuplicate(ctx, res, p); err != nil {
		return nil, err
	}
	if !res.Duplicate {
		c.Wake(queuesOf(p.Jobs)...)
		if c.observer != nil {
			c.observer.JobsEnqueued(res.Jobs)
		}
	}
	return res, nil
}

// EnqueueBatchTx enqueues jobs as one batch inside tx, the caller's
// transaction: the batch exists if and only if tx commits. After an error,
// roll tx back. Inside [Client.InTx] workers are woken after the commit;
// otherwise call [Client.Wake] once tx commits.
func (c *Client[TTx]) EnqueueBatchTx(ctx context.Context, tx TTx, params []EnqueueParams, opts *BatchOpts) (*errandstore.BatchInsertResult, error) {
	ctx, span := c.startEnqueue(ctx, len(params))
	res, err := c.enqueueBatchTx(ctx, tx, params, opts)
	if span != nil && res != nil {
		span.SetAttributes(attrBatchID.String(res.Batch.ID))
	}
	endEnqueue(span, nil, err)
	return res, err
}

func (c *Client[TTx]) enqueueBatchTx(ctx context.Context, tx TTx, params []EnqueueParams, opts *BatchOpts) (*errandstore.BatchInsertResult, error) {
	bs := c.txCaps.batches
	if bs == nil {
		return nil, fmt.Errorf("enqueue batch: %w", errNoBatchStore)
	}
	p, err := c.batchParams(ctx, params, opts)
	if err != nil {
		return nil, err
	}
	res, err := bs.BatchInsertTx(ctx, tx, p)
	if err != nil {
		return nil, fmt.Errorf("enqueue batch: %w", err)
	}
	if err := c.batchDuplicate(ctx, res, p); err != nil {
		return nil, err
	}
	if res.Duplicate {
		return res, nil
	}
	if w, ok := ctx.Value(txWakesKey{}).(*txWakes); ok && w.c == c.engine {
		w.add(queuesOf(p.Jobs))
		if c.observer != nil {
			w.addJobs(res.Jobs)
		}
	} else {
		if c.notifier != nil {
			c.notifier.NoteTx(queuesOf(p.Jobs))
		}
		if c.observer != nil {
			c.observer.JobsEnqueued(res.Jobs)
		}
	}
	return res, nil
}

// Batch returns a batch with its members' current counts, or an error
// wrapping ErrNotFound.
func (c *Client[TTx]) Batch(ctx context.Context, id string) (*errandstore.Batch, error) {
	bs := c.caps.batches
	if bs == nil {
		return nil, fmt.Errorf("get batch: %w", errNoBatchStore)
	}
	b, err := bs.BatchGet(ctx, &errandstore.BatchGetParams{ID: id})
	if err != nil {
		return nil, fmt.Errorf("get batch %s: %w", id, err)
	}
	return b, nil
}

var errNoBatchStore = &errandtype.InputError{Field: "store", Message: "does not keep batches (it is not an errandstore.BatchStore); use errand/sqlite or errand/postgres"}

// batchParams builds and checks a batch's insert parameters.
func (c *engine) batchParams(ctx context.Context, params []EnqueueParams, opts *BatchOpts) (*errandstore.BatchInsertParams, error) {
	if opts == nil {
		opts = &BatchOpts{}
	}
	if err := errandstore.CheckFirstWins(opts.FirstWins, opts.ID, "batch"); err != nil {
		return nil, err
	}
	for i := range params {
		if o := params[i].Opts; o != nil && o.FirstWins {
			return nil, &errandtype.InputError{Field: fmt.Sprintf("job %d: first_wins", i), Message: "is set; a batch's jobs must be new, so set FirstWins on the batch instead"}
		}
		if o := params[i].Opts; o != nil && o.Debounce != nil {
			return nil, &errandtype.InputError{Field: fmt.Sprintf("job %d: debounce", i), Message: "is set; a batch's jobs must be new, and a debounced one may fold into another job; enqueue it on its own"}
		}
	}
	jobs, err := c.insertParams(ctx, params)
	if err != nil {
		return nil, err
	}
	p := &errandstore.BatchInsertParams{ID: opts.ID, Jobs: jobs, FirstWins: opts.FirstWins}
	if p.ID == "" {
		p.ID = ids.NewJobID()
	}
	if opts.Callback != nil {
		co := EnqueueOpts{}
		if opts.CallbackOpts != nil {
			co = *opts.CallbackOpts
		}
		switch {
		case co.ID != "":
			return nil, &errandtype.InputError{Field: "CallbackOpts.ID", Message: "must be empty: the callback's id is BATCH.callback"}
		case !co.RunAt.IsZero():
			return nil, &errandtype.InputError{Field: "CallbackOpts.RunAt", Message: "must be zero: the callback runs when the batch completes; use Delay to wait after that"}
		case !co.StartBy.IsZero():
			return nil, &errandtype.InputError{Field: "CallbackOpts.StartBy", Message: "must be zero: the callback is enqueued when the batch completes, a time fixed now may pass before then; use MaxAge to bound it"}
		case co.UniqueKey != "":
			return nil, &errandtype.InputError{Field: "CallbackOpts.UniqueKey", Message: "must be empty: the callback's fixed id already makes it unique"}
		}
		ip, err := c.insertParam(ctx, &EnqueueParams{Args: opts.Callback, Opts: &co})
		if err != nil {
			return nil, fmt.Errorf("callback: %w", err)
		}
		p.Callback, p.ClientCallback = templateOf(ip), ip
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return p, nil
}

// batchDuplicate returns the *IDConflictError of res, when it is a
// duplicate of p's id that differs and p does not say FirstWins.
func (c *engine) batchDuplicate(ctx context.Context, res *errandstore.BatchInsertResult, p *errandstore.BatchInsertParams) error {
	if !res.Duplicate || p.FirstWins {
		return nil
	}
	return c.batchConflict(ctx, res.Batch, p)
}

// completeBatches asks the store to complete batches ids (every ready open
// batch when ids is empty), wakes the queues of the callbacks it enqueued,
// and returns how many it completed. A store without batches completes
// none.
func (c *engine) completeBatches(ctx context.Context, ids []string) (int, error) {
	bs := c.caps.batches
	if bs == nil {
		return 0, nil
	}
	done, err := bs.BatchComplete(ctx, &errandstore.BatchCompleteParams{IDs: ids})
	var queues []string
	for _, b := range done {
		attrs := []any{"batch_id", b.ID, "succeeded", b.Final.Succeeded, "dead", b.Final.Dead, "cancelled", b.Final.Cancelled}
		if b.Callback != nil {
			queues = append(queues, b.Callback.Queue)
			attrs = append(attrs, "callback_job_id", errandstore.BatchCallbackJobID(b.ID))
		}
		c.logger.Info("batch completed", attrs...)
	}
	c.wakeQueues(queues...)
	return len(done), err
}

// afterMemberFinished completes job's batch when job, a batch member, has
// just finished. A failure is logged: the leader's pass completes the batch
// later.
func (c *engine) afterMemberFinished(ctx context.Context, job *errandtype.Job) {
	if job.BatchID == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), batchCompleteTimeout)
	defer cancel()
	if _, err := c.completeBatches(ctx, []string{*job.BatchID}); err != nil {
		c.logger.Warn("complete batch failed; the leader completes it on its next sweep",
			"batch_id", *job.BatchID, "job_id", job.ID, "err", err)
	}
}

// wakeQueues wakes the workers of queues, here and, through the store's
// notifications, in other processes: for jobs the engine itself enqueued
// (callbacks, hooks).
func (c *engine) wakeQueues(queues ...string) {
	if len(queues) == 0 {
		return
	}
	claims := c.wakes.Wake(queues)
	if c.notifier != nil {
		c.notifier.Notify(queues, claims)
	}
}

// batchConflict returns the *IDConflictError of b, the batch found under
// p's id, when it is not what p would have made (see
// [errandstore.BatchDifferences]).
func (c *engine) batchConflict(ctx context.Context, b *errandstore.Batch, p *errandstore.BatchInsertParams) error {
	fields, err := errandstore.BatchDifferences(ctx, c.store, b, p)
	if err != nil || len(fields) == 0 {
		return err
	}
	return &IDConflictError{What: "batch", ID: b.ID, Fields: fields}
}
