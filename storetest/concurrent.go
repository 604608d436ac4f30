package storetest

import (
	"fmt"
	"sync"
	"testing"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
)

var concurrentCases = []testCase{
	{"ClaimsNeverShareAJob", testConcurrentClaims},
	{"UniqueKeyInsertsOneJob", testConcurrentUniqueKey},
}

// testConcurrentClaims checks that claimers on two stores, with their own
// connections to one database, never claim the same job and together claim
// every job once.
func testConcurrentClaims(t *testing.T, h harness) {
	e := open(t, h)
	other := e.second()
	const n = 200
	var ps []*errandstore.JobInsertParams
	for i := range n {
		ps = append(ps, newJob(fmt.Sprintf("job-%03d", i)))
	}
	e.insert(ps...) // committed before any claim starts

	claims := e.claimAllConcurrently([]errandstore.Store{e.s, other, e.s, other})
	if t.Failed() {
		return
	}
	seen := map[string]claimRec{}
	for _, c := range claims {
		if prev, dup := seen[c.id]; dup {
			t.Errorf("job %s claimed twice: by %s and by %s", c.id, prev.by, c.by)
		}
		if c.attempt != 1 {
			t.Errorf("job %s claimed with attempt %d, want 1", c.id, c.attempt)
		}
		seen[c.id] = c
	}
	if len(seen) != n {
		t.Errorf("claimed %d distinct jobs of %d", len(seen), n)
	}
	// The database agrees with what each claimer was told.
	for _, p := range ps {
		j := e.get(p.ID)
		c := seen[p.ID]
		if j.State != errandtype.StateRunning || token(j) != c.token || j.LeaseOwner == nil || *j.LeaseOwner != c.by || j.Attempt != 1 {
			t.Errorf("job %s: state %s token %q owner %v attempt %d; its claimer %s got token %q",
				p.ID, j.State, token(j), j.LeaseOwner, j.Attempt, c.by, c.token)
		}
	}
}

// claimRec is a claim as its claimer was told it.
type claimRec struct {
	id, token string
	attempt   int
	by        string
}

// claimAllConcurrently claims every job of the default queue with one
// claimer per store of stores, all started at once, 7 jobs a claim, and
// returns every claim.
func (e *env) claimAllConcurrently(stores []errandstore.Store) []claimRec {
	t := e.t
	var (
		mu     sync.Mutex
		claims []claimRec
		wg     sync.WaitGroup
		start  = make(chan struct{})
	)
	for w, s := range stores {
		name := fmt.Sprintf("claimer-%d", w)
		wg.Go(func() {
			<-start
			for {
				js, err := s.JobClaimMany(e.ctx, &errandstore.JobClaimParams{Queues: []string{errand.DefaultQueue}, Limit: 7, Lease: lease, Owner: name})
				if err != nil {
					t.Errorf("%s: JobClaimMany: %v", name, err)
					return
				}
				if len(js) == 0 {
					return
				}
				mu.Lock()
				for _, j := range js {
					claims = append(claims, claimRec{j.ID, token(j), j.Attempt, name})
				}
				mu.Unlock()
			}
		})
	}
	close(start)
	wg.Wait()
	return claims
}

// testConcurrentUniqueKey checks that racing inserts of one unique key, from
// two stores, make exactly one job and tell every other inserter so.
func testConcurrentUniqueKey(t *testing.T, h harness) {
	e := open(t, h)
	other := e.second()
	const keys, perStore = 5, 3
	type result struct {
		key, tried string
		res        errandstore.JobInsertResult
	}
	var (
		mu      sync.Mutex
		results []result
		wg      sync.WaitGroup
		start   = make(chan struct{})
	)
	for w := range 2 * perStore {
		s := e.s
		if w%2 == 1 {
			s = other
		}
		wg.Go(func() {
			<-start
			for k := range keys {
				p := newJob(fmt.Sprintf("w%d-k%d", w, k))
				p.UniqueKey = fmt.Sprintf("key-%d", k)
				rs, err := s.JobInsertMany(e.ctx, &errandstore.JobInsertManyParams{Jobs: []*errandstore.JobInsertParams{p}})
				if err != nil {
					t.Errorf("insert %s: %v", p.ID, err)
					return
				}
				mu.Lock()
				results = append(results, result{p.UniqueKey, p.ID, rs[0]})
				mu.Unlock()
			}
		})
	}
	close(start)
	wg.Wait()
	if t.Failed() {
		return
	}
	winner := map[string]string{}
	for _, r := range results {
		if !r.res.Duplicate {
			if prev, ok := winner[r.key]; ok {
				t.Errorf("key %s inserted twice: jobs %s and %s", r.key, prev, r.tried)
			}
			winner[r.key] = r.tried
			if r.res.Job.ID != r.tried {
				t.Errorf("new job result for %s holds job %s", r.tried, r.res.Job.ID)
			}
		}
	}
	for _, r := range results {
		if w, ok := winner[r.key]; !ok {
			t.Errorf("key %s: no insert reported a new job", r.key)
		} else if r.res.Job.ID != w {
			t.Errorf("insert %s of key %s returned job %s; the key's job is %s", r.tried, r.key, r.res.Job.ID, w)
		}
	}
	js, err := e.s.JobList(e.ctx, &errandstore.JobListParams{})
	if err != nil {
		t.Fatal(err)
	}
	if len(js) != keys {
		t.Errorf("%d jobs stored for %d unique keys: %v", len(js), keys, ids(js))
	}
}
