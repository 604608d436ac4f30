package errand

import (
	"fmt"

	"github.com/errandhq/errand/errandtype"
)

// Weighted queues: a worker with MaxWorkers set runs at most that many jobs
// at once over all its queues, each within its own slots, its freed
// capacity going to the queues that want it by weight (the stride
// scheduling of internal/flow): no queue starves.

// MaxQueueWeight bounds a queue's weight: weights are shares, and a ratio
// past a million to one is a mistake rather than a policy.
const MaxQueueWeight = 1_000_000

// checkWeights validates MaxWorkers and QueueWeights against the queues and
// returns each queue's weight (1 when not given). It returns nil weights
// when MaxWorkers is zero: the queues share nothing.
func checkWeights(cfg *WorkerConfig) (map[string]int, error) {
	if cfg.MaxWorkers < 0 || cfg.MaxWorkers > MaxConcurrency {
		return nil, &errandtype.InputError{Field: "MaxWorkers", Message: fmt.Sprintf("is %d; give 1 to %d, or 0 for no shared limit", cfg.MaxWorkers, MaxConcurrency)}
	}
	if cfg.MaxWorkers == 0 {
		if len(cfg.QueueWeights) > 0 {
			return nil, &errandtype.InputError{Field: "QueueWeights", Message: "weights share MaxWorkers; set MaxWorkers too, e.g. 10"}
		}
		return nil, nil
	}
	weights := make(map[string]int, len(cfg.Queues))
	for q := range cfg.Queues {
		weights[q] = 1
	}
	for q, wt := range cfg.QueueWeights {
		if _, ok := cfg.Queues[q]; !ok {
			return nil, &errandtype.InputError{Field: "QueueWeights", Message: fmt.Sprintf("queue %q is not among the worker's Queues; add it there or remove its weight", q)}
		}
		if wt < 1 || wt > MaxQueueWeight {
			return nil, &errandtype.InputError{Field: "QueueWeights", Message: fmt.Sprintf("queue %q has weight %d; use 1 to %d", q, wt, MaxQueueWeight)}
		}
		weights[q] = wt
	}
	return weights, nil
}
