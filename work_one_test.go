package errand_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
)

var errUpstream = errors.New("upstream said no")

func TestWorkOneClassifiesHandlerErrors(t *testing.T) {
	tests := []struct {
		name       string
		err        error
		wantResult errand.Result
		wantState  errandtype.JobState
		wantClass  string
	}{
		{"plain error retries", errUpstream, errand.ResultRetrying, errandtype.StateRetrying, errand.ClassError},
		{"wrapped plain error retries", fmt.Errorf("charge: %w", errUpstream), errand.ResultRetrying, errandtype.StateRetrying, errand.ClassError},
		{"permanent dies at once", errand.Permanent(errUpstream), errand.ResultDead, errandtype.StateDead, errand.ClassPermanent},
		{"wrapped permanent dies at once", fmt.Errorf("charge: %w", errand.Permanent(errUpstream)), errand.ResultDead, errandtype.StateDead, errand.ClassPermanent},
		{"named class retries", errand.WithClass("receipt_unavailable", errUpstream), errand.ResultRetrying, errandtype.StateRetrying, "receipt_unavailable"},
		{"permanent named class dies", errand.Permanent(errand.WithClass("bad_card", errUpstream)), errand.ResultDead, errandtype.StateDead, "bad_card"},
		{"named class of a permanent error dies", errand.WithClass("bad_card", errand.Permanent(errUpstream)), errand.ResultDead, errandtype.StateDead, "bad_card"},
		{"invalid class is recorded as error", errand.WithClass("Not A Class", errUpstream), errand.ResultRetrying, errandtype.StateRetrying, errand.ClassError},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := newTestClock()
			st := openStore(t, clock)
			c := handlerClient(t, st, func(context.Context, *errandtype.Job) error { return tt.err })
			job := enqueue(t, c, "task", nil)

			r := workOne(t, c, &errand.WorkOneOpts{})
			if r.Result != tt.wantResult || r.Class != tt.wantClass || r.Attempt != 1 || *r.JobID != job.ID {
				t.Fatalf("result %+v, want %s with class %s on attempt 1", r, tt.wantResult, tt.wantClass)
			}
			j := getJob(t, c, job.ID)
			if j.State != tt.wantState || j.Attempt != 1 {
				t.Fatalf("job is %s on attempt %d, want %s on attempt 1", j.State, j.Attempt, tt.wantState)
			}
			if len(j.Errors) != 1 || j.Errors[0].Class != tt.wantClass || j.Errors[0].Attempt != 1 {
				t.Fatalf("history %+v, want one entry of class %s for attempt 1", j.Errors, tt.wantClass)
			}
			if !strings.Contains(j.Errors[0].Message, errUpstream.Error()) {
				t.Errorf("history message %q does not carry the handler's error", j.Errors[0].Message)
			}
			if j.LastError == nil || j.LastError.Class != tt.wantClass || !j.LastError.At.Equal(clock.Now()) {
				t.Errorf("last error %+v, want class %s at %v", j.LastError, tt.wantClass, clock.Now())
			}
			if j.LeaseToken != nil || j.LeaseUntil != nil {
				t.Errorf("lease not cleared: token %v, until %v", j.LeaseToken, j.LeaseUntil)
			}
			switch tt.wantState {
			case errandtype.StateDead:
				if j.FinishedAt == nil || !j.FinishedAt.Equal(clock.Now()) {
					t.Errorf("dead job finished at %v, want %v", j.FinishedAt, clock.Now())
				}
			case errandtype.StateRetrying:
				if !j.AvailableAt.After(clock.Now()) {
					t.Errorf("retrying job available at %v, not after now %v", j.AvailableAt, clock.Now())
				}
			}
		})
	}
}

func TestWorkOneRetryAfterUsesTheHint(t *testing.T) {
	clock := newTestClock()
	st := openStore(t, clock)
	const hint = 90*time.Second + 1500*time.Microsecond
	c := handlerClient(t, st, func(context.Context, *errandtype.Job) error {
		return errand.RetryAfter(hint, errand.WithClass("rate_limited", errUpstream))
	})
	job := enqueue(t, c, "task", nil)
	r := workOne(t, c, &errand.WorkOneOpts{})
	want := clock.Now().Add(hint)
	if r.Result != errand.ResultRetrying || r.AvailableAt == nil || !r.AvailableAt.Equal(want) {
		t.Fatalf("result %+v, want retrying at %v", r, want)
	}
	j := getJob(t, c, job.ID)
	if !j.AvailableAt.Equal(want) || j.State != errandtype.StateRetrying || j.LastError.Class != "rate_limited" {
		t.Fatalf("job %s, available at %v, class %v; want retrying at exactly %v with class rate_limited",
			j.State, j.AvailableAt, j.LastError, want)
	}
}

func TestWorkOneRetryAfterOnTheLastAttemptDies(t *testing.T) {
	st := openStore(t, newTestClock())
	c := handlerClient(t, st, func(context.Context, *errandtype.Job) error { return errand.RetryAfter(time.Minute, errUpstream) })
	job := enqueue(t, c, "task", &errand.EnqueueOpts{MaxAttempts: 1})
	if r := workOne(t, c, &errand.WorkOneOpts{}); r.Result != errand.ResultDead {
		t.Fatalf("result %s, want dead: the hint cannot add attempts", r.Result)
	}
	if j := getJob(t, c, job.ID); j.State != errandtype.StateDead {
		t.Fatalf("job is %s, want dead", j.State)
	}
}

func TestWorkOneSnoozeDoesNotUseAnAttempt(t *testing.T) {
	clock := newTestClock()
	st := openStore(t, clock)
	var runs atomic.Int32
	c := handlerClient(t, st, func(_ context.Context, j *errandtype.Job) error {
		runs.Add(1)
		if j.Attempt != 1 {
			return fmt.Errorf("attempt %d, want 1: a snooze must not count", j.Attempt)
		}
		if runs.Load() < 3 {
			return errand.Snooze(time.Minute)
		}
		return nil
	})
	job := enqueue(t, c, "task", &errand.EnqueueOpts{MaxAttempts: 1})
	for i := range 2 {
		r := workOne(t, c, &errand.WorkOneOpts{})
		want := clock.Now().Add(time.Minute)
		if r.Result != errand.ResultSnoozed || r.AvailableAt == nil || !r.AvailableAt.Equal(want) {
			t.Fatalf("run %d: result %+v, want snoozed until %v", i+1, r, want)
		}
		j := getJob(t, c, job.ID)
		if j.State != errandtype.StateQueued || j.Attempt != 0 || len(j.Errors) != 0 || j.LastError != nil || !j.AvailableAt.Equal(want) {
			t.Fatalf("run %d: job %s attempt %d errors %v available %v; want queued, attempt 0, no history, available %v",
				i+1, j.State, j.Attempt, j.Errors, j.AvailableAt, want)
		}
		if r := workOne(t, c, &errand.WorkOneOpts{}); r.Result != errand.ResultIdle {
			t.Fatalf("run %d: a snoozed job was claimed before its time: %+v", i+1, r)
		}
		clock.Advance(time.Minute)
	}
	// Two snoozes on a one-attempt budget, and the job still runs.
	if r := workOne(t, c, &errand.WorkOneOpts{}); r.Result != errand.ResultSucceeded {
		t.Fatalf("result %+v, want succeeded", r)
	}
}

// panickingHandler is named so that the test can find it in the stack.
func panickingHandler(context.Context, *errandtype.Job) error {
	var m map[string]int
	m["boom"]++ // assignment to a nil map panics
	return nil
}

func TestWorkOneRecoversPanicsWithTheirStack(t *testing.T) {
	st := openStore(t, newTestClock())
	c := handlerClient(t, st, panickingHandler)
	job := enqueue(t, c, "task", nil)
	r := workOne(t, c, &errand.WorkOneOpts{})
	if r.Result != errand.ResultRetrying || r.Class != errand.ClassPanic {
		t.Fatalf("result %+v, want retrying with class panic", r)
	}
	j := getJob(t, c, job.ID)
	if len(j.Errors) != 1 {
		t.Fatalf("history %+v, want one entry", j.Errors)
	}
	e := j.Errors[0]
	if e.Class != errand.ClassPanic || !strings.Contains(e.Message, "nil map") {
		t.Errorf("entry class %q message %q, want class panic and the panic value", e.Class, e.Message)
	}
	if !strings.Contains(e.Stack, "panickingHandler") {
		t.Errorf("stack does not name the handler:\n%s", e.Stack)
	}
}

func TestWorkOneKindTimeout(t *testing.T) {
	clock := newTestClock()
	st := openStore(t, clock)
	c := newClient(t, st, &errand.Config{Clock: clock, Kinds: kindsOf([]testKind{{
		Name:    "task",
		Timeout: time.Second,
		Handler: errand.HandlerFunc(func(ctx context.Context, _ *errandtype.Job) error {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(clockWait):
				return errors.New("the timeout did not cancel the handler's context")
			}
		}),
	}})})
	job := enqueue(t, c, "task", nil)
	done := workOneAsync(t, c, &errand.WorkOneOpts{Lease: time.Minute})
	// The attempt has begun once its lease's heartbeats are scheduled.
	blockUntilAt(t, clock, clock.Now().Add(20*time.Second), 1)
	clock.Advance(time.Second - time.Microsecond)
	select {
	case r := <-done:
		t.Fatalf("work one returned %+v before the timeout", r)
	default:
	}
	clock.Advance(time.Microsecond)
	r := <-done
	if r.Duration != time.Second {
		t.Errorf("handler ran %v, want the timeout, 1s", r.Duration)
	}
	if r.Result != errand.ResultRetrying || r.Class != errand.ClassTimeout {
		t.Fatalf("result %+v, want retrying with class timeout", r)
	}
	if j := getJob(t, c, job.ID); j.LastError == nil || j.LastError.Class != errand.ClassTimeout {
		t.Fatalf("last error %+v, want class timeout", j.LastError)
	}
}

func TestWorkOneLastAttemptDeadLettersWithWholeHistory(t *testing.T) {
	clock := newTestClock()
	st := openStore(t, clock)
	var runs atomic.Int32
	c := handlerClient(t, st, func(_ context.Context, j *errandtype.Job) error {
		runs.Add(1)
		return fmt.Errorf("failure %d", j.Attempt)
	})
	job := enqueue(t, c, "task", &errand.EnqueueOpts{MaxAttempts: 3})
	for attempt := 1; attempt <= 3; attempt++ {
		want := errand.ResultRetrying
		if attempt == 3 {
			want = errand.ResultDead
		}
		r := workOne(t, c, &errand.WorkOneOpts{})
		if r.Result != want || r.Attempt != attempt {
			t.Fatalf("attempt %d: result %+v, want %s", attempt, r, want)
		}
		clock.Advance(2 * time.Hour) // past any backoff
	}
	if r := workOne(t, c, &errand.WorkOneOpts{}); r.Result != errand.ResultIdle {
		t.Fatalf("a dead job was claimed: %+v", r)
	}
	if runs.Load() != 3 {
		t.Fatalf("handler ran %d times, want 3", runs.Load())
	}
	j := getJob(t, c, job.ID)
	if j.State != errandtype.StateDead || j.Attempt != 3 || j.FinishedAt == nil {
		t.Fatalf("job %s attempt %d finished %v, want dead after attempt 3", j.State, j.Attempt, j.FinishedAt)
	}
	if len(j.Errors) != 3 {
		t.Fatalf("history has %d entries, want 3: %+v", len(j.Errors), j.Errors)
	}
	for i, e := range j.Errors {
		if e.Attempt != i+1 || e.Class != errand.ClassError || e.Message != fmt.Sprintf("failure %d", i+1) || e.Replay != 0 {
			t.Errorf("entry %d = %+v, want attempt %d, class error, message \"failure %d\"", i, e, i+1, i+1)
		}
	}
	if !j.Errors[0].At.Before(j.Errors[2].At) {
		t.Errorf("history times %v .. %v do not advance with the clock", j.Errors[0].At, j.Errors[2].At)
	}
}

func TestWorkOneExpiredJobDiesWithoutRunning(t *testing.T) {
	clock := newTestClock()
	st := openStore(t, clock)
	var runs atomic.Int32
	c := handlerClient(t, st, func(context.Context, *errandtype.Job) error { runs.Add(1); return nil })
	job := enqueue(t, c, "task", &errand.EnqueueOpts{MaxAge: time.Minute})
	if job.Deadline == nil || !job.Deadline.Equal(clock.Now().Add(time.Minute)) {
		t.Fatalf("deadline %v, want %v", job.Deadline, clock.Now().Add(time.Minute))
	}
	fresh := enqueue(t, c, "task", &errand.EnqueueOpts{MaxAge: time.Hour})

	clock.Advance(time.Minute)
	// The claim sweeps the expired job, then runs the one still in time.
	r := workOne(t, c, &errand.WorkOneOpts{})
	if r.Result != errand.ResultSucceeded || *r.JobID != fresh.ID {
		t.Fatalf("result %+v, want the unexpired job %s to succeed", r, fresh.ID)
	}
	if r := workOne(t, c, &errand.WorkOneOpts{}); r.Result != errand.ResultIdle {
		t.Fatalf("result %+v, want idle", r)
	}
	if runs.Load() != 1 {
		t.Fatalf("handler ran %d times, want once (only for the unexpired job)", runs.Load())
	}
	j := getJob(t, c, job.ID)
	if j.State != errandtype.StateDead || j.Attempt != 0 || len(j.Errors) != 1 || j.Errors[0].Class != errandstore.ClassExpired {
		t.Fatalf("expired job %s attempt %d history %+v; want dead, never attempted, one expired entry", j.State, j.Attempt, j.Errors)
	}
	if j.LastError == nil || j.LastError.Class != errandstore.ClassExpired {
		t.Fatalf("last error %+v, want class expired", j.LastError)
	}
}

func TestScheduledRetryIsNotClaimableBeforeItIsDue(t *testing.T) {
	clock := newTestClock()
	st := openStore(t, clock)
	c := handlerClient(t, st, func(_ context.Context, j *errandtype.Job) error {
		if j.Attempt == 1 {
			return errUpstream
		}
		return nil
	})
	job := enqueue(t, c, "task", nil)
	r := workOne(t, c, &errand.WorkOneOpts{})
	if r.Result != errand.ResultRetrying {
		t.Fatalf("result %+v, want retrying", r)
	}
	due := getJob(t, c, job.ID).AvailableAt
	if !due.After(clock.Now()) {
		t.Fatalf("retry due at %v, not after now %v", due, clock.Now())
	}
	failedAt := clock.Now()
	wait := due.Sub(failedAt)
	for _, elapsed := range []time.Duration{0, wait / 2, wait - time.Microsecond} {
		clock.Set(failedAt.Add(elapsed))
		if r := workOne(t, c, &errand.WorkOneOpts{}); r.Result != errand.ResultIdle {
			t.Fatalf("at %v (due %v): result %+v, want idle", clock.Now(), due, r)
		}
	}
	clock.Set(due)
	if r := workOne(t, c, &errand.WorkOneOpts{}); r.Result != errand.ResultSucceeded || r.Attempt != 2 {
		t.Fatalf("at the due time: result %+v, want succeeded on attempt 2", r)
	}
}

func TestScheduledJobWaitsForRunAtAndDelay(t *testing.T) {
	clock := newTestClock()
	st := openStore(t, clock)
	c := handlerClient(t, st, func(context.Context, *errandtype.Job) error { return nil })
	at := enqueue(t, c, "task", &errand.EnqueueOpts{RunAt: clock.Now().Add(time.Hour)})
	later := enqueue(t, c, "task", &errand.EnqueueOpts{Delay: 2 * time.Hour})
	if !later.AvailableAt.Equal(clock.Now().Add(2 * time.Hour)) {
		t.Fatalf("delayed job available at %v, want %v", later.AvailableAt, clock.Now().Add(2*time.Hour))
	}
	clock.Advance(time.Hour - time.Microsecond)
	if r := workOne(t, c, &errand.WorkOneOpts{}); r.Result != errand.ResultIdle {
		t.Fatalf("before run-at: %+v, want idle", r)
	}
	clock.Advance(time.Microsecond)
	if r := workOne(t, c, &errand.WorkOneOpts{}); *r.JobID != at.ID {
		t.Fatalf("at run-at: %+v, want job %s", r, at.ID)
	}
	if r := workOne(t, c, &errand.WorkOneOpts{}); r.Result != errand.ResultIdle {
		t.Fatalf("before the delay passed: %+v, want idle", r)
	}
}

func TestWorkOneClaimsOnlyHandledKindsAndQueues(t *testing.T) {
	st := openStore(t, newTestClock())
	c := handlerClient(t, st, func(context.Context, *errandtype.Job) error { return nil })
	other := enqueue(t, newClient(t, st, &errand.Config{}), "unhandled", nil) // a producer of another program's kind
	elsewhere := enqueue(t, c, "task", &errand.EnqueueOpts{Queue: "mail"})
	if r := workOne(t, c, &errand.WorkOneOpts{}); r.Result != errand.ResultIdle {
		t.Fatalf("result %+v, want idle: the only default-queue job has no handler", r)
	}
	if j := getJob(t, c, other.ID); j.State != errandtype.StateQueued || j.Attempt != 0 {
		t.Fatalf("unhandled job %s attempt %d, want untouched", j.State, j.Attempt)
	}
	if r := workOne(t, c, &errand.WorkOneOpts{Queues: []string{"mail"}}); r.Result != errand.ResultSucceeded || *r.JobID != elsewhere.ID {
		t.Fatalf("result %+v, want job %s from queue mail", r, elsewhere.ID)
	}
}

func TestWorkOneClaimOrder(t *testing.T) {
	st := openStore(t, newTestClock())
	var order []string
	c := handlerClient(t, st, func(_ context.Context, j *errandtype.Job) error {
		order = append(order, j.ID)
		return nil
	})
	for _, p := range []struct {
		id       string
		priority int
	}{{"c-low", 5}, {"a-first", 0}, {"b-second", 0}, {"d-urgent", -1}} {
		enqueue(t, c, "task", &errand.EnqueueOpts{ID: p.id, Priority: p.priority})
	}
	for range 4 {
		workOne(t, c, &errand.WorkOneOpts{})
	}
	want := "d-urgent a-first b-second c-low"
	if got := strings.Join(order, " "); got != want {
		t.Fatalf("claim order %q, want %q (priority, then FIFO)", got, want)
	}
}

func TestSetProgressIsSeenByTheNextAttempt(t *testing.T) {
	clock := newTestClock()
	st := openStore(t, clock)
	type checkpoint struct {
		Page int `json:"page"`
	}
	var seen []string
	c := handlerClient(t, st, func(ctx context.Context, j *errandtype.Job) error {
		seen = append(seen, string(j.Progress))
		if j.Attempt == 1 {
			if err := errand.SetProgress(ctx, checkpoint{Page: 3}); err != nil {
				return err
			}
			return errUpstream
		}
		return nil
	})
	job := enqueue(t, c, "task", nil)
	if r := workOne(t, c, &errand.WorkOneOpts{}); r.Result != errand.ResultRetrying {
		t.Fatalf("first attempt: %+v, want retrying", r)
	}
	if j := getJob(t, c, job.ID); string(j.Progress) != `{"page":3}` {
		t.Fatalf("stored progress %q, want {\"page\":3}", j.Progress)
	}
	clock.Advance(2 * time.Hour)
	if r := workOne(t, c, &errand.WorkOneOpts{}); r.Result != errand.ResultSucceeded {
		t.Fatalf("second attempt: %+v, want succeeded", r)
	}
	if len(seen) != 2 || seen[0] != "" || seen[1] != `{"page":3}` {
		t.Fatalf("handler saw progress %q, want none and then {\"page\":3}", seen)
	}
	if err := errand.SetProgress(context.Background(), checkpoint{}); err == nil {
		t.Fatal("SetProgress outside a job succeeded")
	}
}

func TestSetProgressIsFenced(t *testing.T) {
	// The client keeps real time, so that no heartbeat notices the lease
	// end that the store's clock passes: the fenced writes must.
	clock := newTestClock()
	st := openStore(t, clock)
	var progressErr error
	c := handlerClient(t, st, func(ctx context.Context, j *errandtype.Job) error {
		clock.Advance(time.Hour) // the lease expires while the handler runs
		progressErr = errand.SetProgress(ctx, map[string]int{"page": 9})
		return nil
	})
	job := enqueue(t, c, "task", nil)
	if r := workOne(t, c, &errand.WorkOneOpts{Lease: time.Minute}); r.Result != errand.ResultLeaseLost {
		t.Fatalf("result %+v, want lease_lost", r)
	}
	if !errors.Is(progressErr, errandtype.ErrLeaseLost) {
		t.Fatalf("SetProgress after the lease expired: %v, want ErrLeaseLost", progressErr)
	}
	// The stale acknowledgment changed nothing either: the job waits for a
	// sweep, still under the expired lease.
	if j := getJob(t, c, job.ID); j.Progress != nil || j.State != errandtype.StateRunning || j.LeaseToken == nil || j.FinishedAt != nil {
		t.Fatalf("a stale attempt wrote to the job: progress %s, state %s, token %v, finished %v",
			j.Progress, j.State, j.LeaseToken, j.FinishedAt)
	}
}

func TestWorkOneLeaseLostWritesNothing(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		stale error // what the first, stale attempt returns
	}{
		{"stale acknowledge", nil},
		{"stale failure", errUpstream},
		{"stale permanent failure", errand.Permanent(errUpstream)},
		{"stale snooze", errand.Snooze(time.Hour)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := newTestClock()
			path := t.TempDir() + "/errand.db"
			started, release := make(chan struct{}), make(chan struct{})
			first := handlerClient(t, openStoreAt(t, path, clock), func(_ context.Context, j *errandtype.Job) error {
				close(started)
				<-release
				return tt.stale
			})
			second := handlerClient(t, openStoreAt(t, path, clock), func(context.Context, *errandtype.Job) error { return nil })
			job := enqueue(t, first, "task", nil)

			// The clients keep real time, and the lease is far longer than
			// the test: no heartbeat notices that the store's clock passed
			// it, so the stale attempt writes, and the store must fence it.
			const lease = 30 * time.Second
			type outcome struct {
				r   *errand.WorkResult
				err error
			}
			done := make(chan outcome, 1)
			go func() {
				r, err := first.WorkOne(context.Background(), &errand.WorkOneOpts{Lease: lease, Owner: "first"})
				done <- outcome{r, err}
			}()
			<-started
			clock.Advance(lease)
			r2 := workOne(t, second, &errand.WorkOneOpts{Lease: lease, Owner: "second"})
			if r2.Result != errand.ResultSucceeded || r2.Attempt != 2 {
				t.Fatalf("second worker: %+v, want succeeded on attempt 2", r2)
			}
			want := getJob(t, second, job.ID)

			clock.Advance(time.Second)
			close(release)
			o := <-done
			if o.err != nil {
				t.Fatalf("first worker: %v", o.err)
			}
			if o.r.Result != errand.ResultLeaseLost || o.r.Attempt != 1 {
				t.Fatalf("first worker: %+v, want lease_lost on attempt 1", o.r)
			}
			got := getJob(t, second, job.ID)
			if got.State != errandtype.StateSucceeded || got.Attempt != 2 || got.LeaseOwner == nil || *got.LeaseOwner != "second" ||
				!got.FinishedAt.Equal(*want.FinishedAt) || len(got.Errors) != 1 || got.Errors[0].Class != errandstore.ClassLeaseExpired {
				t.Fatalf("after the stale write: %s attempt %d owner %v finished %v history %v; want the second worker's record intact",
					got.State, got.Attempt, got.LeaseOwner, got.FinishedAt, classes(got.Errors))
			}
			if !got.AvailableAt.Equal(want.AvailableAt) || got.LastError.Class != errandstore.ClassLeaseExpired {
				t.Fatalf("stale write changed the job: available %v (was %v), last error %+v", got.AvailableAt, want.AvailableAt, got.LastError)
			}
		})
	}
}

func TestHeartbeatFindingTheLeaseLostCancelsTheHandler(t *testing.T) {
	// The store's clock and the worker's are apart here: the store's
	// passes the lease while the worker's has come only to its first
	// heartbeat, so that it is the store's answer that ends the attempt.
	storeClock, workerClock := newTestClock(), newTestClock()
	st := openStore(t, storeClock)
	started := make(chan struct{})
	c := clockClient(t, st, workerClock, func(ctx context.Context, _ *errandtype.Job) error {
		close(started)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(clockWait):
			return nil
		}
	})
	job := enqueue(t, c, "task", nil)
	const lease = time.Minute
	done := workOneAsync(t, c, &errand.WorkOneOpts{Lease: lease})
	<-started
	claimed := getJob(t, c, job.ID)
	storeClock.Advance(lease) // the lease has expired in the store
	blockUntilAt(t, workerClock, workerClock.Now().Add(lease/3), 1)
	workerClock.Advance(lease / 3) // the first heartbeat finds it so
	r := <-done
	if r == nil || r.Result != errand.ResultLeaseLost {
		t.Fatalf("result %+v, want lease_lost", r)
	}
	// Nothing written: the job still looks claimed by that attempt until a
	// sweep.
	j := getJob(t, c, job.ID)
	if j.State != errandtype.StateRunning || *j.LeaseToken != *claimed.LeaseToken || !j.LeaseUntil.Equal(*claimed.LeaseUntil) || len(j.Errors) != 0 {
		t.Fatalf("job %s token %v until %v history %v; want it untouched", j.State, j.LeaseToken, j.LeaseUntil, j.Errors)
	}
}

func TestHeartbeatKeepsALongAttemptAlive(t *testing.T) {
	clock := newTestClock()
	st := &troubledStore{TxStore: openStore(t, clock), renewed: make(chan errandstore.HeartbeatResult, 16)}
	release := make(chan struct{})
	c := clockClient(t, st, clock, func(ctx context.Context, _ *errandtype.Job) error {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-release:
			return nil
		}
	})
	job := enqueue(t, c, "task", nil)
	const lease = 30 * time.Second
	done := workOneAsync(t, c, &errand.WorkOneOpts{Lease: lease})
	// Three leases pass, a renewal every third of one: each renewal moves
	// the lease's end in the store, and the clock moves on only once the
	// store has committed it.
	blockUntilAt(t, clock, clock.Now().Add(lease/3), 1)
	for range 9 {
		now := clock.Advance(lease / 3)
		select {
		case r := <-st.renewed:
			if r.Err != nil || !r.LeaseUntil.Equal(now.Add(lease)) {
				t.Fatalf("at %v: renewal %+v, want the lease until %v", now, r, now.Add(lease))
			}
		case <-time.After(clockWait):
			t.Fatalf("at %v: no renewal within %v", now, clockWait)
		}
		if j := getJob(t, c, job.ID); j.State != errandtype.StateRunning || !j.LeaseUntil.Equal(now.Add(lease)) {
			t.Fatalf("at %v: job %s until %v, want running until %v", now, j.State, j.LeaseUntil, now.Add(lease))
		}
	}
	close(release)
	r := <-done
	if r.Result != errand.ResultSucceeded || r.Attempt != 1 {
		t.Fatalf("result %+v, want succeeded on attempt 1", r)
	}
	if r.Duration != 3*lease {
		t.Fatalf("handler ran %v, want 3 leases, %v", r.Duration, 3*lease)
	}
	if j := getJob(t, c, job.ID); j.State != errandtype.StateSucceeded || j.Attempt != 1 || len(j.Errors) != 0 {
		t.Fatalf("job %s attempt %d history %v, want succeeded on attempt 1", j.State, j.Attempt, j.Errors)
	}
}

func TestFinalAttemptCrashIsDeadAtTheNextClaim(t *testing.T) {
	clock := newTestClock()
	path := t.TempDir() + "/errand.db"
	crashed := openStoreAt(t, path, clock)
	c := handlerClient(t, openStoreAt(t, path, clock), func(context.Context, *errandtype.Job) error { return nil })
	job := enqueue(t, c, "task", &errand.EnqueueOpts{MaxAttempts: 1})
	// A worker claims the job and dies without a word.
	claimed, err := crashed.JobClaimMany(context.Background(), &errandstore.JobClaimParams{
		Queues: []string{errand.DefaultQueue}, Limit: 1, Lease: time.Minute, Owner: "doomed",
	})
	if err != nil || len(claimed) != 1 {
		t.Fatalf("claim: %v, %d jobs", err, len(claimed))
	}
	clock.Advance(time.Minute)
	if r := workOne(t, c, &errand.WorkOneOpts{}); r.Result != errand.ResultIdle {
		t.Fatalf("result %+v, want idle: a final attempt that crashed must not run again", r)
	}
	j := getJob(t, c, job.ID)
	if j.State != errandtype.StateDead || j.Attempt != 1 || len(j.Errors) != 1 || j.Errors[0].Class != errandstore.ClassLeaseExpired || j.Errors[0].Attempt != 1 {
		t.Fatalf("job %s attempt %d history %+v; want dead with one lease_expired entry for attempt 1", j.State, j.Attempt, j.Errors)
	}
}

// WorkOne records the limits it is given, so that its claim and every
// later one stay within them; a bad limit writes nothing.
func TestWorkOneRecordsItsLimits(t *testing.T) {
	st := openStore(t, newTestClock())
	c := handlerClient(t, st, func(context.Context, *errandtype.Job) error { return nil })
	first := enqueue(t, c, "task", nil)
	second := enqueue(t, c, "task", nil)
	for _, o := range []*errand.WorkOneOpts{
		{RateLimits: []errand.RateLimit{{Queue: "mail", Limit: 1, Per: time.Hour}}},
		{RateLimits: []errand.RateLimit{{Kind: "nope", Limit: 1, Per: time.Hour}}},
		{RetryBudgets: []errand.RetryBudget{{Kind: "task", Ratio: -1}}},
	} {
		if _, err := c.WorkOne(t.Context(), o); !errors.Is(err, errandtype.ErrInvalid) {
			t.Fatalf("WorkOne(%+v) = %v; want an input error", o, err)
		}
	}
	if ls, err := c.Limits(t.Context()); err != nil || len(ls) != 0 {
		t.Fatalf("bad limits wrote %v (%v)", ls, err)
	}

	once := &errand.WorkOneOpts{RateLimits: []errand.RateLimit{{Queue: errand.DefaultQueue, Limit: 1, Per: time.Hour}},
		RetryBudgets: []errand.RetryBudget{{Kind: "task", Ratio: 0.1}}}
	if r := workOne(t, c, once); r.Result != errand.ResultSucceeded || *r.JobID != first.ID {
		t.Fatalf("first WorkOne = %+v; want %s run", r, first.ID)
	}
	if r := workOne(t, c, once); r.Result != errand.ResultIdle {
		t.Fatalf("second WorkOne within the hour = %+v; want idle, the limit spent", r)
	}
	// The limit is stored: a WorkOne that names none honours it too.
	if r := workOne(t, c, &errand.WorkOneOpts{}); r.Result != errand.ResultIdle {
		t.Fatalf("WorkOne without limits = %+v; want idle, the stored limit spent", r)
	}
	if j := getJob(t, c, second.ID); j.State != errandtype.StateQueued || j.Attempt != 0 {
		t.Fatalf("second job %s at attempt %d; want queued, untouched", j.State, j.Attempt)
	}
	ls, err := c.Limits(t.Context())
	if err != nil || len(ls) != 2 || ls[0].Name != "queue:default" || ls[1].Name != "retry:task" {
		t.Fatalf("limits = %v (%v); want queue:default and retry:task", ls, err)
	}
}
