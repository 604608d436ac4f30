package errand_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtest"
	"github.com/errandhq/errand/errandtype"
)

// remoteClient is a producer-only client (the API server's) that knows the
// retry policy of kind "task": backoff from 10s to 10s, so a retry's delay
// is in [5s, 10s).
func remoteClient(t *testing.T, s errandstore.TxStore[*sql.Tx], clock *errandtest.Clock) *errand.Client[*sql.Tx] {
	t.Helper()
	kinds := errand.NewKinds()
	kinds.HandleRaw("task", nil, &errand.KindOpts{RetryPolicy: &errand.RetryPolicy{Base: 10 * time.Second, Max: 10 * time.Second}})
	c, err := errand.NewClient(s, &errand.Config{Kinds: kinds, AllowUnknownKinds: true, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func claimOne(t *testing.T, c *errand.Client[*sql.Tx], owner string) *errandtype.Job {
	t.Helper()
	js, err := c.Claim(context.Background(), &errand.ClaimOpts{Kinds: []string{"task"}, Owner: owner, Lease: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if len(js) != 1 {
		t.Fatalf("claimed %d jobs, want 1", len(js))
	}
	return js[0]
}

func TestRemoteWorkerClaimHeartbeatAck(t *testing.T) {
	eachJobStore(t, func(t *testing.T, s errandstore.TxStore[*sql.Tx], clock *errandtest.Clock) {
		ctx := context.Background()
		c := remoteClient(t, s, clock)
		enqueue(t, c, "other", nil) // a kind the remote worker does not handle
		want := enqueue(t, c, "task", nil)

		j := claimOne(t, c, "node-7")
		if j.ID != want.ID || j.State != errandtype.StateRunning || j.Attempt != 1 {
			t.Fatalf("claimed %s %s attempt %d, want %s running attempt 1", j.ID, j.State, j.Attempt, want.ID)
		}
		if j.LeaseOwner == nil || *j.LeaseOwner != "node-7" || j.LeaseToken == nil || *j.LeaseToken == "" {
			t.Fatalf("lease owner %v token %v, want node-7 and a token", j.LeaseOwner, j.LeaseToken)
		}
		if more, err := c.Claim(ctx, &errand.ClaimOpts{Kinds: []string{"task"}, Owner: "node-7"}); err != nil || len(more) != 0 {
			t.Fatalf("second claim: %d jobs, %v; want none", len(more), err)
		}

		clock.Advance(20 * time.Second)
		until, err := c.Heartbeat(ctx, j.ID, *j.LeaseToken, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if wantUntil := clock.Now().Add(time.Minute); !until.Equal(wantUntil) {
			t.Fatalf("lease until %s, want %s", until, wantUntil)
		}
		clock.Advance(40 * time.Second) // past the first lease, inside the renewed one
		r, err := c.Ack(ctx, j.ID, *j.LeaseToken)
		if err != nil {
			t.Fatal(err)
		}
		if r.State != errandtype.StateSucceeded {
			t.Fatalf("ack: state %s, want succeeded", r.State)
		}
		if got := getJob(t, c, j.ID); got.State != errandtype.StateSucceeded || got.LeaseToken != nil {
			t.Fatalf("after ack: %s with token %v", got.State, got.LeaseToken)
		}
		if _, err := c.Ack(ctx, j.ID, *j.LeaseToken); !errors.Is(err, errandtype.ErrLeaseLost) {
			t.Fatalf("second ack: %v, want ErrLeaseLost", err)
		}
	})
}

func TestRemoteWorkerStaleTokenChangesNothing(t *testing.T) {
	eachJobStore(t, func(t *testing.T, s errandstore.TxStore[*sql.Tx], clock *errandtest.Clock) {
		ctx := context.Background()
		c := remoteClient(t, s, clock)
		enqueue(t, c, "task", nil)
		j := claimOne(t, c, "node-1")
		before := getJob(t, c, j.ID)

		wrong := "not-the-token"
		if _, err := c.Heartbeat(ctx, j.ID, wrong, 0); !errors.Is(err, errandtype.ErrLeaseLost) {
			t.Errorf("heartbeat with a wrong token: %v, want ErrLeaseLost", err)
		}
		if _, err := c.Ack(ctx, j.ID, wrong); !errors.Is(err, errandtype.ErrLeaseLost) {
			t.Errorf("ack with a wrong token: %v, want ErrLeaseLost", err)
		}
		if _, err := c.Fail(ctx, j.ID, wrong, &errand.FailOpts{Message: "x"}); !errors.Is(err, errandtype.ErrLeaseLost) {
			t.Errorf("fail with a wrong token: %v, want ErrLeaseLost", err)
		}
		if _, err := c.Fail(ctx, "no-such-job", *j.LeaseToken, nil); !errors.Is(err, errandtype.ErrLeaseLost) {
			t.Errorf("fail of an unknown job: %v, want ErrLeaseLost", err)
		}
		if after := getJob(t, c, j.ID); !reflect.DeepEqual(before, after) {
			t.Fatalf("a refused call changed the job:\nbefore %+v\nafter  %+v", before, after)
		}

		// Once the lease has expired and another worker claimed the job, the
		// first worker's token is stale.
		clock.Advance(31 * time.Second)
		second := claimOne(t, c, "node-2")
		if second.ID != j.ID || *second.LeaseToken == *j.LeaseToken {
			t.Fatalf("reclaim: %s token %s", second.ID, *second.LeaseToken)
		}
		before = getJob(t, c, j.ID)
		if _, err := c.Fail(ctx, j.ID, *j.LeaseToken, &errand.FailOpts{Permanent: true}); !errors.Is(err, errandtype.ErrLeaseLost) {
			t.Errorf("fail with the stale token: %v, want ErrLeaseLost", err)
		}
		if _, err := c.Ack(ctx, j.ID, *j.LeaseToken); !errors.Is(err, errandtype.ErrLeaseLost) {
			t.Errorf("ack with the stale token: %v, want ErrLeaseLost", err)
		}
		if after := getJob(t, c, j.ID); !reflect.DeepEqual(before, after) {
			t.Fatalf("a stale call changed the job:\nbefore %+v\nafter  %+v", before, after)
		}
	})
}

func TestRemoteWorkerFailRetriesByPolicy(t *testing.T) {
	eachJobStore(t, func(t *testing.T, s errandstore.TxStore[*sql.Tx], clock *errandtest.Clock) {
		ctx := context.Background()
		c := remoteClient(t, s, clock)
		enqueue(t, c, "task", &errand.EnqueueOpts{MaxAttempts: 2})

		j := claimOne(t, c, "node-1")
		r, err := c.Fail(ctx, j.ID, *j.LeaseToken, &errand.FailOpts{Class: "upstream_down", Message: "bad\x00byte \xff", Stack: "at main.js:1"})
		if err != nil {
			t.Fatal(err)
		}
		delay := r.AvailableAt.Sub(clock.Now())
		if r.State != errandtype.StateRetrying || delay < 5*time.Second || delay >= 10*time.Second {
			t.Fatalf("fail: %s, retry in %s; want retrying in [5s, 10s) by the kind's policy", r.State, delay)
		}
		got := getJob(t, c, j.ID)
		e := got.Errors[0]
		if e.Class != "upstream_down" || e.Attempt != 1 || e.Message != "bad\uFFFDbyte \uFFFD" || e.Stack != "at main.js:1" {
			t.Fatalf("history entry %+v", e)
		}

		// The final attempt dies, whatever the worker asked for.
		clock.Advance(10 * time.Second)
		j = claimOne(t, c, "node-1")
		r, err = c.Fail(ctx, j.ID, *j.LeaseToken, &errand.FailOpts{RetryAfter: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if r.State != errandtype.StateDead {
			t.Fatalf("final attempt: %s, want dead", r.State)
		}
		if got := getJob(t, c, j.ID); got.LastError == nil || got.LastError.Class != errand.ClassError || got.LastError.Message != errand.ClassError {
			t.Fatalf("last error %+v, want class and message error", got.LastError)
		}
	})
}

func TestRemoteWorkerFailPermanentAndRetryAfter(t *testing.T) {
	eachJobStore(t, func(t *testing.T, s errandstore.TxStore[*sql.Tx], clock *errandtest.Clock) {
		ctx := context.Background()
		c := remoteClient(t, s, clock)
		enqueue(t, c, "task", nil)
		j := claimOne(t, c, "node-1")
		r, err := c.Fail(ctx, j.ID, *j.LeaseToken, &errand.FailOpts{RetryAfter: 90 * time.Second, Message: "rate limited"})
		if err != nil {
			t.Fatal(err)
		}
		if r.State != errandtype.StateRetrying || !r.AvailableAt.Equal(clock.Now().Add(90*time.Second)) {
			t.Fatalf("retry after: %s at %s", r.State, r.AvailableAt)
		}
		clock.Advance(90 * time.Second)
		j = claimOne(t, c, "node-1")
		r, err = c.Fail(ctx, j.ID, *j.LeaseToken, &errand.FailOpts{Permanent: true, Message: "no such customer"})
		if err != nil {
			t.Fatal(err)
		}
		got := getJob(t, c, j.ID)
		if r.State != errandtype.StateDead || got.State != errandtype.StateDead || got.LastError.Class != errand.ClassPermanent {
			t.Fatalf("permanent: %s, job %s class %s", r.State, got.State, got.LastError.Class)
		}
	})
}

func TestRemoteWorkerBadInput(t *testing.T) {
	clock := newTestClock()
	c := remoteClient(t, openStore(t, clock), clock)
	ctx := context.Background()
	enqueue(t, c, "task", nil)
	for _, tc := range []struct {
		name  string
		opts  *errand.ClaimOpts
		field string
	}{
		{"no kinds", &errand.ClaimOpts{Owner: "w"}, "kinds"},
		{"no owner", &errand.ClaimOpts{Kinds: []string{"task"}}, "worker"},
		{"too many", &errand.ClaimOpts{Kinds: []string{"task"}, Owner: "w", Limit: errand.MaxClaimJobs + 1}, "max_jobs"},
		{"short lease", &errand.ClaimOpts{Kinds: []string{"task"}, Owner: "w", Lease: time.Millisecond}, "lease"},
		{"bad queue", &errand.ClaimOpts{Kinds: []string{"task"}, Owner: "w", Queue: "a b"}, "queue"},
	} {
		_, err := c.Claim(ctx, tc.opts)
		var ie *errandtype.InputError
		if !errors.As(err, &ie) || ie.Field != tc.field {
			t.Errorf("%s: %v, want an input error about %s", tc.name, err, tc.field)
		}
	}
	if js, _ := c.List(ctx, &errand.ListOpts{States: []errandtype.JobState{errandtype.StateRunning}}); len(js) != 0 {
		t.Fatalf("a refused claim claimed %d jobs", len(js))
	}

	j := claimOne(t, c, "w")
	before := getJob(t, c, j.ID)
	for _, tc := range []struct {
		opts  *errand.FailOpts
		field string
	}{
		{&errand.FailOpts{Class: "Not A Class"}, "class"},
		{&errand.FailOpts{Permanent: true, RetryAfter: time.Second}, "retry_after"},
		{&errand.FailOpts{RetryAfter: -time.Second}, "retry_after"},
	} {
		_, err := c.Fail(ctx, j.ID, *j.LeaseToken, tc.opts)
		var ie *errandtype.InputError
		if !errors.As(err, &ie) || ie.Field != tc.field {
			t.Errorf("fail %+v: %v, want an input error about %s", tc.opts, err, tc.field)
		}
	}
	if _, err := c.Ack(ctx, j.ID, ""); !errors.Is(err, errandtype.ErrInvalid) || !strings.Contains(err.Error(), "lease_token") {
		t.Errorf("ack without a token: %v", err)
	}
	if after := getJob(t, c, j.ID); !reflect.DeepEqual(before, after) {
		b, _ := json.Marshal(after)
		t.Fatalf("refused input changed the job: %s", b)
	}
}

func TestRemoteWorkerInTheRegistry(t *testing.T) {
	eachJobStore(t, func(t *testing.T, s errandstore.TxStore[*sql.Tx], clock *errandtest.Clock) {
		ctx := context.Background()
		c := remoteClient(t, s, clock)
		enqueue(t, c, "task", nil)
		enqueue(t, c, "task", nil)
		claimOne(t, c, "node-7") // lease 30s

		ws, err := c.Workers(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(ws) != 1 || ws[0].ID != "node-7" || ws[0].Status != errandtype.WorkerAlive ||
			!reflect.DeepEqual(ws[0].Kinds, []string{"task"}) || len(ws[0].Queues) != 1 || ws[0].Queues[0].Name != errand.DefaultQueue {
			t.Fatalf("registry %+v", ws)
		}
		stats, err := c.Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(stats) != 1 || len(stats[0].UnhandledKinds) != 0 {
			t.Fatalf("a kind a remote worker claims is reported unhandled: %+v", stats)
		}

		// Silent for three leases: gone. A claim brings it back, and one
		// from another queue, of another kind, adds them to its record.
		clock.Advance(91 * time.Second)
		if ws, _ := c.Workers(ctx); ws[0].Status != errandstore.WorkerGone {
			t.Fatalf("after three silent leases: %s, want gone", ws[0].Status)
		}
		if _, err := c.Claim(ctx, &errand.ClaimOpts{Queue: "mail", Kinds: []string{"email"}, Owner: "node-7", Lease: 30 * time.Second}); err != nil {
			t.Fatal(err)
		}
		ws, err = c.Workers(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(ws) != 1 || ws[0].Status != errandtype.WorkerAlive || !reflect.DeepEqual(ws[0].Kinds, []string{"email", "task"}) || len(ws[0].Queues) != 2 {
			t.Fatalf("registry after a claim elsewhere: %+v", ws[0])
		}
		clock.Advance(80 * time.Second)
		claimOne(t, c, "node-7") // a heartbeat, nothing new
		clock.Advance(80 * time.Second)
		if ws, _ := c.Workers(ctx); ws[0].Status != errandtype.WorkerAlive {
			t.Fatalf("a claim 80s ago did not count as a heartbeat: %s", ws[0].Status)
		}
	})
}

func TestRemoteWorkerAckMany(t *testing.T) {
	eachJobStore(t, func(t *testing.T, s errandstore.TxStore[*sql.Tx], clock *errandtest.Clock) {
		ctx := context.Background()
		c := remoteClient(t, s, clock)
		for range 3 {
			enqueue(t, c, "task", nil)
		}
		js, err := c.Claim(ctx, &errand.ClaimOpts{Kinds: []string{"task"}, Owner: "node-1", Limit: 3})
		if err != nil || len(js) != 3 {
			t.Fatalf("claim: %d jobs, %v", len(js), err)
		}
		leases := []errandstore.JobLease{
			{ID: js[0].ID, LeaseToken: *js[0].LeaseToken},
			{ID: js[1].ID, LeaseToken: "stale"},
			{ID: js[2].ID, LeaseToken: *js[2].LeaseToken},
		}
		rs, err := c.AckMany(ctx, leases)
		if err != nil {
			t.Fatal(err)
		}
		if rs[0].State != errandtype.StateSucceeded || !errors.Is(rs[1].Err, errandtype.ErrLeaseLost) || rs[2].State != errandtype.StateSucceeded {
			t.Fatalf("results %+v", rs)
		}
		if j := getJob(t, c, js[1].ID); j.State != errandtype.StateRunning || *j.LeaseToken != *js[1].LeaseToken {
			t.Fatalf("the stale ack changed job %s: %s", j.ID, j.State)
		}
		for _, bad := range [][]errandstore.JobLease{nil, make([]errandstore.JobLease, errand.MaxClaimJobs+1), {{ID: js[1].ID}},
			{{ID: js[1].ID, LeaseToken: *js[1].LeaseToken}, {ID: js[1].ID, LeaseToken: *js[1].LeaseToken}}} {
			if _, err := c.AckMany(ctx, bad); !errors.Is(err, errandtype.ErrInvalid) {
				t.Errorf("AckMany of %d leases: %v, want an input error", len(bad), err)
			}
		}
		if j := getJob(t, c, js[1].ID); j.State != errandtype.StateRunning {
			t.Fatalf("refused input changed job %s: %s", j.ID, j.State)
		}
	})
}

// TestRemoteClaimRepeatedKind: a remote claim that names a kind twice claims
// as one that names it once, a kind rate limit in force; it used to take
// from the limit twice, be refused, and come back empty every time.
func TestRemoteClaimRepeatedKind(t *testing.T) {
	eachJobStore(t, func(t *testing.T, s errandstore.TxStore[*sql.Tx], clock *errandtest.Clock) {
		c := newClient(t, s, &errand.Config{Clock: clock, Kinds: kindsOf([]testKind{{Name: "k",
			Handler: errand.HandlerFunc(func(context.Context, *errandtype.Job) error { return nil })}})})
		enqueue(t, c, "k", &errand.EnqueueOpts{ID: "j1"})
		// A worker's run records the kind's rate limit in the store.
		if _, err := c.WorkOne(context.Background(), &errand.WorkOneOpts{RateLimits: []errand.RateLimit{{Kind: "k", Limit: 100, Per: time.Second}}}); err != nil {
			t.Fatal(err)
		}
		enqueue(t, c, "k", &errand.EnqueueOpts{ID: "j2"})
		jobs, err := c.Claim(context.Background(), &errand.ClaimOpts{Kinds: []string{"k", "k"}, Owner: "remote-1"})
		if err != nil || len(jobs) != 1 || jobs[0].ID != "j2" {
			t.Fatalf("claim of kinds [k k] = %d jobs, %v; want j2", len(jobs), err)
		}
	})
}

// A claim with AnyKind takes jobs of every kind, in the queue's order, and
// refuses to be combined with a list of kinds.
func TestRemoteClaimAnyKind(t *testing.T) {
	eachJobStore(t, func(t *testing.T, s errandstore.TxStore[*sql.Tx], clock *errandtest.Clock) {
		ctx := context.Background()
		c := remoteClient(t, s, clock)
		first := enqueue(t, c, "other", nil) // a kind the client does not declare
		second := enqueue(t, c, "task", nil)
		js, err := c.Claim(ctx, &errand.ClaimOpts{AnyKind: true, Limit: 5, Owner: "faktory-1"})
		if err != nil {
			t.Fatal(err)
		}
		if len(js) != 2 || js[0].ID != first.ID || js[1].ID != second.ID {
			t.Fatalf("claimed %d jobs, want %s then %s", len(js), first.ID, second.ID)
		}
		_, err = c.Claim(ctx, &errand.ClaimOpts{AnyKind: true, Kinds: []string{"task"}, Owner: "faktory-1"})
		var ie *errandtype.InputError
		if !errors.As(err, &ie) || ie.Field != "kinds" {
			t.Fatalf("AnyKind with Kinds: %v; want an input error naming kinds", err)
		}
	})
}
