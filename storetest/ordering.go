package storetest

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/errandhq/errand"
)

var orderingCases = []testCase{
	{"OneAtATimeInOrder", testOrderingOneAtATime},
	{"RetryHoldsBack", testOrderingRetryHoldsBack},
	{"FinishedHoldNothing", testOrderingFinishedHoldNothing},
	{"KeysIndependent", testOrderingKeysIndependent},
	{"ConcurrentClaims", testOrderingConcurrentClaims},
}

func keyed(id, key string) *errand.JobInsertParams {
	p := newJob(id)
	p.OrderingKey = key
	return p
}

// testOrderingOneAtATime: jobs of one key run one at a time in seq order,
// even when a claim asks for all of them at once.
func testOrderingOneAtATime(t *testing.T, h Harness) {
	e := open(t, h)
	e.insert(keyed("k1", "customer-9"), keyed("k2", "customer-9"), keyed("k3", "customer-9"))
	for _, id := range []string{"k1", "k2", "k3"} {
		js := e.claim(10)
		if len(js) != 1 || js[0].ID != id {
			e.t.Fatalf("claim: got %v, want only %s", ids(js), id)
		}
		// While it runs, nothing else of its key is claimable.
		e.claimNone()
		e.recordOK(succeeded(js[0]))
	}
	e.claimNone()
}

// testOrderingRetryHoldsBack: a failed job waiting out its backoff, or a
// snoozed one, holds back the jobs after it; so does an expired lease that
// the sweep turns into a retry.
func testOrderingRetryHoldsBack(t *testing.T, h Harness) {
	e := open(t, h)
	e.insert(keyed("k1", "key"), keyed("k2", "key"))
	j1 := e.claimOne("k1")
	e.recordOK(retry(j1, time.Minute))
	e.claimNone() // k1 retrying, not due; k2 waits behind it
	e.clock.Advance(time.Minute)
	j1 = e.claimOne("k1")
	e.recordOK(&errand.JobOutcome{JobLease: leaseOf(j1), Kind: errand.OutcomeSnooze, Delay: time.Minute})
	e.claimNone() // k1 snoozed
	e.clock.Advance(time.Minute)
	e.claimOne("k1")
	e.clock.Advance(lease) // the worker died: the sweep makes k1 retrying, due now
	e.claimOne("k1")
}

// testOrderingFinishedHoldNothing: dead and cancelled jobs do not hold back
// the rest of their key.
func testOrderingFinishedHoldNothing(t *testing.T, h Harness) {
	e := open(t, h)
	e.insert(keyed("k1", "key"), keyed("k2", "key"), keyed("k3", "key"))
	e.recordOK(dead(e.claimOne("k1")))
	if _, err := e.s.JobCancel(e.ctx, "k2"); err != nil {
		t.Fatal(err)
	}
	e.claimOne("k3")
}

// testOrderingKeysIndependent: different keys, and jobs without a key, do
// not wait for each other.
func testOrderingKeysIndependent(t *testing.T, h Harness) {
	e := open(t, h)
	e.insert(keyed("a1", "a"), keyed("a2", "a"), keyed("b1", "b"), newJob("free1"), newJob("free2"))
	got := ids(e.claim(10))
	slices.Sort(got)
	if want := []string{"a1", "b1", "free1", "free2"}; !slices.Equal(got, want) {
		t.Fatalf("claim: got %v, want %v", got, want)
	}
}

// testOrderingConcurrentClaims: claimers on two stores racing over one
// key's jobs never run two of them at once, and run them in order.
func testOrderingConcurrentClaims(t *testing.T, h Harness) {
	e := open(t, h)
	const n = 12
	var ps []*errand.JobInsertParams
	for i := range n {
		ps = append(ps, keyed(string(rune('a'+i)), "key"))
	}
	e.insert(ps...)
	stores := []errand.Store{e.s, e.second()}
	var (
		mu          sync.Mutex
		order       []string
		ackSent     = map[string]bool{} // set before the ack is sent
		wg          sync.WaitGroup
		allIDs      = ids(e.list(&errand.JobListParams{}))
		finished    = func() bool { mu.Lock(); defer mu.Unlock(); return len(order) == n }
		predecessor = func(id string) string {
			i := slices.Index(allIDs, id)
			if i <= 0 {
				return ""
			}
			return allIDs[i-1]
		}
	)
	for w := range 4 {
		s := stores[w%2]
		wg.Go(func() {
			for range 500 {
				if finished() {
					return
				}
				js, err := s.JobClaimMany(e.ctx, claimParams(n))
				if err != nil {
					t.Errorf("claim: %v", err)
					return
				}
				if len(js) > 1 {
					t.Errorf("one claim took %v of one key", ids(js))
				}
				for _, j := range js {
					mu.Lock()
					// The job before it can have finished only after its
					// ack was sent: a claim before that ran two at once.
					if p := predecessor(j.ID); p != "" && !ackSent[p] {
						t.Errorf("job %s claimed while %s, ahead of it, was unfinished", j.ID, p)
					}
					order = append(order, j.ID)
					ackSent[j.ID] = true
					mu.Unlock()
					rs, err := s.JobRecordOutcomes(e.ctx, []*errand.JobOutcome{succeeded(j)})
					if err != nil || rs[0].Err != nil {
						t.Errorf("ack %s: %v %v", j.ID, err, rs)
					}
				}
			}
		})
	}
	wg.Wait()
	if !slices.Equal(order, allIDs) {
		t.Fatalf("ran in order %v, want %v", order, allIDs)
	}
}
