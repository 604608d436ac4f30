package errand_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtest"
	"github.com/errandhq/errand/errandtype"
	"github.com/errandhq/errand/sqlite"
)

// registryClient opens its own store on path, as a separate worker process
// on the same machine would, with clock for its time (nil: the system
// clock), and returns a client with a handler for "noop".
func registryClient(t *testing.T, path string, clock *errandtest.Clock) (*errand.Client[*sql.Tx], *sqlite.Store) {
	t.Helper()
	var (
		storeClock errandstore.Clock
		timeSource errand.TimeSource
	)
	if clock != nil {
		storeClock, timeSource = clock, clock
	}
	s, err := sqlite.Open(context.Background(), path, &sqlite.Options{Clock: storeClock})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	c, err := errand.NewClient(s, &errand.Config{Clock: timeSource, Kinds: kindsOf([]testKind{{
		Name:    "noop",
		Handler: errand.HandlerFunc(func(context.Context, *errandtype.Job) error { return nil }),
	}})})
	if err != nil {
		t.Fatal(err)
	}
	return c, s
}

func startRegistryWorker(t *testing.T, c *errand.Client[*sql.Tx], cfg errand.WorkerConfig) *errand.Worker {
	t.Helper()
	w, err := c.NewWorker(&cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Stop(context.Background()) })
	return w
}

// registryRecord returns worker id's record from c's registry, or nil.
func registryRecord(t *testing.T, c *errand.Client[*sql.Tx], id string) *errandtype.WorkerRecord {
	t.Helper()
	ws, err := c.Workers(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range ws {
		if w.ID == id {
			return w
		}
	}
	return nil
}

func TestWorkerRegistryListsWorkers(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "errand.db")
	clock := newTestClock()
	c1, _ := registryClient(t, path, clock)
	c2, _ := registryClient(t, path, clock)
	w1 := startRegistryWorker(t, c1, errand.WorkerConfig{
		Queues: map[string]int{"default": 3, "reports": 1}, HeartbeatInterval: time.Second, PollInterval: time.Hour,
	})
	blockUntilAt(t, clock, clock.Now().Add(time.Second), 1) // w1's heartbeat ticker
	clock.Advance(time.Millisecond)                         // w2 starts later
	w2 := startRegistryWorker(t, c2, errand.WorkerConfig{
		Queues: map[string]int{"otp": 5}, HeartbeatInterval: time.Second, PollInterval: time.Hour,
	})
	blockUntilAt(t, clock, clock.Now().Add(time.Second), 1) // w2's
	if w1.ID() == w2.ID() {
		t.Fatalf("two workers share the id %s", w1.ID())
	}
	host, _ := os.Hostname()
	if !strings.HasPrefix(w1.ID(), host+":") {
		t.Errorf("default worker id %q does not start with the host name %q", w1.ID(), host)
	}

	ws, err := c1.Workers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, w := range ws {
		got = append(got, w.ID)
	}
	if want := []string{w2.ID(), w1.ID()}; !slices.Equal(got, want) {
		t.Fatalf("Workers = %v, want %v newest first", got, want)
	}
	for _, c := range []struct {
		w      *errand.Worker
		queues []errandtype.WorkerQueue
	}{
		{w1, []errandtype.WorkerQueue{{Name: "default", Concurrency: 3}, {Name: "reports", Concurrency: 1}}},
		{w2, []errandtype.WorkerQueue{{Name: "otp", Concurrency: 5}}},
	} {
		r := registryRecord(t, c2, c.w.ID())
		if r.Status != errandtype.WorkerAlive || r.StoppedAt != nil {
			t.Errorf("worker %s: status %s, stopped_at %v; want alive", r.ID, r.Status, r.StoppedAt)
		}
		if !slices.Equal(r.Queues, c.queues) {
			t.Errorf("worker %s: queues %v, want %v", r.ID, r.Queues, c.queues)
		}
		if !slices.Equal(r.Kinds, []string{"noop"}) {
			t.Errorf("worker %s: kinds %v, want the kinds it has handlers for, [noop]", r.ID, r.Kinds)
		}
		if r.Host != host || r.PID != os.Getpid() || time.Duration(r.HeartbeatInterval) != time.Second {
			t.Errorf("worker %s: host %q pid %d interval %s; want %q %d 1s", r.ID, r.Host, r.PID, time.Duration(r.HeartbeatInterval), host, os.Getpid())
		}
		if r.JobsCompleted != 0 || r.LastCompletedAt != nil {
			t.Errorf("worker %s: completed %d at %v before any job ran", r.ID, r.JobsCompleted, r.LastCompletedAt)
		}
	}

	// Heartbeats move heartbeat_at on, a heartbeat interval after the
	// start.
	beat := clock.Advance(time.Second)
	workerWaitFor(t, clockWait, func() bool {
		r := registryRecord(t, c1, w2.ID())
		return r.HeartbeatAt.Equal(beat)
	})

	// A job run by w2 shows in its counts at its next heartbeat, with the
	// time it finished (not the time of the heartbeat, nor the worker's
	// start), and its lease_owner names the registered worker.
	ran := clock.Advance(100 * time.Millisecond)
	res, err := c2.Enqueue(ctx, errand.RawArgs{KindName: "noop"}, &errand.EnqueueOpts{Queue: "otp"})
	if err != nil {
		t.Fatal(err)
	}
	workerWaitFor(t, clockWait, func() bool { return getJob(t, c1, res.Job.ID).State == errandtype.StateSucceeded })
	// The outcome is written before the worker counts it: let it count
	// before the heartbeat that must report it.
	workerWaitFor(t, clockWait, func() bool { return w2.Stats().JobsCompleted == 1 })
	beat = clock.Advance(900 * time.Millisecond)
	workerWaitFor(t, clockWait, func() bool {
		r := registryRecord(t, c1, w2.ID())
		return r != nil && r.JobsCompleted == 1
	})
	r := registryRecord(t, c1, w2.ID())
	if r.LastCompletedAt == nil || !r.LastCompletedAt.Equal(ran) || !r.HeartbeatAt.Equal(beat) {
		t.Errorf("worker %s: last_completed_at %v, heartbeat_at %v; want the job's end %v, and the heartbeat's time %v", r.ID, r.LastCompletedAt, r.HeartbeatAt, ran, beat)
	}
	j, err := c1.Get(ctx, res.Job.ID)
	if err != nil {
		t.Fatal(err)
	}
	if j.LeaseOwner == nil || *j.LeaseOwner != w2.ID() {
		t.Errorf("job lease_owner %v, want the worker id %s", j.LeaseOwner, w2.ID())
	}

	// After one stops, it is listed as stopped and the other stays alive.
	if err := w1.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if r := registryRecord(t, c2, w1.ID()); r.Status != errandstore.WorkerStopped || r.StoppedAt == nil || r.JobsRunning != 0 {
		t.Errorf("stopped worker: status %s, stopped_at %v, running %d; want stopped, set, 0", r.Status, r.StoppedAt, r.JobsRunning)
	}
	if r := registryRecord(t, c2, w2.ID()); r.Status != errandtype.WorkerAlive {
		t.Errorf("the other worker: status %s, want alive", r.Status)
	}
}

// TestWorkerRegistryStoppedWhenContextEnds: a worker whose context is
// cancelled without Stop cleans up as a Stop would: Done closes and the
// registry shows it stopped. (A worker that dies without cleaning up is shown
// as gone; the registry conformance cases and the CLI's SIGKILL test cover
// that.)
func TestWorkerRegistryStoppedWhenContextEnds(t *testing.T) {
	path := filepath.Join(t.TempDir(), "errand.db")
	clock := newTestClock()
	c, _ := registryClient(t, path, clock)
	w, err := c.NewWorker(&errand.WorkerConfig{HeartbeatInterval: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	blockUntilAt(t, clock, clock.Now().Add(time.Second), 1) // the heartbeat ticker
	clock.Advance(time.Second)
	workerWaitFor(t, clockWait, func() bool {
		r := registryRecord(t, c, w.ID())
		return r != nil && r.HeartbeatAt.After(r.StartedAt)
	})
	cancel()
	select {
	case <-w.Done():
	case <-time.After(clockWait):
		t.Fatal("Done did not close after the worker's context ended")
	}
	if r := registryRecord(t, c, w.ID()); r.Status != errandstore.WorkerStopped {
		t.Errorf("status %s after the context ended, want stopped", r.Status)
	}
	// A later Stop is a no-op.
	if err := w.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestWorkerRegistryRegistersAgain: a worker whose row was marked stopped
// (or pruned) under it finds out at its next heartbeat and registers again.
func TestWorkerRegistryRegistersAgain(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "errand.db")
	clock := newTestClock()
	c, s := registryClient(t, path, clock)
	w := startRegistryWorker(t, c, errand.WorkerConfig{HeartbeatInterval: time.Second})
	blockUntilAt(t, clock, clock.Now().Add(time.Second), 1) // the heartbeat ticker
	first := registryRecord(t, c, w.ID())
	if err := s.WorkerStop(ctx, &errandstore.WorkerStopParams{ID: w.ID()}); err != nil {
		t.Fatal(err)
	}
	// The worker finds out at its next heartbeat, and registers again, with
	// a new start time.
	if _, err := s.WorkerPrune(ctx, &errandstore.WorkerPruneParams{}); err != nil {
		t.Fatal(err)
	}
	if registryRecord(t, c, w.ID()) != nil {
		t.Fatal("the prune left the stopped worker's row")
	}
	clock.Advance(time.Second)
	workerWaitFor(t, clockWait, func() bool {
		r := registryRecord(t, c, w.ID())
		return r != nil && r.Status == errandtype.WorkerAlive && r.StartedAt.After(first.StartedAt)
	})
}

// TestWorkerStartFailsWithoutRegistry: a worker that cannot register does
// not start, and says why.
func TestWorkerStartFailsWithoutRegistry(t *testing.T) {
	path := filepath.Join(t.TempDir(), "errand.db")
	c, s := registryClient(t, path, nil)
	w, err := c.NewWorker(&errand.WorkerConfig{Owner: "w-1"})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	err = w.Start(context.Background())
	if err == nil {
		w.Stop(context.Background())
		t.Fatal("Start succeeded on a closed store")
	}
	if !strings.Contains(err.Error(), "register w-1") {
		t.Errorf("Start error %q does not say the registration failed", err)
	}
	select {
	case <-w.Done():
		t.Error("a worker that failed to start reports itself stopped before Stop")
	default:
	}
	if err := w.Stop(context.Background()); err != nil {
		t.Errorf("Stop after a failed Start: %v", err)
	}
}

// TestWorkerConfigIntervals: NewWorker refuses a poll, heartbeat or sweep
// interval under MinInterval, naming the field, and takes MinInterval
// itself. A nanosecond's heartbeat interval used to reach the store, whose
// microseconds keep it as zero, and fail there on a constraint.
func TestWorkerConfigIntervals(t *testing.T) {
	c, _ := registryClient(t, filepath.Join(t.TempDir(), "errand.db"), nil)
	for _, field := range []string{"PollInterval", "HeartbeatInterval", "SweepInterval"} {
		with := func(d time.Duration) *errand.WorkerConfig {
			cfg := &errand.WorkerConfig{}
			switch field {
			case "PollInterval":
				cfg.PollInterval = d
			case "HeartbeatInterval":
				cfg.HeartbeatInterval = d
			case "SweepInterval":
				cfg.SweepInterval = d
			}
			return cfg
		}
		for _, d := range []time.Duration{-time.Second, time.Nanosecond, errandstore.MinInterval - time.Microsecond} {
			_, err := c.NewWorker(with(d))
			var ie *errandtype.InputError
			if !errors.As(err, &ie) || ie.Field != field || !strings.Contains(err.Error(), "at least 1ms") {
				t.Errorf("NewWorker with %s %s: %v, want an InputError naming %s and its minimum", field, d, err, field)
			}
		}
		if _, err := c.NewWorker(with(errandstore.MinInterval)); err != nil {
			t.Errorf("NewWorker with %s %s: %v", field, errandstore.MinInterval, err)
		}
	}
}

// TestWorkerRegistryShowsDraining: a worker that is stopping while a job
// runs is shown draining, at once (its heartbeat interval is an hour), until
// the job finishes and it stops.
func TestWorkerRegistryShowsDraining(t *testing.T) {
	ctx := context.Background()
	clock := newTestClock()
	s := openStore(t, clock)
	started, release := make(chan struct{}), make(chan struct{})
	c := newClient(t, s, &errand.Config{Clock: clock, Kinds: kindsOf([]testKind{{Name: "task",
		Handler: errand.HandlerFunc(func(ctx context.Context, j *errandtype.Job) error {
			close(started)
			<-release
			return nil
		})}})})
	w, err := c.NewWorker(&errand.WorkerConfig{HeartbeatInterval: time.Hour, PollInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	job := enqueue(t, c, "task", nil)
	<-started
	if r := registryRecord(t, c, w.ID()); r.Status != errandtype.WorkerAlive || r.DrainingAt != nil {
		t.Fatalf("while running a job: status %s, draining_at %v; want alive, null", r.Status, r.DrainingAt)
	}
	stopped := make(chan error, 1)
	go func() { stopped <- w.Stop(ctx) }()
	workerWaitFor(t, clockWait, func() bool { return registryRecord(t, c, w.ID()).Status == errandstore.WorkerDraining })
	if r := registryRecord(t, c, w.ID()); r.DrainingAt == nil || r.StoppedAt != nil || r.JobsRunning != 1 {
		t.Errorf("draining: draining_at %v, stopped_at %v, jobs_running %d; want a time, null, 1", r.DrainingAt, r.StoppedAt, r.JobsRunning)
	}
	select {
	case err := <-stopped:
		t.Fatalf("Stop returned (%v) while a job ran", err)
	default:
	}
	close(release)
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
	if r := registryRecord(t, c, w.ID()); r.Status != errandstore.WorkerStopped {
		t.Errorf("after the drain: status %s, want stopped", r.Status)
	}
	if got := getJob(t, c, job.ID); got.State != errandtype.StateSucceeded {
		t.Errorf("the job drained with state %s, want succeeded", got.State)
	}
}

// TestWorkerStatusAtLongInterval: a worker whose interval is so long that
// three of them pass time.Duration's range (a remote worker's lease of a
// million hours) is alive a second after its heartbeat, not gone: the
// window saturates instead of wrapping around to a negative one.
func TestWorkerStatusAtLongInterval(t *testing.T) {
	now := time.Date(2026, 12, 4, 6, 0, 0, 0, time.UTC)
	for _, d := range []time.Duration{1_000_000 * time.Hour, 2_562_047 * time.Hour, time.Duration(1<<63 - 1)} {
		r := &errandtype.WorkerRecord{ID: "w", HeartbeatAt: now.Add(-time.Second), HeartbeatInterval: errandtype.Duration(d)}
		if got := errandstore.WorkerStatusAt(r, now, 0); got != errandtype.WorkerAlive {
			t.Errorf("interval %s, a second after the heartbeat: %s, want alive", d, got)
		}
	}
}

// A worker's queue in JSON has its weight null when the worker shares no
// capacity among its queues, and reads back as it was.
func TestWorkerQueueJSON(t *testing.T) {
	for _, tc := range []struct {
		q    errandtype.WorkerQueue
		want string
	}{
		{errandtype.WorkerQueue{Name: "default", Concurrency: 10}, `{"name":"default","concurrency":10,"weight":null}`},
		{errandtype.WorkerQueue{Name: "mail", Concurrency: 4, Weight: 3}, `{"name":"mail","concurrency":4,"weight":3}`},
	} {
		b, err := json.Marshal(tc.q)
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != tc.want {
			t.Errorf("%+v as JSON: %s, want %s", tc.q, b, tc.want)
		}
		var back errandtype.WorkerQueue
		if err := json.Unmarshal(b, &back); err != nil || back != tc.q {
			t.Errorf("%s read back as %+v (%v), want %+v", b, back, err, tc.q)
		}
	}
}

// TestWorkerRegistryCountsEveryFinishedJob: a worker that stops shows in
// the registry every attempt it finished, by every outcome path: successes
// handed to the outcome batcher (on PostgreSQL with their slots freed at
// the handover), a failure and a snooze recorded in place, and a job that
// finished after the draining heartbeat was written.
func TestWorkerRegistryCountsEveryFinishedJob(t *testing.T) {
	eachJobStore(t, func(t *testing.T, s errandstore.TxStore[*sql.Tx], clock *errandtest.Clock) {
		ctx := context.Background()
		started, release := make(chan struct{}), make(chan struct{})
		c := newClient(t, s, &errand.Config{Clock: clock, Kinds: kindsOf([]testKind{{Name: "task",
			Handler: errand.HandlerFunc(func(ctx context.Context, j *errandtype.Job) error {
				switch j.ID {
				case "last":
					close(started)
					<-release
				case "fail":
					return errors.New("boom")
				case "snooze":
					return errand.Snooze(time.Hour)
				}
				return nil
			})}})})
		for _, id := range []string{"a", "b", "c", "fail", "snooze", "last"} {
			enqueue(t, c, "task", &errand.EnqueueOpts{ID: id})
		}
		w, err := c.NewWorker(&errand.WorkerConfig{Queues: map[string]int{errand.DefaultQueue: 10},
			HeartbeatInterval: time.Hour, PollInterval: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Start(ctx); err != nil {
			t.Fatal(err)
		}
		<-started
		workerWaitFor(t, clockWait, func() bool { return w.Stats().JobsCompleted == 5 })
		stopped := make(chan error, 1)
		go func() { stopped <- w.Stop(ctx) }()
		workerWaitFor(t, clockWait, func() bool { return registryRecord(t, c, w.ID()).DrainingAt != nil })
		close(release)
		if err := <-stopped; err != nil {
			t.Fatal(err)
		}
		r := registryRecord(t, c, w.ID())
		if r.Status != errandstore.WorkerStopped || r.JobsCompleted != 6 || r.LastCompletedAt == nil || r.JobsRunning != 0 {
			t.Fatalf("stopped worker: status %s, jobs_completed %d, last_completed_at %v, jobs_running %d; want stopped, 6, a time, 0",
				r.Status, r.JobsCompleted, r.LastCompletedAt, r.JobsRunning)
		}
		if n := w.Stats().JobsCompleted; n != 6 {
			t.Fatalf("Stats().JobsCompleted = %d, want 6", n)
		}
	})
}
