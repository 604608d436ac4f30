package storetest

import (
	"errors"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
)

// The limiter cases run on stores that implement the optional
// [errandstore.LimiterStore]; others skip them, except the claim that leaves
// out a kind's retries, which every store's claim must honour.
var limiterCases = []testCase{
	{"NewBucketStartsFull", testLimiterNewBucket},
	{"RefillOnTheStoreClock", testLimiterRefill},
	{"GiveBackUnused", testLimiterGive},
	{"SpecLastWriterWins", testLimiterLastWriter},
	{"RetryBudget", testLimiterRetryBudget},
	{"List", testLimiterList},
	{"Refusals", testLimiterRefusals},
	{"GrantsNeverExceedTokensAcrossStores", testLimiterConcurrent},
	{"RetryBudgetExactAcrossStores", testRetryBudgetConcurrent},
	{"ClaimSkipRetryKinds", testClaimSkipRetryKinds},
	{"AdjustReportsMoved", testLimiterAdjustMoved},
}

func (e *env) limiters() errandstore.LimiterStore {
	e.t.Helper()
	ls, ok := e.s.(errandstore.LimiterStore)
	if !ok {
		e.t.Skip("the store is not an errandstore.LimiterStore")
	}
	return ls
}

// rateSpec refills rate tokens a second up to burst.
func rateSpec(rate, burst float64) errandtype.LimiterSpec {
	return errandtype.LimiterSpec{Mode: errandtype.LimiterModeRate, Rate: rate, Burst: burst}
}

func (e *env) take(takes ...errandstore.LimiterTake) []errandstore.LimiterGrant {
	e.t.Helper()
	gs, err := e.limiters().LimiterTake(e.ctx, &errandstore.LimiterTakeParams{Takes: takes})
	if err != nil {
		e.t.Fatalf("LimiterTake: %v", err)
	}
	if len(gs) != len(takes) {
		e.t.Fatalf("LimiterTake returned %d grants for %d takes", len(gs), len(takes))
	}
	return gs
}

func (e *env) takeOne(name string, spec errandtype.LimiterSpec, want int) errandstore.LimiterGrant {
	e.t.Helper()
	return e.take(errandstore.LimiterTake{Name: name, Spec: spec, Want: want})[0]
}

func (e *env) give(gives ...errandstore.LimiterGive) {
	e.t.Helper()
	if err := e.limiters().LimiterGive(e.ctx, &errandstore.LimiterGiveParams{Gives: gives}); err != nil {
		e.t.Fatalf("LimiterGive: %v", err)
	}
}

func (e *env) limiterList() []*errandtype.LimiterRecord {
	e.t.Helper()
	rs, err := e.limiters().LimiterList(e.ctx, &errandstore.LimiterListParams{})
	if err != nil {
		e.t.Fatalf("LimiterList: %v", err)
	}
	if rs == nil {
		e.t.Fatal("LimiterList returned nil; want a non-nil list")
	}
	return rs
}

func (e *env) bucket(name string) *errandtype.LimiterRecord {
	e.t.Helper()
	for _, r := range e.limiterList() {
		if r.Name == name {
			return r
		}
	}
	e.t.Fatalf("LimiterList has no bucket %s", name)
	return nil
}

func wantGrant(t *testing.T, what string, got, want errandstore.LimiterGrant) {
	t.Helper()
	if got != want {
		t.Fatalf("%s: grant %+v, want %+v", what, got, want)
	}
}

func testLimiterNewBucket(t *testing.T, h harness) {
	e := open(t, h)
	spec := rateSpec(10, 5)
	// A new bucket is full: 5 of the 8 wanted, then none, and a token is
	// due in a tenth of a second.
	wantGrant(t, "first take", e.takeOne("queue:q", spec, 8), errandstore.LimiterGrant{Granted: 5, Tokens: 0, Wait: 100 * time.Millisecond})
	wantGrant(t, "second take", e.takeOne("queue:q", spec, 8), errandstore.LimiterGrant{Granted: 0, Tokens: 0, Wait: 100 * time.Millisecond})
	// Wanting nothing takes nothing and is not a denial.
	wantGrant(t, "take of none", e.takeOne("queue:q", spec, 0), errandstore.LimiterGrant{Granted: 0, Tokens: 0, Wait: 100 * time.Millisecond})
	want := &errandtype.LimiterRecord{Name: "queue:q", Spec: spec, Tokens: 0, Denied: 1, UpdatedAt: e.now()}
	if got := e.bucket("queue:q"); !reflect.DeepEqual(got, want) {
		t.Fatalf("bucket = %+v, want %+v", *got, *want)
	}
}

func testLimiterRefill(t *testing.T, h harness) {
	e := open(t, h)
	spec := rateSpec(10, 5)
	e.takeOne("kind:k", spec, 5)
	// A quarter of a second refills two and a half tokens: two whole ones.
	e.clock.Advance(250 * time.Millisecond)
	wantGrant(t, "after 250ms", e.takeOne("kind:k", spec, 8), errandstore.LimiterGrant{Granted: 2, Tokens: 0.5, Wait: 50 * time.Millisecond})
	// The level is read as of now without taking.
	e.clock.Advance(20 * time.Millisecond)
	if got := e.bucket("kind:k").Tokens; got < 0.7-1e-9 || got > 0.7+1e-9 {
		t.Fatalf("level after 20ms more = %v, want 0.7", got)
	}
	// A long quiet spell refills no more than the burst.
	e.clock.Advance(time.Hour)
	wantGrant(t, "after an hour", e.takeOne("kind:k", spec, 8), errandstore.LimiterGrant{Granted: 5, Tokens: 0, Wait: 100 * time.Millisecond})
	// A clock that goes back refills nothing, and the time it went back
	// is not refilled twice when it comes forward again.
	e.clock.Advance(-time.Second)
	wantGrant(t, "clock back", e.takeOne("kind:k", spec, 1), errandstore.LimiterGrant{Granted: 0, Tokens: 0, Wait: 100 * time.Millisecond})
	e.clock.Advance(time.Second + 100*time.Millisecond)
	wantGrant(t, "clock forward", e.takeOne("kind:k", spec, 8), errandstore.LimiterGrant{Granted: 1, Tokens: 0, Wait: 100 * time.Millisecond})
}

func testLimiterGive(t *testing.T, h harness) {
	e := open(t, h)
	spec := rateSpec(1, 5)
	e.takeOne("queue:q", spec, 5)
	e.give(errandstore.LimiterGive{Name: "queue:q", Amount: 3})
	if got := e.bucket("queue:q").Tokens; got != 3 {
		t.Fatalf("level after giving back 3 = %v, want 3", got)
	}
	// A rate bucket holds no more than its burst.
	e.give(errandstore.LimiterGive{Name: "queue:q", Amount: 10})
	wantGrant(t, "take after giving too much", e.takeOne("queue:q", spec, 9), errandstore.LimiterGrant{Granted: 5, Tokens: 0, Wait: time.Second})
	// A bucket nobody took from is not created by a give.
	e.give(errandstore.LimiterGive{Name: "queue:none", Amount: 1})
	if rs := e.limiterList(); len(rs) != 1 {
		t.Fatalf("LimiterList after giving to an unknown bucket has %d buckets, want 1", len(rs))
	}
}

func testLimiterLastWriter(t *testing.T, h harness) {
	e := open(t, h)
	e.takeOne("kind:k", rateSpec(10, 5), 1)
	// Another worker with a smaller burst: the bucket takes its spec,
	// and holds no more than its burst.
	narrow := rateSpec(2, 2)
	wantGrant(t, "take with the new spec", e.takeOne("kind:k", narrow, 0), errandstore.LimiterGrant{Granted: 0, Tokens: 2, Wait: 0})
	if got := e.bucket("kind:k"); got.Spec != narrow || got.Tokens != 2 {
		t.Fatalf("bucket after a new spec = %+v, want spec %+v and 2 tokens", *got, narrow)
	}
}

func testLimiterRetryBudget(t *testing.T, h harness) {
	e := open(t, h)
	spec := errandtype.LimiterSpec{Mode: errandtype.LimiterModeRetryBudget, Ratio: 0.5, Min: 2, Window: 10 * time.Second}
	// A new budget holds Min.
	g := e.takeOne("retry:k", spec, 5)
	if g.Granted != 2 || g.Tokens != 0 || g.Wait <= 0 {
		t.Fatalf("first take = %+v, want 2 granted, 0 left and a wait", g)
	}
	// Spent: none, until first attempts deposit.
	if g := e.takeOne("retry:k", spec, 5); g.Granted != 0 {
		t.Fatalf("take of a spent budget = %+v, want none", g)
	}
	e.give(errandstore.LimiterGive{Name: "retry:k", Amount: 0.5 * 8}) // 8 first attempts
	if g := e.takeOne("retry:k", spec, 10); g.Granted != 4 || g.Tokens != 0 {
		t.Fatalf("take after 8 first attempts = %+v, want 4 granted, 0 left", g)
	}
	// With no first attempts the level climbs back towards Min (as if
	// towards Min+1): 3·(1-e^-1) ≈ 1.9 in one window, one whole token.
	e.clock.Advance(10 * time.Second)
	st := errandtype.LimiterState{Tokens: 0, At: e.now().Add(-10 * time.Second)}
	wantState, wantGranted, wantWait := spec.Take(st, e.now(), 10)
	wantGrant(t, "take a window later", e.takeOne("retry:k", spec, 10),
		errandstore.LimiterGrant{Granted: wantGranted, Tokens: wantState.Tokens, Wait: wantWait})
	if wantGranted != 1 || wantWait <= 0 {
		t.Fatalf("the spec grants %d a window later and waits %s, want 1 and a wait", wantGranted, wantWait)
	}
	// Deposits fade with the window: a budget filled long ago is back
	// at Min.
	e.give(errandstore.LimiterGive{Name: "retry:k", Amount: 100})
	e.clock.Advance(time.Hour)
	if got := e.bucket("retry:k").Tokens; got < 2-1e-6 || got > 2+1e-6 {
		t.Fatalf("level an hour after a deposit = %v, want Min (2)", got)
	}
}

func testLimiterList(t *testing.T, h harness) {
	e := open(t, h)
	if rs := e.limiterList(); len(rs) != 0 {
		t.Fatalf("LimiterList of none = %v, want empty", rs)
	}
	budget := errandtype.LimiterSpec{Mode: errandtype.LimiterModeRetryBudget, Ratio: 0.1, Min: 10, Window: time.Minute}
	e.take(errandstore.LimiterTake{Name: "retry:b", Spec: budget, Want: 1},
		errandstore.LimiterTake{Name: "queue:a", Spec: rateSpec(1, 1), Want: 2})
	e.takeOne("queue:a", rateSpec(1, 1), 1)
	e.clock.Advance(time.Second)
	t1 := e.now()
	e.takeOne("kind:c", rateSpec(1, 3), 1)
	rs := e.limiterList()
	var names []string
	for _, r := range rs {
		names = append(names, r.Name)
	}
	if !reflect.DeepEqual(names, []string{"kind:c", "queue:a", "retry:b"}) {
		t.Fatalf("LimiterList names = %v, want [kind:c queue:a retry:b]", names)
	}
	if rs[0].Tokens != 2 || rs[0].Denied != 0 || !rs[0].UpdatedAt.Equal(t1) {
		t.Errorf("kind:c = %+v, want 2 tokens, no denial, updated at %s", *rs[0], t1)
	}
	// queue:a: one granted, one denied, then refilled by a second.
	if rs[1].Tokens != 1 || rs[1].Denied != 1 || !rs[1].UpdatedAt.Equal(T0) {
		t.Errorf("queue:a = %+v, want 1 token, 1 denial, updated at %s", *rs[1], T0)
	}
	if rs[2].Spec != budget {
		t.Errorf("retry:b spec = %+v, want %+v", rs[2].Spec, budget)
	}
}

func testLimiterRefusals(t *testing.T, h harness) {
	e := open(t, h)
	var ie *errandtype.InputError
	for _, p := range []*errandstore.LimiterTakeParams{
		{Takes: []errandstore.LimiterTake{{Name: "", Spec: rateSpec(1, 1), Want: 1}}},
		{Takes: []errandstore.LimiterTake{{Name: "queue:a\x00", Spec: rateSpec(1, 1), Want: 1}}},
		{Takes: []errandstore.LimiterTake{{Name: "queue:a", Spec: rateSpec(0, 1), Want: 1}}},
		{Takes: []errandstore.LimiterTake{{Name: "queue:a", Spec: rateSpec(1, 0.5), Want: 1}}},
		{Takes: []errandstore.LimiterTake{{Name: "queue:a", Spec: rateSpec(1, 1), Want: -1}}},
		{Takes: []errandstore.LimiterTake{{Name: "queue:a", Spec: errandtype.LimiterSpec{Mode: "leaky"}, Want: 1}}},
		{Takes: []errandstore.LimiterTake{{Name: "retry:a", Spec: errandtype.LimiterSpec{Mode: errandtype.LimiterModeRetryBudget, Ratio: 0.1, Window: time.Millisecond}, Want: 1}}},
		{Takes: []errandstore.LimiterTake{{Name: "queue:a", Spec: rateSpec(1, 1), Want: 1}, {Name: "queue:b", Spec: rateSpec(1, 1), Want: 1}, {Name: "queue:a", Spec: rateSpec(1, 1), Want: 1}}},
	} {
		if _, err := e.limiters().LimiterTake(e.ctx, p); !errors.As(err, &ie) {
			t.Errorf("LimiterTake(%+v) = %v, want an *InputError", p.Takes, err)
		}
	}
	if err := e.limiters().LimiterGive(e.ctx, &errandstore.LimiterGiveParams{Gives: []errandstore.LimiterGive{{Name: "queue:a", Amount: -1}}}); !errors.As(err, &ie) {
		t.Errorf("LimiterGive of a negative amount = %v, want an *InputError", err)
	}
	if rs := e.limiterList(); len(rs) != 0 {
		t.Fatalf("refused takes left buckets: %v", rs)
	}
}

// testLimiterConcurrent has takers in two stores on one database race for
// a bucket's tokens while the clock stands still: together they get
// exactly the tokens it holds, never more.
func testLimiterConcurrent(t *testing.T, h harness) {
	e := open(t, h)
	s2, ok := e.second().(errandstore.LimiterStore)
	if !ok {
		t.Fatal("the second store is not an errandstore.LimiterStore")
	}
	stores := []errandstore.LimiterStore{e.limiters(), s2}
	spec := rateSpec(1, 20)
	other := rateSpec(1, 1000)
	race := func() int {
		var mu sync.Mutex
		total := 0
		var wg sync.WaitGroup
		for r := range 8 {
			wg.Go(func() {
				for range 6 {
					// Two buckets per take, named in opposite orders by
					// alternate takers: rows locked in any order must
					// not deadlock.
					takes := []errandstore.LimiterTake{{Name: "queue:q", Spec: spec, Want: 3}, {Name: "kind:k", Spec: other, Want: 1}}
					if r%2 == 1 {
						takes[0], takes[1] = takes[1], takes[0]
					}
					gs, err := stores[r%2].LimiterTake(e.ctx, &errandstore.LimiterTakeParams{Takes: takes})
					if err != nil {
						t.Errorf("LimiterTake: %v", err)
						return
					}
					g := gs[0]
					if r%2 == 1 {
						g = gs[1]
					}
					mu.Lock()
					total += g.Granted
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		return total
	}
	if got := race(); got != 20 {
		t.Fatalf("48 racing takes of 3 from a bucket of 20 granted %d, want 20", got)
	}
	e.clock.Advance(5 * time.Second)
	if got := race(); got != 5 {
		t.Fatalf("racing takes after 5s at 1/s granted %d, want 5", got)
	}
	if got := e.bucket("kind:k").Tokens; got != 1000-96+5 {
		t.Fatalf("kind:k holds %v after 96 takes of 1 and 5s at 1/s, want %d", got, 1000-96+5)
	}
}

// testClaimSkipRetryKinds: a claim that leaves out the retries of a kind
// still claims that kind's first attempts and other kinds' retries, and
// leaves the skipped retries queued, their attempt unused.
func testClaimSkipRetryKinds(t *testing.T, h harness) {
	e := open(t, h)
	a1, a2, b1 := newJob("a-retry"), newJob("a-first"), newJob("b-retry")
	a1.Kind, a2.Kind, b1.Kind = "a", "a", "b"
	e.insert(a1, b1)
	for _, j := range e.claim(2) {
		e.recordOK(retry(j, 0))
	}
	e.insert(a2)
	before := e.get("a-retry")
	js := e.claimWith(&errandstore.JobClaimParams{Queues: []string{errand.DefaultQueue}, Limit: 10, Lease: lease, Owner: owner,
		SkipRetryKinds: []string{"a"}})
	got := map[string]int{}
	for _, j := range js {
		got[j.ID] = j.Attempt
	}
	if want := map[string]int{"a-first": 1, "b-retry": 2}; !reflect.DeepEqual(got, want) {
		t.Fatalf("claim skipping a's retries took %v, want %v", got, want)
	}
	e.unchanged("the skipped retry", before)
	// Without the skip, the retry is claimed.
	if j := e.claimOne("a-retry"); j.Attempt != 2 {
		t.Fatalf("the retry's attempt = %d, want 2", j.Attempt)
	}
}

// testRetryBudgetConcurrent has retries in two stores on one database race
// for a retry budget's tokens, one each, as concurrent failures' retries
// would: together they get exactly the whole tokens it holds, never one
// more on a fraction, and the level never goes below zero.
func testRetryBudgetConcurrent(t *testing.T, h harness) {
	e := open(t, h)
	s2, ok := e.second().(errandstore.LimiterStore)
	if !ok {
		t.Fatal("the second store is not an errandstore.LimiterStore")
	}
	stores := []errandstore.LimiterStore{e.limiters(), s2}
	spec := errandtype.LimiterSpec{Mode: errandtype.LimiterModeRetryBudget, Min: 4, Window: time.Minute}
	var wait time.Duration
	race := func(what string, want int) {
		t.Helper()
		var mu sync.Mutex
		total := 0
		var wg sync.WaitGroup
		for r := range 10 {
			wg.Go(func() {
				gs, err := stores[r%2].LimiterTake(e.ctx, &errandstore.LimiterTakeParams{Takes: []errandstore.LimiterTake{{Name: "retry:k", Spec: spec, Want: 1}}})
				if err != nil {
					t.Errorf("LimiterTake: %v", err)
					return
				}
				mu.Lock()
				defer mu.Unlock()
				total += gs[0].Granted
				if gs[0].Tokens < 0 {
					t.Errorf("%s: a take left %v tokens, below zero", what, gs[0].Tokens)
				}
				if gs[0].Granted == 0 {
					wait = gs[0].Wait
				}
			})
		}
		wg.Wait()
		if total != want {
			t.Fatalf("%s: 10 racing retries were granted %d, want %d", what, total, want)
		}
	}
	race("a new budget of 4", 4)
	// A second later the level is back to about 0.07: not a whole token.
	e.clock.Advance(time.Second)
	race("a second later", 0)
	if got := e.bucket("retry:k").Tokens; got < 0 || got >= 1 {
		t.Fatalf("level a second after the budget was spent = %v, want 0 to 1", got)
	}
	// When the wait a refused take was told is over, one token.
	e.clock.Advance(wait)
	race("after the wait", 1)
	// First attempts' deposits of 2.5 tokens: two whole ones.
	e.give(errandstore.LimiterGive{Name: "retry:k", Amount: 2.5})
	race("after deposits of 2.5", 2)
}
