package errand

import (
	"context"
	"fmt"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
	"github.com/errandhq/errand/internal/breaker"
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
// last attempt; but not a throttle (a reset time, an HTTP 429 or 503) of
// a kind whose adaptive rate limit answers it (see ratelimit_worker.go). A permanent failure, a panic, a snooze, a job given back on
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
func (c *Client[TTx]) Dependency(kind string) string { return c.dependencyOf(kind) }

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

// breakerGate is a Worker's circuit breakers (see internal/breaker), with
// what the engine reports to them: nil when its store keeps none.
type breakerGate struct{ *breaker.Gate }

// newBreakerGate returns the gate of a worker of kinds, or nil when the
// store keeps no breakers (an error when a kind names a dependency).
func newBreakerGate(e *engine, kinds []string) (*breakerGate, error) {
	dep := map[string]string{}
	for _, k := range kinds {
		if d := e.kinds[k].Dependency; d != "" {
			dep[k] = d
		}
	}
	g := breaker.New(breaker.Config{Store: e.caps.breakers, Kinds: kinds, Dependency: dep, Policy: e.breakerPolicy,
		Clock: e.clock, Logger: e.logger, Wake: func() { e.wakes.Wake(nil) }, StaleProbe: MaxLease})
	switch {
	case e.caps.breakers == nil && len(g.Deps()) > 0:
		return nil, &errandtype.InputError{Field: "Kinds", Message: fmt.Sprintf("kinds name dependencies (%v) but the store keeps no circuit breakers; use errand/sqlite or errand/postgres", g.Deps())}
	case e.caps.breakers == nil:
		return nil, nil
	}
	return &breakerGate{g}, nil
}

// guards reports whether kind has a dependency under a breaker, so that
// its attempts' results are events of it. Nil-safe.
func (g *breakerGate) guards(kind string) bool {
	return g != nil && g.Guards(kind)
}

// observe reports a finished attempt of job to its dependency's breaker.
// res is nil when the outcome could not be recorded. Nil-safe.
func (g *breakerGate) observe(ctx context.Context, a *attempt, res *WorkResult) {
	if g != nil {
		g.report(ctx, g.eventOf(ctx, a, res), nil)
	}
}

// report applies r (see breaker.Gate.Apply).
func (g *breakerGate) report(ctx context.Context, r breaker.Report, succeeded map[string]bool) {
	g.Apply(ctx, r, succeeded)
}

// eventOf decides what a's attempt, recorded as res (nil: not recorded),
// tells its breaker.
func (g *breakerGate) eventOf(ctx context.Context, a *attempt, res *WorkResult) breaker.Report {
	o := breaker.Outcome{JobID: a.job.ID, Kind: a.job.Kind}
	var je *JobError
	if a.err != nil {
		je = classified(a.err)
		o.Dependency = je.dependency
	}
	o.Event = breakerEvent(a, res, je)
	if o.Event == errandstore.BreakerFailure {
		o.Message = res.Error
	}
	return g.Finish(ctx, o)
}

// breakerEvent is what an attempt a, recorded as res (nil: not recorded),
// that failed with je (nil: it did not), tells its breaker: a success, a
// failure (a timeout, a retryable failure other than a panic, or one that
// blames a dependency), or nothing (BreakerRelease).
func breakerEvent(a *attempt, res *WorkResult, je *JobError) errandstore.BreakerEvent {
	switch {
	case res == nil || res.Result == ResultLeaseLost || res.Result == ResultInterrupted || res.Result == ResultSnoozed:
	case a.throttled:
	case res.Result == ResultSucceeded:
		return errandstore.BreakerSuccess
	case a.timedOut:
		return errandstore.BreakerFailure
	case je != nil && (je.dependency != "" || !je.permanent && je.class != ClassPanic):
		return errandstore.BreakerFailure
	}
	return errandstore.BreakerRelease
}
