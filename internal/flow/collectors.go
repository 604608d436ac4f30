package flow

import (
	"sync"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
)

// Collectors keep the adaptive collectors of the claims made outside a
// Worker (a remote worker's, through the HTTP API), by bucket, from the
// claims to the outcomes reported later: a claim the limit held back marks
// the collector Limited, and the remote worker's successes and throttles
// count there, so that they move the limit as a Worker's own do. The zero
// value is ready.
type Collectors struct {
	mu sync.Mutex
	m  map[string]*Adaptive
}

// maxCollectors bounds the collectors kept; past it they are dropped, and
// the counts since the last reports with them.
const maxCollectors = 10000

// attach returns the collector of rule r's bucket, made if need be, with
// the latency target the rule holds now.
func (c *Collectors) attach(r Rule) *Adaptive {
	a := c.get(r.Name, true)
	a.mu.Lock()
	a.Target = r.Spec.Target
	a.mu.Unlock()
	return a
}

// get returns the collector of bucket name; when it has none, a new one
// if create, else nil.
func (c *Collectors) get(name string, create bool) *Adaptive {
	c.mu.Lock()
	defer c.mu.Unlock()
	a := c.m[name]
	if a == nil && create {
		if c.m == nil || len(c.m) >= maxCollectors {
			c.m = map[string]*Adaptive{}
		}
		a = &Adaptive{Name: name}
		c.m[name] = a
	}
	return a
}

// Attach gives the adaptive limits of f, limits read from the store for
// one claim, the collectors c keeps for their buckets.
func (c *Collectors) Attach(f *Limits) {
	for k, r := range f.Kinds {
		if r.Spec.Adaptive() {
			f.Adaptive[k] = c.attach(r)
		}
	}
	for d, r := range f.Deps {
		if r.Spec.Adaptive() {
			f.DepAdaptive[d] = c.attach(r)
		}
	}
	for k, r := range f.Concurrency {
		if r.Spec.Adaptive() {
			f.ConcAdaptive[k] = c.attach(r)
		}
	}
}

// For returns limits whose Observe counts an outcome of kind, which
// declares dep ("" for none), with the collectors of kind's and dep's
// buckets, rate and concurrency, that claims have attached; with create,
// a throttle's, also those no claim has attached, since the store leaves
// a bucket that is missing or not adaptive alone, and a throttle is rare.
// Nil when there is none.
func (c *Collectors) For(store errandstore.LimiterStore, kind, dep string, create bool) *Limits {
	f := NewLimits(store)
	if a := c.get("kind:"+kind, create); a != nil {
		f.Adaptive[kind] = a
	}
	if a := c.get(errandtype.ConcurrencyLimitPrefix+kind, create); a != nil {
		f.ConcAdaptive[kind] = a
	}
	if dep != "" {
		if a := c.get(errandtype.DependencyLimitPrefix+dep, create); a != nil {
			f.DepOf[kind], f.DepAdaptive[dep] = dep, a
		}
		if a := c.get(errandtype.ConcurrencyLimitPrefix+errandtype.DependencyLimitPrefix+dep, create); a != nil {
			f.DepOf[kind], f.DepConcAdaptive[dep] = dep, a
		}
	}
	if !f.Adapts(kind) {
		return nil
	}
	return f
}
