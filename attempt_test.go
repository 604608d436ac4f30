package errand_test

import (
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtest"
	"github.com/errandhq/errand/errandtype"
)

// troubledStore wraps a real store with the faults a network or a busy
// database produces.
type troubledStore struct {
	errandstore.TxStore[*sql.Tx]
	hangHeartbeats atomic.Bool  // heartbeats block until their context ends
	failOutcomes   atomic.Int64 // this many outcome writes fail first
	// lostReplies: this many outcome writes (after failOutcomes) commit,
	// then fail as a connection dropped before the answer would.
	lostReplies  atomic.Int64
	hangOutcomes atomic.Bool // outcome writes block until their context ends
	// hanging, when set, hears of a call that begins to hang.
	hanging chan string
	// renewed, when set, hears of each renewal the store committed.
	renewed chan errandstore.HeartbeatResult
}

// hang blocks until ctx ends, after telling s.hanging that call hangs.
func (s *troubledStore) hang(ctx context.Context, call string) error {
	select {
	case s.hanging <- call:
	default: // nobody listens, or the test heard of one already
	}
	<-ctx.Done()
	return ctx.Err()
}

func (s *troubledStore) JobHeartbeatMany(ctx context.Context, p *errandstore.JobHeartbeatParams) ([]errandstore.HeartbeatResult, error) {
	if s.hangHeartbeats.Load() {
		return nil, s.hang(ctx, "heartbeat")
	}
	rs, err := s.TxStore.JobHeartbeatMany(ctx, p)
	if s.renewed != nil && err == nil {
		for _, r := range rs {
			s.renewed <- r
		}
	}
	return rs, err
}

func (s *troubledStore) JobRecordOutcomes(ctx context.Context, p *errandstore.JobRecordOutcomesParams) ([]errandstore.OutcomeResult, error) {
	if s.failOutcomes.Add(-1) >= 0 {
		return nil, errors.New("connection reset by peer")
	}
	if s.hangOutcomes.Load() {
		return nil, s.hang(ctx, "outcome")
	}
	rs, err := s.TxStore.JobRecordOutcomes(ctx, p)
	if err == nil && s.lostReplies.Add(-1) >= 0 {
		return nil, errors.New("read tcp: connection reset by peer")
	}
	return rs, err
}

// clockClient returns a client on clock with one kind, "task", run by h.
func clockClient(t testing.TB, st errandstore.TxStore[*sql.Tx], clock *errandtest.Clock, h errand.HandlerFunc) *errand.Client[*sql.Tx] {
	t.Helper()
	return newClient(t, st, &errand.Config{Clock: clock, Kinds: kindsOf([]testKind{{Name: "task", Handler: h}})})
}

// workOneAsync runs WorkOne in a goroutine, for a test that moves the
// clock while it runs.
func workOneAsync(t *testing.T, c *errand.Client[*sql.Tx], opts *errand.WorkOneOpts) <-chan *errand.WorkResult {
	t.Helper()
	done := make(chan *errand.WorkResult, 1)
	go func() {
		r, err := c.WorkOne(context.Background(), opts)
		if err != nil {
			t.Errorf("work one: %v", err)
		}
		done <- r
	}()
	return done
}

// A heartbeat that hangs in the store must not let the handler run on past
// its lease, where another worker may already run the job: the handler is
// cancelled once a whole lease passed without a renewal, not before.
func TestHangingHeartbeatCancelsHandler(t *testing.T) {
	clock := newTestClock()
	st := &troubledStore{TxStore: openStore(t, clock), hanging: make(chan string, 1)}
	st.hangHeartbeats.Store(true)
	cancelled := make(chan struct{})
	c := clockClient(t, st, clock, func(ctx context.Context, j *errandtype.Job) error {
		<-ctx.Done()
		close(cancelled)
		return ctx.Err()
	})
	enqueue(t, c, "task", nil)
	const lease = time.Minute
	claimed := clock.Now()
	done := workOneAsync(t, c, &errand.WorkOneOpts{Lease: lease})
	// The first heartbeat is sent a third of the lease on, and hangs.
	blockUntilAt(t, clock, claimed.Add(lease/3), 1)
	clock.Advance(lease / 3)
	<-st.hanging
	clock.Set(claimed.Add(lease - time.Microsecond))
	select {
	case <-cancelled:
		t.Fatal("the handler was cancelled before a whole lease passed")
	case r := <-done:
		t.Fatalf("work one returned %+v before a whole lease passed", r)
	default:
	}
	clock.Set(claimed.Add(lease))
	res := <-done
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
	clock := newTestClock()
	st := openStore(t, clock)
	c := newClient(t, st, &errand.Config{Clock: clock, Kinds: kindsOf([]testKind{{
		Name:    "k",
		Timeout: time.Second,
		Handler: errand.HandlerFunc(func(ctx context.Context, j *errandtype.Job) error {
			<-ctx.Done() // the timeout fires...
			return nil   // ...and the handler finishes its work anyway
		}),
	}})})
	j := enqueue(t, c, "k", nil)
	done := workOneAsync(t, c, &errand.WorkOneOpts{Lease: time.Minute})
	// The attempt has begun once its lease's heartbeats are scheduled.
	blockUntilAt(t, clock, clock.Now().Add(20*time.Second), 1)
	clock.Advance(time.Second)
	if res := <-done; res.Result != errand.ResultSucceeded {
		t.Fatalf("result %+v, want succeeded", res)
	}
	if got := getJob(t, c, j.ID); got.State != errandtype.StateSucceeded || len(got.Errors) != 0 {
		t.Fatalf("job %s with history %+v, want succeeded with none", got.State, got.Errors)
	}
}

// A failed acknowledgment write is retried while the lease lasts, backing
// off 50ms and then twice that: one lost write must not turn a finished
// final attempt into a dead job.
func TestOutcomeWriteRetried(t *testing.T) {
	clock := newTestClock()
	st := &troubledStore{TxStore: openStore(t, clock)}
	var logs lockedBuffer
	c := newClient(t, st, &errand.Config{Clock: clock, Logger: slog.New(slog.NewTextHandler(&logs, nil)),
		Kinds: kindsOf([]testKind{{Name: "task", Handler: errand.HandlerFunc(func(ctx context.Context, j *errandtype.Job) error { return nil })}})})
	j := enqueue(t, c, "task", &errand.EnqueueOpts{MaxAttempts: 1})
	st.failOutcomes.Store(3)
	done := workOneAsync(t, c, &errand.WorkOneOpts{Lease: 5 * time.Second})
	for _, backoff := range []time.Duration{50 * time.Millisecond, 100 * time.Millisecond, 200 * time.Millisecond} {
		blockUntilAt(t, clock, clock.Now().Add(backoff), 1)
		clock.Advance(backoff)
	}
	if res := <-done; res.Result != errand.ResultSucceeded {
		t.Fatalf("result %+v, want succeeded after the write was retried", res)
	}
	// One warning for the three failed writes, and one line when the
	// write lands: not a line a retry while the database is away.
	if n := strings.Count(logs.String(), `level=WARN msg="record outcome failed; retrying while the lease lasts"`); n != 1 {
		t.Errorf("three failed writes logged %d warnings, want 1:\n%s", n, logs.String())
	}
	if n := strings.Count(logs.String(), `msg="outcome recorded after failed writes"`); n != 1 || !strings.Contains(logs.String(), "failed_writes=3") {
		t.Errorf("the write that landed logged %d lines, want 1 naming 3 failed writes:\n%s", n, logs.String())
	}
	if got := getJob(t, c, j.ID); got.State != errandtype.StateSucceeded || got.Attempt != 1 {
		t.Fatalf("job %s attempt %d, want succeeded attempt 1", got.State, got.Attempt)
	}
}

// A Worker hands a successful attempt's outcome to its batcher and lets
// the attempt's goroutine end; when that write fails, the outcome is
// written again while the lease lasts, and the job succeeds once, with one
// result for its subscribers.
func TestWorkerOutcomeWriteRetried(t *testing.T) {
	clock := newTestClock()
	st := &troubledStore{TxStore: openStore(t, clock)}
	c := clockClient(t, st, clock, func(ctx context.Context, j *errandtype.Job) error { return nil })
	events, cancel := c.Subscribe()
	defer cancel()
	j := enqueue(t, c, "task", &errand.EnqueueOpts{MaxAttempts: 1})
	st.failOutcomes.Store(1)
	w := workUntilSucceeded(t, c, events, j.ID, "a failed outcome write")
	select {
	case ev := <-events:
		t.Fatalf("a second result: %+v", ev.WorkResult)
	default:
	}
	if got := getJob(t, c, j.ID); got.State != errandtype.StateSucceeded || got.Attempt != 1 {
		t.Fatalf("job %s attempt %d, want succeeded attempt 1", got.State, got.Attempt)
	}
	if n := st.failOutcomes.Load(); n >= 0 {
		t.Fatalf("the failing write was never made (%d left to fail)", n+1)
	}
	if s := w.Stats(); s.JobsCompleted != 1 || s.JobsRunning != 0 || s.OutcomeWrites < 2 {
		t.Fatalf("worker stats %+v, want 1 completed in 2 writes or more, none running", s)
	}
}

// A write that hangs (a connection cut off without a reset) must not hang
// the worker: each write is bounded by the lease, so Stop returns once the
// lease has passed, and the job, whose outcome could not be recorded, is
// left to its lease.
func TestHangingOutcomeWriteDoesNotHangStop(t *testing.T) {
	clock := newTestClock()
	st := &troubledStore{TxStore: openStore(t, clock), hanging: make(chan string, 1)}
	st.hangOutcomes.Store(true)
	ran := make(chan struct{}, 1)
	c := clockClient(t, st, clock, func(ctx context.Context, j *errandtype.Job) error {
		ran <- struct{}{}
		return nil
	})
	j := enqueue(t, c, "task", nil)
	// The leadership renewals come hourly and the sweeps every two hours:
	// none moves the job on while the clock passes its lease.
	const lease = time.Minute
	const sweepEvery = 2 * time.Hour
	w, err := c.NewWorker(&errand.WorkerConfig{Lease: lease, PollInterval: time.Hour, LeaderTTL: 3 * time.Hour, SweepInterval: sweepEvery})
	if err != nil {
		t.Fatal(err)
	}
	claimed := clock.Now()
	if err := w.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	<-ran
	<-st.hanging
	// The sweep on election is done, and the next one two hours away: the
	// lease's end below is not swept.
	blockUntilAt(t, clock, claimed.Add(sweepEvery), 1)
	stopped := make(chan error, 1)
	go func() { stopped <- w.Stop(context.Background()) }()
	clock.Set(claimed.Add(lease))
	select {
	case <-stopped:
	case <-time.After(clockWait):
		t.Fatal("Stop still waiting on a hung outcome write after the lease")
	}
	if got := getJob(t, c, j.ID); got.State != errandtype.StateRunning {
		t.Fatalf("job %s; want running, left to its lease", got.State)
	}
}

// An outcome write that committed but whose answer was lost (the
// connection dropped after the commit) is retried, and the retry finds the
// lease ended, by that very outcome: the attempt's result is what was
// recorded, not a lost lease, for a success and for a failure alike.
func TestOutcomeRecordedDespiteLostAnswer(t *testing.T) {
	for _, tc := range []struct {
		name    string
		handler errand.HandlerFunc
		want    errand.Result
		state   errandtype.JobState
	}{
		{"succeeded", func(context.Context, *errandtype.Job) error { return nil }, errand.ResultSucceeded, errandtype.StateSucceeded},
		{"retrying", func(context.Context, *errandtype.Job) error { return errors.New("upstream 503") }, errand.ResultRetrying, errandtype.StateRetrying},
		{"dead", func(context.Context, *errandtype.Job) error { return errand.Permanent(errors.New("bad card")) }, errand.ResultDead, errandtype.StateDead},
		{"snoozed", func(context.Context, *errandtype.Job) error { return errand.Snooze(time.Minute) }, errand.ResultSnoozed, errandtype.StateQueued},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := newTestClock()
			st := &troubledStore{TxStore: openStore(t, clock)}
			c := clockClient(t, st, clock, tc.handler)
			j := enqueue(t, c, "task", nil)
			st.lostReplies.Store(1)
			done := workOneAsync(t, c, &errand.WorkOneOpts{Lease: 5 * time.Second})
			blockUntilAt(t, clock, clock.Now().Add(50*time.Millisecond), 1)
			clock.Advance(50 * time.Millisecond)
			res := <-done
			if res.Result != tc.want {
				t.Fatalf("result %+v, want %s", res, tc.want)
			}
			if n := st.lostReplies.Load(); n >= 0 {
				t.Fatalf("no write lost its answer (%d left)", n+1)
			}
			got := getJob(t, c, j.ID)
			if got.State != tc.state {
				t.Fatalf("job %s, want %s", got.State, tc.state)
			}
			if tc.state == errandtype.StateRetrying && (res.AvailableAt == nil || !res.AvailableAt.Equal(got.AvailableAt)) {
				t.Fatalf("result available at %v, want the job's %v", res.AvailableAt, got.AvailableAt)
			}
		})
	}
}

// A Worker's outcome handed to its batcher, whose write committed but
// lost its answer, ends succeeded: one result for subscribers, and no lost
// lease counted.
func TestWorkerOutcomeRecordedDespiteLostAnswer(t *testing.T) {
	clock := newTestClock()
	st := &troubledStore{TxStore: openStore(t, clock)}
	c := clockClient(t, st, clock, func(ctx context.Context, j *errandtype.Job) error { return nil })
	events, cancel := c.Subscribe()
	defer cancel()
	j := enqueue(t, c, "task", nil)
	st.lostReplies.Store(1)
	w := workUntilSucceeded(t, c, events, j.ID, "a write lost its answer")
	if n := st.lostReplies.Load(); n >= 0 {
		t.Fatalf("no write lost its answer (%d left)", n+1)
	}
	if s := w.Stats(); s.JobsCompleted != 1 || s.LeasesLost != 0 {
		t.Fatalf("worker stats %+v, want 1 completed and no lease lost", s)
	}
}

// workUntilSucceeded runs a Worker of c until events report job id
// succeeded, then stops it; after names what the test did to the store,
// for the failure when no result comes.
func workUntilSucceeded(t *testing.T, c *errand.Client[*sql.Tx], events <-chan errand.Event, id, after string) *errand.Worker {
	t.Helper()
	w, err := c.NewWorker(&errand.WorkerConfig{Lease: time.Minute, PollInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case ev := <-events:
		if ev.Result != errand.ResultSucceeded || *ev.JobID != id {
			t.Fatalf("event %+v, want job %s succeeded", ev.WorkResult, id)
		}
	case <-time.After(clockWait):
		t.Fatalf("no result after %s", after)
	}
	if err := w.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	return w
}
