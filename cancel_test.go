package errand_test

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
	"github.com/errandhq/errand/internal/pgschemas"
	"github.com/errandhq/errand/postgres"
	"github.com/errandhq/errand/postgres/pgtest"
	"github.com/errandhq/errand/sqlite"
)

// Cancelling running jobs, on both stores, on the real clock: the path
// under test is a notification between two stores on one database, as
// between an operator's process and a worker's.

// eachStorePair runs body with two stores on one fresh database: the
// worker's and the operator's, each with connections of its own.
func eachStorePair(t *testing.T, body func(t *testing.T, worker, operator errandstore.TxStore[*sql.Tx])) {
	t.Run("sqlite", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "cancel.db")
		open := func() errandstore.TxStore[*sql.Tx] {
			s, err := sqlite.Open(t.Context(), path, nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		}
		body(t, open(), open())
	})
	t.Run("postgres", func(t *testing.T) {
		url := pgtest.URL(t)
		schema := pgschemas.Take(t, url)
		open := func() errandstore.TxStore[*sql.Tx] {
			s, err := postgres.Open(t.Context(), url, &postgres.Options{Schema: schema, MaxConns: 4})
			if err != nil {
				t.Fatal(err)
			}
			v := s.SQL(nil)
			t.Cleanup(func() { v.Close() })
			return v
		}
		body(t, open(), open())
	})
}

// cancelOpts is an operator's cancel.
var cancelOpts = &errand.CancelOpts{Operator: "ana", Reason: "runaway import"}

// startSlowWorker starts a worker whose lease renewals and polls are a
// minute apart: a cancel that arrives within seconds came by notification.
func startSlowWorker(t *testing.T, c *errand.Client[*sql.Tx], pollOnly bool, lease time.Duration) *errand.Worker {
	t.Helper()
	w, err := c.NewWorker(&errand.WorkerConfig{
		Queues:       map[string]int{errand.DefaultQueue: 2},
		Lease:        lease,
		PollInterval: time.Minute,
		PollOnly:     pollOnly,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		w.Stop(ctx)
	})
	return w
}

// TestCancelRunningJobByNotification: a handler that blocks on its context
// is cancelled, with cause ErrJobCancelled, by an operator's cancel made
// through another store, long before a lease renewal (every minute) could
// have carried it; the job ends cancelled with a cancelled history entry.
func TestCancelRunningJobByNotification(t *testing.T) {
	eachStorePair(t, func(t *testing.T, ws, os errandstore.TxStore[*sql.Tx]) {
		ctx := context.Background()
		started := make(chan struct{}, 1)
		causes := make(chan error, 1)
		c := handlerClient(t, ws, func(ctx context.Context, j *errandtype.Job) error {
			started <- struct{}{}
			<-ctx.Done()
			causes <- context.Cause(ctx)
			return ctx.Err()
		})
		operator := newClient(t, os, &errand.Config{Kinds: kindsOf([]testKind{{Name: "task"}})})
		startSlowWorker(t, c, false, 3*time.Minute)
		job := enqueue(t, operator, "task", nil)
		select {
		case <-started:
		case <-time.After(time.Minute):
			t.Fatal("the handler did not start within a minute")
		}
		sent := time.Now()
		got, err := operator.Cancel(ctx, job.ID, cancelOpts)
		if err != nil {
			t.Fatalf("cancel a running job: %v", err)
		}
		if got.State != errandtype.StateRunning || !got.CancelPending() {
			t.Fatalf("Cancel returned state %s, request %v; want running with a request", got.State, got.CancelRequestedAt)
		}
		var cause error
		select {
		case cause = <-causes:
		case <-time.After(5 * time.Second): // renewals come every minute
			t.Fatal("the cancel did not reach the handler within 5s: no notification")
		}
		t.Logf("cancel reached the handler after %v", time.Since(sent))
		if !errors.Is(cause, errand.ErrJobCancelled) {
			t.Errorf("handler's context cause = %v, want ErrJobCancelled", cause)
		}
		workerWaitFor(t, 30*time.Second, func() bool { return getJob(t, operator, job.ID).State == errandtype.StateCancelled })
		j := getJob(t, operator, job.ID)
		if j.FinishedAt == nil || j.LeaseToken != nil || len(j.Errors) != 1 || j.Errors[0].Class != errandstore.ClassCancelled {
			t.Errorf("cancelled job: finished %v, lease %v, history %+v", j.FinishedAt, j.LeaseToken, j.Errors)
		}
		if j.Errors[0].Message != errandstore.CancelledByRequestMessage {
			t.Errorf("history message %q, want %q", j.Errors[0].Message, errandstore.CancelledByRequestMessage)
		}
	})
}

// TestCancelRunningJobByRenewal: with notifications off (PollOnly), the
// lease renewal alone delivers the cancel: the floor.
func TestCancelRunningJobByRenewal(t *testing.T) {
	t.Parallel()
	eachStorePair(t, func(t *testing.T, ws, os errandstore.TxStore[*sql.Tx]) {
		ctx := context.Background()
		started := make(chan struct{}, 1)
		giveUp := make(chan struct{}) // closed when the test ends, failed or not
		c := handlerClient(t, ws, func(ctx context.Context, j *errandtype.Job) error {
			started <- struct{}{}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-giveUp: // no cancel came: return, so that the worker stops
				return errors.New("no cancel reached the handler")
			}
		})
		operator := newClient(t, os, &errand.Config{Kinds: kindsOf([]testKind{{Name: "task"}})})
		// Enqueued first, the job is found by the worker's first poll; the
		// next is a minute away.
		job := enqueue(t, operator, "task", nil)
		startSlowWorker(t, c, true, 3*time.Second) // renewals every second
		t.Cleanup(func() { close(giveUp) })        // before the worker's Stop, which waits for the handler
		select {
		case <-started:
		case <-time.After(30 * time.Second):
			t.Fatal("job not started in 30s")
		}
		if _, err := operator.Cancel(ctx, job.ID, cancelOpts); err != nil {
			t.Fatal(err)
		}
		workerWaitFor(t, 30*time.Second, func() bool { return getJob(t, operator, job.ID).State == errandtype.StateCancelled })
	})
}

// TestCancelIgnoredUntilTimeout: a handler that ignores its context is
// abandoned at its kind's timeout and the job ends cancelled while the
// handler still runs; the worker's slot is the handler's until it returns.
func TestCancelIgnoredUntilTimeout(t *testing.T) {
	t.Parallel()
	eachStorePair(t, func(t *testing.T, ws, os errandstore.TxStore[*sql.Tx]) {
		ctx := context.Background()
		started := make(chan struct{}, 1)
		release := make(chan struct{})
		var returned atomic.Bool
		c := newClient(t, ws, &errand.Config{Kinds: kindsOf([]testKind{{Name: "stubborn", Timeout: 3 * time.Second,
			Handler: errand.HandlerFunc(func(ctx context.Context, j *errandtype.Job) error {
				started <- struct{}{}
				<-release // ignores ctx
				returned.Store(true)
				return nil
			})}})})
		operator := newClient(t, os, &errand.Config{Kinds: kindsOf([]testKind{{Name: "stubborn"}})})
		w, err := c.NewWorker(&errand.WorkerConfig{Queues: map[string]int{errand.DefaultQueue: 1}, Lease: 3 * time.Minute, PollInterval: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Start(ctx); err != nil {
			t.Fatal(err)
		}
		job := enqueue(t, operator, "stubborn", nil)
		<-started
		if _, err := operator.Cancel(ctx, job.ID, cancelOpts); err != nil {
			t.Fatal(err)
		}
		workerWaitFor(t, 30*time.Second, func() bool { return getJob(t, operator, job.ID).State == errandtype.StateCancelled })
		if returned.Load() {
			t.Fatal("the handler returned; the test needs it running")
		}
		j := getJob(t, operator, job.ID)
		if len(j.Errors) != 1 || j.Errors[0].Class != errandstore.ClassCancelled {
			t.Errorf("history %+v, want one cancelled entry", j.Errors)
		}
		// The slot is still taken: a second job waits.
		second := enqueue(t, operator, "stubborn", nil)
		time.Sleep(200 * time.Millisecond)
		if st := getJob(t, operator, second.ID).State; st != errandtype.StateQueued {
			t.Errorf("second job %s while the abandoned handler runs; want queued", st)
		}
		close(release)
		<-started // the second job runs once the slot is free
		stopCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		if err := w.Stop(stopCtx); err != nil {
			t.Fatal(err)
		}
	})
}
