package storetest

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
)

var claimCases = []testCase{
	{"Order", testClaimOrder},
	{"BatchLimit", testClaimBatchLimit},
	{"Filters", testClaimFilters},
	{"Writes", testClaimWrites},
	{"FreshTokens", testClaimFreshTokens},
	{"NotBeforeDue", testClaimNotBeforeDue},
	{"InvalidParams", testClaimInvalidParams},
	{"GivesBackUnreadableRows", testClaimGivesBackUnreadableRows},
}

// testClaimGivesBackUnreadableRows: a claimed row that does not decode (a
// value a newer errand wrote, or one changed by hand) must not be left
// running with an attempt spent and nobody working it, nor keep the rest
// of its claim, or of its queue, from running. It is given back, queued
// again a minute later with its attempt uncounted and the reason in its
// history; the other job is claimed. Plain and fair claims alike.
func testClaimGivesBackUnreadableRows(t *testing.T, h harness) {
	if h.spoilJob == nil {
		t.Skip("Harness.SpoilJob is nil")
	}
	for _, fair := range []bool{false, true} {
		t.Run(map[bool]string{false: "plain", true: "fair"}[fair], func(t *testing.T) {
			e := open(t, h)
			claim := e.s.JobClaimMany
			if fair {
				fc, ok := e.s.(errandstore.FairClaimer)
				if !ok {
					t.Skip("not a FairClaimer")
				}
				claim = fc.JobClaimFair
			}
			var ps []*errandstore.JobInsertParams
			for _, id := range []string{"good", "spoilt"} {
				p := newJob(id)
				if fair {
					p.FairnessKey = "tenant"
				}
				ps = append(ps, p)
			}
			e.insert(ps...)
			h.spoilJob(t, e.s, "spoilt")
			claimed, err := claim(e.ctx, claimParams(10))
			if err != nil {
				t.Fatal(err)
			}
			if len(claimed) != 1 || claimed[0].ID != "good" || claimed[0].Attempt != 1 {
				t.Fatalf("claimed %v, want good alone at attempt 1", ids(claimed))
			}
			// The spoilt job waits, queued, as the store cannot read it to
			// report it whole; had it stayed running, it would count so.
			qs, err := e.s.QueueStats(e.ctx, &errandstore.QueueStatsParams{})
			if err != nil {
				t.Fatal(err)
			}
			if len(qs) != 1 || qs[0].Counts[errandtype.StateRunning] != 1 || qs[0].Counts[errandtype.StateQueued] != 1 {
				t.Fatalf("queue stats after the claim: %+v, want 1 running and 1 queued", qs)
			}
			if again, err := claim(e.ctx, claimParams(10)); err != nil || len(again) != 0 {
				t.Fatalf("claim right after: %v, %v; want nothing while the spoilt job waits", ids(again), err)
			}
		})
	}
}

// testClaimOrder checks the claim order: priority, then available_at, then
// insertion order.
func testClaimOrder(t *testing.T, h harness) {
	e := open(t, h)
	now := e.now()
	mk := func(id string, prio int, avail time.Time) *errandstore.JobInsertParams {
		p := newJob(id)
		p.Priority, p.RunAt = prio, avail
		return p
	}
	e.insert(
		mk("p0-now-1", 0, now),
		mk("p0-earlier", 0, now.Add(-time.Minute)),
		mk("urgent", -1, now),
		mk("p0-now-2", 0, now),
		mk("low", 5, now.Add(-time.Hour)),
		mk("p0-future", 0, now.Add(10*time.Second)), // due inside the leases above
		mk("p1", 1, now.Add(-2*time.Hour)),
	)
	for _, id := range []string{"urgent", "p0-earlier", "p0-now-1", "p0-now-2", "p1", "low"} {
		e.claimOne(id)
	}
	e.claimNone()
	e.clock.Advance(10 * time.Second)
	e.claimOne("p0-future")
}

// testClaimBatchLimit checks that a batch claim honours its limit and
// returns the jobs in claim order.
func testClaimBatchLimit(t *testing.T, h harness) {
	e := open(t, h)
	var ps []*errandstore.JobInsertParams
	for i, id := range []string{"e", "d", "c", "b", "a"} {
		p := newJob(id)
		p.Priority = 10 - i // a runs first, e last
		ps = append(ps, p)
	}
	e.insert(ps...)
	if got := ids(e.claim(3)); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Errorf("first claim of 3: %v, want [a b c]", got)
	}
	if got := ids(e.claim(3)); !slices.Equal(got, []string{"d", "e"}) {
		t.Errorf("second claim of 3: %v, want [d e]", got)
	}
	e.claimNone()
}

func testClaimFilters(t *testing.T, h harness) {
	e := open(t, h)
	mk := func(id, queue, kind string) *errandstore.JobInsertParams {
		p := newJob(id)
		p.Queue, p.Kind = queue, kind
		return p
	}
	inserted := e.insert(
		mk("q1-k1", "q1", "k1"),
		mk("q1-k2", "q1", "k2"),
		mk("q2-k1", "q2", "k1"),
		mk("q2-k3", "q2", "k3"),
		mk("q3-k1", "q3", "k1"),
	)
	claimAll := func(p *errandstore.JobClaimParams) []string {
		var got []string
		for {
			js := e.claimWith(p)
			if len(js) == 0 {
				slices.Sort(got)
				return got
			}
			got = append(got, ids(js)...)
		}
	}
	p := &errandstore.JobClaimParams{Queues: []string{"q1", "q2"}, Kinds: []string{"k1"}, Limit: 1, Lease: lease, Owner: owner}
	if got := claimAll(p); !slices.Equal(got, []string{"q1-k1", "q2-k1"}) {
		t.Errorf("claim queues [q1 q2] kinds [k1]: %v, want [q1-k1 q2-k1]", got)
	}
	// Jobs of unlisted kinds and queues were never touched.
	for _, j := range inserted {
		if j.ID == "q1-k2" || j.ID == "q2-k3" || j.ID == "q3-k1" {
			e.unchanged("job "+j.ID+" outside the claim's filters", j)
		}
	}
	p = &errandstore.JobClaimParams{Queues: []string{"q2", "q1"}, Kinds: []string{"k3", "k2"}, Limit: 5, Lease: lease, Owner: owner}
	if got := claimAll(p); !slices.Equal(got, []string{"q1-k2", "q2-k3"}) {
		t.Errorf("claim kinds [k3 k2]: %v, want [q1-k2 q2-k3]", got)
	}
	// No kinds means every kind.
	p = &errandstore.JobClaimParams{Queues: []string{"q3"}, Limit: 5, Lease: lease, Owner: owner}
	if got := claimAll(p); !slices.Equal(got, []string{"q3-k1"}) {
		t.Errorf("claim q3 with no kind filter: %v, want [q3-k1]", got)
	}
}

// testClaimWrites checks the whole record a claim writes.
func testClaimWrites(t *testing.T, h harness) {
	e := open(t, h)
	p := newJob("a")
	p.UniqueKey, p.Tags = "u", []string{"t"}
	before := e.insert(p)[0]
	now := e.clock.Advance(5 * time.Second)
	js := e.claimWith(&errandstore.JobClaimParams{Queues: []string{errand.DefaultQueue}, Limit: 1, Lease: 45 * time.Second, Owner: "host-7:1234"})
	if len(js) != 1 {
		t.Fatalf("claimed %d jobs, want 1", len(js))
	}
	tok := token(js[0])
	if tok == "" {
		t.Fatalf("claim wrote no lease token")
	}
	want := claimed(before, tok, now, 45*time.Second, "host-7:1234")
	same(t, "claimed job", want, js[0])
	same(t, "JobGet after claim", want, e.get("a"))
}

// testClaimFreshTokens checks that every claim writes a token no other claim
// wrote.
func testClaimFreshTokens(t *testing.T, h harness) {
	e := open(t, h)
	e.insertIDs("a", "b", "c", "d", "e", "f", "g", "h")
	seen := map[string]string{}
	note := func(j *errandtype.Job) {
		tok := token(j)
		if tok == "" {
			t.Fatalf("job %s claimed without a token", j.ID)
		}
		if prev, dup := seen[tok]; dup {
			t.Fatalf("token %q written by two claims (%s and attempt %d of %s)", tok, prev, j.Attempt, j.ID)
		}
		seen[tok] = j.ID
	}
	js := e.claim(8)
	if len(js) != 8 {
		t.Fatalf("claimed %d of 8 jobs", len(js))
	}
	for _, j := range js {
		note(j)
	}
	// Claims of the same job, attempt after attempt, get new tokens too.
	j := js[0]
	for attempt := 2; attempt <= 3; attempt++ {
		e.recordOK(retry(j, 0))
		j = e.claimOne(j.ID)
		if j.Attempt != attempt {
			t.Errorf("attempt = %d, want %d", j.Attempt, attempt)
		}
		note(j)
	}
}

// testClaimNotBeforeDue checks that scheduled and retrying jobs become
// claimable exactly when due, and not a microsecond before.
func testClaimNotBeforeDue(t *testing.T, h harness) {
	for _, c := range []struct {
		name  string
		setup func(e *env) time.Duration // returns the wait until due
	}{
		{"scheduled", func(e *env) time.Duration {
			p := newJob("a")
			p.Delay = 10 * time.Minute
			e.insert(p)
			return 10 * time.Minute
		}},
		{"retrying", func(e *env) time.Duration {
			e.insertIDs("a")
			j := e.claimOne("a")
			r := e.recordOK(retry(j, 90*time.Second))
			if r.State != errandtype.StateRetrying {
				e.t.Fatalf("retry outcome: state %s, want retrying", r.State)
			}
			return 90 * time.Second
		}},
		{"snoozed", func(e *env) time.Duration {
			e.insertIDs("a")
			j := e.claimOne("a")
			e.recordOK(&errandstore.JobOutcome{JobLease: leaseOf(j), Kind: errandstore.OutcomeSnooze, Delay: time.Hour})
			return time.Hour
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := open(t, h)
			wait := c.setup(e)
			e.claimNone()
			e.clock.Advance(wait - time.Microsecond)
			e.claimNone()
			e.clock.Advance(time.Microsecond)
			e.claimOne("a")
		})
	}
}

// manyNames returns n distinct names.
func manyNames(n int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("name-%d", i)
	}
	return names
}

func testClaimInvalidParams(t *testing.T, h harness) {
	e := open(t, h)
	before := e.insertIDs("a")[0]
	for _, c := range []struct {
		name string
		p    errandstore.JobClaimParams
	}{
		{"no-queues", errandstore.JobClaimParams{Limit: 1, Lease: lease}},
		{"zero-limit", errandstore.JobClaimParams{Queues: []string{errand.DefaultQueue}, Lease: lease}},
		{"zero-lease", errandstore.JobClaimParams{Queues: []string{errand.DefaultQueue}, Limit: 1}},
		{"negative-lease", errandstore.JobClaimParams{Queues: []string{errand.DefaultQueue}, Limit: 1, Lease: -time.Second}},
		// More names than SQLite binds parameters: refused alike on
		// every store, not a store's error on one.
		{"too-many-kinds", errandstore.JobClaimParams{Queues: []string{errand.DefaultQueue}, Limit: 1, Lease: lease, Kinds: manyNames(errandstore.MaxClaimNames)}},
		{"too-many-queues", errandstore.JobClaimParams{Queues: manyNames(errandstore.MaxClaimNames + 1), Limit: 1, Lease: lease}},
	} {
		js, err := e.s.JobClaimMany(e.ctx, &c.p)
		if !errors.Is(err, errandtype.ErrInvalid) {
			t.Errorf("%s: JobClaimMany = %v, %v; want an error wrapping ErrInvalid", c.name, ids(js), err)
		}
	}
	e.unchanged("job after invalid claims", before)
}
