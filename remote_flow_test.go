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
)

// smtpRemoteClient returns a client that, like `errand serve --dependency
// send_email=smtp`, knows that remote workers' kind send_email calls smtp,
// whose breaker opens after 2 failures for 47 seconds. Failed jobs retry an
// hour later, so none comes due while the breaker decides.
func smtpRemoteClient(t *testing.T, s errandstore.TxStore[*sql.Tx], clock *errandtest.Clock) *errand.Client[*sql.Tx] {
	t.Helper()
	kinds := errand.NewKinds()
	hour := &errand.RetryPolicy{Base: time.Hour, Max: time.Hour}
	kinds.HandleRaw("send_email", nil, &errand.KindOpts{Dependency: "smtp", RetryPolicy: hour})
	kinds.HandleRaw("task", nil, &errand.KindOpts{RetryPolicy: hour})
	return newClient(t, s, &errand.Config{Kinds: kinds, AllowUnknownKinds: true, Clock: clock,
		Breakers: map[string]*errandtype.BreakerPolicy{"smtp": {Threshold: 2, Window: time.Minute, Cooldown: 47 * time.Second}}})
}

func breakerState(t *testing.T, c *errand.Client[*sql.Tx], dep string) errandtype.BreakerState {
	t.Helper()
	bs, err := c.Breakers(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range bs {
		if b.Dependency == dep {
			return b.State
		}
	}
	return errandstore.BreakerClosed
}

// kindsOfJobs returns the kinds of jobs, in order.
func kindsOfJobs(jobs []*errandtype.Job) []string {
	out := []string{}
	for _, j := range jobs {
		out = append(out, j.Kind)
	}
	return out
}

// TestRemoteClaimsHonourBreakers: a remote worker's failures of a kind
// whose dependency is smtp open smtp's breaker; its claims then skip the
// kind (other kinds still come), until the cool-down lets one probe through
// (one only, however many claims ask), whose acknowledgment closes the
// breaker. Opened again, an operator's reset lets the kind be claimed at
// once.
func TestRemoteClaimsHonourBreakers(t *testing.T) {
	eachJobStore(t, func(t *testing.T, s errandstore.TxStore[*sql.Tx], clock *errandtest.Clock) {
		ctx := context.Background()
		c := smtpRemoteClient(t, s, clock)
		for range 6 {
			enqueue(t, c, "send_email", nil)
		}
		task := enqueue(t, c, "task", nil)
		claim := func(limit int) []*errandtype.Job {
			t.Helper()
			js, err := c.Claim(ctx, &errand.ClaimOpts{Kinds: []string{"send_email", "task"}, Owner: "node-7", Limit: limit})
			if err != nil {
				t.Fatal(err)
			}
			return js
		}
		fail := func(j *errandtype.Job) {
			t.Helper()
			if _, err := c.Fail(ctx, j.ID, *j.LeaseToken, &errand.FailOpts{Message: "dial smtp: connection refused"}); err != nil {
				t.Fatal(err)
			}
		}
		for i := range 2 {
			js := claim(1)
			if len(js) != 1 || js[0].Kind != "send_email" {
				t.Fatalf("claim %d: %v; want one send_email", i, kindsOfJobs(js))
			}
			fail(js[0])
		}
		if st := breakerState(t, c, "smtp"); st != errandtype.BreakerOpen {
			t.Fatalf("breaker after 2 remote failures: %s; want open", st)
		}
		js := claim(10)
		if len(js) != 1 || js[0].ID != task.ID {
			t.Fatalf("claim with smtp's breaker open: %v; want the task alone", kindsOfJobs(js))
		}
		if _, err := c.Ack(ctx, task.ID, *js[0].LeaseToken); err != nil {
			t.Fatal(err)
		}
		if js := claim(10); len(js) != 0 {
			t.Fatalf("claim with smtp's breaker open: %v; want nothing", kindsOfJobs(js))
		}

		clock.Advance(47 * time.Second) // the cool-down is over
		probe := claim(10)
		if len(probe) != 1 || probe[0].Kind != "send_email" {
			t.Fatalf("claim after the cool-down: %v; want one probe", kindsOfJobs(probe))
		}
		if js := claim(10); len(js) != 0 {
			t.Fatalf("claim while the probe runs: %v; want nothing (one probe)", kindsOfJobs(js))
		}
		if _, err := c.Ack(ctx, probe[0].ID, *probe[0].LeaseToken); err != nil {
			t.Fatal(err)
		}
		if st := breakerState(t, c, "smtp"); st != errandstore.BreakerClosed {
			t.Fatalf("breaker after the probe's ack: %s; want closed", st)
		}
		js = claim(2)
		if len(js) != 2 || js[0].Kind != "send_email" || js[1].Kind != "send_email" {
			t.Fatalf("claim after the breaker closed: %v; want two send_email", kindsOfJobs(js))
		}
		fail(js[0])
		fail(js[1])
		if st := breakerState(t, c, "smtp"); st != errandtype.BreakerOpen {
			t.Fatalf("breaker after 2 more failures: %s; want open", st)
		}
		if js := claim(10); len(js) != 0 {
			t.Fatalf("claim with smtp's breaker open again: %v; want nothing", kindsOfJobs(js))
		}
		if _, err := c.ResetBreaker(ctx, "smtp", "ops", "smtp is back"); err != nil {
			t.Fatal(err)
		}
		if js := claim(10); len(js) != 1 || js[0].Kind != "send_email" {
			t.Fatalf("claim after the reset: %v; want the last send_email", kindsOfJobs(js))
		}
	})
}

// TestRemoteClaimsAreFair: a queue holding 1,000 jobs of one tenant and,
// enqueued after them, 1 job of another is claimed fairly through the API:
// the lone tenant's job comes within the first three one-job claims, not
// after the thousand.
func TestRemoteClaimsAreFair(t *testing.T) {
	eachJobStore(t, func(t *testing.T, s errandstore.TxStore[*sql.Tx], clock *errandtest.Clock) {
		ctx := context.Background()
		c := remoteClient(t, s, clock)
		params := make([]errand.EnqueueParams, 0, 500)
		for i := range 1000 {
			params = append(params, errand.EnqueueParams{Args: rawArgs(t, "task", map[string]int{"n": i}), Opts: &errand.EnqueueOpts{FairnessKey: "big"}})
			if len(params) == cap(params) {
				if _, err := c.EnqueueMany(ctx, params); err != nil {
					t.Fatal(err)
				}
				params = params[:0]
			}
		}
		small := enqueue(t, c, "task", &errand.EnqueueOpts{FairnessKey: "small"})
		var got []string
		for range 3 {
			js, err := c.Claim(ctx, &errand.ClaimOpts{Kinds: []string{"task"}, Owner: "node-7"})
			if err != nil {
				t.Fatal(err)
			}
			if len(js) != 1 {
				t.Fatalf("claimed %d jobs; want 1", len(js))
			}
			got = append(got, *js[0].FairnessKey)
			if js[0].ID == small.ID {
				return
			}
		}
		t.Fatalf("the first three claims took the keys %v; want the lone tenant's job among them", got)
	})
}

// TestWorkOneHonoursStoredRateLimit: WorkOne (errand work --once) takes
// from the queue's rate limit that the Workers keep in the store: at 1 an
// hour, one job runs, the next claim is idle with jobs waiting, and an
// hour later one more runs.
func TestWorkOneHonoursStoredRateLimit(t *testing.T) {
	eachJobStore(t, func(t *testing.T, s errandstore.TxStore[*sql.Tx], clock *errandtest.Clock) {
		ctx := context.Background()
		c := handlerClient(t, s, func(context.Context, *errandtype.Job) error { return nil })
		limit := errand.RateLimit{Queue: errand.DefaultQueue, Limit: 1, Per: time.Hour, Burst: 1}
		spec, err := errand.RateLimitSpec(limit)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.(errandstore.LimiterStore).LimiterTake(ctx, &errandstore.LimiterTakeParams{Takes: []errandstore.LimiterTake{{Name: limit.Name(), Spec: spec}}}); err != nil {
			t.Fatal(err)
		}
		for range 3 {
			enqueue(t, c, "task", nil)
		}
		if r := workOne(t, c, nil); r.Result != errand.ResultSucceeded {
			t.Fatalf("first WorkOne: %s; want succeeded", r.Result)
		}
		if r := workOne(t, c, nil); r.Result != errand.ResultIdle {
			t.Fatalf("WorkOne over the limit: %s; want idle", r.Result)
		}
		if r := workOne(t, c, &errand.WorkOneOpts{Queues: []string{"other", errand.DefaultQueue}}); r.Result != errand.ResultIdle {
			t.Fatalf("WorkOne of two queues over the limit: %s; want idle", r.Result)
		}
		clock.Advance(time.Hour)
		if r := workOne(t, c, nil); r.Result != errand.ResultSucceeded {
			t.Fatalf("WorkOne an hour later: %s; want succeeded", r.Result)
		}
	})
}

// TestWorkOneHonoursStoredRetryBudget: with a retry budget of no retries
// kept in the store for its kind, WorkOne leaves a due retry waiting (idle)
// and still claims a first attempt.
func TestWorkOneHonoursStoredRetryBudget(t *testing.T) {
	eachJobStore(t, func(t *testing.T, s errandstore.TxStore[*sql.Tx], clock *errandtest.Clock) {
		ctx := context.Background()
		kinds := errand.NewKinds()
		kinds.HandleRaw("task", errand.HandlerFunc(func(context.Context, *errandtype.Job) error { return errors.New("flaky") }),
			&errand.KindOpts{RetryPolicy: &errand.RetryPolicy{Base: time.Second, Max: time.Second}})
		c := newClient(t, s, &errand.Config{Kinds: kinds, Clock: clock})
		failed := enqueue(t, c, "task", nil)
		if r := workOne(t, c, nil); r.Result != errand.ResultRetrying {
			t.Fatalf("first attempt: %s; want retrying", r.Result)
		}
		clock.Advance(time.Minute) // the retry is due
		budget := errand.RetryBudget{Kind: "task", Ratio: 0, Min: -1}
		spec, err := errand.RetryBudgetSpec(budget)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.(errandstore.LimiterStore).LimiterTake(ctx, &errandstore.LimiterTakeParams{Takes: []errandstore.LimiterTake{{Name: budget.Name(), Spec: spec}}}); err != nil {
			t.Fatal(err)
		}
		if r := workOne(t, c, nil); r.Result != errand.ResultIdle {
			t.Fatalf("WorkOne with the retry over budget: %s; want idle", r.Result)
		}
		first := enqueue(t, c, "task", nil)
		r := workOne(t, c, nil)
		if r.JobID == nil || *r.JobID != first.ID {
			t.Fatalf("WorkOne with a first attempt waiting ran %v; want %s, not the retry %s", r.JobID, first.ID, failed.ID)
		}
	})
}

// TestWorkOneHonoursBreakers: WorkOne's failures open the breaker of its
// kind's dependency; then WorkOne leaves the kind's jobs waiting (idle)
// until the cool-down, when one probe runs and its success closes it.
func TestWorkOneHonoursBreakers(t *testing.T) {
	eachJobStore(t, func(t *testing.T, s errandstore.TxStore[*sql.Tx], clock *errandtest.Clock) {
		down := true
		c := smtpClient(t, s, clock, func(context.Context, *errandtype.Job) error {
			if down {
				return errors.New("dial smtp: connection refused")
			}
			return nil
		})
		for range 5 {
			enqueue(t, c, "send_email", nil)
		}
		for i := range 3 {
			if r := workOne(t, c, nil); r.Result != errand.ResultRetrying {
				t.Fatalf("attempt %d: %s; want retrying", i, r.Result)
			}
		}
		if st := breakerState(t, c, "smtp"); st != errandtype.BreakerOpen {
			t.Fatalf("breaker after 3 failures of WorkOne: %s; want open", st)
		}
		if r := workOne(t, c, nil); r.Result != errand.ResultIdle {
			t.Fatalf("WorkOne with smtp's breaker open: %s; want idle", r.Result)
		}
		down = false
		clock.Advance(47 * time.Second)
		if r := workOne(t, c, nil); r.Result != errand.ResultSucceeded {
			t.Fatalf("probe after the cool-down: %s; want succeeded", r.Result)
		}
		if st := breakerState(t, c, "smtp"); st != errandstore.BreakerClosed {
			t.Fatalf("breaker after the probe: %s; want closed", st)
		}
		if r := workOne(t, c, nil); r.Result != errand.ResultSucceeded {
			t.Fatalf("WorkOne after the breaker closed: %s; want succeeded", r.Result)
		}
	})
}
