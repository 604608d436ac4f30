package breaker

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
	"github.com/errandhq/errand/internal/clock"
)

// fakeClock is a TimeSource whose Now stands still until a test moves it.
type fakeClock struct {
	clock.System
	now time.Time
}

func (c *fakeClock) Now() time.Time { return c.now }

// memStore keeps breakers in memory, deciding every event with
// errandstore.ApplyBreakerEvent on the clock's time, as the stores do.
type memStore struct {
	clock *fakeClock

	mu       sync.Mutex
	breakers map[string]*errandtype.BreakerRecord
	updates  []errandstore.BreakerUpdateParams
	lists    int
	declared []errandstore.KindDependency
}

func (s *memStore) BreakerUpdate(_ context.Context, p *errandstore.BreakerUpdateParams) (*errandstore.BreakerUpdateResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.updates = append(s.updates, *p)
	t := errandstore.ApplyBreakerEvent(s.breakers[p.Dependency], p, s.clock.now)
	if t.Changed {
		s.breakers[p.Dependency] = t.Next
	}
	return &errandstore.BreakerUpdateResult{Breaker: t.Next, Applied: t.Applied}, nil
}

func (s *memStore) BreakerList(_ context.Context, p *errandstore.BreakerListParams) (*errandstore.BreakerListResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lists++
	r := &errandstore.BreakerListResult{Now: s.clock.now}
	for _, d := range p.Dependencies {
		if b := s.breakers[d]; b != nil {
			c := *b
			r.Breakers = append(r.Breakers, &c)
		}
	}
	return r, nil
}

func (s *memStore) BreakerKindsDeclare(_ context.Context, p *errandstore.BreakerKindsDeclareParams) error {
	s.declared = p.Kinds
	return nil
}

func (s *memStore) BreakerKindsList(context.Context) ([]errandstore.KindDependency, error) {
	return s.declared, nil
}

// events returns the events written to the store.
func (s *memStore) events() []errandstore.BreakerEvent {
	s.mu.Lock()
	defer s.mu.Unlock()
	var evs []errandstore.BreakerEvent
	for _, u := range s.updates {
		evs = append(evs, u.Event)
	}
	return evs
}

var policy = errandtype.BreakerPolicy{Threshold: 2, Window: time.Minute, Cooldown: 30 * time.Second, Probes: 1}

// testGate returns a gate over send_email (dependency smtp) and report
// (none), and its store, with smtp's breaker opened by two failures.
func testGate(t *testing.T) (*Gate, *memStore, *fakeClock, *int) {
	t.Helper()
	clk := &fakeClock{now: time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)}
	st := &memStore{clock: clk, breakers: map[string]*errandtype.BreakerRecord{}}
	wakes := new(int)
	g := New(Config{Store: st, Kinds: []string{"send_email", "report"}, Dependency: map[string]string{"send_email": "smtp"},
		Policy: func(string) errandtype.BreakerPolicy { return policy.WithDefaults() }, Clock: clk,
		Logger: slog.New(slog.DiscardHandler), Wake: func() { *wakes++ }, StaleProbe: 24 * time.Hour})
	ctx := t.Context()
	for range 2 {
		g.Apply(ctx, g.Finish(ctx, Outcome{JobID: "x", Kind: "send_email", Event: errandstore.BreakerFailure, Message: "refused"}), nil)
	}
	if b := st.breakers["smtp"]; b == nil || b.State != errandtype.BreakerOpen {
		t.Fatalf("smtp after 2 failures: %+v; want open", b)
	}
	return g, st, clk, wakes
}

// recordingClaim returns a claim that answers each call with one job per
// kind, up to the limit, ids numbered from 1, and the params of each call.
func recordingClaim() (ClaimFunc, *[]errandstore.JobClaimParams) {
	var calls []errandstore.JobClaimParams
	n := 0
	return func(_ context.Context, p *errandstore.JobClaimParams) ([]*errandtype.Job, error) {
		calls = append(calls, *p)
		var jobs []*errandtype.Job
		for _, k := range p.Kinds {
			if len(jobs) == p.Limit {
				break
			}
			n++
			jobs = append(jobs, &errandtype.Job{ID: string(rune('0' + n)), Kind: k})
		}
		return jobs, nil
	}, &calls
}

// TestClaimLeavesOutOpenDependency: while smtp's breaker is open its kind
// is left out of the claim, and an idle queue sleeps no longer than the
// cool-down.
func TestClaimLeavesOutOpenDependency(t *testing.T) {
	g, _, _, _ := testGate(t)
	claim, calls := recordingClaim()
	jobs, err := g.Claim(t.Context(), &errandstore.JobClaimParams{Kinds: []string{"send_email", "report"}, Limit: 5}, claim)
	if err != nil || len(jobs) != 1 || jobs[0].Kind != "report" {
		t.Fatalf("claim with smtp open: %v, %v; want one report", jobs, err)
	}
	if len(*calls) != 1 || !slices.Equal((*calls)[0].Kinds, []string{"report"}) || (*calls)[0].Limit != 5 {
		t.Fatalf("claims sent: %+v; want one of report, limit 5", *calls)
	}
	if w := g.CapWait(time.Hour, time.Millisecond); w != policy.Cooldown {
		t.Fatalf("idle wait with smtp open: %s; want the cool-down %s", w, policy.Cooldown)
	}
	if w := g.CapWait(time.Second, time.Millisecond); w != time.Second {
		t.Fatalf("a shorter wait: %s; want it kept", w)
	}
}

// TestClaimWithoutDependencyReadsNothing: a claim of kinds that name no
// dependency goes straight to the store, reading no breaker.
func TestClaimWithoutDependencyReadsNothing(t *testing.T) {
	g, st, _, _ := testGate(t)
	lists := st.lists
	claim, calls := recordingClaim()
	p := &errandstore.JobClaimParams{Kinds: []string{"report"}, Limit: 3}
	if _, err := g.Claim(t.Context(), p, claim); err != nil {
		t.Fatal(err)
	}
	if st.lists != lists || len(*calls) != 1 {
		t.Fatalf("breaker reads %d, claims %d; want none, one", st.lists-lists, len(*calls))
	}
}

// TestProbeClosesBreaker: past the cool-down one job of smtp is claimed as
// a probe beside the other kinds; its success closes the breaker and wakes
// the queues.
func TestProbeClosesBreaker(t *testing.T) {
	g, st, clk, wakes := testGate(t)
	clk.now = clk.now.Add(policy.Cooldown)
	claim, calls := recordingClaim()
	jobs, err := g.Claim(t.Context(), &errandstore.JobClaimParams{Kinds: []string{"send_email", "report"}, Limit: 5}, claim)
	if err != nil || len(jobs) != 2 || jobs[0].Kind != "send_email" || jobs[1].Kind != "report" {
		t.Fatalf("claim past the cool-down: %v, %v; want the probe, then report", jobs, err)
	}
	if c := *calls; len(c) != 2 || c[0].Limit != 1 || !slices.Equal(c[1].Kinds, []string{"report"}) || c[1].Limit != 4 {
		t.Fatalf("claims sent: %+v; want the probe's (limit 1), then report's (limit 4)", c)
	}
	if g.Probes() != 1 {
		t.Fatalf("probes kept: %d; want 1", g.Probes())
	}
	r := g.Finish(t.Context(), Outcome{JobID: jobs[0].ID, Kind: "send_email", Event: errandstore.BreakerSuccess})
	if !r.probe {
		t.Fatal("the probe's report is not a probe's")
	}
	g.Apply(t.Context(), r, nil)
	if b := st.breakers["smtp"]; b.State != errandstore.BreakerClosed || *wakes != 1 || g.Probes() != 0 {
		t.Fatalf("after the probe's success: %s, %d wakes, %d probes; want closed, 1, 0", b.State, *wakes, g.Probes())
	}
}

// TestProbeThatTellsNothingGivesSlotBack: a probe whose attempt tells
// nothing of smtp (a snooze, a lost lease), or that blames another
// dependency, gives its slot back, with the slot's time, so that a late
// release cannot free a newer probe's slot.
func TestProbeThatTellsNothingGivesSlotBack(t *testing.T) {
	for _, o := range []Outcome{
		{Event: errandstore.BreakerRelease},
		{Event: errandstore.BreakerFailure, Dependency: "imap"},
	} {
		g, st, clk, _ := testGate(t)
		clk.now = clk.now.Add(policy.Cooldown)
		claim, _ := recordingClaim()
		jobs, err := g.Claim(t.Context(), &errandstore.JobClaimParams{Kinds: []string{"send_email"}, Limit: 1}, claim)
		if err != nil || len(jobs) != 1 {
			t.Fatalf("claim past the cool-down: %v, %v; want the probe", jobs, err)
		}
		until := *st.breakers["smtp"].ProbeUntil
		o.JobID, o.Kind = jobs[0].ID, jobs[0].Kind
		r := g.Finish(t.Context(), o)
		last := st.updates[len(st.updates)-1]
		if r.probe || last.Event != errandstore.BreakerRelease || !last.ProbeUntil.Equal(until) {
			t.Fatalf("%+v: report probe %v, last write %s at %v; want a release at %v", o, r.probe, last.Event, last.ProbeUntil, until)
		}
		if b := st.breakers["smtp"]; b.Probes != 0 {
			t.Fatalf("%+v: smtp keeps %d probes; want its slot back", o, b.Probes)
		}
	}
}

// TestProbeWithoutJobGivesSlotBack: a probe slot that finds no job is
// given back at once.
func TestProbeWithoutJobGivesSlotBack(t *testing.T) {
	g, st, clk, _ := testGate(t)
	clk.now = clk.now.Add(policy.Cooldown)
	none := func(context.Context, *errandstore.JobClaimParams) ([]*errandtype.Job, error) { return nil, nil }
	if jobs, err := g.Claim(t.Context(), &errandstore.JobClaimParams{Kinds: []string{"send_email"}, Limit: 1}, none); err != nil || len(jobs) != 0 {
		t.Fatalf("claim: %v, %v; want nothing", jobs, err)
	}
	evs := st.events()
	if !slices.Equal(evs[len(evs)-2:], []errandstore.BreakerEvent{errandstore.BreakerProbe, errandstore.BreakerRelease}) || g.Probes() != 0 {
		t.Fatalf("writes %v, probes %d; want a probe given back", evs, g.Probes())
	}
}

// TestClaimReturnsProbesWhenLaterClaimFails: jobs claimed as probes are the
// caller's even when the rest of the claim fails.
func TestClaimReturnsProbesWhenLaterClaimFails(t *testing.T) {
	g, _, clk, _ := testGate(t)
	clk.now = clk.now.Add(policy.Cooldown)
	claim, _ := recordingClaim()
	failSecond := func(ctx context.Context, p *errandstore.JobClaimParams) ([]*errandtype.Job, error) {
		if slices.Contains(p.Kinds, "report") {
			return nil, errors.New("database is locked")
		}
		return claim(ctx, p)
	}
	jobs, err := g.Claim(t.Context(), &errandstore.JobClaimParams{Kinds: []string{"send_email", "report"}, Limit: 5}, failSecond)
	if err != nil || len(jobs) != 1 || jobs[0].Kind != "send_email" {
		t.Fatalf("claim whose second part fails: %v, %v; want the probe, no error", jobs, err)
	}
}

// TestStaleProbeForgotten: a probe not reported StaleProbe after its
// slot's time is forgotten at the next probe claimed.
func TestStaleProbeForgotten(t *testing.T) {
	g, _, clk, _ := testGate(t)
	clk.now = clk.now.Add(policy.Cooldown)
	claim, _ := recordingClaim()
	p := &errandstore.JobClaimParams{Kinds: []string{"send_email"}, Limit: 1}
	if jobs, _ := g.Claim(t.Context(), p, claim); len(jobs) != 1 {
		t.Fatal("no probe claimed")
	}
	clk.now = clk.now.Add(25 * time.Hour) // past the probe's time and StaleProbe
	if jobs, _ := g.Claim(t.Context(), p, claim); len(jobs) != 1 {
		t.Fatal("no second probe claimed")
	}
	if g.Probes() != 1 {
		t.Fatalf("probes kept: %d; want the stale one forgotten", g.Probes())
	}
}

// TestSuccessWritesOnlyWhenItChangesBreaker: a success of a healthy
// dependency writes nothing; one that ends a run of failures closes it;
// a batch reads the breaker once per dependency.
func TestSuccessWritesOnlyWhenItChangesBreaker(t *testing.T) {
	g, st, _, _ := testGate(t)
	ctx := t.Context()
	ok := Outcome{JobID: "a", Kind: "send_email", Event: errandstore.BreakerSuccess}
	st.breakers = map[string]*errandtype.BreakerRecord{}
	writes := len(st.updates)
	g.Apply(ctx, g.Finish(ctx, ok), nil)
	if len(st.updates) != writes {
		t.Fatalf("a healthy dependency's success wrote %v", st.events()[writes:])
	}
	g.Apply(ctx, g.Finish(ctx, Outcome{JobID: "b", Kind: "send_email", Event: errandstore.BreakerFailure}), nil)
	lists := st.lists
	succeeded := map[string]bool{}
	g.Apply(ctx, g.Finish(ctx, ok), succeeded)
	g.Apply(ctx, g.Finish(ctx, ok), succeeded)
	if b := st.breakers["smtp"]; b.Failures != 0 || st.lists != lists+1 {
		t.Fatalf("after a batch's successes: %d failures, %d reads; want 0, 1", b.Failures, st.lists-lists)
	}
}

// TestDeclare records every kind's dependency, "" for a kind that names
// none.
func TestDeclare(t *testing.T) {
	g, st, _, _ := testGate(t)
	g.Declare(t.Context())
	want := []errandstore.KindDependency{{Kind: "send_email", Dependency: "smtp"}, {Kind: "report"}}
	if !slices.Equal(st.declared, want) {
		t.Fatalf("declared %+v; want %+v", st.declared, want)
	}
}
