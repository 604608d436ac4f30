package storetest

import (
	"encoding/json"
	"errors"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
)

// The breaker cases run on stores that implement the optional
// [errandstore.BreakerStore]; others skip them. Every time is the fake clock's.
var breakerCases = []testCase{
	{"ThresholdWithinWindowOpens", testBreakerThreshold},
	{"WindowExpiryStartsANewRun", testBreakerWindow},
	{"SuccessEndsTheRun", testBreakerSuccessEndsRun},
	{"ProbeWaitsForCooldown", testBreakerProbeCooldown},
	{"HalfOpenProbeLimit", testBreakerProbeLimit},
	{"LateProbeReleaseGivesNothingBack", testBreakerLateRelease},
	{"ProbeSuccessCloses", testBreakerProbeCloses},
	{"ProbeFailureReopens", testBreakerProbeReopens},
	{"LostProbesExpire", testBreakerProbeExpiry},
	{"ResetIsAudited", testBreakerReset},
	{"List", testBreakerList},
	{"Refusals", testBreakerRefusals},
	{"ProbeLimitAcrossStores", testBreakerProbeAcrossStores},
	{"KindsDeclaredLastWins", testBreakerKindsDeclare},
}

// breakerPolicy is the cases' policy: 3 failures within a minute open the
// breaker for 30 seconds; one probe at a time.
var breakerPolicy = errandtype.BreakerPolicy{Threshold: 3, Window: time.Minute, Cooldown: 30 * time.Second, Probes: 1}

func (e *env) breakers() errandstore.BreakerStore {
	e.t.Helper()
	bs, ok := e.s.(errandstore.BreakerStore)
	if !ok {
		e.t.Skip("the store is not an errandstore.BreakerStore")
	}
	return bs
}

func (e *env) breakerEvent(dep string, ev errandstore.BreakerEvent, pol errandtype.BreakerPolicy) *errandstore.BreakerUpdateResult {
	e.t.Helper()
	r, err := e.breakers().BreakerUpdate(e.ctx, &errandstore.BreakerUpdateParams{Dependency: dep, Event: ev, Policy: pol,
		Message: "connection refused"})
	if err != nil {
		e.t.Fatalf("BreakerUpdate(%s, %s): %v", dep, ev, err)
	}
	return r
}

// breaker reads one breaker back, nil when it has no row.
func (e *env) breaker(dep string) *errandtype.BreakerRecord {
	e.t.Helper()
	r, err := e.breakers().BreakerList(e.ctx, &errandstore.BreakerListParams{Dependencies: []string{dep}})
	if err != nil {
		e.t.Fatalf("BreakerList(%s): %v", dep, err)
	}
	switch len(r.Breakers) {
	case 0:
		return nil
	case 1:
		return r.Breakers[0]
	}
	e.t.Fatalf("BreakerList(%s) returned %d breakers", dep, len(r.Breakers))
	return nil
}

// checkBreaker compares the stored breaker, and the one an update returned,
// with want.
func (e *env) checkBreaker(what string, got *errandtype.BreakerRecord, want errandtype.BreakerRecord) {
	e.t.Helper()
	stored := e.breaker(want.Dependency)
	if !reflect.DeepEqual(got, &want) {
		e.t.Errorf("%s: update returned\n%+v\nwant\n%+v", what, *got, want)
	}
	if stored == nil || !reflect.DeepEqual(stored, &want) {
		e.t.Errorf("%s: stored\n%+v\nwant\n%+v", what, stored, want)
	}
}

func at(t time.Time) *time.Time { return &t }

func testBreakerThreshold(t *testing.T, h harness) {
	e := open(t, h)
	t0 := e.now()
	r := e.breakerEvent("smtp", errandstore.BreakerFailure, breakerPolicy)
	if r.Applied {
		t.Error("the first failure reported the breaker opened")
	}
	e.checkBreaker("one failure", r.Breaker, errandtype.BreakerRecord{Dependency: "smtp", State: errandstore.BreakerClosed,
		Failures: 1, FailingSince: at(t0), LastError: "connection refused", UpdatedAt: t0})
	e.clock.Advance(10 * time.Second)
	e.breakerEvent("smtp", errandstore.BreakerFailure, breakerPolicy)
	e.clock.Advance(49 * time.Second) // 59s after the first: still within the window
	t2 := e.now()
	r = e.breakerEvent("smtp", errandstore.BreakerFailure, breakerPolicy)
	if !r.Applied {
		t.Error("the third failure within the window did not report the breaker opened")
	}
	e.checkBreaker("three failures", r.Breaker, errandtype.BreakerRecord{Dependency: "smtp", State: errandtype.BreakerOpen,
		Failures: 3, FailingSince: at(t0), OpenedAt: at(t2), OpenUntil: at(t2.Add(30 * time.Second)), Trips: 1,
		LastError: "connection refused", UpdatedAt: t2})
	// A failure while open (a job that started before) is counted in the
	// run, and opens nothing anew.
	e.clock.Advance(time.Second)
	t3 := e.now()
	r = e.breakerEvent("smtp", errandstore.BreakerFailure, breakerPolicy)
	if r.Applied {
		t.Error("a failure while open reported the breaker opened")
	}
	e.checkBreaker("a failure while open", r.Breaker, errandtype.BreakerRecord{Dependency: "smtp", State: errandtype.BreakerOpen,
		Failures: 4, FailingSince: at(t0), OpenedAt: at(t2), OpenUntil: at(t2.Add(30 * time.Second)), Trips: 1,
		LastError: "connection refused", UpdatedAt: t3})
}

func testBreakerWindow(t *testing.T, h harness) {
	e := open(t, h)
	e.breakerEvent("smtp", errandstore.BreakerFailure, breakerPolicy)
	e.breakerEvent("smtp", errandstore.BreakerFailure, breakerPolicy)
	e.clock.Advance(time.Minute) // the run's first failure is a window old
	t1 := e.now()
	r := e.breakerEvent("smtp", errandstore.BreakerFailure, breakerPolicy)
	if r.Applied {
		t.Error("a failure a window after the run began opened the breaker")
	}
	e.checkBreaker("new run", r.Breaker, errandtype.BreakerRecord{Dependency: "smtp", State: errandstore.BreakerClosed,
		Failures: 1, FailingSince: at(t1), LastError: "connection refused", UpdatedAt: t1})
}

func testBreakerSuccessEndsRun(t *testing.T, h harness) {
	e := open(t, h)
	// A success of a dependency without a breaker writes nothing.
	if r := e.breakerEvent("smtp", errandstore.BreakerSuccess, breakerPolicy); r.Applied || r.Breaker.State != errandstore.BreakerClosed {
		t.Errorf("success on no breaker: %+v", *r.Breaker)
	}
	if b := e.breaker("smtp"); b != nil {
		t.Fatalf("a success created a breaker: %+v", *b)
	}
	t0 := e.now()
	e.breakerEvent("smtp", errandstore.BreakerFailure, breakerPolicy)
	e.breakerEvent("smtp", errandstore.BreakerFailure, breakerPolicy)
	e.clock.Advance(time.Second)
	t1 := e.now()
	r := e.breakerEvent("smtp", errandstore.BreakerSuccess, breakerPolicy)
	e.checkBreaker("success", r.Breaker, errandtype.BreakerRecord{Dependency: "smtp", State: errandstore.BreakerClosed,
		LastError: "connection refused", UpdatedAt: t1})
	_ = t0
	r = e.breakerEvent("smtp", errandstore.BreakerFailure, breakerPolicy)
	if r.Breaker.Failures != 1 || r.Breaker.State != errandstore.BreakerClosed {
		t.Errorf("the failure after a success: %+v, want a run of 1", *r.Breaker)
	}
}

// trip opens dep's breaker at the clock's time and returns that time.
func (e *env) trip(dep string, pol errandtype.BreakerPolicy) time.Time {
	e.t.Helper()
	for range pol.Threshold {
		e.breakerEvent(dep, errandstore.BreakerFailure, pol)
	}
	b := e.breaker(dep)
	if b == nil || b.State != errandtype.BreakerOpen {
		e.t.Fatalf("breaker %s after %d failures: %+v, want open", dep, pol.Threshold, b)
	}
	return e.now()
}

func testBreakerProbeCooldown(t *testing.T, h harness) {
	e := open(t, h)
	t0 := e.trip("smtp", breakerPolicy)
	e.clock.Set(t0.Add(30*time.Second - time.Microsecond))
	if r := e.breakerEvent("smtp", errandstore.BreakerProbe, breakerPolicy); r.Applied || r.Breaker.State != errandtype.BreakerOpen {
		t.Errorf("probe a microsecond before the cool-down ends: applied %v, %+v", r.Applied, *r.Breaker)
	}
	e.clock.Set(t0.Add(30 * time.Second))
	t1 := e.now()
	r := e.breakerEvent("smtp", errandstore.BreakerProbe, breakerPolicy)
	if !r.Applied {
		t.Fatal("probe at the end of the cool-down was refused")
	}
	e.checkBreaker("probing", r.Breaker, errandtype.BreakerRecord{Dependency: "smtp", State: errandtype.BreakerHalfOpen,
		Failures: 3, FailingSince: at(t0), OpenedAt: at(t0), Probes: 1, ProbeUntil: at(t1.Add(30 * time.Second)),
		Trips: 1, LastError: "connection refused", UpdatedAt: t1})
	// A closed breaker grants no probe: its jobs need none.
	if r := e.breakerEvent("imap", errandstore.BreakerProbe, breakerPolicy); r.Applied {
		t.Error("a closed breaker granted a probe")
	}
	if b := e.breaker("imap"); b != nil {
		t.Errorf("a refused probe wrote a breaker: %+v", *b)
	}
}

func testBreakerProbeLimit(t *testing.T, h harness) {
	e := open(t, h)
	two := breakerPolicy
	two.Probes = 2
	t0 := e.trip("smtp", two)
	e.clock.Set(t0.Add(time.Minute))
	granted := 0
	for range 4 {
		if e.breakerEvent("smtp", errandstore.BreakerProbe, two).Applied {
			granted++
		}
	}
	if granted != 2 {
		t.Fatalf("granted %d probes, want 2", granted)
	}
	// A released slot is granted again, once.
	e.breakerEvent("smtp", errandstore.BreakerRelease, two)
	if b := e.breaker("smtp"); b.Probes != 1 || b.State != errandtype.BreakerHalfOpen {
		t.Errorf("after a release: %+v, want half-open with 1 probe", *b)
	}
	if !e.breakerEvent("smtp", errandstore.BreakerProbe, two).Applied {
		t.Error("the released slot was not granted")
	}
	if e.breakerEvent("smtp", errandstore.BreakerProbe, two).Applied {
		t.Error("a third probe was granted")
	}
}

// testBreakerLateRelease: a probe's slot not reported by its ProbeUntil
// is granted to another probe; the first probe's release, fenced by the
// ProbeUntil its grant returned, then gives back nothing, and the second's
// gives back its slot.
func testBreakerLateRelease(t *testing.T, h harness) {
	e := open(t, h)
	t0 := e.trip("smtp", breakerPolicy)
	e.clock.Set(t0.Add(30 * time.Second))
	first := e.breakerEvent("smtp", errandstore.BreakerProbe, breakerPolicy)
	e.clock.Set(*first.Breaker.ProbeUntil)
	second := e.breakerEvent("smtp", errandstore.BreakerProbe, breakerPolicy)
	if !first.Applied || !second.Applied {
		t.Fatalf("probes granted %v and %v, want both (the first's slot presumed lost)", first.Applied, second.Applied)
	}
	e.clock.Advance(time.Second)
	release := func(until time.Time) {
		t.Helper()
		if _, err := e.breakers().BreakerUpdate(e.ctx, &errandstore.BreakerUpdateParams{Dependency: "smtp",
			Event: errandstore.BreakerRelease, Policy: breakerPolicy, ProbeUntil: until}); err != nil {
			t.Fatal(err)
		}
	}
	release(*first.Breaker.ProbeUntil)
	if b := e.breaker("smtp"); b.Probes != 1 {
		t.Errorf("after the late release of the first probe: %d probes, want the second's 1", b.Probes)
	}
	release(*second.Breaker.ProbeUntil)
	if b := e.breaker("smtp"); b.Probes != 0 || b.State != errandtype.BreakerHalfOpen {
		t.Errorf("after the second probe's release: %+v, want half-open with none", *b)
	}
}

func testBreakerProbeCloses(t *testing.T, h harness) {
	e := open(t, h)
	t0 := e.trip("smtp", breakerPolicy)
	e.clock.Set(t0.Add(30 * time.Second))
	e.breakerEvent("smtp", errandstore.BreakerProbe, breakerPolicy)
	e.clock.Advance(time.Second)
	t1 := e.now()
	r := e.breakerEvent("smtp", errandstore.BreakerSuccess, breakerPolicy)
	if !r.Applied {
		t.Error("the probe's success did not report the breaker closed")
	}
	e.checkBreaker("closed", r.Breaker, errandtype.BreakerRecord{Dependency: "smtp", State: errandstore.BreakerClosed,
		OpenedAt: at(t0), Trips: 1, LastError: "connection refused", UpdatedAt: t1})
	if e.breakerEvent("smtp", errandstore.BreakerProbe, breakerPolicy).Applied {
		t.Error("a closed breaker granted a probe")
	}
}

func testBreakerProbeReopens(t *testing.T, h harness) {
	e := open(t, h)
	t0 := e.trip("smtp", breakerPolicy)
	e.clock.Set(t0.Add(30 * time.Second))
	e.breakerEvent("smtp", errandstore.BreakerProbe, breakerPolicy)
	e.clock.Advance(time.Second)
	t1 := e.now()
	r := e.breakerEvent("smtp", errandstore.BreakerFailure, breakerPolicy)
	if !r.Applied {
		t.Error("the probe's failure did not report the breaker opened")
	}
	e.checkBreaker("reopened", r.Breaker, errandtype.BreakerRecord{Dependency: "smtp", State: errandtype.BreakerOpen,
		Failures: 4, FailingSince: at(t0), OpenedAt: at(t1), OpenUntil: at(t1.Add(30 * time.Second)), Trips: 2,
		LastError: "connection refused", UpdatedAt: t1})
	if e.breakerEvent("smtp", errandstore.BreakerProbe, breakerPolicy).Applied {
		t.Error("a reopened breaker granted a probe before its new cool-down ended")
	}
}

func testBreakerProbeExpiry(t *testing.T, h harness) {
	e := open(t, h)
	t0 := e.trip("smtp", breakerPolicy)
	e.clock.Set(t0.Add(30 * time.Second))
	e.breakerEvent("smtp", errandstore.BreakerProbe, breakerPolicy)
	e.clock.Advance(30*time.Second - time.Microsecond)
	if e.breakerEvent("smtp", errandstore.BreakerProbe, breakerPolicy).Applied {
		t.Error("a second probe was granted while the first may still report")
	}
	e.clock.Advance(time.Microsecond)
	if !e.breakerEvent("smtp", errandstore.BreakerProbe, breakerPolicy).Applied {
		t.Error("a probe that never reported kept its slot past its time")
	}
	if b := e.breaker("smtp"); b.Probes != 1 {
		t.Errorf("probes after the lost one expired: %d, want 1", b.Probes)
	}
}

func testBreakerReset(t *testing.T, h harness) {
	e := open(t, h)
	t0 := e.trip("smtp", breakerPolicy)
	e.clock.Advance(time.Second)
	t1 := e.now()
	r, err := e.breakers().BreakerUpdate(e.ctx, &errandstore.BreakerUpdateParams{Dependency: "smtp", Event: errandstore.BreakerReset,
		Operator: "ana", Reason: "relay fixed"})
	if err != nil {
		t.Fatal(err)
	}
	if !r.Applied {
		t.Error("a reset did not report itself applied")
	}
	e.checkBreaker("reset", r.Breaker, errandtype.BreakerRecord{Dependency: "smtp", State: errandstore.BreakerClosed,
		OpenedAt: at(t0), Trips: 1, LastError: "connection refused", UpdatedAt: t1})
	recs := e.auditList(&errandstore.AuditListParams{Action: errandtype.AuditBreakerReset})
	if len(recs) != 1 {
		t.Fatalf("audit has %d breaker resets, want 1", len(recs))
	}
	a := recs[0]
	if a.JobID != nil || a.Operator != "ana" || a.Reason != "relay fixed" || !a.At.Equal(t1) {
		t.Errorf("audit record %+v", a)
	}
	var d errandstore.BreakerResetDetails
	if err := json.Unmarshal(a.Details, &d); err != nil {
		t.Fatalf("details %s: %v", a.Details, err)
	}
	if d != (errandstore.BreakerResetDetails{Dependency: "smtp", PriorState: errandtype.BreakerOpen, Failures: 3}) {
		t.Errorf("details %+v", d)
	}
}

func testBreakerList(t *testing.T, h harness) {
	e := open(t, h)
	r, err := e.breakers().BreakerList(e.ctx, &errandstore.BreakerListParams{})
	if err != nil {
		t.Fatal(err)
	}
	if r.Breakers == nil || len(r.Breakers) != 0 || !r.Now.Equal(e.now()) {
		t.Errorf("empty list: %+v, want no breakers (non-nil) and now %s", r, e.now())
	}
	for _, d := range []string{"smtp", "billing", "imap"} {
		e.breakerEvent(d, errandstore.BreakerFailure, breakerPolicy)
	}
	e.clock.Advance(time.Second)
	r, err = e.breakers().BreakerList(e.ctx, &errandstore.BreakerListParams{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, b := range r.Breakers {
		names = append(names, b.Dependency)
	}
	if !reflect.DeepEqual(names, []string{"billing", "imap", "smtp"}) || !r.Now.Equal(e.now()) {
		t.Errorf("list: %v at %s, want billing, imap, smtp at %s", names, r.Now, e.now())
	}
	r, err = e.breakers().BreakerList(e.ctx, &errandstore.BreakerListParams{Dependencies: []string{"smtp", "billing", "none"}})
	if err != nil {
		t.Fatal(err)
	}
	names = nil
	for _, b := range r.Breakers {
		names = append(names, b.Dependency)
	}
	if !reflect.DeepEqual(names, []string{"billing", "smtp"}) {
		t.Errorf("filtered list: %v, want billing, smtp", names)
	}
}

func testBreakerRefusals(t *testing.T, h harness) {
	e := open(t, h)
	bad := []*errandstore.BreakerUpdateParams{
		{Dependency: "", Event: errandstore.BreakerFailure},
		{Dependency: "smtp", Event: "explode"},
		{Dependency: "smtp", Event: errandstore.BreakerFailure, Message: "nul\x00byte"},
		{Dependency: "smtp", Event: errandstore.BreakerFailure, Policy: errandtype.BreakerPolicy{Threshold: -1}},
		{Dependency: "smtp", Event: errandstore.BreakerReset, Operator: "ana"},
		{Dependency: "smtp", Event: errandstore.BreakerReset, Reason: "why"},
	}
	for _, p := range bad {
		if _, err := e.breakers().BreakerUpdate(e.ctx, p); !errors.Is(err, errandtype.ErrInvalid) {
			t.Errorf("BreakerUpdate(%+v): %v, want an *InputError", *p, err)
		}
	}
	if b := e.breaker("smtp"); b != nil {
		t.Errorf("a refused update wrote %+v", *b)
	}
	_, err := e.breakers().BreakerUpdate(e.ctx, &errandstore.BreakerUpdateParams{Dependency: "smpt", Event: errandstore.BreakerReset,
		Operator: "ana", Reason: "typo"})
	if !errors.Is(err, errandtype.ErrNotFound) {
		t.Errorf("reset of a dependency without a breaker: %v, want ErrNotFound", err)
	}
	if b := e.breaker("smpt"); b != nil {
		t.Errorf("a reset of an unknown dependency wrote %+v", *b)
	}
	if recs := e.auditList(&errandstore.AuditListParams{Action: errandtype.AuditBreakerReset}); len(recs) != 0 {
		t.Errorf("a refused reset was audited: %+v", recs)
	}
}

func testBreakerProbeAcrossStores(t *testing.T, h harness) {
	e := open(t, h)
	s2, ok := e.second().(errandstore.BreakerStore)
	if !ok {
		t.Fatal("the second store is not an errandstore.BreakerStore")
	}
	stores := []errandstore.BreakerStore{e.breakers(), s2}
	two := breakerPolicy
	two.Probes = 2
	t0 := e.trip("smtp", two)
	e.clock.Set(t0.Add(30 * time.Second))
	const racers = 8
	var mu sync.Mutex
	granted := 0
	var wg sync.WaitGroup
	for r := range racers {
		wg.Go(func() {
			res, err := stores[r%2].BreakerUpdate(e.ctx, &errandstore.BreakerUpdateParams{Dependency: "smtp", Event: errandstore.BreakerProbe, Policy: two})
			if err != nil {
				t.Errorf("BreakerUpdate: %v", err)
				return
			}
			if res.Applied {
				mu.Lock()
				granted++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if granted != 2 {
		t.Errorf("%d racers were granted a probe, want 2", granted)
	}
	// The first failures of a new dependency, racing, are all counted.
	for r := range racers {
		wg.Go(func() {
			if _, err := stores[r%2].BreakerUpdate(e.ctx, &errandstore.BreakerUpdateParams{Dependency: "imap", Event: errandstore.BreakerFailure,
				Policy: errandtype.BreakerPolicy{Threshold: 100}}); err != nil {
				t.Errorf("BreakerUpdate: %v", err)
			}
		})
	}
	wg.Wait()
	if b := e.breaker("imap"); b == nil || b.Failures != racers {
		t.Errorf("racing first failures: %+v, want %d failures", b, racers)
	}
}

func (e *env) kindDependencies() []errandstore.KindDependency {
	e.t.Helper()
	ks, err := e.breakers().BreakerKindsList(e.ctx)
	if err != nil {
		e.t.Fatalf("BreakerKindsList: %v", err)
	}
	return ks
}

func testBreakerKindsDeclare(t *testing.T, h harness) {
	e := open(t, h)
	bs := e.breakers()
	if ks := e.kindDependencies(); len(ks) != 0 {
		t.Fatalf("a new store lists %+v; want none", ks)
	}
	t0 := e.now()
	declare := func(ks ...errandstore.KindDependency) {
		t.Helper()
		if err := bs.BreakerKindsDeclare(e.ctx, &errandstore.BreakerKindsDeclareParams{Kinds: ks}); err != nil {
			t.Fatalf("BreakerKindsDeclare(%+v): %v", ks, err)
		}
	}
	declare(errandstore.KindDependency{Kind: "send_email", Dependency: "smtp"}, errandstore.KindDependency{Kind: "charge", Dependency: "payments"},
		errandstore.KindDependency{Kind: "audit_log"})
	want := []errandstore.KindDependency{{Kind: "charge", Dependency: "payments", DeclaredAt: t0}, {Kind: "send_email", Dependency: "smtp", DeclaredAt: t0}}
	if ks := e.kindDependencies(); !reflect.DeepEqual(ks, want) {
		t.Fatalf("declared kinds %+v; want %+v", ks, want)
	}
	// A later client (a new version) declares send_email with another
	// dependency and charge with none: the last declaration wins.
	e.clock.Advance(time.Minute)
	t1 := e.now()
	declare(errandstore.KindDependency{Kind: "send_email", Dependency: "mailgun"}, errandstore.KindDependency{Kind: "charge"})
	want = []errandstore.KindDependency{{Kind: "send_email", Dependency: "mailgun", DeclaredAt: t1}}
	if ks := e.kindDependencies(); !reflect.DeepEqual(ks, want) {
		t.Fatalf("declared kinds after the second declaration %+v; want %+v", ks, want)
	}
	for _, bad := range [][]errandstore.KindDependency{
		{{Kind: "charge", Dependency: "payments"}, {Kind: "bad kind", Dependency: "smtp"}},
		{{Kind: "charge", Dependency: "bad dep"}},
		{{Kind: "charge", Dependency: "payments"}, {Kind: "charge"}},
	} {
		var ie *errandtype.InputError
		if err := bs.BreakerKindsDeclare(e.ctx, &errandstore.BreakerKindsDeclareParams{Kinds: bad}); !errors.As(err, &ie) {
			t.Errorf("BreakerKindsDeclare(%+v) = %v; want an *errandtype.InputError", bad, err)
		}
	}
	if ks := e.kindDependencies(); !reflect.DeepEqual(ks, want) {
		t.Fatalf("refused declarations wrote %+v; want %+v kept", ks, want)
	}
}
