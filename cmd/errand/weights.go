package main

import (
	"flag"
	"strconv"
	"strings"

	"github.com/errandhq/errand"
)

// weightFlags are --max-workers and --weight, which errand work and errand
// serve share: the worker's capacity over all its queues and each queue's
// share of it when all are busy.
type weightFlags struct {
	maxWorkers *int
	weights    *[]string
}

func addWeightFlags(fs *flag.FlagSet) weightFlags {
	return weightFlags{
		maxWorkers: intFlag(fs, "max-workers", 0, "run at most `N` jobs at once over all queues, shared by --weight when all are busy (default: no shared limit)"),
		weights:    listFlag(fs, "weight", "give queue NAME weight W in the share of --max-workers (`NAME=W`, repeatable; default 1)"),
	}
}

// set reports whether any of the flags was given.
func (f weightFlags) set(fs *flag.FlagSet) bool {
	return isSet(fs, "max-workers") || len(*f.weights) > 0
}

// apply checks the flags against the --queue flags and writes them into
// cfg.
func (f weightFlags) apply(fs *flag.FlagSet, qs queueFlags, cfg *errand.WorkerConfig) error {
	if isSet(fs, "max-workers") && *f.maxWorkers < 1 {
		return usagef("--max-workers must be at least 1, e.g. --max-workers 20")
	}
	if len(*f.weights) > 0 && *f.maxWorkers == 0 {
		return usagef("--weight shares --max-workers among the queues; add --max-workers N, e.g. --max-workers 20")
	}
	weights := map[string]int{}
	for _, spec := range *f.weights {
		i := strings.LastIndexByte(spec, '=')
		if i <= 0 {
			return usagef("--weight %q: write NAME=W, e.g. --weight critical=6", spec)
		}
		name := spec[:i]
		w, err := strconv.Atoi(spec[i+1:])
		if err != nil || w < 1 || w > errand.MaxQueueWeight {
			return usagef("--weight %q: write NAME=W with W at least 1 and at most %d, e.g. --weight critical=6", spec, errand.MaxQueueWeight)
		}
		if _, ok := qs.concurrency[name]; !ok {
			return usagef("--weight names queue %q, which no --queue runs; add --queue %s or drop the weight", name, name)
		}
		if _, dup := weights[name]; dup {
			return usagef("--weight names queue %q twice; give it once", name)
		}
		weights[name] = w
	}
	cfg.MaxWorkers = *f.maxWorkers
	if len(weights) > 0 {
		cfg.QueueWeights = weights
	}
	return nil
}
