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
// another error when the check could not decide. It checks each job's
// operations without the claims of unknown outcome first, and only a job
// that fails so again with those that may have touched it, since each such
// claim doubles the orders to try.
func Check(h History, o Options) error {
	if o.Timeout <= 0 {
		o.Timeout = time.Minute
	}
	m := Model.ToModel()
	p := partition(h.ops)
	res, info := porcupine.CheckOperationsVerbose(m, h.ops, o.Timeout)
	if res == porcupine.Unknown {
		return fmt.Errorf("history: the check of %d operations ran out of its %s", len(h.ops), o.Timeout)
	}
	if res == porcupine.Ok {
		return visualize(m, info, o.VisualizationPath)
	}
	one := Model
	one.Partition = nil
	m1 := one.ToModel()
	lins := info.PartialLinearizationsOperations()
	for i, ops := range p.jobs {
		if longest(lins[i]) == len(ops) {
			continue
		}
		ops = p.withAnyJob(ops)
		res, info := porcupine.CheckOperationsVerbose(m1, ops, o.Timeout)
		switch res {
		case porcupine.Ok:
			continue
		case porcupine.Unknown:
			return fmt.Errorf("history: the check of the %d operations of one job ran out of its %s", len(ops), o.Timeout)
		}
		if err := visualize(m1, info, o.VisualizationPath); err != nil {
			return err
		}
		v := violation(m1, ops, info.PartialLinearizationsOperations()[0])
		v.VisualizationPath = o.VisualizationPath
		return v
	}
	return visualize(m, info, o.VisualizationPath)
}

func visualize(m porcupine.Model, info porcupine.LinearizationInfo, path string) error {
	if path == "" {
		return nil
	}
	if err := porcupine.VisualizePath(m, info, path); err != nil {
		return fmt.Errorf("history: write the visualization: %w", err)
	}
	return nil
}

func longest(lins [][]porcupine.Operation) int {
	n := 0
	for _, l := range lins {
		n = max(n, len(l))
	}
	return n
}

// violation describes the operations of one job that no order fits, given
// the longest orders that fit their beginnings.
func violation(m porcupine.Model, ops []porcupine.Operation, lins [][]porcupine.Operation) *Violation {
	var best []porcupine.Operation
	for _, l := range lins {
		if len(l) > len(best) {
			best = l
		}
	}
	v := &Violation{}
	for _, o := range ops {
		if id := o.Input.(input).JobID; id != "" {
			v.JobID = id
		}
	}
	// Replay the order to describe the states it passes through.
	states := []any{job{}}
	for _, o := range best {
		var next []any
		for _, s := range states {
			next = append(next, step(s, o.Input, o.Output)...)
		}
		states = next
		v.Linearized = append(v.Linearized, describe(m, o)+"  => "+describeStates(states))
	}
	unknownClaims := 0
	for _, o := range ops {
		switch {
		case slices.ContainsFunc(best, func(l porcupine.Operation) bool { return sameOp(l, o) }):
		case o.Input.(input).JobID == "":
			unknownClaims++
		default:
			v.Stuck = append(v.Stuck, describe(m, o))
		}
	}
	if unknownClaims > 0 {
		v.Stuck = append(v.Stuck, fmt.Sprintf("(and %d claims of unknown outcome, which may or may not have claimed the job)", unknownClaims))
	}
	return v
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
