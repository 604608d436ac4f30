package storetest

import (
	"testing"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandstore"
)

var nextDueCases = []testCase{
	{"NothingWaiting", testNextDueNothing},
	{"ScheduledRetryingSnoozed", testNextDueStates},
	{"QueuesAndKinds", testNextDueFilters},
	{"Priorities", testNextDuePriorities},
	{"Boundary", testNextDueBoundary},
	{"InClaim", testNextDueInClaim},
}

// nextDue asks JobNextDue and fails the test on an error.
func (e *env) nextDue(p *errandstore.JobNextDueParams) (time.Duration, bool) {
	e.t.Helper()
	r, err := e.s.JobNextDue(e.ctx, p)
	d, ok := r.Wait, r.Found
	if err != nil {
		e.t.Fatalf("JobNextDue(%+v): %v", p, err)
	}
	return d, ok
}

// wantNextDue checks JobNextDue's answer for the default queue.
func (e *env) wantNextDue(what string, want time.Duration, wantOK bool) {
	e.t.Helper()
	e.wantNextDueWith(what, &errandstore.JobNextDueParams{Queues: []string{errand.DefaultQueue}}, want, wantOK)
}

func (e *env) wantNextDueWith(what string, p *errandstore.JobNextDueParams, want time.Duration, wantOK bool) {
	e.t.Helper()
	got, ok := e.nextDue(p)
	if ok != wantOK || got != want {
		if wantOK {
			e.t.Errorf("%s: JobNextDue = %s, %v; want %s, true", what, got, ok, want)
		} else {
			e.t.Errorf("%s: JobNextDue = %s, %v; want nothing due", what, got, ok)
		}
	}
}

func scheduled(id string, at time.Time) *errandstore.JobInsertParams {
	p := newJob(id)
	p.RunAt = at
	return p
}

// testNextDueNothing: no job, jobs available already, running and finished
// jobs, and no queue at all are nothing due.
func testNextDueNothing(t *testing.T, h harness) {
	e := open(t, h)
	e.wantNextDue("empty store", 0, false)
	e.insert(newJob("run"), newJob("done"), newJob("ready"))
	e.wantNextDue("only available jobs", 0, false)
	js := e.claim(2)
	e.recordOK(succeeded(js[1]))
	e.insert(scheduled("cancelled", T0.Add(time.Minute)))
	e.wantNextDue("a scheduled job", time.Minute, true)
	if _, err := e.s.JobCancel(e.ctx, &errandstore.JobCancelParams{ID: "cancelled"}); err != nil {
		t.Fatal(err)
	}
	// A running job's lease ending is the sweep's business, not a schedule.
	e.wantNextDue("running, succeeded and cancelled jobs", 0, false)
	e.insert(scheduled("later", T0.Add(time.Hour)))
	e.wantNextDueWith("no queue", &errandstore.JobNextDueParams{}, 0, false)
}

// testNextDueStates: a scheduled job, a retry waiting out its backoff and
// a snoozed job each come due, on the store's clock, earliest first; a job
// that came due is no longer the answer.
func testNextDueStates(t *testing.T, h harness) {
	e := open(t, h)
	e.insert(newJob("to-retry"), newJob("to-snooze"), scheduled("scheduled", T0.Add(90*time.Second)))
	e.wantNextDue("a job scheduled in 90s", 90*time.Second, true)
	js := e.claim(2)
	if len(js) != 2 {
		t.Fatalf("claim: %v", ids(js))
	}
	e.recordOK(retry(js[0], 30*time.Second))
	e.wantNextDue("a retry due in 30s", 30*time.Second, true)
	e.clock.Advance(10 * time.Second)
	e.recordOK(&errandstore.JobOutcome{JobLease: leaseOf(js[1]), Kind: errandstore.OutcomeSnooze, Delay: 5 * time.Second})
	e.wantNextDue("a snooze due in 5s", 5*time.Second, true)
	e.clock.Advance(5 * time.Second)
	e.wantNextDue("the snoozed job due now", 15*time.Second, true)
	e.clock.Advance(15 * time.Second)
	e.wantNextDue("the retry due now", 60*time.Second, true)
	e.clock.Advance(time.Hour)
	e.wantNextDue("everything due", 0, false)
}

// testNextDueFilters: the answer is the earliest over the queues asked
// about, among the kinds asked about.
func testNextDueFilters(t *testing.T, h harness) {
	e := open(t, h)
	mk := func(id, queue, kind string, in time.Duration) *errandstore.JobInsertParams {
		p := scheduled(id, T0.Add(in))
		p.Queue, p.Kind = queue, kind
		return p
	}
	e.insert(
		mk("a-email", "a", "email", 40*time.Second),
		mk("a-report", "a", "report", 10*time.Second),
		mk("b-email", "b", "email", 20*time.Second),
		mk("c-sms", "c", "sms", time.Second),
	)
	for _, c := range []struct {
		queues, kinds []string
		want          time.Duration
		ok            bool
	}{
		{[]string{"a"}, nil, 10 * time.Second, true},
		{[]string{"a"}, []string{"email"}, 40 * time.Second, true},
		{[]string{"a"}, []string{"email", "report"}, 10 * time.Second, true},
		{[]string{"a"}, []string{"sms"}, 0, false},
		{[]string{"a", "b"}, []string{"email"}, 20 * time.Second, true},
		{[]string{"b", "a", "c"}, nil, time.Second, true},
		{[]string{"b", "a", "c"}, []string{"email", "report"}, 10 * time.Second, true},
		{[]string{"nowhere"}, nil, 0, false},
	} {
		e.wantNextDueWith("queues "+join(c.queues)+" kinds "+join(c.kinds),
			&errandstore.JobNextDueParams{Queues: c.queues, Kinds: c.kinds}, c.want, c.ok)
	}
}

// testNextDuePriorities: the answer is the earliest over every priority,
// whichever comes first in claim order, past jobs available already and
// jobs of other kinds in each.
func testNextDuePriorities(t *testing.T, h harness) {
	e := open(t, h)
	mk := func(id, kind string, priority int, in time.Duration) *errandstore.JobInsertParams {
		p := newJob(id)
		if in > 0 {
			p.RunAt = T0.Add(in)
		}
		p.Kind, p.Priority = kind, priority
		return p
	}
	e.insert(
		mk("ready-high", "k", -5, 0),
		mk("ready-low", "k", 9, 0),
		mk("high-later", "k", -5, time.Hour),
		mk("mid-other-kind", "other", 0, 5*time.Second),
		mk("mid", "k", 0, 50*time.Second),
		mk("low-soon", "k", 9, 30*time.Second),
		mk("lowest", "rare", errandstore.MaxPriority, 20*time.Second),
		mk("highest", "rare", errandstore.MinPriority, 40*time.Second),
	)
	for _, c := range []struct {
		kinds []string
		want  time.Duration
	}{
		{nil, 5 * time.Second},
		{[]string{"k"}, 30 * time.Second},
		{[]string{"rare"}, 20 * time.Second},
		{[]string{"k", "other"}, 5 * time.Second},
	} {
		e.wantNextDueWith("kinds "+join(c.kinds), &errandstore.JobNextDueParams{Queues: []string{errand.DefaultQueue}, Kinds: c.kinds}, c.want, true)
	}
}

// testNextDueBoundary: a job is due when the clock reaches its
// available_at, the same instant a claim takes it; a microsecond before, it
// is a microsecond away.
func testNextDueBoundary(t *testing.T, h harness) {
	e := open(t, h)
	e.insert(scheduled("j", T0.Add(time.Second)))
	e.clock.Advance(time.Second - time.Microsecond)
	e.wantNextDue("a microsecond before", time.Microsecond, true)
	e.claimNone()
	e.clock.Advance(time.Microsecond)
	e.wantNextDue("at available_at", 0, false)
	e.claimOne("j")
}

func join(ss []string) string {
	if len(ss) == 0 {
		return "(all)"
	}
	out := ss[0]
	for _, s := range ss[1:] {
		out += "," + s
	}
	return out
}

// testNextDueInClaim: a store that is a NextDueClaimer claims as
// JobClaimMany does and answers as JobNextDue does, on the same clock: a
// job at its available_at is claimed and not the answer; a microsecond
// before, it is the answer and not claimed.
func testNextDueInClaim(t *testing.T, h harness) {
	e := open(t, h)
	dc, ok := e.s.(errandstore.NextDueClaimer)
	if !ok {
		t.Skip("the store is not a NextDueClaimer")
	}
	claim := func(what string, next *errandstore.JobNextDueParams, wantIDs []string, want time.Duration, wantOK bool) {
		t.Helper()
		js, due, err := dc.JobClaimManyNextDue(e.ctx, claimParams(10), next)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if got := ids(js); join(got) != join(wantIDs) {
			t.Errorf("%s: claimed %v, want %v", what, got, wantIDs)
		}
		if due.Wait != want || due.Found != wantOK {
			t.Errorf("%s: next due %s, %v; want %s, %v", what, due.Wait, due.Found, want, wantOK)
		}
	}
	dflt := &errandstore.JobNextDueParams{Queues: []string{errand.DefaultQueue}}
	claim("empty store", dflt, nil, 0, false)
	e.insert(newJob("ready"), scheduled("soon", T0.Add(time.Second)), scheduled("later", T0.Add(20*time.Second)))
	claim("a ready job, two scheduled", dflt, []string{"ready"}, time.Second, true)
	e.clock.Advance(time.Second - time.Microsecond)
	claim("a microsecond before", dflt, nil, time.Microsecond, true)
	e.clock.Advance(time.Microsecond)
	claim("at available_at", dflt, []string{"soon"}, 19*time.Second, true)
	claim("another kind", &errandstore.JobNextDueParams{Queues: []string{errand.DefaultQueue}, Kinds: []string{"other"}}, nil, 0, false)
	claim("no queue", &errandstore.JobNextDueParams{}, nil, 0, false)
	claim("no question", nil, nil, 0, false)
	e.clock.Advance(19 * time.Second) // within the claimed jobs' leases
	claim("everything due", dflt, []string{"later"}, 0, false)
}
