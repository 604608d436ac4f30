package main

import (
	"errors"
	"flag"
	"strconv"
	"strings"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
)

// agingFlag is --priority-aging, repeatable: QUEUE=STEP or QUEUE=STEP:FLOOR.
func agingFlag(fs *flag.FlagSet) *[]string {
	return listFlag(fs, "priority-aging", "when leading, raise the waiting jobs of QUEUE one priority every STEP they wait, down to FLOOR (`QUEUE=STEP[:FLOOR]`, e.g. bulk=1m:0, default floor 0; repeatable)")
}

// parseAging turns --priority-aging values into a worker's PriorityAging.
func parseAging(values []string) (map[string]errand.PriorityAging, error) {
	if len(values) == 0 {
		return nil, nil
	}
	out := map[string]errand.PriorityAging{}
	for _, v := range values {
		queue, spec, ok := strings.Cut(v, "=")
		if !ok || queue == "" {
			return nil, usagef("--priority-aging %q: give QUEUE=STEP[:FLOOR], e.g. bulk=1m:0", v)
		}
		step, floor, _ := strings.Cut(spec, ":")
		d, err := time.ParseDuration(step)
		if err != nil {
			return nil, usagef("--priority-aging %q: STEP %q is not a duration; write it like 1m", v, step)
		}
		a := errand.PriorityAging{Step: d}
		if floor != "" {
			if a.Floor, err = strconv.Atoi(floor); err != nil {
				return nil, usagef("--priority-aging %q: FLOOR %q is not an integer priority", v, floor)
			}
		}
		var ie *errandtype.InputError
		if err := errandstore.CheckPriorityAging("step", a); errors.As(err, &ie) {
			return nil, usagef("--priority-aging %q: STEP %s", v, ie.Message)
		}
		if _, dup := out[queue]; dup {
			return nil, usagef("--priority-aging names queue %s twice; give one", queue)
		}
		out[queue] = a
	}
	return out, nil
}
