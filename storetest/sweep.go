package storetest

import (
	"testing"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
)

var sweepCases = []testCase{
	{"FinalAttemptCrashDiesAtNextClaim", testSweepFinalAttemptCrash},
	{"ExpiredLeaseRetriesAtNextClaim", testSweepExpiredLeaseAtClaim},
	{"ExpiredLease", testSweepExpiredLease},
	{"LiveLeaseUntouched", testSweepLiveLease},
	{"Deadline", testSweepDeadline},
	{"DeadlineAtClaim", testSweepDeadlineAtClaim},
	{"DeadlineOfRunningJob", testSweepDeadlineRunning},
	{"ClaimSweepsOncePerInterval", testSweepClaimPace},
	{"SweepCountsForClaims", testSweepCountsForClaims},
	{"DeadlinePassedNeverClaimed", testSweepDeadlineBeforeSweep},
}

// shortLease ends within errandstore.ClaimSweepInterval of a claim.
const shortLease = errandstore.ClaimSweepInterval / 4

// testSweepClaimPace checks that claims through one store handle sweep at
// most once per errandstore.ClaimSweepInterval on the store's clock, and that a
// handle's first claim, and the first after the interval, do sweep: a lease
// that expires between two sweeps is recovered by the first claim after
// the interval, and a new handle (another process) sweeps at once.
func testSweepClaimPace(t *testing.T, h harness) {
	e := open(t, h)
	p := newJob("a")
	p.MaxAttempts = 10 // a runs three times
	e.insert(p)
	start := e.now()
	first := e.claimWith(&errandstore.JobClaimParams{Queues: []string{errand.DefaultQueue}, Limit: 1, Lease: shortLease, Owner: owner})
	if len(first) != 1 {
		t.Fatalf("first claim: %d jobs, want a", len(first))
	}
	// The lease has expired, but this handle swept at start, less than an
	// interval ago: the claim does not sweep and a stays running.
	e.clock.Advance(2 * shortLease)
	e.claimNone()
	e.unchanged("expired lease between two sweeps", first[0])
	// A claim an interval after the last sweep sweeps, and takes a again.
	now := e.clock.Advance(start.Add(errandstore.ClaimSweepInterval).Sub(e.now()))
	again := e.claimOne("a")
	if again.Attempt != 2 || len(again.Errors) != 1 || again.Errors[0].Class != errandstore.ClassLeaseExpired ||
		!again.Errors[0].At.Equal(now) {
		t.Fatalf("claim an interval later: attempt %d, history %+v; want attempt 2 after a lease_expired entry at %v",
			again.Attempt, again.Errors, now)
	}

	// Another handle on the database paces its own claims: its first one
	// sweeps, whatever this handle did.
	e.clock.Advance(lease + time.Second) // again's lease expired; a sweep of e.s is due
	e.insertIDs("b")
	third := e.claimWith(&errandstore.JobClaimParams{Queues: []string{errand.DefaultQueue}, Limit: 2, Lease: shortLease, Owner: owner})
	if len(third) != 2 {
		t.Fatalf("claim of a and b: %d jobs", len(third))
	}
	e.clock.Advance(2 * shortLease)
	s2 := e.second()
	js, err := s2.JobClaimMany(e.ctx, &errandstore.JobClaimParams{Queues: []string{errand.DefaultQueue}, Limit: 2, Lease: lease, Owner: "worker-2"})
	if err != nil {
		t.Fatalf("claim on a second handle: %v", err)
	}
	if len(js) != 2 {
		t.Errorf("first claim of a second handle took %d jobs; want a and b, swept at once", len(js))
	}
}

// expiredEntry is the history entry a sweep writes for job j's lease; the
// message is the store's own words.
func expiredEntry(t *testing.T, got *errandtype.Job, attempt, replay int, at time.Time, class string) errandtype.AttemptError {
	t.Helper()
	if len(got.Errors) == 0 {
		t.Fatalf("job %s has no history; want a %s entry", got.ID, class)
	}
	msg := got.Errors[len(got.Errors)-1].Message
	if msg == "" {
		t.Errorf("job %s: %s entry has no message", got.ID, class)
	}
	return errandtype.AttemptError{Attempt: attempt, Replay: replay, At: at, Class: class, Message: msg}
}

// testSweepFinalAttemptCrash checks guarantee 4: a worker that dies on the
// final attempt leaves a job that the next claim dead-letters instead of
// running again.
func testSweepFinalAttemptCrash(t *testing.T, h harness) {
	e := open(t, h)
	p := newJob("a")
	p.MaxAttempts = 2
	e.insert(p)
	first := e.claimOne("a")
	failAt := e.clock.Advance(time.Second)
	o := retry(first, 0)
	e.recordOK(o)
	last := e.claimOne("a")
	if last.Attempt != 2 {
		t.Fatalf("attempt %d, want 2", last.Attempt)
	}
	// The worker crashes: no outcome. Until the lease expires the job is
	// running and nothing claims it.
	e.clock.Advance(lease - time.Microsecond)
	e.claimNone()
	if got := e.get("a"); got.State != errandtype.StateRunning {
		t.Fatalf("before expiry: state %s, want running", got.State)
	}
	now := e.clock.Advance(time.Minute)
	if got := e.get("a"); got.State != errandtype.StateRunning {
		t.Fatalf("expired but not yet swept: state %s, want running (only a sweep moves it)", got.State)
	}
	e.claimNone()
	got := e.get("a")
	ent := expiredEntry(t, got, 2, 0, now, errandstore.ClassLeaseExpired)
	want := *last
	want.State = errandtype.StateDead
	want.LeaseToken, want.LeaseUntil = nil, nil
	want.FinishedAt = ptr(now)
	want.Errors = []errandtype.AttemptError{entry(o, 0, failAt), ent}
	want.LastError = lastErr(ent)
	same(t, "final attempt swept at the next claim", &want, got)
	e.clock.Advance(time.Hour)
	e.claimNone()
}

// testSweepExpiredLeaseAtClaim checks that a job whose worker died with
// attempts left is claimable at once, by the claim that sweeps it.
func testSweepExpiredLeaseAtClaim(t *testing.T, h harness) {
	e := open(t, h)
	e.insertIDs("a")
	first := e.claimOne("a")
	now := e.clock.Advance(2 * lease)
	second := e.claimOne("a")
	ent := expiredEntry(t, second, 1, 0, now, errandstore.ClassLeaseExpired)
	want := claimed(first, token(second), now, lease, owner)
	want.AvailableAt = now
	want.Errors = []errandtype.AttemptError{ent}
	want.LastError = lastErr(ent)
	same(t, "job reclaimed after its lease expired", want, second)
}

// testSweepExpiredLease checks JobSweep on expired leases, final and not.
func testSweepExpiredLease(t *testing.T, h harness) {
	e := open(t, h)
	p := newJob("last")
	p.MaxAttempts = 1
	e.insert(newJob("more"), p)
	js := e.claim(2)
	if len(js) != 2 {
		t.Fatalf("claimed %d of 2", len(js))
	}
	now := e.clock.Advance(lease)
	r, err := e.s.JobSweep(e.ctx, &errandstore.JobSweepParams{})
	if err != nil {
		t.Fatalf("JobSweep: %v", err)
	}
	if r != (errandstore.SweepResult{Retried: 1, Dead: 1}) {
		t.Errorf("JobSweep = %+v, want 1 retried and 1 dead", r)
	}
	for _, j := range js {
		got := e.get(j.ID)
		ent := expiredEntry(t, got, 1, 0, now, errandstore.ClassLeaseExpired)
		want := *j
		want.LeaseToken, want.LeaseUntil = nil, nil
		want.Errors = []errandtype.AttemptError{ent}
		want.LastError = lastErr(ent)
		if j.ID == "more" {
			want.State = errandtype.StateRetrying
			want.AvailableAt = now
		} else {
			want.State = errandtype.StateDead
			want.FinishedAt = ptr(now)
		}
		same(t, "swept job "+j.ID, &want, got)
	}
	// A second sweep finds nothing; the retried job is claimable now.
	if r, err := e.s.JobSweep(e.ctx, &errandstore.JobSweepParams{}); err != nil || r != (errandstore.SweepResult{}) {
		t.Errorf("second JobSweep = %+v, %v; want nothing", r, err)
	}
	if j := e.claimOne("more"); j.Attempt != 2 {
		t.Errorf("reclaimed attempt %d, want 2", j.Attempt)
	}
}

func testSweepLiveLease(t *testing.T, h harness) {
	e := open(t, h)
	p := newJob("a")
	p.MaxAge = time.Hour
	e.insert(p, newJob("b"))
	j := e.claimOne("a")
	queued := e.get("b")
	e.clock.Advance(lease - time.Microsecond)
	r, err := e.s.JobSweep(e.ctx, &errandstore.JobSweepParams{})
	if err != nil || r != (errandstore.SweepResult{}) {
		t.Errorf("JobSweep inside the lease = %+v, %v; want nothing", r, err)
	}
	e.unchanged("running job inside its lease", j)
	e.unchanged("queued job inside its deadline", queued)
}

// testSweepDeadline checks that queued and retrying jobs past their deadline
// die with class expired, and not a microsecond before.
func testSweepDeadline(t *testing.T, h harness) {
	e := open(t, h)
	scheduled := newJob("scheduled")
	scheduled.MaxAge, scheduled.Delay = 10*time.Minute, 20*time.Minute
	retrying := newJob("retrying")
	retrying.MaxAge = 10 * time.Minute
	later := newJob("later")
	later.MaxAge = 11 * time.Minute
	e.insert(scheduled, retrying, later)
	j := e.claimOne("retrying")
	failAt := e.clock.Advance(time.Second)
	o := retry(j, time.Hour)
	e.recordOK(o)
	before := []*errandtype.Job{e.get("scheduled"), e.get("retrying")}

	e.clock.Set(T0.Add(10*time.Minute - time.Microsecond))
	if r, err := e.s.JobSweep(e.ctx, &errandstore.JobSweepParams{}); err != nil || r != (errandstore.SweepResult{}) {
		t.Errorf("JobSweep before the deadline = %+v, %v; want nothing", r, err)
	}
	now := T0.Add(10 * time.Minute)
	e.clock.Set(now)
	r, err := e.s.JobSweep(e.ctx, &errandstore.JobSweepParams{})
	if err != nil || r != (errandstore.SweepResult{Dead: 2}) {
		t.Errorf("JobSweep at the deadline = %+v, %v; want 2 dead", r, err)
	}
	for _, b := range before {
		got := e.get(b.ID)
		// The entry's attempt is the job's attempt when it expired: 0 for a
		// job never claimed.
		ent := expiredEntry(t, got, b.Attempt, 0, now, errandstore.ClassExpired)
		want := *b
		want.State = errandtype.StateDead
		want.FinishedAt = ptr(now)
		want.Errors = append(append([]errandtype.AttemptError{}, b.Errors...), ent)
		want.LastError = lastErr(ent)
		same(t, "expired job "+b.ID, &want, got)
	}
	if got := e.get("retrying"); len(got.Errors) != 2 || got.Errors[0] != entry(o, 0, failAt) {
		t.Errorf("history of the expired retrying job: %+v", got.Errors)
	}
	if got := e.get("later"); got.State != errandtype.StateQueued {
		t.Errorf("job with a later deadline: state %s, want queued", got.State)
	}
}

func testSweepDeadlineAtClaim(t *testing.T, h harness) {
	e := open(t, h)
	p := newJob("a")
	p.MaxAge = 5 * time.Minute
	e.insert(p)
	now := e.clock.Advance(6 * time.Minute)
	e.claimNone()
	got := e.get("a")
	if got.State != errandtype.StateDead || len(got.Errors) != 1 || got.Errors[0].Class != errandstore.ClassExpired ||
		got.FinishedAt == nil || !got.FinishedAt.Equal(now) || got.Attempt != 0 {
		t.Errorf("job past its deadline after a claim: %+v; want dead at %v with one expired entry and attempt 0", got, now)
	}
}

// testSweepDeadlineRunning checks that a deadline does not take a job from
// the worker running it; if that worker dies, the sweep that expires the
// lease then finds the job past its deadline.
func testSweepDeadlineRunning(t *testing.T, h harness) {
	e := open(t, h)
	p := newJob("a")
	p.MaxAge = lease / 2
	e.insert(p)
	j := e.claimOne("a")
	e.clock.Advance(lease - time.Microsecond)
	if r, err := e.s.JobSweep(e.ctx, &errandstore.JobSweepParams{}); err != nil || r != (errandstore.SweepResult{}) {
		t.Errorf("JobSweep of a running job past its deadline = %+v, %v; want nothing", r, err)
	}
	e.unchanged("running job past its deadline", j)
	now := e.clock.Advance(time.Microsecond)
	r, err := e.s.JobSweep(e.ctx, &errandstore.JobSweepParams{})
	if err != nil || r != (errandstore.SweepResult{Retried: 1, Dead: 1}) {
		t.Errorf("JobSweep at lease expiry = %+v, %v; want the lease retried, then the job dead", r, err)
	}
	got := e.get("a")
	if got.State != errandtype.StateDead || len(got.Errors) != 2 ||
		got.Errors[0].Class != errandstore.ClassLeaseExpired || got.Errors[1].Class != errandstore.ClassExpired ||
		got.LastError == nil || got.LastError.Class != errandstore.ClassExpired || got.FinishedAt == nil || !got.FinishedAt.Equal(now) {
		t.Errorf("job: %+v; want dead with a lease_expired then an expired entry", got)
	}
}

// testSweepCountsForClaims checks that a JobSweep counts as the handle's
// last sweep: a claim within errandstore.ClaimSweepInterval of it does not sweep
// again.
func testSweepCountsForClaims(t *testing.T, h harness) {
	e := open(t, h)
	e.insertIDs("a")
	j := e.claimWith(&errandstore.JobClaimParams{Queues: []string{errand.DefaultQueue}, Limit: 1, Lease: lease, Owner: owner})[0]
	e.clock.Advance(lease - shortLease)
	swept := e.now()
	if r, err := e.s.JobSweep(e.ctx, &errandstore.JobSweepParams{}); err != nil || r != (errandstore.SweepResult{}) {
		t.Fatalf("JobSweep inside the lease = %+v, %v; want nothing", r, err)
	}
	e.clock.Advance(2 * shortLease) // the lease has expired
	e.claimNone()
	e.unchanged("expired lease within an interval of a JobSweep", j)
	e.clock.Advance(swept.Add(errandstore.ClaimSweepInterval).Sub(e.now()))
	if got := e.claimOne("a"); got.Attempt != 2 {
		t.Errorf("claim an interval after the sweep: attempt %d, want 2", got.Attempt)
	}
}

// testSweepDeadlineBeforeSweep checks that a waiting job whose deadline has
// passed is never claimed, even by a claim that does not sweep: it waits,
// queued, for the next sweep, which dead-letters it.
func testSweepDeadlineBeforeSweep(t *testing.T, h harness) {
	e := open(t, h)
	e.claimNone() // this handle sweeps now
	start := e.now()
	p := newJob("a")
	p.MaxAge = shortLease
	e.insert(p)
	e.insertIDs("b")
	e.clock.Advance(2 * shortLease)
	if got := e.claim(2); len(got) != 1 || got[0].ID != "b" {
		t.Fatalf("claim past a's deadline took %v; want b alone", got)
	}
	if got := e.get("a"); got.State != errandtype.StateQueued || len(got.Errors) != 0 {
		t.Fatalf("job past its deadline before a sweep: state %s, history %+v; want queued, untouched", got.State, got.Errors)
	}
	now := e.clock.Advance(start.Add(errandstore.ClaimSweepInterval).Sub(e.now()))
	e.claimNone()
	got := e.get("a")
	if got.State != errandtype.StateDead || len(got.Errors) != 1 || got.Errors[0].Class != errandstore.ClassExpired ||
		got.FinishedAt == nil || !got.FinishedAt.Equal(now) {
		t.Errorf("job past its deadline after the next sweep: %+v; want dead at %v with an expired entry", got, now)
	}
}
