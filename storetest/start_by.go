package storetest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
)

// startByCases check a job's start-by time: the deadline of its first
// start, ended with class start_by, kept apart from the maximum age.
var startByCases = []testCase{
	{"EndsJobNotStarted", testStartByEnds},
	{"NeverClaimedLate", testStartByNeverClaimed},
	{"BoundsFirstStartOnly", testStartByFirstStart},
	{"FairClaimPutsBackMaxAge", testStartByFairClaim},
	{"LargeBatch", testStartByLargeBatch},
	{"ReplayClears", testStartByReplay},
	{"BeforeRunAtRefused", testStartByBeforeRunAt},
}

// testStartByEnds checks that a job not started by its start-by is never
// claimed and dies with class start_by, not a microsecond early, while a
// job whose maximum age comes first dies with class expired.
func testStartByEnds(t *testing.T, h harness) {
	e := open(t, h)
	startBy := T0.Add(5 * time.Minute)
	a, b, c := newJob("a"), newJob("b"), newJob("c")
	a.StartBy, a.MaxAge, a.Delay = startBy, time.Hour, 10*time.Minute // available only after its start-by
	b.StartBy, b.Delay = startBy, 10*time.Minute
	c.StartBy, c.MaxAge, c.Delay = T0.Add(time.Hour), 7*time.Minute, 10*time.Minute
	for _, j := range e.insert(a, b, c) {
		want := startBy
		if j.ID == "c" {
			want = T0.Add(7 * time.Minute)
		}
		if j.Deadline == nil || !j.Deadline.Equal(want) || j.StartBy == nil {
			t.Errorf("inserted %s: deadline %v, start_by %v; want deadline %v and a start_by", j.ID, j.Deadline, j.StartBy, want)
		}
	}
	e.clock.Set(startBy.Add(-time.Microsecond))
	if r, err := e.s.JobSweep(e.ctx, &errandstore.JobSweepParams{}); err != nil || r != (errandstore.SweepResult{}) {
		t.Errorf("JobSweep before the start-by = %+v, %v; want nothing", r, err)
	}
	e.clock.Set(startBy)
	if r, err := e.s.JobSweep(e.ctx, &errandstore.JobSweepParams{}); err != nil || r != (errandstore.SweepResult{Dead: 2}) {
		t.Errorf("JobSweep at the start-by = %+v, %v; want 2 dead", r, err)
	}
	for _, id := range []string{"a", "b"} {
		got := e.get(id)
		ent := expiredEntry(t, got, 0, 0, startBy, errandstore.ClassStartBy)
		if ent.Message != errandstore.StartByMessage || got.State != errandtype.StateDead || got.Attempt != 0 {
			t.Errorf("job %s past its start-by: state %s, attempt %d, entry %+v; want dead, attempt 0, %q", id, got.State, got.Attempt, ent, errandstore.StartByMessage)
		}
	}
	e.clock.Set(T0.Add(7 * time.Minute))
	e.claimNone()
	got := e.get("c")
	if ent := expiredEntry(t, got, 0, 0, e.now(), errandstore.ClassExpired); ent.Message != errandstore.ExpiredMessage {
		t.Errorf("job past its maximum age before its start-by: entry %+v; want class expired", ent)
	}
}

// testStartByNeverClaimed checks that a claim that does not sweep never
// takes a job past its start-by either.
func testStartByNeverClaimed(t *testing.T, h harness) {
	e := open(t, h)
	e.claimNone() // this handle sweeps now
	p := newJob("a")
	p.StartBy = e.now().Add(shortLease)
	e.insert(p)
	e.insertIDs("b")
	e.clock.Advance(2 * shortLease)
	if got := e.claim(2); len(got) != 1 || got[0].ID != "b" {
		t.Fatalf("claim past a's start-by took %v; want b alone", ids(got))
	}
}

// testStartByFirstStart checks that the first claim puts back the maximum
// age's deadline, so a retry after the start-by still runs.
func testStartByFirstStart(t *testing.T, h harness) {
	e := open(t, h)
	startBy := T0.Add(5 * time.Minute)
	a, b := newJob("a"), newJob("b")
	a.StartBy, a.MaxAge = startBy, time.Hour
	b.StartBy, b.Priority = startBy, 1
	e.insert(a, b)
	e.clock.Advance(time.Minute)
	ja, jb := e.claimOne("a"), e.claimOne("b")
	if ja.Deadline == nil || !ja.Deadline.Equal(T0.Add(time.Hour)) || jb.Deadline != nil {
		t.Errorf("claimed: a's deadline %v, b's %v; want created_at+max_age (%v) and none", ja.Deadline, jb.Deadline, T0.Add(time.Hour))
	}
	if ja.StartBy == nil || !ja.StartBy.Equal(startBy) {
		t.Errorf("claimed a: start_by %v; want it kept, %v", ja.StartBy, startBy)
	}
	e.recordOK(retry(ja, 10*time.Minute))
	e.recordOK(retry(jb, 10*time.Minute))
	e.clock.Advance(10 * time.Minute) // past the start-by
	if r, err := e.s.JobSweep(e.ctx, &errandstore.JobSweepParams{}); err != nil || r != (errandstore.SweepResult{}) {
		t.Errorf("JobSweep of retries past their start-by = %+v, %v; want nothing", r, err)
	}
	if got := e.claim(2); len(got) != 2 || got[0].Attempt != 2 || got[1].Attempt != 2 {
		t.Errorf("claim of retries past their start-by: %v; want a and b on attempt 2", ids(got))
	}
}

// testStartByFairClaim checks that a fair claim, too, puts back the
// maximum age's deadline.
func testStartByFairClaim(t *testing.T, h harness) {
	e := open(t, h)
	p := tenant("a", "t1")
	p.StartBy, p.MaxAge = T0.Add(5*time.Minute), time.Hour
	e.insert(p)
	js := e.claimFair(1)
	if len(js) != 1 || js[0].Deadline == nil || !js[0].Deadline.Equal(T0.Add(time.Hour)) {
		t.Fatalf("fair claim of a job with a start-by: %+v; want it with deadline %v", js, T0.Add(time.Hour))
	}
}

// testStartByLargeBatch checks a batch as large as a bulk enqueue sends,
// which a store may stream in bulk: each job reads back as its result says.
func testStartByLargeBatch(t *testing.T, h harness) {
	e := open(t, h)
	var ps []*errandstore.JobInsertParams
	for i := range 100 {
		p := newJob(fmt.Sprintf("j%03d", i))
		if i%2 == 0 {
			p.StartBy = T0.Add(time.Duration(i+1) * time.Second)
		}
		if i%3 == 0 {
			p.MaxAge = 30 * time.Second
		}
		ps = append(ps, p)
	}
	for i, j := range e.insert(ps...) {
		same(t, "job "+j.ID, j, e.get(j.ID))
		want := errandstore.FirstDeadline(T0, ps[i].MaxAge, ps[i].StartBy)
		if (want == nil) != (j.Deadline == nil) || (want != nil && !want.Equal(*j.Deadline)) {
			t.Errorf("job %s: deadline %v, want %v", j.ID, j.Deadline, want)
		}
	}
}

// testStartByReplay checks that a replay clears the start-by: the job runs.
func testStartByReplay(t *testing.T, h harness) {
	e := open(t, h)
	p := newJob("a")
	p.StartBy = T0.Add(time.Minute)
	e.insert(p)
	e.clock.Advance(time.Minute)
	e.claimNone()
	if got := e.get("a"); got.State != errandtype.StateDead {
		t.Fatalf("job past its start-by: state %s, want dead", got.State)
	}
	got, err := e.s.JobReplay(e.ctx, &errandstore.JobReplayParams{ID: "a", Operator: "ana", Reason: "late is fine"})
	if err != nil {
		t.Fatalf("JobReplay: %v", err)
	}
	if got.StartBy != nil || got.Deadline != nil {
		t.Errorf("replayed: start_by %v, deadline %v; want none", got.StartBy, got.Deadline)
	}
	e.claimOne("a")
}

// testStartByBeforeRunAt checks that a start-by the job could never meet
// is refused, and nothing of its batch written.
func testStartByBeforeRunAt(t *testing.T, h harness) {
	e := open(t, h)
	bad := newJob("bad")
	bad.RunAt, bad.StartBy = T0.Add(time.Hour), T0.Add(time.Minute)
	_, err := e.s.JobInsertMany(e.ctx, &errandstore.JobInsertManyParams{Jobs: []*errandstore.JobInsertParams{newJob("good"), bad}})
	var ie *errandtype.InputError
	if !errors.As(err, &ie) || ie.Field != "start_by" {
		t.Fatalf("insert with a start-by before its run-at = %v; want an *InputError on start_by", err)
	}
	e.notFound("good")
}
