package errand_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtest"
	"github.com/errandhq/errand/errandtype"
)

// TestRemoteClaimsDrawOnTheClusterRateLimit: a remote worker's claims
// (the HTTP API's) take from the rate limit the Workers keep in the store,
// so a queue limited to 2 an hour starts no more than that however its jobs
// are claimed; a queue no Worker limits is not held back.
func TestRemoteClaimsDrawOnTheClusterRateLimit(t *testing.T) {
	eachJobStore(t, func(t *testing.T, s errandstore.TxStore[*sql.Tx], clock *errandtest.Clock) {
		ctx := context.Background()
		c := remoteClient(t, s, clock)
		limit := errand.RateLimit{Queue: errand.DefaultQueue, Limit: 2, Per: time.Hour, Burst: 2}
		spec, err := errand.RateLimitSpec(limit)
		if err != nil {
			t.Fatal(err)
		}
		ls := s.(errandstore.LimiterStore)
		// A Worker with the limit records its rule with its first take.
		if _, err := ls.LimiterTake(ctx, &errandstore.LimiterTakeParams{Takes: []errandstore.LimiterTake{{Name: limit.Name(), Spec: spec}}}); err != nil {
			t.Fatal(err)
		}
		for range 5 {
			enqueue(t, c, "task", nil)
			enqueue(t, c, "task", &errand.EnqueueOpts{Queue: "free"})
		}
		claim := func(queue string) int {
			t.Helper()
			js, err := c.Claim(ctx, &errand.ClaimOpts{Queue: queue, Kinds: []string{"task"}, Owner: "node-7", Limit: 5})
			if err != nil {
				t.Fatal(err)
			}
			return len(js)
		}
		if n := claim(errand.DefaultQueue); n != 2 {
			t.Fatalf("first claim took %d jobs; want the burst, 2", n)
		}
		if n := claim(errand.DefaultQueue); n != 0 {
			t.Fatalf("claim with no token took %d jobs; want none", n)
		}
		if n := claim("free"); n != 5 {
			t.Fatalf("claim of a queue without a limit took %d jobs; want 5", n)
		}
		clock.Advance(30 * time.Minute) // one token, at 2 an hour
		if n := claim(errand.DefaultQueue); n != 1 {
			t.Fatalf("claim after half an hour took %d jobs; want 1", n)
		}
		rs, err := ls.LimiterList(ctx, &errandstore.LimiterListParams{})
		if err != nil || len(rs) != 1 || rs[0].Tokens > 0.01 {
			t.Fatalf("buckets after the claims: %+v, %v; want one, spent", rs, err)
		}
	})
}

// TestRetryBudgetLeavesFirstAttemptsAlone: a retry budget with 2 tokens
// lets a claim take 2 retries, and as many first attempts as it asks for:
// the budget bounds retries, not the claim.
func TestRetryBudgetLeavesFirstAttemptsAlone(t *testing.T) {
	eachJobStore(t, func(t *testing.T, s errandstore.TxStore[*sql.Tx], clock *errandtest.Clock) {
		ctx := context.Background()
		c := remoteClient(t, s, clock)
		claim := func(n int) []*errandtype.Job {
			t.Helper()
			js, err := c.Claim(ctx, &errand.ClaimOpts{Kinds: []string{"task"}, Owner: "node-7", Limit: n})
			if err != nil {
				t.Fatal(err)
			}
			return js
		}
		for range 3 {
			enqueue(t, c, "task", nil)
		}
		for _, j := range claim(3) {
			if _, err := c.Fail(ctx, j.ID, *j.LeaseToken, &errand.FailOpts{Message: "downstream is down"}); err != nil {
				t.Fatal(err)
			}
		}
		clock.Advance(time.Minute) // the 3 retries are due
		budget := errand.RetryBudget{Kind: "task", Ratio: 0, Window: time.Minute, Min: 2}
		spec, err := errand.RetryBudgetSpec(budget)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.(errandstore.LimiterStore).LimiterTake(ctx, &errandstore.LimiterTakeParams{Takes: []errandstore.LimiterTake{{Name: budget.Name(), Spec: spec}}}); err != nil {
			t.Fatal(err)
		}
		for range 6 {
			enqueue(t, c, "task", nil)
		}
		retries, firsts := 0, 0
		for _, j := range claim(10) {
			if j.Attempt > 1 {
				retries++
			} else {
				firsts++
			}
		}
		if retries != 2 || firsts != 6 {
			t.Fatalf("claim of 10 took %d retries and %d first attempts; want the budget's 2 and all 6", retries, firsts)
		}
		if js := claim(10); len(js) != 0 {
			t.Fatalf("claim with the budget spent took %d jobs; want none (a retry waits)", len(js))
		}
	})
}
