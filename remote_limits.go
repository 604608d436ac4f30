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
// cannot start more jobs than the cluster's limit allows. A queue or kind no
// Worker limits has no bucket, and its remote claims are not limited.

// storedFlowLimits returns the limits that bind a claim of queue for kinds:
// the stored buckets of the queue, of each kind and of each kind's retries.
// It returns nil when none applies or the store keeps no limits.
func storedFlowLimits(ctx context.Context, ls errandstore.LimiterStore, queue string, kinds []string) (*flow.Limits, error) {
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
		default:
			continue
		}
		m[name] = flow.Rule{Name: r.Name, Spec: r.Spec}
		n++
	}
	if n == 0 {
		return nil, nil
	}
	return f, nil
}
