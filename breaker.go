package errand

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
)

// Circuit breakers. A kind names the dependency its jobs call
// ([KindOpts].Dependency, e.g. "smtp"); several kinds may share one. When
// jobs of a dependency fail Threshold times in a row within Window, its
// breaker opens, in the database, for every process: workers stop claiming
// the jobs of its kinds, which wait queued or retrying with their attempts
// intact, instead of spending them on a dependency that is down. After
// Cooldown, on the store's clock, the breaker lets up to Probes jobs through
// (half-open): a success closes it, a counted failure opens it again.
//
// What counts as a failure of the dependency: a retryable failure (whatever
// its class, other than a panic) and a timeout, including one on a job's
// last attempt. A permanent failure, a panic, a snooze, a job given back on
// drain and a lost lease say nothing about the dependency and do not count.
// A handler can name the dependency explicitly with [DependencyDown], which
// counts whatever the kind declares.

// ClassDependencyDown is the class of a [DependencyDown] failure that names
// no class of its own.
const ClassDependencyDown = "dependency_down"

// DependencyDown reports that the failure err is the fault of dependency
// dep being down: it counts as a failure of dep's circuit breaker, whatever
// dependency the job's kind declares (or none). The job itself retries as
// err says (class "dependency_down" unless err names one); wrap it in
// [Permanent] to dead-letter the job and still count the failure. Jobs of
// the kinds that declare dep (see [KindOpts].Dependency) are the ones its
// open breaker holds back.
func DependencyDown(dep string, err error) error {
	je := classified(err)
	if je.snooze > 0 {
		return je
	}
	je.dependency = dep
	if je.class == ClassError || je.class == "" {
		je.class = ClassDependencyDown
	}
	return je
}

// Dependency is the dependency that [DependencyDown] named, or "".
func (e *JobError) Dependency() string { return e.dependency }

// breakerPolicy returns the policy of dep: Config.Breakers' or the defaults.
func (c *engine) breakerPolicy(dep string) errandtype.BreakerPolicy {
	if p := c.breakers[dep]; p != nil {
		return p.WithDefaults()
	}
	return errandtype.BreakerPolicy{}.WithDefaults()
}

// checkBreakers validates Config.Breakers.
func checkBreakers(m map[string]*errandtype.BreakerPolicy) error {
	for dep, p := range m {
		if err := errandstore.CheckName("Breakers key", dep); err != nil {
			return err
		}
		if p == nil {
			return &errandtype.InputError{Field: "Breakers." + dep, Message: "is nil; give a BreakerPolicy (its zero value takes the defaults)"}
		}
		if err := p.Validate("Breakers." + dep); err != nil {
			return err
		}
	}
	return nil
}

// Breakers returns the circuit breakers of dependencies that have had one
// (every breaker that ever counted a failure or was reset), ordered by
// dependency: none when the store keeps no breakers.
func (c *Client[TTx]) Breakers(ctx context.Context) ([]*errandtype.BreakerRecord, error) {
	bs := c.caps.breakers
	if bs == nil {
		return []*errandtype.BreakerRecord{}, nil
	}
	r, err := bs.BreakerList(ctx, &errandstore.BreakerListParams{})
	if err != nil {
		return nil, fmt.Errorf("list breakers: %w", err)
	}
	return r.Breakers, nil
}

// Dependency returns the dependency that kind declares (see
// [KindOpts].Dependency), or "" when it declares none or this client does
// not know it.
func (c *Client[TTx]) Dependency(kind string) string {
	if k := c.kinds[kind]; k != nil {
		return k.Dependency
	}
	return ""
}

// ResetBreaker closes the breaker of dep at once, an operator's decision
// recorded in the audit with operator and reason: its jobs are claimed again
// without waiting for the cool-down and a probe. A dependency that has no
// breaker (see [Client.Breakers]) is ErrNotFound.
func (c *Client[TTx]) ResetBreaker(ctx context.Context, dep, operator, reason string) (*errandtype.BreakerRecord, error) {
	bs := c.caps.breakers
	if bs == nil {
		return nil, errNoBreakerStore
	}
	r, err := bs.BreakerUpdate(ctx, &errandstore.BreakerUpdateParams{Dependency: dep, Event: errandstore.BreakerReset, Operator: operator, Reason: reason})
	if err != nil {
		return nil, fmt.Errorf("reset breaker %s: %w", dep, err)
	}
	c.wakes.Wake(nil)
	return r.Breaker, nil
}

var errNoBreakerStore = &errandtype.InputError{Field: "store", Message: "keeps no circuit breakers; use errand/sqlite or errand/postgres"}

// breakerGate is a Worker's circuit breakers: nil when its store keeps none.
// When none of its kinds names a dependency its claims go straight to the
// store, costing what they did without breakers.
type breakerGate struct {
	e     *engine
	store errandstore.BreakerStore
	kinds []string          // the worker's kinds
	dep   map[string]string // kind -> dependency, for kinds that name one
	deps  []string          // the dependencies, sorted

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

// newBreakerGate returns the gate of a worker of kinds, or nil when the
// store keeps no breakers (an error when a kind names a dependency).
func newBreakerGate(e *engine, kinds []string) (*breakerGate, error) {
	g := &breakerGate{e: e, kinds: kinds, dep: map[string]string{}, probes: map[string]probeSlot{}}
	for _, k := range kinds {
		if d := e.kinds[k].Dependency; d != "" {
			g.dep[k] = d
			if !slices.Contains(g.deps, d) {
				g.deps = append(g.deps, d)
			}
		}
	}
	slices.Sort(g.deps)
	bs := e.caps.breakers
	ok := bs != nil
	switch {
	case !ok && len(g.deps) > 0:
		return nil, &errandtype.InputError{Field: "Kinds", Message: fmt.Sprintf("kinds name dependencies (%v) but the store keeps no circuit breakers; use errand/sqlite or errand/postgres", g.deps)}
	case !ok:
		return nil, nil
	}
	// A gate without dependencies claims as a worker without breakers
	// does; it only records the failures handlers blame on a dependency
	// with DependencyDown.
	g.store = bs
	return g, nil
}

// claim claims jobs as params ask, leaving out the kinds whose breaker is
// open and claiming at most one job per probe slot it gets for a breaker
// whose cool-down is over.
func (g *breakerGate) claim(ctx context.Context, params *errandstore.JobClaimParams, claim claimFunc) ([]*errandtype.Job, error) {
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
// when the nearest of them may change (see capWait).
func (g *breakerGate) blocked(ctx context.Context, deps []string) (map[string]bool, []*errandtype.BreakerRecord, error) {
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
		g.recheck = g.e.clock.Now().Add(wait)
	}
	g.mu.Unlock()
	return blocked, probe, nil
}

// mayProbe reports whether the blocked breaker b, read at now, may let a
// probe through: open past its cool-down, or half-open with a probe slot
// free or its probes' time over.
func (g *breakerGate) mayProbe(b *errandtype.BreakerRecord, now time.Time) bool {
	if b.State == errandtype.BreakerOpen {
		return b.OpenUntil != nil && !now.Before(*b.OpenUntil)
	}
	return b.Probes < g.e.breakerPolicy(b.Dependency).Probes || b.ProbeUntil == nil || !now.Before(*b.ProbeUntil)
}

// claimedSoFar ends a claim that failed after it had claimed jobs (probes):
// they are the caller's, their attempts counted and their leases running,
// so they are returned without the error, which is logged; a caller that
// drops jobs with an error (a remote claim, WorkOne) would strand them
// until their leases ran out, and hold their breakers' probe slots. With
// none claimed the error is returned.
func (g *breakerGate) claimedSoFar(jobs []*errandtype.Job, err error) ([]*errandtype.Job, error) {
	if len(jobs) == 0 {
		return nil, err
	}
	g.e.logger.Warn("claim failed after claiming probes; returning those", "jobs", len(jobs), "err", err)
	return jobs, nil
}

// depsOf returns the dependencies that kinds name, sorted.
func (g *breakerGate) depsOf(kinds []string) []string {
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
func (g *breakerGate) claimProbe(ctx context.Context, params *errandstore.JobClaimParams, dep string, claim claimFunc) (*errandtype.Job, error) {
	r, err := g.store.BreakerUpdate(ctx, &errandstore.BreakerUpdateParams{Dependency: dep, Event: errandstore.BreakerProbe, Policy: g.e.breakerPolicy(dep)})
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
	g.e.logger.Info("circuit breaker half-open; probing", "dependency", dep, "job_id", jobs[0].ID, "kind", jobs[0].Kind)
	return jobs[0], nil
}

// staleProbe is how long past its slot's time a probe is still looked
// for: a probe that reports later (its job's heartbeats kept it running) is
// taken for an ordinary attempt. Before it, a probe claimed for a remote
// worker that died, or that reported through another API server, would
// be kept for the life of the process.
const staleProbe = MaxLease

// forgetStaleProbes drops the probes whose slot's time passed staleProbe
// ago. g.mu is held.
func (g *breakerGate) forgetStaleProbes() {
	cut := g.e.clock.Now().Add(-staleProbe)
	for id, p := range g.probes {
		if !p.until.IsZero() && p.until.Before(cut) {
			delete(g.probes, id)
		}
	}
}

// capWait shortens an idle queue's sleep to the time a blocked breaker may
// let a job through. Nil-safe.
func (g *breakerGate) capWait(wait time.Duration) time.Duration {
	if g == nil {
		return wait
	}
	g.mu.Lock()
	at := g.recheck
	g.mu.Unlock()
	if at.IsZero() {
		return wait
	}
	return min(wait, max(at.Sub(g.e.clock.Now()), minDueWait))
}

// observe reports a finished attempt of job to its dependency's breaker.
// res is nil when the outcome could not be recorded. Nil-safe.
func (g *breakerGate) observe(ctx context.Context, a *attempt, res *WorkResult) {
	if g != nil {
		g.report(ctx, g.eventOf(ctx, a, res), nil)
	}
}

// breakerReport is what one finished attempt tells its dependency's
// breaker.
type breakerReport struct {
	dep   string
	event errandstore.BreakerEvent // BreakerRelease: nothing
	msg   string
	probe bool // the attempt held a probe slot of dep
}

// eventOf decides what a's attempt, recorded as res (nil: not recorded),
// tells its breaker, giving back the probe slot of an attempt that tells
// nothing of the slot's dependency.
func (g *breakerGate) eventOf(ctx context.Context, a *attempt, res *WorkResult) breakerReport {
	job := a.job
	g.mu.Lock()
	slot, probe := g.probes[job.ID]
	delete(g.probes, job.ID)
	g.mu.Unlock()
	r := breakerReport{dep: g.dep[job.Kind], event: errandstore.BreakerRelease, probe: probe}
	var je *JobError
	if a.err != nil {
		je = classified(a.err)
		if je.dependency != "" {
			r.dep = je.dependency
		}
	}
	r.event = breakerEvent(a, res, je)
	if r.event == errandstore.BreakerFailure {
		r.msg = res.Error
	}
	if probe && (r.event == errandstore.BreakerRelease || r.dep != slot.dep) {
		// The probe learned nothing of its dependency (or its job blamed
		// another): its slot is given back.
		g.release(ctx, slot)
		r.probe = false
	}
	return r
}

// breakerEvent is what an attempt a, recorded as res (nil: not recorded),
// that failed with je (nil: it did not), tells its breaker: a success, a
// failure (a timeout, a retryable failure other than a panic, or one that
// blames a dependency), or nothing (BreakerRelease).
func breakerEvent(a *attempt, res *WorkResult, je *JobError) errandstore.BreakerEvent {
	switch {
	case res == nil || res.Result == ResultLeaseLost || res.Result == ResultInterrupted || res.Result == ResultSnoozed:
	case res.Result == ResultSucceeded:
		return errandstore.BreakerSuccess
	case a.timedOut:
		return errandstore.BreakerFailure
	case je != nil && (je.dependency != "" || !je.permanent && je.class != ClassPanic):
		return errandstore.BreakerFailure
	}
	return errandstore.BreakerRelease
}

// report applies r. A success that is not a probe's is a conditional
// write: it reads the breaker and writes only when the success changes it
// (ends a run of failures), so that a success of a healthy dependency
// writes nothing, and one after failures recorded by any process ends
// their run. succeeded, when not nil, holds the dependencies whose success
// was reported already, by a batch of outcomes that needs one per
// dependency.
func (g *breakerGate) report(ctx context.Context, r breakerReport, succeeded map[string]bool) {
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
func (g *breakerGate) successChanges(ctx context.Context, dep string) bool {
	read, err := g.store.BreakerList(context.WithoutCancel(ctx), &errandstore.BreakerListParams{Dependencies: []string{dep}})
	if err != nil {
		g.e.logger.Warn("read circuit breaker failed", "dependency", dep, "err", err)
		return true
	}
	var cur *errandtype.BreakerRecord
	if len(read.Breakers) == 1 {
		cur = read.Breakers[0]
	}
	p := &errandstore.BreakerUpdateParams{Dependency: dep, Event: errandstore.BreakerSuccess, Policy: g.e.breakerPolicy(dep)}
	return errandstore.ApplyBreakerEvent(cur, p, read.Now).Changed
}

// guards reports whether kind has a dependency under a breaker, so that
// its attempts' results are events of it.
func (g *breakerGate) guards(kind string) bool {
	return g != nil && g.dep[kind] != ""
}

// update applies one event, logging what it changed; a failed write is
// logged and dropped (the breaker is advisory: the jobs' own outcomes are
// recorded already).
func (g *breakerGate) update(ctx context.Context, dep string, event errandstore.BreakerEvent, msg string) {
	g.write(ctx, &errandstore.BreakerUpdateParams{Dependency: dep, Event: event, Message: errandstore.CleanText(msg, errandstore.MaxMessageBytes)})
}

// release gives back the probe slot s, unless it is too late to: a slot
// not reported within its time may be another probe's now.
func (g *breakerGate) release(ctx context.Context, s probeSlot) {
	g.write(ctx, &errandstore.BreakerUpdateParams{Dependency: s.dep, Event: errandstore.BreakerRelease, ProbeUntil: s.until})
}

// write applies the event p under the dependency's policy, as update says.
func (g *breakerGate) write(ctx context.Context, p *errandstore.BreakerUpdateParams) {
	dep, event := p.Dependency, p.Event
	p.Policy = g.e.breakerPolicy(dep)
	r, err := g.store.BreakerUpdate(context.WithoutCancel(ctx), p)
	if err != nil {
		g.e.logger.Warn("record circuit breaker event failed", "dependency", dep, "event", string(event), "err", err)
		return
	}
	if !r.Applied {
		return
	}
	switch event {
	case errandstore.BreakerFailure:
		g.e.logger.Warn("circuit breaker opened; jobs of the dependency wait", "dependency", dep,
			"until", r.Breaker.OpenUntil, "trips", r.Breaker.Trips, "last_error", r.Breaker.LastError)
	case errandstore.BreakerSuccess:
		g.e.logger.Info("circuit breaker closed; jobs of the dependency run again", "dependency", dep)
		g.e.wakes.Wake(nil)
	}
}

// claimFunc claims the jobs p asks for.
type claimFunc func(ctx context.Context, p *errandstore.JobClaimParams) ([]*errandtype.Job, error)
