package errand_test

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtest"
	"github.com/errandhq/errand/errandtype"
)

// recordLimit writes rl's bucket as a Worker with the limit leaves it.
func recordLimit(t *testing.T, s errandstore.TxStore[*sql.Tx], rl errand.RateLimit) {
	t.Helper()
	spec, err := rl.Spec()
	if err != nil {
		t.Fatal(err)
	}
	take := &errandstore.LimiterTakeParams{Takes: []errandstore.LimiterTake{{Name: rl.Name(), Spec: spec}}}
	if _, err := s.(errandstore.LimiterStore).LimiterTake(context.Background(), take); err != nil {
		t.Fatal(err)
	}
}

// TestRemoteSuccessesRaiseAdaptiveLimit: a kind worked only by remote
// workers grows its adaptive limit: their claims the limit held back and
// their acknowledged successes move it as a Worker's do, an interval
// apart on the clock; so do those of a dependency's kinds, acknowledged
// in a batch.
func TestRemoteSuccessesRaiseAdaptiveLimit(t *testing.T) {
	eachJobStore(t, func(t *testing.T, s errandstore.TxStore[*sql.Tx], clock *errandtest.Clock) {
		ctx := context.Background()
		c := newClient(t, s, &errand.Config{Clock: clock, Kinds: dependencyKinds(nil)})
		recordLimit(t, s, errand.RateLimit{Kind: "c", Limit: 2, Per: time.Second, Floor: 1, Ceiling: 100})
		recordLimit(t, s, errand.RateLimit{Dependency: "api", Limit: 2, Per: time.Second, Floor: 1, Ceiling: 100})
		for i := range 20 {
			for _, k := range []string{"a", "b", "c"} {
				enqueue(t, c, k, &errand.EnqueueOpts{ID: fmt.Sprintf("%s%d", k, i)})
			}
		}
		ackOne := func(kinds ...string) {
			t.Helper()
			jobs, err := c.Claim(ctx, &errand.ClaimOpts{Kinds: kinds, Owner: "remote", Limit: 5})
			if err != nil || len(jobs) == 0 {
				t.Fatalf("claim of %v: %v, %v", kinds, jobs, err)
			}
			leases := make([]errandstore.JobLease, len(jobs))
			for i, j := range jobs {
				leases[i] = errandstore.JobLease{ID: j.ID, LeaseToken: *j.LeaseToken}
			}
			if len(kinds) == 1 {
				_, err = c.Ack(ctx, jobs[0].ID, *jobs[0].LeaseToken)
			} else {
				_, err = c.AckMany(ctx, leases)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		for _, want := range []float64{4, 8, 16} {
			ackOne("c")
			ackOne("a", "b")
			for _, name := range []string{"kind:c", "dependency:api"} {
				if got := storedRate(t, s.(errandstore.LimiterStore), name); got != want {
					t.Fatalf("%s after held-back remote claims and their successes: rate %g, want %g", name, got, want)
				}
			}
			clock.Advance(time.Second)
		}
	})
}

// dependencyClaims returns a client of dependencyKinds, whose dependency
// api has an adaptive limit of 20/s, with 5 jobs each of kinds a and b
// enqueued, and a remote worker's claim of up to 5 jobs of one kind.
func dependencyClaims(t *testing.T, s errandstore.TxStore[*sql.Tx], clock *errandtest.Clock) (*errand.Client[*sql.Tx], func(kind string) []*errandtype.Job) {
	t.Helper()
	c := newClient(t, s, &errand.Config{Clock: clock, Kinds: dependencyKinds(nil)})
	recordLimit(t, s, errand.RateLimit{Dependency: "api", Limit: 20, Per: time.Second, Floor: 1, Ceiling: 100})
	for i := range 5 {
		for _, k := range []string{"a", "b"} {
			enqueue(t, c, k, &errand.EnqueueOpts{ID: fmt.Sprintf("%s%d", k, i)})
		}
	}
	return c, func(kind string) []*errandtype.Job {
		t.Helper()
		jobs, err := c.Claim(context.Background(), &errand.ClaimOpts{Kinds: []string{kind}, Owner: "remote", Limit: 5})
		if err != nil {
			t.Fatal(err)
		}
		return jobs
	}
}

// TestRemoteClaimsDrawOnDependencyLimit: a remote worker's claim of the
// kinds of a dependency takes from the dependency's bucket, shared by its
// kinds, and a throttle one of them reports holds the other.
func TestRemoteClaimsDrawOnDependencyLimit(t *testing.T) {
	eachJobStore(t, func(t *testing.T, s errandstore.TxStore[*sql.Tx], clock *errandtest.Clock) {
		ctx := context.Background()
		c, claim := dependencyClaims(t, s, clock)
		// The burst of 20/s is 2, for both kinds.
		if n := len(claim("a")); n != 2 {
			t.Fatalf("a's claim took %d jobs; want the dependency's burst, 2", n)
		}
		if n := len(claim("b")); n != 0 {
			t.Fatalf("b's claim after a's took %d jobs; want none, the dependency's tokens are spent", n)
		}
		clock.Advance(100 * time.Millisecond)
		jobs := claim("b")
		if len(jobs) != 2 {
			t.Fatalf("b's claim 100ms later took %d jobs; want 2", len(jobs))
		}
		if _, err := c.Fail(ctx, jobs[0].ID, *jobs[0].LeaseToken, &errand.FailOpts{Class: "http_429", RetryAfter: 2 * time.Second}); err != nil {
			t.Fatal(err)
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
