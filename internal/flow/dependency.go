package flow

import (
	"strings"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
)

// A dependency's rate limit is one bucket for every kind that declares the
// dependency: a claim of any of them takes from it once, as many tokens as
// it has room for, and a grant of none takes all of them out of the claim.
// Its adaptive collector counts the outcomes of all of them, so that a
// provider's reset time seen by one kind holds the others.

// dependencyLimits are a worker's limits of dependencies.
type dependencyLimits struct {
	// Deps: dependency -> its rate limit.
	Deps map[string]Rule
	// DepOf: kind -> the dependency it declares, for kinds that declare
	// one.
	DepOf map[string]string
	// DepAdaptive: dependency -> the collector of its adaptive limit (in
	// Deps too).
	DepAdaptive map[string]*Adaptive
	// DepConcAdaptive: dependency -> the collector of its adaptive
	// concurrency limit, for outcomes counted outside a claim (a claim's
	// gate keys it by kind, in ConcAdaptive).
	DepConcAdaptive map[string]*Adaptive
}

func newDependencyLimits() dependencyLimits {
	return dependencyLimits{Deps: map[string]Rule{}, DepOf: map[string]string{}, DepAdaptive: map[string]*Adaptive{}, DepConcAdaptive: map[string]*Adaptive{}}
}

// dependencyTakes returns the takes of the dependencies' limits of a claim
// of up to free jobs of kinds: one per dependency, in the kinds' order.
func (d *dependencyLimits) dependencyTakes(kinds []string, free int) []errandstore.LimiterTake {
	var takes []errandstore.LimiterTake
	seen := map[string]bool{}
	for _, k := range kinds {
		dep := d.DepOf[k]
		if r, ok := d.Deps[dep]; ok && !seen[dep] {
			seen[dep] = true
			takes = append(takes, errandstore.LimiterTake{Name: r.Name, Spec: r.Spec, Want: free})
		}
	}
	return takes
}

// kindsByDependency returns, for each dependency's bucket that limits
// kinds, the kinds it limits.
func (d *dependencyLimits) kindsByDependency(kinds []string) map[string][]string {
	var m map[string][]string
	for _, k := range kinds {
		if r, ok := d.Deps[d.DepOf[k]]; ok {
			if m == nil {
				m = map[string][]string{}
			}
			m[r.Name] = append(m[r.Name], k)
		}
	}
	return m
}

// limitedKinds returns the kinds of the claim that the bucket of a kind's
// or a dependency's rate limit named name limits.
func (p *Plan) limitedKinds(name string) []string {
	if k, ok := strings.CutPrefix(name, "kind:"); ok {
		return []string{k}
	}
	return p.depKinds[name]
}

// collector returns the adaptive collector of the bucket of a kind's or a
// dependency's rate limit named name, or nil.
func (f *Limits) collector(name string) *Adaptive {
	if dep, ok := strings.CutPrefix(name, errandtype.DependencyLimitPrefix); ok {
		return f.DepAdaptive[dep]
	}
	return f.Adaptive[strings.TrimPrefix(name, "kind:")]
}
