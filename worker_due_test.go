package errand_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/postgres"
	"github.com/errandhq/errand/postgres/pgtest"
)

// Workers here poll once an hour, so that only knowing when a job comes
// due, or being woken, can explain a prompt start. The limits are generous
// (seconds for a job due in milliseconds): the machines are shared and
// slow, and a missed due time costs an hour.

// eachJobStore runs body on a fresh SQLite store and, when
// ERRAND_TEST_POSTGRES_URL is set, a fresh PostgreSQL schema; both on the
// real clock.
func eachJobStore(t *testing.T, body func(t *testing.T, s errand.TxStore[*sql.Tx])) {
	t.Run("sqlite", func(t *testing.T) { body(t, openStore(t, nil)) })
	t.Run("postgres", func(t *testing.T) {
		url := pgtest.URL(t)
		s, err := postgres.Open(t.Context(), url, &postgres.Options{Schema: pgtest.Schema(t, url), MaxConns: 4})
		if err != nil {
			t.Fatal(err)
		}
		v := s.SQL(nil)
		t.Cleanup(func() { v.Close() })
		body(t, v)
	})
}

// startHourlyWorker starts a worker of c on the default queue with two
// slots that polls once an hour and listens for nothing.
func startHourlyWorker(t *testing.T, c *errand.Client[*sql.Tx]) *errand.Worker {
	t.Helper()
	w, err := c.NewWorker(errand.WorkerConfig{
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
func attempts(ran chan<- string, outcome func(j *errand.Job) error) errand.HandlerFunc {
	return func(ctx context.Context, j *errand.Job) error {
		ran <- j.ID
		return outcome(j)
	}
}

func waitAttempt(t *testing.T, ran <-chan string, id string, limit time.Duration, what string) {
	t.Helper()
	select {
	case got := <-ran:
		if got != id {
			t.Fatalf("%s: job %s ran, want %s", what, got, id)
		}
	case <-time.After(limit):
		t.Fatalf("%s: job %s did not run within %s (the worker polls hourly)", what, id, limit)
	}
}

// TestWorkerRetryRunsWhenDue: a job that fails with a 200ms RetryAfter, or
// snoozes for 200ms, runs again about then, not at the next poll an hour
// later. The worker has a free slot while the job runs, so its queue loop
// is idle when the outcome is recorded: the outcome has to wake it.
func TestWorkerRetryRunsWhenDue(t *testing.T) {
	eachJobStore(t, func(t *testing.T, s errand.TxStore[*sql.Tx]) {
		for _, c := range []struct {
			name  string
			first error
		}{
			{"retry", errand.RetryAfter(200*time.Millisecond, errors.New("provider busy"))},
			{"snooze", errand.Snooze(200 * time.Millisecond)},
		} {
			t.Run(c.name, func(t *testing.T) {
				ran := make(chan string, 4)
				cl := newClient(t, s, errand.Config{Kinds: kindsOf([]testKind{{Name: "flaky_" + c.name,
					Handler: attempts(ran, func(j *errand.Job) error {
						if j.Attempt == 1 && len(j.Errors) == 0 && j.AvailableAt.Equal(j.CreatedAt) {
							return c.first
						}
						return nil
					})}})})
				startHourlyWorker(t, cl)
				j := enqueue(t, cl, "flaky_"+c.name, &errand.EnqueueOpts{ID: "flaky-" + c.name})
				waitAttempt(t, ran, j.ID, 10*time.Second, "first attempt")
				waitAttempt(t, ran, j.ID, 10*time.Second, "after the "+c.name)
				workerWaitFor(t, 10*time.Second, func() bool { return getJob(t, cl, j.ID).State == errand.StateSucceeded })
				got := getJob(t, cl, j.ID)
				if ran := got.AttemptedAt.Sub(got.CreatedAt); ran < 200*time.Millisecond {
					t.Errorf("second attempt %s after the enqueue, before the job was due", ran)
				}
			})
		}
	})
}

// TestWorkerFindsDelayedJobWhenDue: a job enqueued with a delay by another
// client, which wakes nobody, runs when it comes due: the worker asked the
// store when that is.
func TestWorkerFindsDelayedJobWhenDue(t *testing.T) {
	eachJobStore(t, func(t *testing.T, s errand.TxStore[*sql.Tx]) {
		ran := make(chan string, 2)
		worker := newClient(t, s, errand.Config{Kinds: kindsOf([]testKind{{Name: "later",
			Handler: attempts(ran, func(*errand.Job) error { return nil })}})})
		other := newClient(t, s, errand.Config{})
		j := enqueue(t, other, "later", &errand.EnqueueOpts{Delay: 300 * time.Millisecond})
		startHourlyWorker(t, worker)
		waitAttempt(t, ran, j.ID, 10*time.Second, "delayed job")
		if got := getJob(t, worker, j.ID); got.AttemptedAt.Before(got.AvailableAt) {
			t.Errorf("claimed at %s, before it was due at %s", got.AttemptedAt, got.AvailableAt)
		}
	})
}

// TestWorkerRunsNextOrderedJobWhenPredecessorEnds: the second job of an
// ordering key, held back while the first runs, runs as soon as the first
// succeeds: finishing an ordered job wakes the queue.
func TestWorkerRunsNextOrderedJobWhenPredecessorEnds(t *testing.T) {
	eachJobStore(t, func(t *testing.T, s errand.TxStore[*sql.Tx]) {
		ran := make(chan string, 4)
		release := make(chan struct{})
		worker := newClient(t, s, errand.Config{Kinds: kindsOf([]testKind{{Name: "ordered",
			Handler: attempts(ran, func(j *errand.Job) error {
				if j.ID == "first" {
					<-release
				}
				return nil
			})}})})
		other := newClient(t, s, errand.Config{})
		for _, id := range []string{"first", "second"} {
			enqueue(t, other, "ordered", &errand.EnqueueOpts{ID: id, OrderingKey: "account-7"})
		}
		startHourlyWorker(t, worker)
		waitAttempt(t, ran, "first", 10*time.Second, "first job")
		select {
		case id := <-ran:
			t.Fatalf("job %s ran while the first of its key was running", id)
		case <-time.After(100 * time.Millisecond):
		}
		close(release)
		waitAttempt(t, ran, "second", 10*time.Second, "second job after the first succeeded")
	})
}
