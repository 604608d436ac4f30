package history

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

// Options tune Check.
type Options struct {
	// Timeout bounds the check; zero means a minute. A check that runs out
	// of time is an error, neither a pass nor a violation.
	Timeout time.Duration
	// VisualizationPath, when set, is where porcupine's visualization of
	// the history (an HTML file) is written.
	VisualizationPath string
}

// Violation is a history that no order of its operations fits: the
// counterexample of one job.
type Violation struct {
	JobID string
	// Linearized is the longest order of the job's operations that fits
	// the model, each described with the state it leaves.
	Linearized []string
	// Stuck are the job's operations left over, in call order: none can
	// come next.
	Stuck []string
	// VisualizationPath is where the visualization was written, if it was.
	VisualizationPath string
}

func (v *Violation) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "history of job %s is not linearizable\nlongest linearizable order:\n", v.JobID)
	for _, l := range v.Linearized {
		b.WriteString("  " + l + "\n")
	}
	b.WriteString("then none of these can come next:\n")
	for _, l := range v.Stuck {
		b.WriteString("  " + l + "\n")
	}
	if v.VisualizationPath != "" {
		fmt.Fprintf(&b, "visualization: %s\n", v.VisualizationPath)
	}
	return b.String()
}

// Check returns nil when h is linearizable, a *Violation when it is not, or
// another error when the check could not decide.
func Check(h History, o Options) error {
	if o.Timeout <= 0 {
		o.Timeout = time.Minute
	}
	m := Model.ToModel()
	res, info := porcupine.CheckOperationsVerbose(m, h.ops, o.Timeout)
	if o.VisualizationPath != "" {
		if err := porcupine.VisualizePath(m, info, o.VisualizationPath); err != nil {
			return fmt.Errorf("history: write the visualization: %w", err)
		}
	}
	switch res {
	case porcupine.Ok:
		return nil
	case porcupine.Unknown:
		return fmt.Errorf("history: the check of %d operations ran out of its %s", len(h.ops), o.Timeout)
	}
	v := violation(m, partition(h.ops), info.PartialLinearizationsOperations())
	v.VisualizationPath = o.VisualizationPath
	return v
}

// violation finds the first partition that no order fits and describes it.
func violation(m porcupine.Model, parts [][]porcupine.Operation, lins [][][]porcupine.Operation) *Violation {
	for p, ops := range parts {
		var longest []porcupine.Operation
		for _, l := range lins[p] {
			if len(l) > len(longest) {
				longest = l
			}
		}
		if len(longest) == len(ops) {
			continue
		}
		v := &Violation{}
		for _, o := range ops {
			if id := o.Input.(input).JobID; id != "" {
				v.JobID = id
			}
		}
		// Replay the order to describe the states it passes through.
		states := []any{job{}}
		for _, o := range longest {
			var next []any
			for _, s := range states {
				next = append(next, step(s, o.Input, o.Output)...)
			}
			states = next
			v.Linearized = append(v.Linearized, describe(m, o)+"  => "+describeStates(states))
		}
		for _, o := range ops {
			if !slices.ContainsFunc(longest, func(l porcupine.Operation) bool { return sameOp(l, o) }) {
				v.Stuck = append(v.Stuck, describe(m, o))
			}
		}
		return v
	}
	return &Violation{Stuck: []string{"porcupine found the history illegal, but every partition's longest order is complete"}}
}

func sameOp(a, b porcupine.Operation) bool {
	return a.ClientId == b.ClientId && a.Call == b.Call && a.Return == b.Return && a.Input == b.Input && a.Output == b.Output
}

func describe(m porcupine.Model, o porcupine.Operation) string {
	return fmt.Sprintf("client %d [%s, %s] %s", o.ClientId, ms(o.Call), ms(o.Return), m.DescribeOperation(o.Input, o.Output))
}

func describeStates(ss []any) string {
	var ds []string
	for _, s := range ss {
		d := s.(job).String()
		if !slices.Contains(ds, d) {
			ds = append(ds, d)
		}
	}
	return strings.Join(ds, " | ")
}
