package errand

import (
	"context"
	"fmt"

	"github.com/errandhq/errand/errandtype"
	"github.com/errandhq/errand/internal/flow"
)

// A dependency's rate limit ([RateLimit].Dependency) is one bucket shared
// by every kind that declares the dependency ([KindOpts].Dependency), in
// every process: two kinds that call one provider share its rate. A claim
// of any of them takes a token of it besides those of its queue's and its
// kind's limits; an adaptive one moves on the outcomes of all of them,
// and a provider's reset time seen by one holds them all. The mechanics
// are internal/flow's (dependency.go).

// dependencyOf returns the dependency that kind declares, or "" when it
// declares none or this client does not know it.
func (e *engine) dependencyOf(kind string) string {
	if k := e.kinds[kind]; k != nil {
		return k.Dependency
	}
	return ""
}

// addDependencyLimit adds l, a dependency's limit with spec, to the limits
// f of a worker of kinds. A dependency no registered kind declares is a
// mistake: the limit would bind nothing.
func addDependencyLimit(e *engine, f *flow.Limits, l errandtype.RateLimit, spec errandtype.LimiterSpec, kinds []string) error {
	dep := l.Dependency
	declared := false
	for k := range e.kinds {
		declared = declared || e.dependencyOf(k) == dep
	}
	if !declared {
		return &errandtype.InputError{Field: "RateLimits", Message: fmt.Sprintf("%s limits a dependency no kind declares; declare it on the kinds that call it with KindOpts.Dependency, or drop the limit", l.Name())}
	}
	if _, dup := f.Deps[dep]; dup {
		return &errandtype.InputError{Field: "RateLimits", Message: fmt.Sprintf("%s is limited twice; give each dependency one limit", l.Name())}
	}
	f.Deps[dep] = flow.Rule{Name: l.Name(), Spec: spec}
	if spec.Adaptive() {
		f.DepAdaptive[dep] = &flow.Adaptive{Name: l.Name(), Target: l.Target}
	}
	for _, k := range kinds {
		if e.dependencyOf(k) == dep {
			f.DepOf[k] = dep
		}
	}
	return nil
}

// observeOutsideAdaptive counts the outcome o of an attempt of kind
// claimed outside a Worker, a remote worker's or [Client.WorkOne]'s, for
// the adaptive limits that follow kind's outcomes, its own and its
// dependency's, as a Worker counts its own (see remote_limits.go).
func (e *engine) observeOutsideAdaptive(ctx context.Context, kind string, o flow.Outcome) {
	if e.caps.limiter == nil {
		return
	}
	f := e.outside.adaptive.For(e.caps.limiter, kind, e.dependencyOf(kind), o.Throttled)
	if f != nil {
		f.Observe(ctx, e.logger, kind, o, e.clock.Now())
	}
}
