package storetest

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
)

// fairnessCases check fair claims ([errandstore.FairClaimer]); stores without
// the capability skip them.
var fairnessCases = []testCase{
	{"KeyStored", testFairKeyStored},
	{"BurstDoesNotDelayOtherKey", testFairBurst},
	{"RoundRobinOrder", testFairRoundRobin},
	{"TurnsAcrossClaims", testFairTurns},
	{"PrioritiesFirst", testFairPriorities},
	{"ClaimableOnly", testFairClaimableOnly},
	{"OrderingKeyRule", testFairOrderingKey},
	{"WithoutKeysAsPlainClaim", testFairWithoutKeys},
	{"OneQueue", testFairOneQueue},
	{"ConcurrentClaims", testFairConcurrent},
	{"KeysWaiting", testFairKeysWaiting},
	{"TurnPrune", testFairTurnPrune},
}

func (e *env) fair() errandstore.FairClaimer {
	e.t.Helper()
	f, ok := e.s.(errandstore.FairClaimer)
	if !ok {
		e.t.Skip("the store is not an errandstore.FairClaimer")
	}
	return f
}

func (e *env) claimFair(limit int) []*errandtype.Job {
	e.t.Helper()
	js, err := e.fair().JobClaimFair(e.ctx, claimParams(limit))
	if err != nil {
		e.t.Fatalf("JobClaimFair: %v", err)
	}
	return js
}

func tenant(id, key string) *errandstore.JobInsertParams {
	p := newJob(id)
	p.FairnessKey = key
	return p
}

// testFairKeyStored: the key is kept and read back, and a fair claim
// returns it with the whole job as a plain claim would.
func testFairKeyStored(t *testing.T, h harness) {
	e := open(t, h)
	e.fair()
	ins := e.insert(tenant("a1", "tenant:a"), newJob("n1"))
	if got := deref(ins[0].FairnessKey); got != "tenant:a" {
		t.Fatalf("insert returned fairness key %q, want tenant:a", got)
	}
	if ins[1].FairnessKey != nil {
		t.Fatalf("a job without a key has fairness key %q", *ins[1].FairnessKey)
	}
	same(t, "JobGet", ins[0], e.get("a1"))
	js := e.claimFair(1)
	if len(js) != 1 || js[0].ID != "a1" {
		t.Fatalf("fair claim: %v, want [a1]", ids(js))
	}
	same(t, "claimed", claimed(ins[0], token(js[0]), e.now(), lease, owner), js[0])
}

// testFairBurst: one key's 10,000 queued jobs do not delay another key's
// single job enqueued after them: a claim of 10 takes it, and so does the
// second of two claims of one.
func testFairBurst(t *testing.T, h harness) {
	e := open(t, h)
	e.fair()
	const burst = 10000
	for start := 0; start < burst; start += 1000 {
		ps := make([]*errandstore.JobInsertParams, 1000)
		for i := range ps {
			ps[i] = tenant(fmt.Sprintf("a%05d", start+i), "tenant-a")
		}
		e.insert(ps...)
	}
	e.clock.Advance(time.Second)
	e.insert(tenant("b1", "tenant-b"))

	js := e.claimFair(10)
	if len(js) != 10 {
		t.Fatalf("fair claim of 10 took %d jobs", len(js))
	}
	if got := ids(js)[:2]; !slices.Equal(got, []string{"a00000", "b1"}) {
		t.Fatalf("fair claim of 10 began %v; want [a00000 b1]: one job of each key, then tenant-a's", got)
	}
	// Without fairness the same burst holds b1 back behind all of it.
	e.insert(tenant("b2", "tenant-b"))
	if got := ids(e.claim(10)); slices.Contains(got, "b2") {
		t.Fatalf("plain claim took b2 ahead of tenant-a's backlog: %v", got)
	}

	e2 := open(t, h)
	e2.insert(tenant("a1", "tenant-a"), tenant("a2", "tenant-a"), tenant("a3", "tenant-a"), tenant("b1", "tenant-b"))
	first, second := e2.claimFair(1), e2.claimFair(1)
	if got := append(ids(first), ids(second)...); !slices.Equal(got, []string{"a1", "b1"}) {
		t.Fatalf("two fair claims of one took %v, want [a1 b1]", got)
	}
}

// testFairRoundRobin: keys take turns, each key's jobs in claim order;
// jobs without a key share one turn; ties of rank go by available_at and
// seq.
func testFairRoundRobin(t *testing.T, h harness) {
	e := open(t, h)
	e.fair()
	e.insert(tenant("a1", "a"), tenant("a2", "a"), tenant("a3", "a"), newJob("n1"), newJob("n2"))
	e.clock.Advance(time.Second)
	e.insert(tenant("b1", "b"), tenant("b2", "b"), tenant("c1", "c"))
	want := []string{"a1", "n1", "b1", "c1", "a2", "n2", "b2", "a3"}
	if got := ids(e.claimFair(20)); !slices.Equal(got, want) {
		t.Fatalf("fair claim: %v, want %v", got, want)
	}
}

// testFairPriorities: priority still comes first: a key's urgent job goes
// before other keys' first ordinary ones, and all of a priority before the
// next.
func testFairPriorities(t *testing.T, h harness) {
	e := open(t, h)
	e.fair()
	urgent := func(p *errandstore.JobInsertParams) *errandstore.JobInsertParams { p.Priority = -1; return p }
	e.insert(tenant("a1", "a"), tenant("b1", "b"), urgent(tenant("a2", "a")), urgent(tenant("a3", "a")),
		urgent(tenant("b2", "b")))
	want := []string{"a2", "b2", "a3", "a1", "b1"}
	if got := ids(e.claimFair(3)); !slices.Equal(got, want[:3]) {
		t.Fatalf("fair claim of 3: %v, want %v", got, want[:3])
	}
	if got := ids(e.claimFair(3)); !slices.Equal(got, want[3:]) {
		t.Fatalf("next fair claim: %v, want %v", got, want[3:])
	}
}

// testFairClaimableOnly: a fair claim takes only available jobs of the
// wanted kinds in the claimed queue, and ranks a key's jobs among those:
// a key whose first job is scheduled later still has its turn now.
func testFairClaimableOnly(t *testing.T, h harness) {
	e := open(t, h)
	e.fair()
	later := tenant("a0", "a")
	later.Delay = time.Hour
	other := tenant("x1", "a")
	other.Queue = "other"
	sms := tenant("s1", "b")
	sms.Kind = "sms"
	e.insert(later, other, sms, tenant("a1", "a"), tenant("a2", "a"), tenant("b1", "b"))
	p := claimParams(10)
	p.Kinds = []string{"email"}
	js, err := e.fair().JobClaimFair(e.ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := ids(js), []string{"a1", "b1", "a2"}; !slices.Equal(got, want) {
		t.Fatalf("fair claim: %v, want %v", got, want)
	}
	for _, j := range js {
		e.recordOK(succeeded(j))
	}
	e.clock.Advance(time.Hour)
	if got := ids(e.claimFair(10)); !slices.Equal(got, []string{"s1", "a0"}) {
		t.Fatalf("fair claim an hour later: %v, want [s1 a0]", got)
	}
}

// testFairOrderingKey: the ordering-key rule holds in a fair claim: jobs
// of one ordering key run one at a time whatever their fairness keys.
func testFairOrderingKey(t *testing.T, h harness) {
	e := open(t, h)
	e.fair()
	k1, k2 := tenant("k1", "a"), tenant("k2", "b")
	k1.OrderingKey, k2.OrderingKey = "order", "order"
	e.insert(k1, k2, tenant("a1", "a"))
	js := e.claimFair(10)
	if got := ids(js); !slices.Equal(got, []string{"k1", "a1"}) {
		t.Fatalf("fair claim: %v, want [k1 a1]", got)
	}
	if got := ids(e.claimFair(10)); len(got) != 0 {
		t.Fatalf("fair claim while k1 runs: %v, want none", got)
	}
	e.recordOK(succeeded(js[0]))
	if got := ids(e.claimFair(10)); !slices.Equal(got, []string{"k2"}) {
		t.Fatalf("fair claim after k1: %v, want [k2]", got)
	}
}

// testFairWithoutKeys: in a queue without keys a fair claim takes what a
// plain claim takes, in the same order.
func testFairWithoutKeys(t *testing.T, h harness) {
	mk := func(e *env) {
		low := newJob("low")
		low.Priority = 5
		e.insert(newJob("j1"), low, newJob("j2"))
		e.clock.Advance(time.Second)
		e.insert(newJob("j3"))
	}
	plain, fair := open(t, h), open(t, h)
	fair.fair()
	mk(plain)
	mk(fair)
	want := ids(plain.claim(3))
	if got := ids(fair.claimFair(3)); !slices.Equal(got, want) || !slices.Equal(want, []string{"j1", "j2", "j3"}) {
		t.Fatalf("fair claim %v, plain claim %v; want both [j1 j2 j3]", got, want)
	}
}

// testFairOneQueue: a fair claim names exactly one queue.
func testFairOneQueue(t *testing.T, h harness) {
	e := open(t, h)
	p := claimParams(1)
	p.Queues = []string{"a", "b"}
	_, err := e.fair().JobClaimFair(e.ctx, p)
	var in *errandtype.InputError
	if !errors.As(err, &in) {
		t.Fatalf("fair claim of two queues: %v, want an *errandtype.InputError", err)
	}
}

// testFairConcurrent: concurrent fair claims from two stores never share
// a job, and together take every job.
func testFairConcurrent(t *testing.T, h harness) {
	e := open(t, h)
	e.fair()
	s2, ok := e.second().(errandstore.FairClaimer)
	if !ok {
		t.Fatal("the second store is not an errandstore.FairClaimer")
	}
	var ps []*errandstore.JobInsertParams
	for i := range 200 {
		ps = append(ps, tenant(fmt.Sprintf("j%03d", i), fmt.Sprintf("t%d", i%7)))
	}
	e.insert(ps...)
	seen := make(chan []*errandtype.Job, 64)
	errs := make(chan error, 2)
	for _, s := range []errandstore.FairClaimer{e.fair(), s2} {
		go func() {
			for {
				js, err := s.JobClaimFair(e.ctx, claimParams(7))
				if err != nil {
					errs <- err
					return
				}
				if len(js) == 0 {
					errs <- nil
					return
				}
				seen <- js
			}
		}()
	}
	got := map[string]bool{}
	for done := 0; done < 2; {
		select {
		case err := <-errs:
			if err != nil {
				t.Fatalf("JobClaimFair: %v", err)
			}
			done++
		case js := <-seen:
			claimedOnce(t, got, js)
		}
	}
	for len(seen) > 0 {
		claimedOnce(t, got, <-seen)
	}
	if len(got) != len(ps) {
		t.Fatalf("claimed %d jobs, want %d", len(got), len(ps))
	}
}

// claimedOnce checks that no job of js is in got, the jobs claimed so far,
// and adds them.
func claimedOnce(t *testing.T, got map[string]bool, js []*errandtype.Job) {
	t.Helper()
	for _, j := range js {
		if got[j.ID] {
			t.Fatalf("job %s claimed twice", j.ID)
		}
		got[j.ID] = true
	}
}

// testFairKeysWaiting: the busiest keys per queue, counting waiting jobs
// only, scheduled ones too.
func testFairKeysWaiting(t *testing.T, h harness) {
	e := open(t, h)
	f := e.fair()
	in := func(p *errandstore.JobInsertParams, q string) *errandstore.JobInsertParams { p.Queue = q; return p }
	later := tenant("a4", "a")
	later.Delay = time.Hour
	e.insert(tenant("a1", "a"), tenant("a2", "a"), tenant("a3", "a"), later, tenant("b1", "b"), tenant("c1", "c"),
		tenant("c2", "c"), newJob("n1"), in(tenant("z1", "z"), "bulk"))
	e.claimOne("a1") // running: no longer waiting
	keys := func(p *errandstore.FairnessKeysParams) []errandtype.FairnessKeyCount {
		t.Helper()
		got, err := f.FairnessKeysWaiting(e.ctx, p)
		if err != nil {
			t.Fatalf("FairnessKeysWaiting: %v", err)
		}
		return got
	}
	want := []errandtype.FairnessKeyCount{{Queue: "bulk", Key: "z", Waiting: 1},
		{Queue: "default", Key: "a", Waiting: 3}, {Queue: "default", Key: "c", Waiting: 2}, {Queue: "default", Key: "b", Waiting: 1}}
	if got := keys(&errandstore.FairnessKeysParams{}); !reflect.DeepEqual(got, want) {
		t.Fatalf("keys waiting: %+v, want %+v", got, want)
	}
	if got := keys(&errandstore.FairnessKeysParams{Queue: "default", Limit: 2}); !reflect.DeepEqual(got, want[1:3]) {
		t.Fatalf("top 2 keys of default: %+v, want %+v", got, want[1:3])
	}
	if got := keys(&errandstore.FairnessKeysParams{Queue: "none"}); got == nil || len(got) != 0 {
		t.Fatalf("keys of an empty queue: %#v, want an empty list", got)
	}
}

// testFairTurns: claims of one job serve the keys round-robin, the key
// served longest ago first, whatever the age of their jobs; jobs without a
// key take their turn as one key.
func testFairTurns(t *testing.T, h harness) {
	e := open(t, h)
	e.fair()
	e.insert(tenant("a1", "a"), tenant("a2", "a"), tenant("a3", "a"), tenant("b1", "b"), tenant("b2", "b"))
	e.clock.Advance(time.Second)
	e.insert(newJob("n1"), tenant("c1", "c"), tenant("a4", "a"))
	var got []string
	for range 8 {
		js := e.claimFair(1)
		if len(js) != 1 {
			t.Fatalf("fair claim %d took %v", len(got)+1, ids(js))
		}
		got = append(got, js[0].ID)
		e.recordOK(succeeded(js[0]))
	}
	want := []string{"a1", "b1", "n1", "c1", "a2", "b2", "a3", "a4"}
	if !slices.Equal(got, want) {
		t.Fatalf("claims of one took %v, want %v", got, want)
	}
	e.claimNone()
}

// testFairTurnPrune: the turn of a key with no waiting job, unserved for
// longer than the bound, is deleted; a key with a waiting job keeps its
// turn however long ago it was served, and so does the turn of the jobs
// without a key. A pruned key that comes back counts as served longest
// ago, and an active key's turn still orders the claims.
func testFairTurnPrune(t *testing.T, h harness) {
	e := open(t, h)
	e.fair()
	p, ok := e.s.(errandstore.FairTurnPruner)
	if !ok {
		t.Skip("the store is not an errandstore.FairTurnPruner")
	}
	prune := func(idle time.Duration) int {
		t.Helper()
		n, err := p.FairTurnPrune(e.ctx, &errandstore.FairTurnPruneParams{IdleFor: idle})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	e.insert(tenant("a1", "a"), tenant("b1", "b"), tenant("b2", "b"), newJob("n1"))
	var got []string
	for range 3 {
		js := e.claimFair(1)
		if len(js) != 1 {
			t.Fatalf("fair claim took %v", ids(js))
		}
		got = append(got, js[0].ID)
		e.recordOK(succeeded(js[0]))
	}
	if want := []string{"a1", "b1", "n1"}; !slices.Equal(got, want) {
		t.Fatalf("claims took %v, want %v", got, want)
	}
	if n := prune(time.Hour); n != 0 {
		t.Fatalf("prune of turns served just now deleted %d, want 0", n)
	}
	e.clock.Advance(2 * time.Hour)
	if n := prune(time.Hour); n != 1 {
		t.Fatalf("prune deleted %d turns, want 1: a's (b has a job waiting, the keyless turn stays)", n)
	}
	if n := prune(time.Hour); n != 0 {
		t.Fatalf("a second prune deleted %d, want 0", n)
	}
	// b's turn (served) is kept: a (pruned) and c (new) go before b2,
	// although b2 waited longest.
	e.insert(tenant("a2", "a"), tenant("c1", "c"))
	got = nil
	for range 3 {
		js := e.claimFair(1)
		if len(js) != 1 {
			t.Fatalf("fair claim took %v", ids(js))
		}
		got = append(got, js[0].ID)
	}
	if want := []string{"a2", "c1", "b2"}; !slices.Equal(got, want) {
		t.Fatalf("claims after the prune took %v, want %v", got, want)
	}
	var ie *errandtype.InputError
	if _, err := p.FairTurnPrune(e.ctx, &errandstore.FairTurnPruneParams{}); !errors.As(err, &ie) {
		t.Fatalf("prune with no bound: %v, want an InputError", err)
	}
}
