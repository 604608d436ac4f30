package errand

import (
	"context"
	"slices"
	"strings"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
	"github.com/errandhq/errand/internal/flow"
)

// A claim made outside a Worker, by a worker in another language through
// the HTTP API ([Client.Claim]), draws on the same rate limits and retry
// budgets as every Worker: the cluster's limits are the rules the Workers
// wrote into the store with their takes (the last writer's rule wins, see
// [LimiterStore]), so a remote worker needs no configuration of its own and
// cannot start more jobs than the cluster's limit allows. A concurrency
// limit, a kind's or a dependency's, binds the kinds its row counts as it
// binds a Worker's claims (see concurrency_limit.go). A queue or kind no
// Worker limits has no bucket, and its remote claims are not limited. A
// dependency's rate limit binds the kinds that this client knows to
// declare it ([KindOpts].Dependency), as its circuit breaker does.
//
// The remote worker's outcomes move adaptive limits as a Worker's do:
// the client keeps a collector per adaptive bucket (internal/flow's
// Collectors), which its claims mark when the limit held them back, and
// which counts the successes and throttles the remote worker reports
// (observeOutsideAdaptive), a success slower than the latency target the
// limit's row keeps as slow.

// storedFlowLimits returns the limits that bind a claim of queue for kinds:
// the stored buckets of the queue, of each kind, of each kind's retries and
// of the dependencies the kinds declare (depOf), with the collectors col
// keeps for the adaptive ones. It returns nil when none applies or the
// store keeps no limits.
func storedFlowLimits(ctx context.Context, ls errandstore.LimiterStore, queue string, kinds []string, depOf func(kind string) string, col *flow.Collectors) (*flow.Limits, error) {
	if ls == nil {
		return nil, nil
	}
	rs, err := ls.LimiterList(ctx, &errandstore.LimiterListParams{})
	if err != nil {
		return nil, err
	}
	f := flow.NewLimits(ls)
	n := 0
	for _, r := range rs {
		if r.Spec.Mode == errandtype.LimiterModeConcurrency {
			// Its own kind's limit, or its dependency's, by the kinds the
			// row counts.
			for _, k := range kinds {
				if _, dup := f.Concurrency[k]; !dup && slices.Contains(r.Counts, k) {
					f.Concurrency[k] = flow.Rule{Name: r.Name, Spec: r.Spec, Counts: r.Counts}
					n++
				}
			}
			continue
		}
		scope, name, _ := strings.Cut(r.Name, ":")
		budget := r.Spec.Mode == errandtype.LimiterModeRetryBudget
		var m map[string]flow.Rule
		switch {
		case scope == "queue" && name == queue && !budget:
			m = f.Queues
		case scope == "kind" && slices.Contains(kinds, name) && !budget:
			m = f.Kinds
		case scope == "retry" && slices.Contains(kinds, name) && budget:
			m = f.Budgets
		case scope+":" == errandtype.DependencyLimitPrefix && !budget && declareDependency(f, kinds, name, depOf):
			m = f.Deps
		default:
			continue
		}
		m[name] = flow.Rule{Name: r.Name, Spec: r.Spec}
		n++
	}
	if n == 0 {
		return nil, nil
	}
	col.Attach(f)
	return f, nil
}

// declareDependency notes in f which of kinds declare dep, and reports
// whether any does.
func declareDependency(f *flow.Limits, kinds []string, dep string, depOf func(kind string) string) bool {
	found := false
	for _, k := range kinds {
		if depOf(k) == dep {
			f.DepOf[k], found = dep, true
		}
	}
	return found
}

// remoteSucceeded counts a remote worker's acknowledged attempt, recorded
// as r, for the adaptive limits of its kind: it took from its claim to
// now, the round trips of the remote worker included. A store that does
// not report the kind with the outcome leaves it uncounted.
func (c *engine) remoteSucceeded(ctx context.Context, r errandstore.OutcomeResult) {
	if r.Err == nil && r.State == errandtype.StateSucceeded && r.Kind != "" {
		o := flow.Outcome{Succeeded: true}
		if !r.AttemptedAt.IsZero() {
			o.Took = c.clock.Now().Sub(r.AttemptedAt)
		}
		c.observeOutsideAdaptive(ctx, r.Kind, o)
	}
}
