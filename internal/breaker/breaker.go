// Package breaker holds the claim side of errand's circuit breakers: the
// gate a worker's claims pass, which leaves out the kinds whose
// dependency's breaker is open and claims half-open probes, and the
// reports of finished attempts that open and close the breakers. The
// breakers themselves are kept in the store (errandstore.BreakerStore);
// what counts as a failure of a dependency is the engine's decision, which
// it hands to the gate as an Outcome.
package breaker

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
)

// ClaimFunc claims the jobs p asks for.
type ClaimFunc func(ctx context.Context, p *errandstore.JobClaimParams) ([]*errandtype.Job, error)

// Config is what a gate takes from the engine.
type Config struct {
	Store errandstore.BreakerStore
	// Kinds are the worker's kinds; Dependency maps those that name a
	// dependency to it.
	Kinds      []string
	Dependency map[string]string
	// Policy returns the policy of a dependency, defaults applied.
	Policy func(dep string) errandtype.BreakerPolicy
	Clock  errandtype.TimeSource
	Logger *slog.Logger
	// Wake wakes every queue: a breaker closed, its jobs are ready.
	Wake func()
	// StaleProbe is how long past its slot's time a probe is still looked
	// for: a probe that reports later (its job's heartbeats kept it
	// running) is taken for an ordinary attempt. Without it, a probe
	// claimed for a remote worker that died, or that reported through
	// another API server, would be kept for the life of the process. The
	// engine gives its longest lease.
	StaleProbe time.Duration
}

// Gate is a worker's circuit breakers. When none of its kinds names a
// dependency its claims go straight to the store, costing what they did
// without breakers; it only records the failures handlers blame on a
// dependency.
type Gate struct {
	store      errandstore.BreakerStore
	kinds      []string          // the worker's kinds
	dep        map[string]string // kind -> dependency, for kinds that name one
	deps       []string          // the dependencies, sorted
	policy     func(dep string) errandtype.BreakerPolicy
	clock      errandtype.TimeSource
	logger     *slog.Logger
	wake       func()
	staleProbe time.Duration

	mu sync.Mutex
	// probes holds the jobs claimed as half-open probes, by id.
	probes map[string]probeSlot
	// recheck is when, on the worker's clock, a blocked dependency may next
	// let a job through; zero when none is blocked.
	recheck time.Time
}

// probeSlot is a half-open breaker's slot granted to a probe.
type probeSlot struct {
	dep   string
	until time.Time // the breaker's ProbeUntil when it granted the slot
}

// New returns the gate cfg describes. Its Store may be nil only for a
// gate asked for its Deps.
func New(cfg Config) *Gate {
	g := &Gate{store: cfg.Store, kinds: cfg.Kinds, dep: map[string]string{}, policy: cfg.Policy, clock: cfg.Clock,
		logger: cfg.Logger, wake: cfg.Wake, staleProbe: cfg.StaleProbe, probes: map[string]probeSlot{}}
	for _, k := range cfg.Kinds {
		if d := cfg.Dependency[k]; d != "" {
			g.dep[k] = d
			if !slices.Contains(g.deps, d) {
				g.deps = append(g.deps, d)
			}
		}
	}
	slices.Sort(g.deps)
	return g
}

// Deps returns the dependencies the gate's kinds name, sorted; the caller
// must not change them.
func (g *Gate) Deps() []string { return g.deps }

// Guards reports whether kind has a dependency under a breaker, so that
// its attempts' results are events of it.
func (g *Gate) Guards(kind string) bool { return g.dep[kind] != "" }

// Claim claims jobs as params ask, leaving out the kinds whose breaker is
// open and claiming at most one job per probe slot it gets for a breaker
// whose cool-down is over.
func (g *Gate) Claim(ctx context.Context, params *errandstore.JobClaimParams, claim ClaimFunc) ([]*errandtype.Job, error) {
	deps := g.depsOf(params.Kinds)
	if len(deps) == 0 {
		return claim(ctx, params) // no kind claimed names a dependency
	}
	blocked, probe, err := g.blocked(ctx, deps)
	if err != nil {
		return nil, err
	}
	if len(blocked) == 0 {
		return claim(ctx, params)
	}
	var jobs []*errandtype.Job
	for _, b := range probe {
		if len(jobs) == params.Limit {
			break
		}
		j, err := g.claimProbe(ctx, params, b.Dependency, claim)
		if err != nil {
			return g.claimedSoFar(jobs, err)
		}
		if j != nil {
			jobs = append(jobs, j)
		}
	}
	var open []string
	for _, k := range params.Kinds {
		if !blocked[g.dep[k]] {
			open = append(open, k)
		}
	}
	limit := params.Limit - len(jobs)
	if limit == 0 || len(open) == 0 {
		return jobs, nil // every kind waits for its breaker: claim nothing
	}
	p := *params
	p.Kinds, p.Limit = open, limit
	more, err := claim(ctx, &p)
	if err != nil {
		return g.claimedSoFar(jobs, err)
	}
	return append(jobs, more...), nil
}

// blocked reads the breakers of deps and returns those that hold their
// jobs back, and of them those that may let a probe through now. It notes
// when the nearest of them may change (see CapWait).
func (g *Gate) blocked(ctx context.Context, deps []string) (map[string]bool, []*errandtype.BreakerRecord, error) {
	read, err := g.store.BreakerList(ctx, &errandstore.BreakerListParams{Dependencies: deps})
	if err != nil {
		return nil, nil, fmt.Errorf("read breakers: %w", err)
	}
	blocked := map[string]bool{}
	var probe []*errandtype.BreakerRecord
	var wait time.Duration // until the nearest blocked breaker may change
	note := func(at *time.Time) {
		if at != nil && at.After(read.Now) && (wait == 0 || at.Sub(read.Now) < wait) {
			wait = at.Sub(read.Now)
		}
	}
	for _, b := range read.Breakers {
		var until *time.Time
		switch b.State {
		case errandtype.BreakerOpen:
			until = b.OpenUntil
		case errandtype.BreakerHalfOpen:
			until = b.ProbeUntil
		default:
			continue
		}
		blocked[b.Dependency] = true
		if g.mayProbe(b, read.Now) {
			probe = append(probe, b)
		}
		note(until)
	}
	g.mu.Lock()
	g.recheck = time.Time{}
	if wait > 0 {
		g.recheck = g.clock.Now().Add(wait)
	}
	g.mu.Unlock()
	return blocked, probe, nil
}

// mayProbe reports whether the blocked breaker b, read at now, may let a
// probe through: open past its cool-down, or half-open with a probe slot
// free or its probes' time over.
func (g *Gate) mayProbe(b *errandtype.BreakerRecord, now time.Time) bool {
	if b.State == errandtype.BreakerOpen {
		return b.OpenUntil != nil && !now.Before(*b.OpenUntil)
	}
	return b.Probes < g.policy(b.Dependency).Probes || b.ProbeUntil == nil || !now.Before(*b.ProbeUntil)
}

// claimedSoFar ends a claim that failed after it had claimed jobs (probes):
// they are the caller's, their attempts counted and their leases running,
// so they are returned without the error, which is logged; a caller that
// drops jobs with an error (a remote claim, WorkOne) would strand them
// until their leases ran out, and hold their breakers' probe slots. With
// none claimed the error is returned.
func (g *Gate) claimedSoFar(jobs []*errandtype.Job, err error) ([]*errandtype.Job, error) {
	if len(jobs) == 0 {
		return nil, err
	}
	g.logger.Warn("claim failed after claiming probes; returning those", "jobs", len(jobs), "err", err)
	return jobs, nil
}

// depsOf returns the dependencies that kinds name, sorted.
func (g *Gate) depsOf(kinds []string) []string {
	var deps []string
	for _, k := range kinds {
		if d := g.dep[k]; d != "" && !slices.Contains(deps, d) {
			deps = append(deps, d)
		}
	}
	slices.Sort(deps)
	return deps
}

// claimProbe asks for a probe slot of dep and, granted one, claims one job
// of dep's kinds; a slot that finds no job is given back at once.
func (g *Gate) claimProbe(ctx context.Context, params *errandstore.JobClaimParams, dep string, claim ClaimFunc) (*errandtype.Job, error) {
	r, err := g.store.BreakerUpdate(ctx, &errandstore.BreakerUpdateParams{Dependency: dep, Event: errandstore.BreakerProbe, Policy: g.policy(dep)})
	if err != nil {
		return nil, fmt.Errorf("probe breaker %s: %w", dep, err)
	}
	if !r.Applied {
		return nil, nil
	}
	slot := probeSlot{dep: dep}
	if r.Breaker.ProbeUntil != nil {
		slot.until = *r.Breaker.ProbeUntil
	}
	var kinds []string
	for _, k := range params.Kinds {
		if g.dep[k] == dep {
			kinds = append(kinds, k)
		}
	}
	p := *params
	p.Kinds, p.Limit = kinds, 1
	var jobs []*errandtype.Job
	if len(kinds) > 0 {
		jobs, err = claim(ctx, &p)
	}
	if err != nil || len(jobs) == 0 {
		g.release(ctx, slot)
		return nil, err
	}
	g.mu.Lock()
	g.forgetStaleProbes()
	g.probes[jobs[0].ID] = slot
	g.mu.Unlock()
	g.logger.Info("circuit breaker half-open; probing", "dependency", dep, "job_id", jobs[0].ID, "kind", jobs[0].Kind)
	return jobs[0], nil
}

// forgetStaleProbes drops the probes whose slot's time passed StaleProbe
// ago. g.mu is held.
func (g *Gate) forgetStaleProbes() {
	cut := g.clock.Now().Add(-g.staleProbe)
	for id, p := range g.probes {
		if !p.until.IsZero() && p.until.Before(cut) {
			delete(g.probes, id)
		}
	}
}

// Probes counts the probes the gate keeps track of.
func (g *Gate) Probes() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.probes)
}

// CapWait shortens an idle queue's sleep to the time a blocked breaker may
// let a job through, and to no less than floor.
func (g *Gate) CapWait(wait, floor time.Duration) time.Duration {
	g.mu.Lock()
	at := g.recheck
	g.mu.Unlock()
	if at.IsZero() {
		return wait
	}
	return min(wait, max(at.Sub(g.clock.Now()), floor))
}

// Outcome is what the engine judged one finished attempt to tell its
// dependency's breaker.
type Outcome struct {
	JobID, Kind string
	// Dependency is the dependency the attempt's error blamed, "" for the
	// one its kind names.
	Dependency string
	Event      errandstore.BreakerEvent // BreakerRelease: nothing
	Message    string                   // a failure's error message
}

// Report is what one finished attempt tells its dependency's breaker, its
// probe slot (if it held one) settled: see Finish and Apply.
type Report struct {
	dep   string
	event errandstore.BreakerEvent // BreakerRelease: nothing
	msg   string
	probe bool // the attempt held a probe slot of dep
}

// Finish turns o into the report to Apply, giving back the probe slot of
// an attempt that tells nothing of the slot's dependency.
func (g *Gate) Finish(ctx context.Context, o Outcome) Report {
	g.mu.Lock()
	slot, probe := g.probes[o.JobID]
	delete(g.probes, o.JobID)
	g.mu.Unlock()
	r := Report{dep: g.dep[o.Kind], event: o.Event, probe: probe}
	if o.Dependency != "" {
		r.dep = o.Dependency
	}
	if o.Event == errandstore.BreakerFailure {
		r.msg = o.Message
	}
	if probe && (r.event == errandstore.BreakerRelease || r.dep != slot.dep) {
		// The probe learned nothing of its dependency (or its job blamed
		// another): its slot is given back.
		g.release(ctx, slot)
		r.probe = false
	}
	return r
}

// Apply applies r. A success that is not a probe's is a conditional
// write: it reads the breaker and writes only when the success changes it
// (ends a run of failures), so that a success of a healthy dependency
// writes nothing, and one after failures recorded by any process ends
// their run. succeeded, when not nil, holds the dependencies whose success
// was reported already, by a batch of outcomes that needs one per
// dependency.
func (g *Gate) Apply(ctx context.Context, r Report, succeeded map[string]bool) {
	switch {
	case r.dep == "" || r.event == errandstore.BreakerRelease:
	case r.event == errandstore.BreakerSuccess && !r.probe:
		if succeeded[r.dep] {
			return
		}
		if succeeded != nil {
			succeeded[r.dep] = true
		}
		if g.successChanges(ctx, r.dep) {
			g.update(ctx, r.dep, errandstore.BreakerSuccess, "")
		}
	default:
		g.update(ctx, r.dep, r.event, r.msg)
	}
}

// successChanges reports whether a success changes dep's breaker as read
// now; a failed read is logged and taken for yes, the write deciding.
func (g *Gate) successChanges(ctx context.Context, dep string) bool {
	read, err := g.store.BreakerList(context.WithoutCancel(ctx), &errandstore.BreakerListParams{Dependencies: []string{dep}})
	if err != nil {
		g.logger.Warn("read circuit breaker failed", "dependency", dep, "err", err)
		return true
	}
	var cur *errandtype.BreakerRecord
	if len(read.Breakers) == 1 {
		cur = read.Breakers[0]
	}
	p := &errandstore.BreakerUpdateParams{Dependency: dep, Event: errandstore.BreakerSuccess, Policy: g.policy(dep)}
	return errandstore.ApplyBreakerEvent(cur, p, read.Now).Changed
}

// update applies one event, logging what it changed; a failed write is
// logged and dropped (the breaker is advisory: the jobs' own outcomes are
// recorded already).
func (g *Gate) update(ctx context.Context, dep string, event errandstore.BreakerEvent, msg string) {
	g.write(ctx, &errandstore.BreakerUpdateParams{Dependency: dep, Event: event, Message: errandstore.CleanText(msg, errandstore.MaxMessageBytes)})
}

// release gives back the probe slot s, unless it is too late to: a slot
// not reported within its time may be another probe's now.
func (g *Gate) release(ctx context.Context, s probeSlot) {
	g.write(ctx, &errandstore.BreakerUpdateParams{Dependency: s.dep, Event: errandstore.BreakerRelease, ProbeUntil: s.until})
}

// write applies the event p under the dependency's policy, as update says.
func (g *Gate) write(ctx context.Context, p *errandstore.BreakerUpdateParams) {
	dep, event := p.Dependency, p.Event
	p.Policy = g.policy(dep)
	r, err := g.store.BreakerUpdate(context.WithoutCancel(ctx), p)
	if err != nil {
		g.logger.Warn("record circuit breaker event failed", "dependency", dep, "event", string(event), "err", err)
		return
	}
	if !r.Applied {
		return
	}
	switch event {
	case errandstore.BreakerFailure:
		g.logger.Warn("circuit breaker opened; jobs of the dependency wait", "dependency", dep,
			"until", r.Breaker.OpenUntil, "trips", r.Breaker.Trips, "last_error", r.Breaker.LastError)
	case errandstore.BreakerSuccess:
		g.logger.Info("circuit breaker closed; jobs of the dependency run again", "dependency", dep)
		g.wake()
	}
}

// Declare records in the store the dependencies that the gate's kinds
// name, for every process's readers, when any of them names one; a failure
// is logged, as it changes only what readers report.
func (g *Gate) Declare(ctx context.Context) {
	if len(g.deps) == 0 {
		return
	}
	p := &errandstore.BreakerKindsDeclareParams{Kinds: make([]errandstore.KindDependency, len(g.kinds))}
	for i, k := range g.kinds {
		p.Kinds[i] = errandstore.KindDependency{Kind: k, Dependency: g.dep[k]}
	}
	if err := g.store.BreakerKindsDeclare(ctx, p); err != nil {
		g.logger.Warn("record kinds' dependencies failed; other processes may report their jobs ready while a breaker holds them", "err", err)
	}
}
