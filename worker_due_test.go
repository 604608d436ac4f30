package errand_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtest"
	"github.com/errandhq/errand/errandtype"
	"github.com/errandhq/errand/internal/pgschemas"
	"github.com/errandhq/errand/postgres"
	"github.com/errandhq/errand/postgres/pgtest"
)

// Workers here poll once an hour on a fake clock that the tests move only
// as far as a job's due time, so that only knowing when a job comes due,
// or being woken, can start it.

// eachJobStore runs body on a fresh SQLite store and, when
// ERRAND_TEST_POSTGRES_URL is set, a fresh PostgreSQL schema; both on a
// fake clock, which the clients share.
func eachJobStore(t *testing.T, body func(t *testing.T, s errandstore.TxStore[*sql.Tx], clock *errandtest.Clock)) {
	t.Run("sqlite", func(t *testing.T) {
		clock := newTestClock()
		body(t, openStore(t, clock), clock)
	})
	t.Run("postgres", func(t *testing.T) {
		url := pgtest.URL(t)
		clock := newTestClock()
		s, err := postgres.Open(t.Context(), url, &postgres.Options{Schema: pgschemas.Take(t, url), MaxConns: 4, Clock: clock})
		if err != nil {
			t.Fatal(err)
		}
		v := s.SQL(nil)
		t.Cleanup(func() { v.Close() })
		body(t, v, clock)
	})
}

// startHourlyWorker starts a worker of c on the default queue with two
// slots that polls once an hour and listens for nothing.
func startHourlyWorker(t *testing.T, c *errand.Client[*sql.Tx]) *errand.Worker {
	t.Helper()
	w, err := c.NewWorker(&errand.WorkerConfig{
		Queues:       map[string]int{errand.DefaultQueue: 2},
		PollInterval: time.Hour,
		PollOnly:     true,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Stop(context.Background()) })
	return w
}

// attempts returns a handler that reports each attempt's job and number on
// ran and returns what outcome says for it.
func attempts(ran chan<- string, outcome func(j *errandtype.Job) error) errand.HandlerFunc {
	return func(ctx context.Context, j *errandtype.Job) error {
		ran <- j.ID
		return outcome(j)
	}
}

func waitAttempt(t *testing.T, ran <-chan string, id string, what string) {
	t.Helper()
	select {
	case got := <-ran:
		if got != id {
			t.Fatalf("%s: job %s ran, want %s", what, got, id)
		}
	case <-time.After(clockWait):
		t.Fatalf("%s: job %s did not run within %s (the worker polls hourly)", what, id, clockWait)
	}
}

// notYet fails the test if a job has started.
func notYet(t *testing.T, ran <-chan string, what string) {
	t.Helper()
	select {
	case id := <-ran:
		t.Fatalf("job %s ran %s", id, what)
	default:
	}
}

// TestWorkerRetryRunsWhenDue: a job that fails with a 200ms RetryAfter, or
// snoozes for 200ms, runs again then, not at the next poll an hour later.
// The worker has a free slot while the job runs, so its queue loop is idle
// when the outcome is recorded: the outcome has to wake it, for it to learn
// when the job comes due.
func TestWorkerRetryRunsWhenDue(t *testing.T) {
	eachJobStore(t, func(t *testing.T, s errandstore.TxStore[*sql.Tx], clock *errandtest.Clock) {
		for _, c := range []struct {
			name  string
			first error
		}{
			{"retry", errand.RetryAfter(200*time.Millisecond, errors.New("provider busy"))},
			{"snooze", errand.Snooze(200 * time.Millisecond)},
		} {
			t.Run(c.name, func(t *testing.T) {
				ran := make(chan string, 4)
				cl := newClient(t, s, &errand.Config{Clock: clock, Kinds: kindsOf([]testKind{{Name: "flaky_" + c.name,
					Handler: attempts(ran, func(j *errandtype.Job) error {
						if j.Attempt == 1 && len(j.Errors) == 0 && j.AvailableAt.Equal(j.CreatedAt) {
							return c.first
						}
						return nil
					})}})})
				startHourlyWorker(t, cl)
				j := enqueue(t, cl, "flaky_"+c.name, &errand.EnqueueOpts{ID: "flaky-" + c.name})
				waitAttempt(t, ran, j.ID, "first attempt")
				// The queue sleeps until the job is due, not a whole poll.
				due := clock.Now().Add(200 * time.Millisecond)
				blockUntilAt(t, clock, due, 1)
				notYet(t, ran, "before it was due")
				clock.Set(due)
				waitAttempt(t, ran, j.ID, "after the "+c.name)
				workerWaitFor(t, clockWait, func() bool { return getJob(t, cl, j.ID).State == errandtype.StateSucceeded })
				if got := getJob(t, cl, j.ID); !got.AttemptedAt.Equal(due) {
					t.Errorf("second attempt at %v, want when it came due, %v", got.AttemptedAt, due)
				}
			})
		}
	})
}

// TestWorkerFindsDelayedJobWhenDue: a job enqueued with a delay by another
// client, which wakes nobody, runs when it comes due: the worker asked the
// store when that is.
func TestWorkerFindsDelayedJobWhenDue(t *testing.T) {
	eachJobStore(t, func(t *testing.T, s errandstore.TxStore[*sql.Tx], clock *errandtest.Clock) {
		ran := make(chan string, 2)
		worker := newClient(t, s, &errand.Config{Clock: clock, Kinds: kindsOf([]testKind{{Name: "later",
			Handler: attempts(ran, func(*errandtype.Job) error { return nil })}})})
		other := newClient(t, s, &errand.Config{})
		j := enqueue(t, other, "later", &errand.EnqueueOpts{Delay: 300 * time.Millisecond})
		startHourlyWorker(t, worker)
		blockUntilAt(t, clock, j.AvailableAt, 1)
		notYet(t, ran, "before it was due")
		clock.Set(j.AvailableAt)
		waitAttempt(t, ran, j.ID, "delayed job")
		if got := getJob(t, worker, j.ID); !got.AttemptedAt.Equal(got.AvailableAt) {
			t.Errorf("claimed at %s, want when it came due at %s", got.AttemptedAt, got.AvailableAt)
		}
	})
}

// TestWorkerRunsNextOrderedJobWhenPredecessorEnds: the second job of an
// ordering key, held back while the first runs, runs as soon as the first
// succeeds: finishing an ordered job wakes the queue.
func TestWorkerRunsNextOrderedJobWhenPredecessorEnds(t *testing.T) {
	eachJobStore(t, func(t *testing.T, s errandstore.TxStore[*sql.Tx], clock *errandtest.Clock) {
		ran := make(chan string, 4)
		release := make(chan struct{})
		worker := newClient(t, s, &errand.Config{Clock: clock, Kinds: kindsOf([]testKind{{Name: "ordered",
			Handler: attempts(ran, func(j *errandtype.Job) error {
				if j.ID == "first" {
					<-release
				}
				return nil
			})}})})
		other := newClient(t, s, &errand.Config{})
		for _, id := range []string{"first", "second"} {
			enqueue(t, other, "ordered", &errand.EnqueueOpts{ID: id, OrderingKey: "account-7"})
		}
		startHourlyWorker(t, worker)
		waitAttempt(t, ran, "first", "first job")
		// Idle with a free slot, the second job held back: the claim that
		// found the first left it.
		blockUntilAt(t, clock, clock.Now().Add(time.Hour), 1)
		notYet(t, ran, "while the first of its key was running")
		close(release)
		waitAttempt(t, ran, "second", "second job after the first succeeded")
	})
}
