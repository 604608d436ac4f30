package errand_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtest"
	"github.com/errandhq/errand/errandtype"
)

// TestRemoteWorkerFailMany: a batch of failures is decided per job as
// Fail decides one (the kind's backoff, a retry_after, a permanent
// failure, a pending cancel), a stale entry is lease lost with nothing
// written for it, and input refused for one entry writes nothing at all.
func TestRemoteWorkerFailMany(t *testing.T) {
	eachJobStore(t, func(t *testing.T, s errandstore.TxStore[*sql.Tx], clock *errandtest.Clock) {
		ctx := context.Background()
		c := remoteClient(t, s, clock)
		for i := range 5 {
			enqueue(t, c, "task", &errand.EnqueueOpts{ID: fmt.Sprintf("t%d", i)})
		}
		js, err := c.Claim(ctx, &errand.ClaimOpts{Kinds: []string{"task"}, Owner: "node-1", Limit: 5})
		if err != nil || len(js) != 5 {
			t.Fatalf("claim: %d jobs, %v", len(js), err)
		}
		if _, err := c.Cancel(ctx, js[3].ID, cancelOpts); err != nil {
			t.Fatal(err)
		}
		lease := func(j *errandtype.Job) errandstore.JobLease {
			return errandstore.JobLease{ID: j.ID, LeaseToken: *j.LeaseToken}
		}
		fails := []errand.JobFailure{
			{JobLease: lease(js[0]), FailOpts: errand.FailOpts{Class: "upstream_down", Message: "502 from upstream", Stack: "at main.js:1"}},
			{JobLease: errandstore.JobLease{ID: js[1].ID, LeaseToken: "stale"}, FailOpts: errand.FailOpts{Permanent: true}},
			{JobLease: lease(js[2]), FailOpts: errand.FailOpts{RetryAfter: 90 * time.Second}},
			{JobLease: lease(js[3]), FailOpts: errand.FailOpts{Message: "stopped"}},
			{JobLease: lease(js[4]), FailOpts: errand.FailOpts{Permanent: true, Message: "no such customer"}},
		}
		for i, bad := range []errand.FailOpts{{Class: "Not A Class"}, {RetryAfter: -time.Second}, {Permanent: true, RetryAfter: time.Second}} {
			refused := append([]errand.JobFailure(nil), fails...)
			refused[4].FailOpts = bad
			var ie *errandtype.InputError
			if _, err := c.FailMany(ctx, refused); !errors.As(err, &ie) || ie.Field[:8] != "jobs[4]." {
				t.Errorf("bad options %d: %v, want an input error naming jobs[4]", i, err)
			}
		}
		for _, bad := range [][]errand.JobFailure{nil, make([]errand.JobFailure, errand.MaxClaimJobs+1), {fails[0], fails[0]}} {
			if _, err := c.FailMany(ctx, bad); !errors.Is(err, errandtype.ErrInvalid) {
				t.Errorf("FailMany of %d failures: %v, want an input error", len(bad), err)
			}
		}
		if j := getJob(t, c, js[0].ID); j.State != errandtype.StateRunning {
			t.Fatalf("refused input changed job %s: %s", j.ID, j.State)
		}

		rs, err := c.FailMany(ctx, fails)
		if err != nil {
			t.Fatal(err)
		}
		if delay := rs[0].AvailableAt.Sub(clock.Now()); rs[0].State != errandtype.StateRetrying || delay < 5*time.Second || delay >= 10*time.Second {
			t.Errorf("jobs[0]: %s, retry in %s; want retrying in [5s, 10s) by the kind's policy", rs[0].State, delay)
		}
		if !errors.Is(rs[1].Err, errandtype.ErrLeaseLost) {
			t.Errorf("jobs[1] with a stale token: %+v, want lease lost", rs[1])
		}
		if rs[2].State != errandtype.StateRetrying || !rs[2].AvailableAt.Equal(clock.Now().Add(90*time.Second)) {
			t.Errorf("jobs[2]: %s at %s, want retrying after 90s", rs[2].State, rs[2].AvailableAt)
		}
		if rs[3].State != errandtype.StateCancelled || rs[4].State != errandtype.StateDead {
			t.Errorf("jobs[3], jobs[4]: %s, %s; want cancelled (a cancel was pending), dead", rs[3].State, rs[4].State)
		}
		if j := getJob(t, c, js[1].ID); j.State != errandtype.StateRunning || *j.LeaseToken != *js[1].LeaseToken {
			t.Errorf("the stale failure changed job %s: %s", j.ID, j.State)
		}
		if e := getJob(t, c, js[0].ID).Errors[0]; e.Class != "upstream_down" || e.Message != "502 from upstream" || e.Stack != "at main.js:1" {
			t.Errorf("history entry %+v", e)
		}
		if e := getJob(t, c, js[4].ID).LastError; e == nil || e.Class != errand.ClassPermanent {
			t.Errorf("permanent failure's last error %+v", e)
		}
	})
}

// TestRemoteFailManyThrottleHoldsDependency: a throttle reported in a
// batch of failures reaches the dependency's adaptive limit as one Fail
// reports it: its reset time holds the claims of every kind of the
// dependency.
func TestRemoteFailManyThrottleHoldsDependency(t *testing.T) {
	eachJobStore(t, func(t *testing.T, s errandstore.TxStore[*sql.Tx], clock *errandtest.Clock) {
		ctx := context.Background()
		c, claim := dependencyClaims(t, s, clock)
		jobs := claim("b")
		if len(jobs) != 2 {
			t.Fatalf("b's claim took %d jobs; want the dependency's burst, 2", len(jobs))
		}
		rs, err := c.FailMany(ctx, []errand.JobFailure{
			{JobLease: errandstore.JobLease{ID: jobs[0].ID, LeaseToken: "stale"}},
			{JobLease: errandstore.JobLease{ID: jobs[1].ID, LeaseToken: *jobs[1].LeaseToken}, FailOpts: errand.FailOpts{Class: "http_429", RetryAfter: 2 * time.Second}},
		})
		if err != nil || !errors.Is(rs[0].Err, errandtype.ErrLeaseLost) || rs[1].State != errandtype.StateRetrying {
			t.Fatalf("FailMany: %+v, %v", rs, err)
		}
		clock.Advance(time.Second)
		if n := len(claim("a")); n != 0 {
			t.Fatalf("a's claim while b's reset time holds the dependency took %d jobs; want none", n)
		}
		clock.Advance(time.Second + 200*time.Millisecond)
		if n := len(claim("a")); n == 0 {
			t.Fatal("a's claim after the hold took no job")
		}
	})
}

// TestRemoteFailManyOpensBreaker: two failures of a dependency's kind in
// one batch open its breaker, as two Fail calls do.
func TestRemoteFailManyOpensBreaker(t *testing.T) {
	eachJobStore(t, func(t *testing.T, s errandstore.TxStore[*sql.Tx], clock *errandtest.Clock) {
		ctx := context.Background()
		c := smtpRemoteClient(t, s, clock)
		for range 2 {
			enqueue(t, c, "send_email", nil)
		}
		js, err := c.Claim(ctx, &errand.ClaimOpts{Kinds: []string{"send_email"}, Owner: "node-7", Limit: 2})
		if err != nil || len(js) != 2 {
			t.Fatalf("claim: %d jobs, %v", len(js), err)
		}
		fails := make([]errand.JobFailure, len(js))
		for i, j := range js {
			fails[i] = errand.JobFailure{JobLease: errandstore.JobLease{ID: j.ID, LeaseToken: *j.LeaseToken},
				FailOpts: errand.FailOpts{Message: "dial smtp: connection refused"}}
		}
		if _, err := c.FailMany(ctx, fails); err != nil {
			t.Fatal(err)
		}
		if st := breakerState(t, c, "smtp"); st != errandtype.BreakerOpen {
			t.Fatalf("breaker after 2 remote failures in one batch: %s; want open", st)
		}
	})
}
