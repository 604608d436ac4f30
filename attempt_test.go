package errand_test

import (
	"context"
	"database/sql"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/errandhq/errand"
)

// troubledStore wraps a real store with the faults a network or a busy
// database produces.
type troubledStore struct {
	errand.TxStore[*sql.Tx]
	hangHeartbeats atomic.Bool  // heartbeats block until their context ends
	failOutcomes   atomic.Int64 // this many outcome writes fail first
	hangOutcomes   atomic.Bool  // outcome writes block until their context ends
}

func (s *troubledStore) JobHeartbeatMany(ctx context.Context, p *errand.JobHeartbeatParams) ([]errand.HeartbeatResult, error) {
	if s.hangHeartbeats.Load() {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return s.TxStore.JobHeartbeatMany(ctx, p)
}

func (s *troubledStore) JobRecordOutcomes(ctx context.Context, p *errand.JobRecordOutcomesParams) ([]errand.OutcomeResult, error) {
	if s.failOutcomes.Add(-1) >= 0 {
		return nil, errors.New("connection reset by peer")
	}
	if s.hangOutcomes.Load() {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return s.TxStore.JobRecordOutcomes(ctx, p)
}

// A heartbeat that hangs in the store must not let the handler run on past
// its lease, where another worker may already run the job: the handler is
// cancelled once a whole lease passed without a renewal.
func TestHangingHeartbeatCancelsHandler(t *testing.T) {
	st := &troubledStore{TxStore: openStore(t, nil)}
	st.hangHeartbeats.Store(true)
	cancelled := make(chan time.Duration, 1)
	c := handlerClient(t, st, func(ctx context.Context, j *errand.Job) error {
		start := time.Now()
		select {
		case <-ctx.Done():
			cancelled <- time.Since(start)
			return ctx.Err()
		case <-time.After(30 * time.Second):
			return nil
		}
	})
	enqueue(t, c, "task", nil)
	res := workOne(t, c, errand.WorkOneOpts{Lease: errand.MinLease})
	select {
	case <-cancelled:
	default:
		t.Fatal("the handler was never cancelled although no heartbeat succeeded")
	}
	if res.Result != errand.ResultLeaseLost {
		t.Fatalf("result %+v, want lease_lost", res)
	}
}

// A handler that returns nil after its timeout passed did its work: the
// attempt succeeded, and running it again would repeat the effect.
func TestSuccessPastTimeoutIsSuccess(t *testing.T) {
	st := openStore(t, nil)
	c := newClient(t, st, errand.Config{Kinds: kindsOf([]testKind{{
		Name:    "k",
		Timeout: 50 * time.Millisecond,
		Handler: errand.HandlerFunc(func(ctx context.Context, j *errand.Job) error {
			<-ctx.Done() // the timeout fires...
			time.Sleep(20 * time.Millisecond)
			return nil // ...and the handler finishes its work anyway
		}),
	}})})
	j := enqueue(t, c, "k", nil)
	if res := workOne(t, c, errand.WorkOneOpts{}); res.Result != errand.ResultSucceeded {
		t.Fatalf("result %+v, want succeeded", res)
	}
	if got := getJob(t, c, j.ID); got.State != errand.StateSucceeded || len(got.Errors) != 0 {
		t.Fatalf("job %s with history %+v, want succeeded with none", got.State, got.Errors)
	}
}

// A failed acknowledgment write is retried while the lease lasts: one lost
// write must not turn a finished final attempt into a dead job.
func TestOutcomeWriteRetried(t *testing.T) {
	st := &troubledStore{TxStore: openStore(t, nil)}
	c := handlerClient(t, st, func(ctx context.Context, j *errand.Job) error { return nil })
	j := enqueue(t, c, "task", &errand.EnqueueOpts{MaxAttempts: 1})
	st.failOutcomes.Store(2)
	if res := workOne(t, c, errand.WorkOneOpts{Lease: 5 * time.Second}); res.Result != errand.ResultSucceeded {
		t.Fatalf("result %+v, want succeeded after the write was retried", res)
	}
	if got := getJob(t, c, j.ID); got.State != errand.StateSucceeded || got.Attempt != 1 {
		t.Fatalf("job %s attempt %d, want succeeded attempt 1", got.State, got.Attempt)
	}
}

// A write that hangs (a connection cut off without a reset) must not hang
// the worker: each write is bounded by the lease, so Stop returns, and the
// job, whose outcome could not be recorded, is left to its lease.
func TestHangingOutcomeWriteDoesNotHangStop(t *testing.T) {
	st := &troubledStore{TxStore: openStore(t, nil)}
	st.hangOutcomes.Store(true)
	ran := make(chan struct{}, 1)
	c := handlerClient(t, st, func(ctx context.Context, j *errand.Job) error {
		ran <- struct{}{}
		return nil
	})
	j := enqueue(t, c, "task", nil)
	// The lease bounds the hung write, so Stop takes about that long. It is
	// long enough that the leader's sweep at its election, at about the
	// time of the claim, cannot find the lease already expired and move the
	// job on before Stop ends the leader's duties.
	w, err := c.NewWorker(errand.WorkerConfig{Lease: time.Second, PollInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	<-ran
	stopped := make(chan error, 1)
	go func() { stopped <- w.Stop(context.Background()) }()
	select {
	case <-stopped:
	case <-time.After(20 * time.Second):
		t.Fatal("Stop still waiting on a hung outcome write")
	}
	if got := getJob(t, c, j.ID); got.State != errand.StateRunning {
		t.Fatalf("job %s; want running, left to its lease", got.State)
	}
}
