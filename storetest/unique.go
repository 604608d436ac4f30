package storetest

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
)

var uniqueCases = []testCase{
	{"ConcurrentInsertsOneJobThenFree", testUniqueConcurrentThenFree},
	{"DefaultScopeHoldsForever", testUniqueDefaultHolds},
	{"UntilFinishedFreedByEveryExit", testUniqueUntilFinishedExits},
	{"UntilSucceededHoldsDead", testUniqueUntilSucceeded},
	{"CustomScope", testUniqueCustomScope},
	{"WithinOneBatch", testUniqueWithinBatch},
	{"Window", testUniqueWindow},
	{"ReplayConflict", testUniqueReplayConflict},
	{"InvalidScopeRefused", testUniqueInvalid},
}

// uniqueJob returns insert parameters for a job with unique key key in
// scope.
func uniqueJob(id, key string, scope errandtype.UniqueScope) *errandstore.JobInsertParams {
	p := newJob(id)
	p.UniqueKey, p.UniqueScope = key, scope
	return p
}

// insertOne inserts p and returns its result.
func (e *env) insertOne(p *errandstore.JobInsertParams) errandstore.JobInsertResult {
	e.t.Helper()
	return e.insertResults(p)[0]
}

// wantNew requires that inserting p made a new job.
func (e *env) wantNew(p *errandstore.JobInsertParams) *errandtype.Job {
	e.t.Helper()
	r := e.insertOne(p)
	if r.Duplicate || r.Job.ID != p.ID {
		e.t.Fatalf("insert %s (key %q): got job %s, duplicate %v; want a new job", p.ID, p.UniqueKey, r.Job.ID, r.Duplicate)
	}
	return r.Job
}

// wantDuplicateOf requires that inserting p returned job holder.
func (e *env) wantDuplicateOf(p *errandstore.JobInsertParams, holder string) {
	e.t.Helper()
	r := e.insertOne(p)
	if !r.Duplicate || r.Job.ID != holder {
		e.t.Fatalf("insert %s (key %q): got job %s, duplicate %v; want the duplicate of %s", p.ID, p.UniqueKey, r.Job.ID, r.Duplicate, holder)
	}
	e.notFound(p.ID)
}

// raceUnique inserts, from e's store and a second store at once, one job
// per inserter with unique key key in scope, and returns the ids of the
// jobs inserted, checking that every other inserter was told the winner.
func (e *env) raceUnique(other errandstore.Store, round, key string, scope errandtype.UniqueScope) []string {
	e.t.Helper()
	const inserters = 6
	var (
		mu      sync.Mutex
		results = map[string]errandstore.JobInsertResult{}
		wg      sync.WaitGroup
		start   = make(chan struct{})
	)
	for w := range inserters {
		s := e.s
		if w%2 == 1 {
			s = other
		}
		id := fmt.Sprintf("%s-w%d", round, w)
		wg.Go(func() {
			<-start
			rs, err := s.JobInsertMany(e.ctx, &errandstore.JobInsertManyParams{Jobs: []*errandstore.JobInsertParams{uniqueJob(id, key, scope)}})
			if err != nil {
				e.t.Errorf("insert %s: %v", id, err)
				return
			}
			mu.Lock()
			results[id] = rs[0]
			mu.Unlock()
		})
	}
	close(start)
	wg.Wait()
	if e.t.Failed() {
		e.t.FailNow()
	}
	var won []string
	for id, r := range results {
		if !r.Duplicate {
			won = append(won, id)
		}
	}
	if len(won) != 1 {
		e.t.Fatalf("%s: %d concurrent inserts of key %q made jobs %v; want exactly one", round, inserters, key, won)
	}
	for id, r := range results {
		if r.Job.ID != won[0] {
			e.t.Errorf("%s: insert %s returned job %s, not the one inserted (%s)", round, id, r.Job.ID, won[0])
		}
	}
	return won
}

// testUniqueConcurrentThenFree: concurrent inserts of one key from two
// stores make one job; once it succeeded, under UniqueUntilFinished, the key
// is free and a second race again makes exactly one job.
func testUniqueConcurrentThenFree(t *testing.T, h harness) {
	e := open(t, h)
	other := e.second()
	first := e.raceUnique(other, "r1", "sync:acct-7", errandtype.UniqueUntilFinished)[0]
	j := e.get(first)
	if j.UniqueKey == nil || *j.UniqueKey != "sync:acct-7" || j.UniqueScope == nil || *j.UniqueScope != errandtype.UniqueUntilFinished || j.UniqueWindowStart != nil {
		t.Fatalf("job %s: key %v scope %v window %v; want sync:acct-7, until_finished, none", first, j.UniqueKey, j.UniqueScope, j.UniqueWindowStart)
	}
	// Still held while it runs.
	running := e.claimOne(first)
	e.wantDuplicateOf(uniqueJob("while-running", "sync:acct-7", errandtype.UniqueUntilFinished), first)
	e.recordOK(succeeded(running))

	second := e.raceUnique(other, "r2", "sync:acct-7", errandtype.UniqueUntilFinished)[0]
	if second == first {
		t.Fatalf("second race returned the succeeded job %s", first)
	}
	if got := e.get(first).State; got != errandtype.StateSucceeded {
		t.Errorf("first job is %s, want succeeded (untouched)", got)
	}
}

// testUniqueDefaultHolds: a key with the default scope is held in every
// state: after success, death and cancel a new insert returns the old job.
func testUniqueDefaultHolds(t *testing.T, h harness) {
	e := open(t, h)
	e.wantNew(uniqueJob("a", "k-succeeded", 0))
	e.recordOK(succeeded(e.claimOne("a")))
	e.wantDuplicateOf(uniqueJob("a2", "k-succeeded", 0), "a")
	e.wantDuplicateOf(uniqueJob("a3", "k-succeeded", errandtype.UniqueAlways), "a")
	if s := e.get("a").UniqueScope; s == nil || *s != errandtype.UniqueAlways {
		t.Errorf("default scope read back as %v, want always", s)
	}

	e.wantNew(uniqueJob("b", "k-dead", 0))
	e.recordOK(dead(e.claimOne("b")))
	e.wantDuplicateOf(uniqueJob("b2", "k-dead", 0), "b")

	e.wantNew(uniqueJob("c", "k-cancelled", 0))
	if _, err := e.s.JobCancel(e.ctx, &errandstore.JobCancelParams{ID: "c", Operator: "ana", Reason: "r"}); err != nil {
		t.Fatal(err)
	}
	e.wantDuplicateOf(uniqueJob("c2", "k-cancelled", 0), "c")
}

// testUniqueUntilFinishedExits: under UniqueUntilFinished the key is held
// while queued, scheduled, running and retrying, and freed by success,
// death, a lease-expiry sweep on the last attempt, cancel and prune.
func testUniqueUntilFinishedExits(t *testing.T, h harness) {
	e := open(t, h)
	scope := errandtype.UniqueUntilFinished
	// Scheduled, then retrying: held.
	p := uniqueJob("r", "k-retry", scope)
	p.Delay = time.Minute
	e.wantNew(p)
	e.wantDuplicateOf(uniqueJob("r-dup1", "k-retry", scope), "r")
	e.clock.Advance(time.Minute)
	e.recordOK(retry(e.claimOne("r"), time.Minute))
	e.wantDuplicateOf(uniqueJob("r-dup2", "k-retry", scope), "r")
	e.clock.Advance(time.Minute)
	e.recordOK(dead(e.claimOne("r")))
	e.wantNew(uniqueJob("r-after-dead", "k-retry", scope))
	e.recordOK(succeeded(e.claimOne("r-after-dead")))

	// A lease that expires on the final attempt: swept to dead, key free.
	p = uniqueJob("s", "k-sweep", scope)
	p.MaxAttempts = 1
	e.wantNew(p)
	e.claimOne("s")
	e.clock.Advance(lease + time.Second)
	if _, err := e.s.JobSweep(e.ctx, &errandstore.JobSweepParams{}); err != nil {
		t.Fatal(err)
	}
	if got := e.get("s").State; got != errandtype.StateDead {
		t.Fatalf("swept job is %s, want dead", got)
	}
	e.wantNew(uniqueJob("s-after-sweep", "k-sweep", scope))
	e.recordOK(succeeded(e.claimOne("s-after-sweep")))

	// Cancel frees the key.
	e.wantNew(uniqueJob("c", "k-cancel", scope))
	if _, err := e.s.JobCancel(e.ctx, &errandstore.JobCancelParams{ID: "c", Operator: "ana", Reason: "r"}); err != nil {
		t.Fatal(err)
	}
	e.wantNew(uniqueJob("c-after-cancel", "k-cancel", scope))
}

// testUniqueUntilSucceeded: UniqueUntilSucceeded holds the key while the
// job is dead, and frees it on success or cancel.
func testUniqueUntilSucceeded(t *testing.T, h harness) {
	e := open(t, h)
	scope := errandtype.UniqueUntilSucceeded
	e.wantNew(uniqueJob("a", "k", scope))
	e.recordOK(dead(e.claimOne("a")))
	e.wantDuplicateOf(uniqueJob("a2", "k", scope), "a")
	// A replay keeps the key (dead was in scope: no conflict possible).
	if _, err := e.s.JobReplay(e.ctx, &errandstore.JobReplayParams{ID: "a", Operator: "ana", Reason: "fixed"}); err != nil {
		t.Fatalf("replay a: %v", err)
	}
	e.wantDuplicateOf(uniqueJob("a3", "k", scope), "a")
	e.recordOK(succeeded(e.claimOne("a")))
	e.wantNew(uniqueJob("b", "k", scope))
	if _, err := e.s.JobCancel(e.ctx, &errandstore.JobCancelParams{ID: "b", Operator: "ana", Reason: "r"}); err != nil {
		t.Fatal(err)
	}
	e.wantNew(uniqueJob("c", "k", scope))
}

// testUniqueCustomScope: a scope built from states (unfinished and
// succeeded: once per key unless it failed) is kept and enforced, and jobs
// of one key with different scopes each hold it by their own.
func testUniqueCustomScope(t *testing.T, h harness) {
	e := open(t, h)
	scope := errand.UniqueScopeOf(errandtype.StateQueued, errandtype.StateRunning, errandtype.StateRetrying, errandtype.StateSucceeded)
	e.wantNew(uniqueJob("a", "k", scope))
	e.recordOK(dead(e.claimOne("a")))
	e.wantNew(uniqueJob("b", "k", scope))
	e.recordOK(succeeded(e.claimOne("b")))
	e.wantDuplicateOf(uniqueJob("c", "k", scope), "b")
	if s := e.get("b").UniqueScope; s == nil || *s != scope {
		t.Errorf("scope read back as %v, want %v", s, scope)
	}
	// A job whose scope is until_finished still meets b, which holds the
	// key by its own scope.
	e.wantDuplicateOf(uniqueJob("d", "k", errandtype.UniqueUntilFinished), "b")
}

// testUniqueWithinBatch: two jobs of one batch with one key: the second is
// the first's duplicate, whatever the scope.
func testUniqueWithinBatch(t *testing.T, h harness) {
	e := open(t, h)
	p := uniqueJob("w", "k-win", errandtype.UniqueUntilFinished)
	p.UniqueWindow = time.Hour
	rs := e.insertResults(uniqueJob("a", "k", errandtype.UniqueUntilFinished), uniqueJob("b", "k", errandtype.UniqueUntilFinished),
		newJob("plain"), p, func() *errandstore.JobInsertParams { q := *p; q.ID = "w2"; return &q }())
	want := []struct {
		id  string
		dup bool
	}{{"a", false}, {"a", true}, {"plain", false}, {"w", false}, {"w", true}}
	for i, w := range want {
		if rs[i].Job.ID != w.id || rs[i].Duplicate != w.dup {
			t.Errorf("job %d: got %s duplicate %v, want %s duplicate %v", i, rs[i].Job.ID, rs[i].Duplicate, w.id, w.dup)
		}
	}
}

// testUniqueWindow: with a window the key is held once per window of the
// store's clock: a second insert in the window is a duplicate; one in the
// next window is new even though the first job still waits. The job keeps
// the key as given and shows its window's start.
func testUniqueWindow(t *testing.T, h harness) {
	e := open(t, h)
	win := func(id string) *errandstore.JobInsertParams {
		p := uniqueJob(id, "digest:acct-7", errandtype.UniqueUntilFinished)
		p.UniqueWindow = time.Hour
		return p
	}
	start := T0.Truncate(time.Hour) // T0 is 09:30:00.123456
	a := e.wantNew(win("a"))
	if a.UniqueKey == nil || *a.UniqueKey != "digest:acct-7" || a.UniqueWindowStart == nil || !a.UniqueWindowStart.Equal(start) {
		t.Fatalf("job a: key %v window start %v; want digest:acct-7 and %s", a.UniqueKey, a.UniqueWindowStart, start)
	}
	same(t, "JobGet a", a, e.get("a"))
	e.clock.Advance(29 * time.Minute) // 09:59
	e.wantDuplicateOf(win("a-dup"), "a")
	// The same key without a window is another key space.
	e.wantNew(uniqueJob("nowin", "digest:acct-7", errandtype.UniqueUntilFinished))
	e.clock.Advance(time.Minute) // 10:00:00.123456: the next window
	b := e.wantNew(win("b"))
	if b.UniqueWindowStart == nil || !b.UniqueWindowStart.Equal(start.Add(time.Hour)) {
		t.Errorf("job b: window start %v, want %s", b.UniqueWindowStart, start.Add(time.Hour))
	}
	e.wantDuplicateOf(win("b-dup"), "b")
	// Within a window the scope still rules: once b succeeded the key is
	// free in its window too.
	js := e.claim(10)
	for _, j := range js {
		e.recordOK(succeeded(j))
	}
	e.wantNew(win("c"))
}

// testUniqueReplayConflict: a replay that would take back a key another
// job now holds is refused with a *UniqueConflictError naming the holder,
// and writes nothing (no state change, no audit record); once the holder
// finished, the replay goes through. A bulk replay meeting such a job
// fails with the same error.
func testUniqueReplayConflict(t *testing.T, h harness) {
	e := open(t, h)
	scope := errandtype.UniqueUntilFinished
	e.wantNew(uniqueJob("a", "k", scope))
	e.recordOK(dead(e.claimOne("a")))
	e.wantNew(uniqueJob("b", "k", scope))
	before := e.get("a")

	_, err := e.s.JobReplay(e.ctx, &errandstore.JobReplayParams{ID: "a", Operator: "ana", Reason: "fixed"})
	var ce *errandtype.UniqueConflictError
	if !errors.As(err, &ce) || !errors.Is(err, errandtype.ErrUniqueConflict) || ce.ID != "a" || ce.Key != "k" || ce.HeldBy != "b" {
		t.Fatalf("replay a while b holds its key: %v; want a *UniqueConflictError for a, key k, held by b", err)
	}
	same(t, "a after the refused replay", before, e.get("a"))
	if rs, err := e.s.JobReplayAudit(e.ctx, &errandstore.JobReplayAuditParams{JobID: "a"}); err != nil || len(rs) != 0 {
		t.Fatalf("replay audit of a: %v, %v; want empty", rs, err)
	}
	_, err = e.s.JobReplayMany(e.ctx, &errandstore.JobReplayManyParams{Limit: 10, Operator: "ana", Reason: "bulk", Bulk: "bulk-1"})
	if !errors.Is(err, errandtype.ErrUniqueConflict) {
		t.Fatalf("bulk replay meeting a: %v; want ErrUniqueConflict", err)
	}
	same(t, "a after the refused bulk replay", before, e.get("a"))

	e.recordOK(succeeded(e.claimOne("b")))
	j, err := e.s.JobReplay(e.ctx, &errandstore.JobReplayParams{ID: "a", Operator: "ana", Reason: "fixed"})
	if err != nil || j.State != errandtype.StateQueued {
		t.Fatalf("replay a once b succeeded: %v, %v; want it queued", j, err)
	}
	e.wantDuplicateOf(uniqueJob("c", "k", scope), "a")
}

// testUniqueInvalid: a scope that leaves out an unfinished state, holds
// cancelled but not dead jobs, or comes without a key, or a window below
// the minimum, is an *InputError and writes nothing.
func testUniqueInvalid(t *testing.T, h harness) {
	e := open(t, h)
	noKey := newJob("nokey")
	noKey.UniqueScope = errandtype.UniqueUntilFinished
	shortWindow := uniqueJob("short", "k", errandtype.UniqueUntilFinished)
	shortWindow.UniqueWindow = time.Microsecond
	for _, p := range []*errandstore.JobInsertParams{
		uniqueJob("no-running", "k", errand.UniqueScopeOf(errandtype.StateQueued, errandtype.StateRetrying)),
		uniqueJob("cancel-not-dead", "k", errandtype.UniqueUntilFinished|errand.UniqueScopeOf(errandtype.StateCancelled)),
		uniqueJob("bad-state", "k", errand.UniqueScopeOf("paused")),
		noKey, shortWindow,
	} {
		_, err := e.s.JobInsertMany(e.ctx, &errandstore.JobInsertManyParams{Jobs: []*errandstore.JobInsertParams{p}})
		if !errors.Is(err, errandtype.ErrInvalid) {
			t.Errorf("insert %s: %v; want an *InputError", p.ID, err)
		}
		e.notFound(p.ID)
	}
}
