package errandstore

import (
	"context"
	"fmt"
	"time"

	"github.com/errandhq/errand/errandtype"
)

// BreakerStore is an optional capability of a Store: the cluster-wide state
// of circuit breakers (see [github.com/errandhq/errand.KindOpts].Dependency),
// found by type assertion. errand/sqlite and errand/postgres implement it. A
// Worker whose kinds name a dependency needs it; a Worker without one never
// touches it, so the claim path pays nothing for it.
//
// Every transition is decided by [ApplyBreakerEvent], once for every store:
// a store reads the breaker's row under a lock (the writer transaction on
// SQLite, FOR UPDATE on PostgreSQL), applies the event on its own clock and
// writes the result in the same transaction. That makes each event a
// compare-and-set, so that however many processes ask for a half-open probe
// at once, no more than the policy's Probes are granted.
type BreakerStore interface {
	// BreakerUpdate applies one event to the breaker of Dependency, as
	// [ApplyBreakerEvent] decides on the store's clock, in one transaction.
	// A breaker that has no row is closed with no failures; only an event
	// that changes it writes a row. A [BreakerReset] appends an
	// [errandtype.AuditBreakerReset] record in the same transaction, with the details
	// of [BreakerResetDetails]; resetting a breaker that has no row is
	// ErrNotFound, so that a mistyped name does not create one. Params that fail Validate are an
	// *InputError and nothing is written.
	BreakerUpdate(ctx context.Context, params *BreakerUpdateParams) (*BreakerUpdateResult, error)

	// BreakerList returns the breakers of Dependencies (every breaker when
	// Dependencies is empty) that have a row, ordered by dependency, and
	// the store's time of the read.
	BreakerList(ctx context.Context, params *BreakerListParams) (*BreakerListResult, error)

	// BreakerKindsDeclare records, for each kind of Kinds, the dependency
	// it names, at the store's time, replacing what was recorded: the last
	// declaration of a kind wins. A kind that names none ("") has its
	// record removed. Params that fail Validate are an *InputError and
	// nothing is written.
	BreakerKindsDeclare(ctx context.Context, params *BreakerKindsDeclareParams) error

	// BreakerKindsList returns every recorded kind's dependency, ordered
	// by kind.
	BreakerKindsList(ctx context.Context) ([]KindDependency, error)
}

// KindDependency is a kind's dependency as a client declared it (see
// [github.com/errandhq/errand.KindOpts].Dependency), recorded so that every
// process, not only those that declare the kind, knows which breaker holds
// its jobs back.
type KindDependency struct {
	Kind       string    `json:"kind"`
	Dependency string    `json:"dependency"`
	DeclaredAt time.Time `json:"declared_at"` // set by the store
}

// BreakerKindsDeclareParams are the kinds a starting client declares.
type BreakerKindsDeclareParams struct {
	Kinds []KindDependency
}

// Validate checks the parameters of BreakerKindsDeclare.
func (p *BreakerKindsDeclareParams) Validate() error {
	seen := make(map[string]int, len(p.Kinds))
	for i, k := range p.Kinds {
		if err := CheckName(fmt.Sprintf("kinds[%d].kind", i), k.Kind); err != nil {
			return err
		}
		if j, ok := seen[k.Kind]; ok {
			return &errandtype.InputError{Field: fmt.Sprintf("kinds[%d].kind", i), Message: fmt.Sprintf("%q is also kinds[%d]; declare each kind once", k.Kind, j)}
		}
		seen[k.Kind] = i
		if k.Dependency != "" {
			if err := CheckName(fmt.Sprintf("kinds[%d].dependency", i), k.Dependency); err != nil {
				return err
			}
		}
	}
	return nil
}

const (
	// BreakerClosed: jobs of the dependency run; failures are counted.
	BreakerClosed errandtype.BreakerState = "closed"
)

// BreakerEvent is what happened to a dependency.
type BreakerEvent string

const (
	// BreakerFailure: a job of the dependency failed in a way that counts
	// (see [github.com/errandhq/errand.KindOpts].Dependency).
	BreakerFailure BreakerEvent = "failure"
	// BreakerSuccess: a job of the dependency succeeded.
	BreakerSuccess BreakerEvent = "success"
	// BreakerProbe asks for a half-open probe slot. Applied reports whether
	// it was granted.
	BreakerProbe BreakerEvent = "probe"
	// BreakerRelease gives back a probe slot whose job said nothing about
	// the dependency (it found no job, snoozed, failed permanently, was
	// given back).
	BreakerRelease BreakerEvent = "release"
	// BreakerReset closes the breaker at once, an operator's decision,
	// audited.
	BreakerReset BreakerEvent = "reset"
)

// BreakerUpdateParams describe one event for [BreakerStore.BreakerUpdate].
type BreakerUpdateParams struct {
	Dependency string
	Event      BreakerEvent
	// Policy decides failures and probes; its zero fields take the
	// defaults of [errandtype.BreakerPolicy].
	Policy errandtype.BreakerPolicy
	// Message is a failure's message, kept as LastError.
	Message string
	// ProbeUntil, on a release, is the ProbeUntil of the breaker that
	// granted the probe's slot. A release at or after it gives nothing
	// back: the slot was presumed lost then and may hold another probe
	// now. Zero releases a slot whenever the breaker is half-open.
	ProbeUntil time.Time
	// Operator and Reason say who reset the breaker and why, for the audit.
	Operator string
	Reason   string
}

// Validate checks the parameters of BreakerUpdate.
func (p *BreakerUpdateParams) Validate() error {
	if err := CheckName("dependency", p.Dependency); err != nil {
		return err
	}
	switch p.Event {
	case BreakerFailure, BreakerSuccess, BreakerProbe, BreakerRelease:
	case BreakerReset:
		if err := CheckIdentifier("operator", p.Operator, MaxIDBytes); err != nil {
			return err
		}
		if p.Reason == "" {
			return &errandtype.InputError{Field: "reason", Message: "is empty; say why the breaker is reset, e.g. \"smtp relay fixed\""}
		}
		if err := checkText("reason", p.Reason); err != nil {
			return err
		}
	default:
		return &errandtype.InputError{Field: "event", Message: fmt.Sprintf("%q is not a breaker event; use failure, success, probe, release or reset", p.Event)}
	}
	if len(p.Message) > MaxMessageBytes*2 {
		return &errandtype.InputError{Field: "message", Message: fmt.Sprintf("is %d bytes; clean it with errand.CleanText(msg, errand.MaxMessageBytes)", len(p.Message))}
	}
	if err := checkText("message", p.Message); err != nil {
		return err
	}
	return p.Policy.Validate("policy")
}

// BreakerUpdateResult is what an event did.
type BreakerUpdateResult struct {
	// Breaker is the breaker after the event: a closed one with no failures
	// when it has no row.
	Breaker *errandtype.BreakerRecord
	// Applied reports that the event did what it asks: a probe was granted,
	// a failure opened the breaker, a success closed a half-open one, a
	// reset closed it.
	Applied bool
}

// BreakerListParams select breakers. Empty Dependencies means every one.
type BreakerListParams struct {
	Dependencies []string
}

// BreakerListResult are breakers and the store's time of the read, by
// which their times are judged.
type BreakerListResult struct {
	Now      time.Time
	Breakers []*errandtype.BreakerRecord
}

// BreakerResetDetails are the details of an [errandtype.AuditBreakerReset] record.
type BreakerResetDetails struct {
	Dependency string                  `json:"dependency"`
	PriorState errandtype.BreakerState `json:"prior_state"`
	Failures   int                     `json:"failures"`
}

// BreakerTransition is what [ApplyBreakerEvent] decided.
type BreakerTransition struct {
	// Next is the breaker after the event.
	Next *errandtype.BreakerRecord
	// Applied is [BreakerUpdateResult].Applied.
	Applied bool
	// Changed reports that Next differs from the stored breaker and must be
	// written.
	Changed bool
}

// ApplyBreakerEvent decides what event p does to the breaker cur (nil: no
// row, a closed breaker with no failures) at now, the store's time. Both
// stores call it; it is the whole state machine:
//
//   - failure: counted in the run (and kept as LastError) whatever the
//     state. Closed: a run starts afresh when its first failure is Window
//     old or older; at Threshold the breaker opens for Cooldown.
//     Half-open: it opens again for Cooldown. Open (a job that started
//     before it opened): only counted.
//   - success, closed: the run of failures ends. Half-open: it closes.
//     Open: nothing.
//   - probe: granted when the breaker is open with its cool-down over, or
//     half-open with fewer than Probes running; a grant makes it half-open
//     and holds a slot until ProbeUntil (now + Cooldown), after which an
//     unreported slot is free again.
//   - release: a half-open breaker's running probes drop by one, unless
//     the release comes at or after the ProbeUntil its slot was granted
//     with (p.ProbeUntil): by then the slot was presumed lost and may be
//     another probe's.
//   - reset: closed, with no failures, whatever it was (a breaker with no
//     row is not changed: the store answers ErrNotFound).
func ApplyBreakerEvent(cur *errandtype.BreakerRecord, p *BreakerUpdateParams, now time.Time) BreakerTransition {
	s := breakerStep{p: p, pol: p.Policy.WithDefaults(), now: now}
	if cur != nil {
		s.b = *cur
	} else {
		s.b = errandtype.BreakerRecord{Dependency: p.Dependency, State: BreakerClosed}
	}
	if p.Event == BreakerReset && cur == nil {
		return BreakerTransition{Next: &s.b}
	}
	s.forgetLostProbes()
	applied := false
	if apply, ok := breakerEvents[p.Event]; ok {
		applied = apply(&s)
	}
	changed := breakerChanged(cur, &s.b, p.Event)
	if changed {
		s.b.UpdatedAt = now
	}
	return BreakerTransition{Next: &s.b, Applied: applied, Changed: changed}
}

// breakerEvents is the transition of each event; it reports
// [BreakerTransition].Applied.
var breakerEvents = map[BreakerEvent]func(*breakerStep) bool{
	BreakerFailure: (*breakerStep).failure,
	BreakerSuccess: (*breakerStep).success,
	BreakerProbe:   (*breakerStep).probe,
	BreakerRelease: (*breakerStep).release,
	BreakerReset:   (*breakerStep).reset,
}

// breakerStep is one event being applied: b is the breaker as the event
// leaves it, pol the policy with its defaults, now the store's time.
type breakerStep struct {
	b   errandtype.BreakerRecord
	p   *BreakerUpdateParams
	pol errandtype.BreakerPolicy
	now time.Time
}

// forgetLostProbes frees the slots of half-open probes that never reported
// by their ProbeUntil.
func (s *breakerStep) forgetLostProbes() {
	b := &s.b
	if b.State == errandtype.BreakerHalfOpen && b.ProbeUntil != nil && !s.now.Before(*b.ProbeUntil) {
		b.Probes, b.ProbeUntil = 0, nil
	}
}

func (s *breakerStep) failure() bool {
	b := &s.b
	if b.State == BreakerClosed && s.runOver() {
		at := s.now
		b.Failures, b.FailingSince = 0, &at
	}
	// Every counted failure is one of the run, whatever the state, so
	// that the run matches the failures of the dependency's kinds.
	b.Failures++
	b.LastError = s.p.Message
	if b.State == errandtype.BreakerHalfOpen || b.State == BreakerClosed && b.Failures >= s.pol.Threshold {
		s.open()
		return true
	}
	return false
}

// runOver reports that a closed breaker's run of failures is to start
// afresh: it has none, or its first is Window old or older.
func (s *breakerStep) runOver() bool {
	b := &s.b
	return b.Failures == 0 || b.FailingSince == nil || !s.now.Before(b.FailingSince.Add(s.pol.Window))
}

func (s *breakerStep) success() bool {
	switch s.b.State {
	case BreakerClosed:
		s.b.Failures, s.b.FailingSince = 0, nil
	case errandtype.BreakerHalfOpen:
		s.close()
		return true
	}
	return false
}

func (s *breakerStep) probe() bool {
	b := &s.b
	if b.State == errandtype.BreakerOpen && b.OpenUntil != nil && !s.now.Before(*b.OpenUntil) {
		b.State, b.OpenUntil, b.Probes = errandtype.BreakerHalfOpen, nil, 0
	}
	if b.State != errandtype.BreakerHalfOpen || b.Probes >= s.pol.Probes {
		return false
	}
	until := s.now.Add(s.pol.Cooldown)
	b.Probes++
	b.ProbeUntil = &until
	return true
}

func (s *breakerStep) release() bool {
	// Every later grant of a slot comes at or after the ProbeUntil of
	// this one (the slots free up then, or the breaker opened since and
	// had a Cooldown to wait out), so a release before it is this slot's.
	// Stores keep microseconds.
	b := &s.b
	late := !s.p.ProbeUntil.IsZero() && !s.now.Before(s.p.ProbeUntil.Truncate(time.Microsecond))
	if b.State == errandtype.BreakerHalfOpen && b.Probes > 0 && !late {
		b.Probes--
		if b.Probes == 0 {
			b.ProbeUntil = nil
		}
	}
	return false
}

func (s *breakerStep) reset() bool {
	s.close()
	return true
}

// open opens the breaker for the policy's Cooldown.
func (s *breakerStep) open() {
	b := &s.b
	until, at := s.now.Add(s.pol.Cooldown), s.now
	b.State, b.OpenedAt, b.OpenUntil = errandtype.BreakerOpen, &at, &until
	b.Probes, b.ProbeUntil = 0, nil
	b.Trips++
}

// close closes the breaker with no failures; OpenedAt and Trips stay as
// its history.
func (s *breakerStep) close() {
	b := &s.b
	b.State, b.Failures, b.FailingSince, b.OpenUntil = BreakerClosed, 0, nil, nil
	b.Probes, b.ProbeUntil = 0, nil
}

// breakerChanged reports whether next must be written: it differs from the
// stored breaker cur (a breaker with no row is closed with no failures),
// or the event is a reset, which is always written and audited.
func breakerChanged(cur, next *errandtype.BreakerRecord, ev BreakerEvent) bool {
	if ev == BreakerReset {
		return true
	}
	if cur == nil {
		return next.State != BreakerClosed || next.Failures > 0
	}
	return !sameBreaker(cur, next)
}

// sameBreaker reports whether a and b hold the same state, UpdatedAt aside.
func sameBreaker(a, b *errandtype.BreakerRecord) bool {
	eq := func(x, y *time.Time) bool { return x == nil && y == nil || x != nil && y != nil && x.Equal(*y) }
	return a.State == b.State && a.Failures == b.Failures && eq(a.FailingSince, b.FailingSince) &&
		eq(a.OpenedAt, b.OpenedAt) && eq(a.OpenUntil, b.OpenUntil) && a.Probes == b.Probes &&
		eq(a.ProbeUntil, b.ProbeUntil) && a.Trips == b.Trips && a.LastError == b.LastError
}
