package errand

import (
	"context"
	"errors"
	"fmt"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
)

// RemoteEffectKeyPrefix starts RemoteEffect's default key. Once and
// RemoteEffect share one ledger; distinct defaults keep one from taking the
// other's entry for its own.
const RemoteEffectKeyPrefix = "remote:"

// Once performs an effect in the same database as the queue at most once per
// key, inside a handler. It records key inside tx, the caller's
// transaction, and calls fn only when the key was not recorded before; fn
// does its writes in the same tx. If tx commits, both the effect and its
// record are durable; if it rolls back, neither is. A repeated delivery
// after a crash finds the key and skips fn, so the effect happens once even
// though the handler ran twice.
//
// key defaults to the job's id. The record is fenced by the job's lease:
// when the worker no longer owns the job, Once returns ErrLeaseLost and the
// caller must roll back. ran reports whether fn was called.
//
// Once finds the store through the handler's context: outside a handler it
// returns an error. The store must take transactions of type TTx (see
// [TxStore]); otherwise the error wraps ErrUnsupportedTx.
func Once[TTx any](ctx context.Context, tx TTx, job *errandtype.Job, key string, fn func() error) (ran bool, err error) {
	a, ok := ctx.Value(attemptKey{}).(*attemptInfo)
	if !ok {
		return false, errors.New("once: no errand job in this context; call it inside a handler")
	}
	store, ok := a.store.(errandstore.TxStore[TTx])
	if !ok {
		return false, fmt.Errorf("once: %w: the store (%T) does not take a %T", ErrUnsupportedTx, a.store, tx)
	}
	if key == "" {
		key = job.ID
	}
	token := ""
	if job.LeaseToken != nil {
		token = *job.LeaseToken
	}
	first, err := store.EffectRecordTx(ctx, tx, &errandstore.EffectRecordParams{Key: key, JobID: job.ID, LeaseToken: token})
	if err != nil {
		return false, fmt.Errorf("record effect %s: %w", key, err)
	}
	if !first {
		return false, nil
	}
	return true, fn()
}

// RemoteEffect performs an effect outside the queue's database (an email, a
// charge at a provider) under the try-begin / complete / release protocol of
// the effect ledger, keyed by key and fenced by the job's lease token. The
// default key is RemoteEffectKeyPrefix and the job's id, never the bare id
// that Once defaults to, so a handler may use both:
//
//   - if an earlier delivery completed the effect, fn is not called and
//     RemoteEffect returns nil;
//   - if another delivery holds it under a live lease, it returns a
//     retryable error wrapping ErrEffectHeld;
//   - otherwise this delivery owns it and fn runs. status is EffectBegun on
//     a first try, EffectRetaken after a released failure, and
//     EffectAbandoned when an earlier delivery began and then lost its
//     lease: the remote side may have acted, so fn should look it up by key
//     before acting again. A nil result completes the entry; an error
//     releases it, so a later delivery may try again, and is returned.
//
// Pass the key to the remote side as its idempotency key where it takes
// one. RemoteEffect finds the store through the handler's context: outside
// a handler it returns an error.
func RemoteEffect(ctx context.Context, job *errandtype.Job, key string, fn func(ctx context.Context, status errandtype.EffectStatus) error) error {
	a, ok := ctx.Value(attemptKey{}).(*attemptInfo)
	if !ok {
		return errors.New("remote effect: no errand job in this context; call it inside a handler")
	}
	return remoteEffect(ctx, a.store, job, key, fn)
}

func remoteEffect(ctx context.Context, store errandstore.Store, job *errandtype.Job, key string, fn func(ctx context.Context, status errandtype.EffectStatus) error) error {
	if key == "" {
		key = RemoteEffectKeyPrefix + job.ID
	}
	if job.LeaseToken == nil {
		return fmt.Errorf("remote effect %s: job %s is not claimed", key, job.ID)
	}
	p := &errandstore.EffectParams{Key: key, JobID: job.ID, LeaseToken: *job.LeaseToken}
	e, err := store.EffectBegin(ctx, p)
	if err != nil {
		return fmt.Errorf("begin effect %s: %w", key, err)
	}
	switch e.Status {
	case errandtype.EffectAlreadyCompleted:
		return nil
	case errandtype.EffectHeldElsewhere:
		return WithClass("effect_held", fmt.Errorf("effect %s: %w", key, ErrEffectHeld))
	}
	if ferr := fn(ctx, e.Status); ferr != nil {
		if _, err := store.EffectRelease(context.WithoutCancel(ctx), &errandstore.EffectReleaseParams{EffectParams: *p, Message: errandstore.CleanText(ferr.Error(), errandstore.MaxMessageBytes)}); err != nil {
			return fmt.Errorf("release effect %s after %v: %w", key, ferr, err)
		}
		return ferr
	}
	if _, err := store.EffectComplete(context.WithoutCancel(ctx), p); err != nil {
		return fmt.Errorf("complete effect %s: %w", key, err)
	}
	return nil
}
