package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
)

var orderingHoldCases = []testCase{
	{"DeadHeadHoldsUntilReplay", testOrderingHoldUntilReplay},
	{"CancelReleases", testOrderingHoldCancelReleases},
	{"ReleaseIsTheDefault", testOrderingHoldDefaultReleases},
}

// holding returns insert parameters for a job of ordering key key that
// holds it while dead.
func holding(id, key string) *errandstore.JobInsertParams {
	p := keyed(id, key)
	p.OrderingHold = true
	return p
}

// heldCount is how many jobs the store's insights count as held back by
// their ordering key.
func (e *env) heldCount() int {
	e.t.Helper()
	d, err := e.s.JobInsights(e.ctx, &errandstore.JobInsightsParams{})
	if err != nil {
		e.t.Fatalf("JobInsights: %v", err)
	}
	n := 0
	for _, c := range d.Depth {
		if c.Bucket == errand.BucketHeld {
			n += c.Jobs
		}
	}
	return n
}

// testOrderingHoldUntilReplay: a job that holds its key dies; the jobs
// behind it stay held (HeldBy names it, insights count them held, the
// oldest-ready age ignores them, a claim skips them), and the key of
// another holds nothing; a replay puts it first in line, and its success
// releases the rest, in order.
func testOrderingHoldUntilReplay(t *testing.T, h harness) {
	e := open(t, h)
	e.insert(holding("h1", "ledger"), holding("h2", "ledger"), holding("h3", "ledger"), keyed("free", "other"))
	if j := e.get("h1"); !j.OrderingHold {
		t.Fatalf("job h1: OrderingHold false, want true")
	}
	js := e.claim(10)
	if got := ids(js); len(got) != 2 || got[0] != "h1" || got[1] != "free" {
		t.Fatalf("claim: %v, want [h1 free]", got)
	}
	e.recordOK(dead(js[0]))
	e.recordOK(succeeded(js[1]))
	e.clock.Advance(time.Minute)
	e.claimNone()
	e.wantHeldBy("h1 dead and holding", map[string]string{"h1": "", "h2": "h1", "h3": "h1"})
	if n := e.heldCount(); n != 2 {
		t.Errorf("insights count %d held jobs, want 2 (h2, h3)", n)
	}
	if age := e.oldestReady(errand.DefaultQueue); age != 0 {
		t.Errorf("oldest ready age %v with only held jobs waiting, want 0", age)
	}
	// Another key is not affected.
	e.insert(keyed("o2", "other"))
	e.claimOne("o2")

	if _, err := e.s.JobReplay(e.ctx, &errandstore.JobReplayParams{ID: "h1", Operator: "ana", Reason: "ledger fixed"}); err != nil {
		t.Fatal(err)
	}
	e.wantHeldBy("h1 replayed", map[string]string{"h1": "", "h2": "h1", "h3": "h1"})
	j1 := e.claimOne("h1")
	e.claimNone()
	e.recordOK(succeeded(j1))
	e.recordOK(succeeded(e.claimOne("h2")))
	e.recordOK(succeeded(e.claimOne("h3")))
	if n := e.heldCount(); n != 0 {
		t.Errorf("insights count %d held jobs after all ran, want 0", n)
	}
}

// testOrderingHoldCancelReleases: cancelling the dead job that holds its
// key releases it; a dead job that does not hold its key cannot be
// cancelled (dead is final but for a replay).
func testOrderingHoldCancelReleases(t *testing.T, h harness) {
	e := open(t, h)
	e.insert(holding("h1", "ledger"), holding("h2", "ledger"), keyed("r1", "rel"), newJob("plain"))
	js := e.claim(10)
	if got := ids(js); len(got) != 3 {
		t.Fatalf("claim: %v, want h1, r1 and plain", got)
	}
	for _, j := range js {
		e.recordOK(dead(j))
	}
	e.claimNone()
	c, err := e.s.JobCancel(e.ctx, &errandstore.JobCancelParams{ID: "h1", Operator: "ana", Reason: "skip the broken entry"})
	if err != nil {
		t.Fatalf("cancel dead h1 that holds its key: %v", err)
	}
	if c.State != errandtype.StateCancelled {
		t.Fatalf("cancelled h1 is %s", c.State)
	}
	e.wantHeldBy("h1 cancelled", map[string]string{"h2": ""})
	e.claimOne("h2")
	for _, id := range []string{"r1", "plain"} {
		_, err := e.s.JobCancel(e.ctx, &errandstore.JobCancelParams{ID: id, Operator: "ana", Reason: "r"})
		var se *errandtype.StateError
		if !errors.As(err, &se) || se.State != errandtype.StateDead {
			t.Errorf("cancel dead %s that holds no key: %v; want a *StateError", id, err)
		}
		if got := e.get(id).State; got != errandtype.StateDead {
			t.Errorf("job %s is %s after a refused cancel, want dead", id, got)
		}
	}
}

// testOrderingHoldDefaultReleases: without OrderingHold a dead job
// releases its key at once, as before.
func testOrderingHoldDefaultReleases(t *testing.T, h harness) {
	e := open(t, h)
	e.insert(keyed("k1", "key"), holding("k2", "key"))
	if e.get("k1").OrderingHold {
		t.Fatal("job k1: OrderingHold true without asking")
	}
	e.recordOK(dead(e.claimOne("k1")))
	e.wantHeldBy("k1 dead", map[string]string{"k2": ""})
	e.claimOne("k2")
}
