package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
)

var insertClaimCases = []testCase{
	{"Writes", testInsertClaimWrites},
	{"ClaimRule", testInsertClaimRule},
	{"Duplicates", testInsertClaimDuplicates},
	{"InvalidParams", testInsertClaimInvalid},
}

// insertClaimer returns e's store as an InsertClaimer, skipping the case
// for a store without the capability.
func (e *env) insertClaimer() errandstore.InsertClaimer {
	e.t.Helper()
	ic, ok := e.s.(errandstore.InsertClaimer)
	if !ok {
		e.t.Skip("the store is not an InsertClaimer")
	}
	return ic
}

// eagerClaim is the claim of an insert into p's queue, of kinds.
func eagerClaim(p *errandstore.JobInsertParams, kinds ...string) errandstore.JobClaimParams {
	return errandstore.JobClaimParams{Queues: []string{p.Queue}, Kinds: kinds, Limit: 1, Lease: lease, Owner: owner}
}

// insertClaim inserts p claiming it under claim, failing the test on an
// error.
func (e *env) insertClaim(p *errandstore.JobInsertParams, claim errandstore.JobClaimParams) (errandstore.JobInsertResult, bool) {
	e.t.Helper()
	r, ok, err := e.insertClaimer().JobInsertClaim(e.ctx, &errandstore.JobInsertClaimParams{Job: p, Claim: claim})
	if err != nil {
		e.t.Fatalf("JobInsertClaim(%s): %v", p.ID, err)
	}
	return r, ok
}

// testInsertClaimWrites: a job inserted and claimed at once is the job an
// insert then a claim of it would have made, under a token of its own,
// and its lease fences its outcome as a claim's does: a job with a unique
// key, and one without keys, which a store may write running at once.
func testInsertClaimWrites(t *testing.T, h harness) {
	for _, keyed := range []bool{true, false} {
		t.Run(map[bool]string{true: "Keyed", false: "Keyless"}[keyed], func(t *testing.T) {
			e := open(t, h)
			e.insertClaimer()
			job := func(id string) *errandstore.JobInsertParams {
				p := newJob(id)
				p.Tags, p.MaxAge, p.StartBy = []string{"t"}, time.Hour, e.clock.Now().Add(time.Minute)
				p.Metadata, p.FairnessKey = []byte(`{"m":1}`), "f"
				if keyed {
					p.UniqueKey = "u-" + id
				}
				return p
			}
			e.insert(job("twin"))
			want := e.claimOne("twin")

			p := job("a")
			r, claimed := e.insertClaim(p, eagerClaim(p))
			if !claimed || r.Duplicate {
				t.Fatalf("JobInsertClaim: claimed %v, duplicate %v; want the job claimed", claimed, r.Duplicate)
			}
			got := r.Job
			if token(got) == "" || token(got) == token(want) {
				t.Fatalf("claimed with token %q (the twin's: %q); want a fresh token", token(got), token(want))
			}
			w := *want
			w.ID, w.Seq, w.LeaseToken, w.UniqueKey = got.ID, got.Seq, got.LeaseToken, got.UniqueKey
			same(t, "claimed job", &w, got)
			same(t, "JobGet after JobInsertClaim", &w, e.get("a"))
			e.claimNone()

			stale := *got
			stale.LeaseToken = want.LeaseToken
			if r := e.record(succeeded(&stale))[0]; !errors.Is(r.Err, errandtype.ErrLeaseLost) {
				t.Errorf("outcome under another token: %v, want ErrLeaseLost", r.Err)
			}
			e.recordOK(succeeded(got))
			if j := e.get("a"); j.State != errandtype.StateSucceeded {
				t.Errorf("after its outcome: state %s, want succeeded", j.State)
			}
		})
	}
}

// testInsertClaimRule: the job is claimed only where a claim could take it
// now; otherwise it is inserted and waits for an ordinary claim.
func testInsertClaimRule(t *testing.T, h harness) {
	e := open(t, h)
	e.insertClaimer()
	unclaimed := func(what string, p *errandstore.JobInsertParams, claim errandstore.JobClaimParams) {
		t.Helper()
		r, claimed := e.insertClaim(p, claim)
		if claimed || r.Duplicate || r.Job.State.Terminal() || r.Job.State == errandtype.StateRunning {
			t.Fatalf("%s: claimed %v, duplicate %v, state %s; want it inserted, waiting", what, claimed, r.Duplicate, r.Job.State)
		}
		if j := e.get(p.ID); j.State == errandtype.StateRunning || j.Attempt != 0 {
			t.Errorf("%s: stored state %s, attempt %d; want waiting, attempt 0", what, j.State, j.Attempt)
		}
	}
	first := newJob("k-first")
	first.OrderingKey = "k"
	e.insert(first)
	e.claimOne("k-first")
	second := newJob("k-second")
	second.OrderingKey = "k"
	unclaimed("a job whose ordering key is held", second, eagerClaim(second))

	free := newJob("k2-first")
	free.OrderingKey = "k2"
	if _, claimed := e.insertClaim(free, eagerClaim(free, "email")); !claimed {
		t.Errorf("the first job of a free ordering key, of a kind the claim names, was not claimed")
	}

	later := newJob("later")
	later.Delay = time.Minute
	unclaimed("a delayed job", later, eagerClaim(later))

	late := newJob("late")
	late.StartBy = e.clock.Now().Add(-time.Second)
	unclaimed("a job past its start-by", late, eagerClaim(late))

	other := newJob("other-kind")
	unclaimed("a kind the claim does not name", other, eagerClaim(other, "sms"))
	if got := ids(e.claim(10)); join(got) != "other-kind" {
		t.Errorf("an ordinary claim took %v; want other-kind alone (the late job is past its deadline)", got)
	}
}

// testInsertClaimDuplicates: a duplicate, of an id (with a unique key or
// without) or of a unique key, is reported as an insert reports it, and
// claims nothing, not even the job of the same id.
func testInsertClaimDuplicates(t *testing.T, h harness) {
	e := open(t, h)
	e.insertClaimer()
	held := newJob("held")
	held.UniqueKey = "u"
	before := e.insert(held)[0]

	again := newJob("held")
	again.UniqueKey = "u"
	r, claimed := e.insertClaim(again, eagerClaim(again))
	if claimed || !r.Duplicate || r.Job.ID != "held" {
		t.Errorf("the same id again: claimed %v, duplicate %v; want a duplicate of held, unclaimed", claimed, r.Duplicate)
	}
	byKey := newJob("by-key")
	byKey.UniqueKey = "u"
	r, claimed = e.insertClaim(byKey, eagerClaim(byKey))
	if claimed || !r.Duplicate || r.Job.ID != "held" {
		t.Errorf("the same unique key: claimed %v, duplicate %v; want a duplicate of held, unclaimed", claimed, r.Duplicate)
	}
	e.unchanged("the job holding the id and key", before)
	e.notFound("by-key")

	plain := e.insert(newJob("plain"))[0]
	twin := newJob("plain")
	r, claimed = e.insertClaim(twin, eagerClaim(twin))
	if claimed || !r.Duplicate || r.Job.ID != "plain" {
		t.Errorf("the same id again, no keys: claimed %v, duplicate %v; want a duplicate of plain, unclaimed", claimed, r.Duplicate)
	}
	e.unchanged("the job holding the id", plain)
}

// testInsertClaimInvalid: a claim of another queue or of more than one job
// is refused, and nothing is written.
func testInsertClaimInvalid(t *testing.T, h harness) {
	e := open(t, h)
	ic := e.insertClaimer()
	p := newJob("a")
	for what, c := range map[string]errandstore.JobClaimParams{
		"another queue": {Queues: []string{"other"}, Limit: 1, Lease: lease, Owner: owner},
		"two queues":    {Queues: []string{errand.DefaultQueue, "other"}, Limit: 1, Lease: lease, Owner: owner},
		"a limit of 2":  {Queues: []string{errand.DefaultQueue}, Limit: 2, Lease: lease, Owner: owner},
		"no lease":      {Queues: []string{errand.DefaultQueue}, Limit: 1, Owner: owner},
	} {
		_, _, err := ic.JobInsertClaim(e.ctx, &errandstore.JobInsertClaimParams{Job: p, Claim: c})
		var ie *errandtype.InputError
		if !errors.As(err, &ie) {
			t.Errorf("%s: %v, want an *InputError", what, err)
		}
	}
	if _, _, err := ic.JobInsertClaim(e.ctx, &errandstore.JobInsertClaimParams{Claim: eagerClaim(p)}); err == nil {
		t.Errorf("no job: no error")
	}
	e.notFound("a")
}
