package storetest

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
)

// The concurrency cases run on stores that implement the optional
// [errandstore.ConcurrencyClaimer]; others skip them.
var concurrencyCases = []testCase{
	{"ClaimsNoMoreThanTheLimit", testConcurrencyLimit},
	{"ExpiredLeasesFreeSlots", testConcurrencyLeaseExpiry},
	{"ExactAcrossStores", testConcurrencyAcrossStores},
	{"AdaptiveLimitMoves", testConcurrencyAdaptive},
	{"Refusals", testConcurrencyRefusals},
	{"CountsOtherKinds", testConcurrencyCounts},
}

const concName = "concurrency:export"

func (e *env) concurrency() errandstore.ConcurrencyClaimer {
	e.t.Helper()
	cc, ok := e.s.(errandstore.ConcurrencyClaimer)
	if !ok {
		e.t.Skip("the store is not an errandstore.ConcurrencyClaimer")
	}
	return cc
}

func concSpec(limit float64) errandtype.LimiterSpec {
	return errandtype.LimiterSpec{Mode: errandtype.LimiterModeConcurrency, Rate: limit}
}

func limitedClaim(spec errandtype.LimiterSpec, want int) *errandstore.JobClaimLimitedParams {
	return &errandstore.JobClaimLimitedParams{Name: concName, Spec: spec, Claim: errandstore.JobClaimParams{
		Queues: []string{errand.DefaultQueue}, Kinds: []string{"export"}, Limit: want, Lease: lease, Owner: owner}}
}

func (e *env) claimLimited(cc errandstore.ConcurrencyClaimer, spec errandtype.LimiterSpec, want int) *errandstore.JobClaimLimitedResult {
	e.t.Helper()
	r, err := cc.JobClaimLimited(e.ctx, limitedClaim(spec, want))
	if err != nil {
		e.t.Fatalf("JobClaimLimited: %v", err)
	}
	return r
}

// insertExports inserts n jobs of kind export and one of kind email.
func (e *env) insertExports(n int) {
	e.t.Helper()
	ps := []*errandstore.JobInsertParams{newJob("email-1")}
	for i := range n {
		p := newJob(fmt.Sprintf("export-%02d", i))
		p.Kind = "export"
		ps = append(ps, p)
	}
	e.insert(ps...)
}

func wantLimited(t *testing.T, what string, r *errandstore.JobClaimLimitedResult, jobs, running, slots int) {
	t.Helper()
	if len(r.Jobs) != jobs || r.Running != running || r.Slots != slots || r.Room != jobs {
		t.Fatalf("%s: claimed %d with %d running of %d slots (room %d); want %d with %d running of %d", what, len(r.Jobs), r.Running, r.Slots, r.Room, jobs, running, slots)
	}
	for _, j := range r.Jobs {
		if j.Kind != "export" || j.State != errandtype.StateRunning || j.Attempt != 1 {
			t.Fatalf("%s: claimed %s (%s, %s, attempt %d); want running exports on their first attempt", what, j.ID, j.Kind, j.State, j.Attempt)
		}
	}
}

// testConcurrencyLimit: a limited claim takes no more than the limit less
// the kind's running jobs, leaves the rest queued with their attempts
// unused, counts a claim that got no room as denied, and takes a slot
// again once a job finishes. The list shows the running jobs and the free
// slots.
func testConcurrencyLimit(t *testing.T, h harness) {
	e := open(t, h)
	cc := e.concurrency()
	e.insertExports(5)
	spec := concSpec(2)
	r := e.claimLimited(cc, spec, 10)
	wantLimited(t, "first claim", r, 2, 0, 2)
	wantLimited(t, "claim at the limit", e.claimLimited(cc, spec, 10), 0, 2, 2)
	if j := e.get("export-02"); j.State != errandtype.StateQueued || j.Attempt != 0 {
		t.Fatalf("a job over the limit is %s, attempt %d; want queued, attempt 0", j.State, j.Attempt)
	}
	b := e.bucket(concName)
	if b.Running == nil || *b.Running != 2 || b.Tokens != 0 || b.Denied != 1 || b.Spec.Rate != 2 {
		t.Fatalf("bucket at the limit: %+v (running %v); want 2 running, 0 tokens, 1 denied, limit 2", b, b.Running)
	}
	e.recordOK(succeeded(r.Jobs[0]))
	wantLimited(t, "claim after a success", e.claimLimited(cc, spec, 10), 1, 1, 2)
	// A higher limit, given by the last claimer, lets more run.
	wantLimited(t, "claim under a raised limit", e.claimLimited(cc, concSpec(4), 10), 2, 2, 4)
	if got := e.claim(10); len(got) != 1 || got[0].ID != "email-1" {
		t.Fatalf("a plain claim after took %v; want email-1 alone, the kinds' claims are the caller's to split", ids(got))
	}
}

// testConcurrencyLeaseExpiry: the slots of jobs whose worker died come
// back when their leases expire, without anything written for them.
func testConcurrencyLeaseExpiry(t *testing.T, h harness) {
	e := open(t, h)
	cc := e.concurrency()
	e.insertExports(4)
	spec := concSpec(2)
	wantLimited(t, "first claim", e.claimLimited(cc, spec, 10), 2, 0, 2)
	e.clock.Advance(lease - time.Microsecond)
	wantLimited(t, "claim inside the leases", e.claimLimited(cc, spec, 10), 0, 2, 2)
	e.clock.Advance(time.Microsecond)
	wantLimited(t, "claim once the leases expired", e.claimLimited(cc, spec, 10), 2, 0, 2)
}

// testConcurrencyAcrossStores has limited claimers in two stores on one
// database race while the clock stands still: together they start exactly
// the limit, never more, and exactly the slots that successes free.
func testConcurrencyAcrossStores(t *testing.T, h harness) {
	e := open(t, h)
	cc := e.concurrency()
	s2, ok := e.second().(errandstore.ConcurrencyClaimer)
	if !ok {
		t.Fatal("the second store is not an errandstore.ConcurrencyClaimer")
	}
	stores := []errandstore.ConcurrencyClaimer{cc, s2}
	e.insertExports(40)
	spec := concSpec(5)
	race := func() []*errandtype.Job {
		var mu sync.Mutex
		var all []*errandtype.Job
		var wg sync.WaitGroup
		for r := range 8 {
			wg.Go(func() {
				for range 3 {
					got, err := stores[r%2].JobClaimLimited(e.ctx, limitedClaim(spec, 3))
					if err != nil {
						t.Errorf("JobClaimLimited: %v", err)
						return
					}
					mu.Lock()
					all = append(all, got.Jobs...)
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		return all
	}
	first := race()
	if len(first) != 5 {
		t.Fatalf("24 racing claims of 3 under a limit of 5 started %d jobs, want 5", len(first))
	}
	e.recordOK(succeeded(first[0]))
	e.recordOK(succeeded(first[1]))
	if got := race(); len(got) != 2 {
		t.Fatalf("racing claims after 2 successes started %d jobs, want 2", len(got))
	}
}

// testConcurrencyAdaptive: an adaptive limit's row moves by
// LimiterAdjust, as an adaptive rate's does, and claims follow it: a
// throttle lowers it (10 to 9), a provider's reset time holds every claim
// until it passes, and a claim keeps the stored limit within its bounds.
func testConcurrencyAdaptive(t *testing.T, h harness) {
	e := open(t, h)
	cc := e.concurrency()
	e.insertExports(20)
	spec := concSpec(10)
	spec.Floor, spec.Ceiling = 2, 50
	wantLimited(t, "first claim", e.claimLimited(cc, spec, 1), 1, 0, 10)
	r, err := e.limiters().LimiterAdjust(e.ctx, &errandstore.LimiterAdjustParams{Name: concName,
		Signal: errandtype.LimiterSignal{Throttled: 1, Class: "http_429", RetryAfter: 5 * time.Second}})
	if err != nil {
		t.Fatalf("LimiterAdjust: %v", err)
	}
	if r == nil || !r.Moved || r.Limiter == nil || r.Limiter.Spec.Rate != 9 || r.Limiter.Adaptive == nil || !r.Limiter.Adaptive.HeldUntil.Equal(e.now().Add(5*time.Second)) {
		t.Fatalf("after a throttle with a reset time of 5s: %+v; want a limit of 9 held until %s", r, e.now().Add(5*time.Second))
	}
	wantLimited(t, "claim during the hold", e.claimLimited(cc, spec, 10), 0, 1, 0)
	e.clock.Advance(5 * time.Second)
	wantLimited(t, "claim after the hold", e.claimLimited(cc, spec, 20), 8, 1, 9)
	if b := e.bucket(concName); b.Spec.Rate != 9 || *b.Running != 9 || b.Tokens != 0 || b.Adaptive == nil {
		t.Fatalf("bucket after: %+v; want an adaptive limit of 9 with 9 running", b)
	}
}

// testConcurrencyRefusals: a limited claim without kinds or with another
// mode's rule, and a take from a concurrency limit, are refused, and
// nothing is written.
func testConcurrencyRefusals(t *testing.T, h harness) {
	e := open(t, h)
	cc := e.concurrency()
	e.insertExports(1)
	var ie *errandtype.InputError
	noKinds := limitedClaim(concSpec(1), 1)
	noKinds.Claim.Kinds = nil
	rate := limitedClaim(rateSpec(1, 1), 1)
	zero := limitedClaim(concSpec(0), 1)
	uncounted := limitedClaim(concSpec(1), 1)
	uncounted.Counts = []string{"email"}
	for what, p := range map[string]*errandstore.JobClaimLimitedParams{"no kinds": noKinds, "a rate limit's rule": rate, "a limit of 0": zero,
		"a claimed kind it does not count": uncounted} {
		if _, err := cc.JobClaimLimited(e.ctx, p); !errors.As(err, &ie) {
			t.Errorf("JobClaimLimited with %s: %v; want an *InputError", what, err)
		}
	}
	_, err := e.limiters().LimiterTake(e.ctx, &errandstore.LimiterTakeParams{Takes: []errandstore.LimiterTake{{Name: concName, Spec: concSpec(1), Want: 1}}})
	if !errors.As(err, &ie) {
		t.Errorf("LimiterTake from a concurrency limit: %v; want an *InputError", err)
	}
	if rs := e.limiterList(); len(rs) != 0 {
		t.Fatalf("refused calls left buckets: %v", rs)
	}
	if j := e.get("export-00"); j.State != errandtype.StateQueued {
		t.Fatalf("refused calls left the job %s; want queued", j.State)
	}
}

// testConcurrencyCounts: a limit that counts several kinds (a dependency's)
// counts the running jobs of all of them, the kinds it claims and the
// others, keeps the kinds in its row, and shows them running together.
func testConcurrencyCounts(t *testing.T, h harness) {
	e := open(t, h)
	cc := e.concurrency()
	e.insertExports(4) // and email-1
	const dep = "concurrency:dependency:files"
	counts := []string{"email", "export"}
	claim := func(kinds []string, want int) *errandstore.JobClaimLimitedResult {
		t.Helper()
		p := &errandstore.JobClaimLimitedParams{Name: dep, Spec: concSpec(3), Counts: counts, Claim: errandstore.JobClaimParams{
			Queues: []string{errand.DefaultQueue}, Kinds: kinds, Limit: want, Lease: lease, Owner: owner}}
		r, err := cc.JobClaimLimited(e.ctx, p)
		if err != nil {
			t.Fatalf("JobClaimLimited: %v", err)
		}
		return r
	}
	if r := claim([]string{"email"}, 10); len(r.Jobs) != 1 || r.Running != 0 || r.Room != 3 {
		t.Fatalf("claim of email: %d jobs, %d running, room %d; want email-1 alone, room 3", len(r.Jobs), r.Running, r.Room)
	}
	// The running email takes one of the three slots the exports share.
	if r := claim([]string{"export"}, 10); len(r.Jobs) != 2 || r.Running != 1 || r.Slots != 3 || r.Room != 2 {
		t.Fatalf("claim of exports beside a running email: %d jobs, %d running of %d slots, room %d; want 2, 1 of 3, room 2", len(r.Jobs), r.Running, r.Slots, r.Room)
	}
	if r := claim([]string{"export"}, 10); len(r.Jobs) != 0 || r.Running != 3 {
		t.Fatalf("claim at the limit: %d jobs with %d running; want none with 3", len(r.Jobs), r.Running)
	}
	b := e.bucket(dep)
	if b.Running == nil || *b.Running != 3 || b.Tokens != 0 || !slices.Equal(b.Counts, counts) {
		t.Fatalf("bucket: running %v, tokens %g, counts %v; want 3 running, 0 tokens, counts %v", b.Running, b.Tokens, b.Counts, counts)
	}
	// A kind's own limit, written with no counts, counts its kind.
	e.claimLimited(cc, concSpec(1), 1)
	if b := e.bucket(concName); !slices.Equal(b.Counts, []string{"export"}) || b.Running == nil || *b.Running != 2 {
		t.Fatalf("a kind's limit: counts %v, running %v; want [export], 2", b.Counts, b.Running)
	}
}
