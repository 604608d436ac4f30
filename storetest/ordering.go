package storetest

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandstore"
)

var orderingCases = []testCase{
	{"OneAtATimeInOrder", testOrderingOneAtATime},
	{"RetryHoldsBack", testOrderingRetryHoldsBack},
	{"FinishedHoldNothing", testOrderingFinishedHoldNothing},
	{"KeysIndependent", testOrderingKeysIndependent},
	{"ConcurrentClaims", testOrderingConcurrentClaims},
	{"HeldBy", testOrderingHeldBy},
}

// heldBy returns, by id, the HeldBy that JobGet and JobList report for
// every job ("" for nil), failing the test when the two disagree.
func (e *env) heldBy() map[string]string {
	e.t.Helper()
	got := map[string]string{}
	for _, j := range e.list(&errandstore.JobListParams{}) {
		byGet := e.get(j.ID).HeldBy
		if (byGet == nil) != (j.HeldBy == nil) || byGet != nil && *byGet != *j.HeldBy {
			e.t.Errorf("job %s: JobList says held by %v, JobGet by %v", j.ID, j.HeldBy, byGet)
		}
		got[j.ID] = ""
		if j.HeldBy != nil {
			got[j.ID] = *j.HeldBy
		}
	}
	return got
}

func (e *env) wantHeldBy(what string, want map[string]string) {
	e.t.Helper()
	got := e.heldBy()
	for id, w := range want {
		if got[id] != w {
			e.t.Errorf("%s: job %s held by %q, want %q", what, id, got[id], w)
		}
	}
}

// testOrderingHeldBy: HeldBy names what holds a job back, exactly when a
// claim would skip it: the running job of its key, else the earliest job of
// the key waiting ahead of it; nobody holds a key's first job, a running or
// finished job, or a job without a key.
func testOrderingHeldBy(t *testing.T, h harness) {
	e := open(t, h)
	e.insert(keyed("k1", "key"), keyed("k2", "key"), keyed("k3", "key"), newJob("free"), keyed("b1", "other"))
	e.wantHeldBy("all queued", map[string]string{"k1": "", "k2": "k1", "k3": "k1", "free": "", "b1": ""})
	other := e.claimWith(&errandstore.JobClaimParams{Queues: []string{errand.DefaultQueue}, Kinds: []string{"email"},
		Limit: 10, Lease: time.Hour, Owner: owner})
	if got := ids(other); !slices.Equal(got, []string{"k1", "free", "b1"}) {
		t.Fatalf("claim: %v, want [k1 free b1]", got)
	}
	e.wantHeldBy("k1, free and b1 running", map[string]string{"k1": "", "k2": "k1", "k3": "k1", "free": "", "b1": ""})
	e.recordOK(&errandstore.JobOutcome{JobLease: leaseOf(other[0]), Kind: errandstore.OutcomeSnooze})
	e.recordOK(succeeded(other[1]))
	e.recordOK(succeeded(other[2]))
	e.wantHeldBy("k1 snoozed", map[string]string{"k1": "", "k2": "k1", "k3": "k1", "free": "", "b1": ""})

	j1 := e.claimOne("k1")
	e.wantHeldBy("k1 running", map[string]string{"k1": "", "k2": "k1", "k3": "k1"})
	e.recordOK(retry(j1, time.Minute))
	e.wantHeldBy("k1 waiting out a retry", map[string]string{"k1": "", "k2": "k1", "k3": "k1"})
	e.clock.Advance(time.Minute)
	e.recordOK(succeeded(e.claimOne("k1")))
	e.wantHeldBy("k1 succeeded", map[string]string{"k1": "", "k2": "", "k3": "k2"})
	if _, err := e.s.JobCancel(e.ctx, &errandstore.JobCancelParams{ID: "k2"}); err != nil {
		t.Fatal(err)
	}
	e.wantHeldBy("k2 cancelled", map[string]string{"k2": "", "k3": ""})

	// A replay puts k2 back ahead of k3, which is running: k2 waits for
	// k3, and a job enqueued after both waits for k2, the first of the
	// key in line.
	j3 := e.claimOne("k3")
	if _, err := e.s.JobReplay(e.ctx, &errandstore.JobReplayParams{ID: "k2", Operator: "op", Reason: "again"}); err != nil {
		t.Fatal(err)
	}
	e.insert(keyed("k4", "key"))
	e.wantHeldBy("k2 replayed while k3 runs", map[string]string{"k2": "k3", "k3": "", "k4": "k2"})
	e.claimNone()
	e.recordOK(succeeded(j3))
	e.wantHeldBy("k3 succeeded", map[string]string{"k2": "", "k4": "k2"})
	e.claimOne("k2")
	e.wantHeldBy("k2 running", map[string]string{"k2": "", "k4": "k2"})
	e.claimNone()
}

func keyed(id, key string) *errandstore.JobInsertParams {
	p := newJob(id)
	p.OrderingKey = key
	return p
}

// testOrderingOneAtATime: jobs of one key run one at a time in seq order,
// even when a claim asks for all of them at once.
func testOrderingOneAtATime(t *testing.T, h harness) {
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
func testOrderingRetryHoldsBack(t *testing.T, h harness) {
	e := open(t, h)
	e.insert(keyed("k1", "key"), keyed("k2", "key"))
	j1 := e.claimOne("k1")
	e.recordOK(retry(j1, time.Minute))
	e.claimNone() // k1 retrying, not due; k2 waits behind it
	e.clock.Advance(time.Minute)
	j1 = e.claimOne("k1")
	e.recordOK(&errandstore.JobOutcome{JobLease: leaseOf(j1), Kind: errandstore.OutcomeSnooze, Delay: time.Minute})
	e.claimNone() // k1 snoozed
	e.clock.Advance(time.Minute)
	e.claimOne("k1")
	e.clock.Advance(lease) // the worker died: the sweep makes k1 retrying, due now
	e.claimOne("k1")
}

// testOrderingFinishedHoldNothing: dead and cancelled jobs do not hold back
// the rest of their key.
func testOrderingFinishedHoldNothing(t *testing.T, h harness) {
	e := open(t, h)
	e.insert(keyed("k1", "key"), keyed("k2", "key"), keyed("k3", "key"))
	e.recordOK(dead(e.claimOne("k1")))
	if _, err := e.s.JobCancel(e.ctx, &errandstore.JobCancelParams{ID: "k2"}); err != nil {
		t.Fatal(err)
	}
	e.claimOne("k3")
}

// testOrderingKeysIndependent: different keys, and jobs without a key, do
// not wait for each other.
func testOrderingKeysIndependent(t *testing.T, h harness) {
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
func testOrderingConcurrentClaims(t *testing.T, h harness) {
	e := open(t, h)
	const n = 12
	var ps []*errandstore.JobInsertParams
	for i := range n {
		ps = append(ps, keyed(string(rune('a'+i)), "key"))
	}
	e.insert(ps...)
	stores := []errandstore.Store{e.s, e.second()}
	var (
		mu          sync.Mutex
		order       []string
		ackSent     = map[string]bool{} // set before the ack is sent
		wg          sync.WaitGroup
		allIDs      = ids(e.list(&errandstore.JobListParams{}))
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
					rs, err := s.JobRecordOutcomes(e.ctx, &errandstore.JobRecordOutcomesParams{Outcomes: []*errandstore.JobOutcome{succeeded(j)}})
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
