package errand

import (
	"fmt"
	"slices"
	"strings"

	"github.com/errandhq/errand/errandstore"
)

// A caller-given id makes a retried enqueue return the job (batch,
// workflow) the first one made. A duplicate id whose existing job is not
// what the enqueue would have made is another request reusing the id, and
// is refused with an *IDConflictError naming what differs, unless the
// enqueue says FirstWins. A duplicate found by a unique key is never a
// conflict: unique keys exist to dedupe jobs whose args differ.
//
// Times relative to a request (Delay, RunAt, MaxAge, which a job keeps as
// its deadline) cannot be compared and are not; neither is a max attempts
// or an ordering-on-dead choice the enqueue left to the defaults, which
// another client may resolve otherwise.

// IDConflictError reports an enqueue refused because its id names an
// existing job, batch or workflow that differs from the one it would have
// made. Nothing was written. errors.Is(err, ErrIDConflict) is true.
type IDConflictError struct {
	// What is "job", "batch" or "workflow".
	What string
	// ID is the id the existing one has.
	ID string
	// Fields names what differs, as the JSON API names it: "args",
	// "queue", "jobs[2].args", "steps[0].compensate.kind".
	Fields []string
}

func (e *IDConflictError) Error() string {
	return fmt.Sprintf("%s id %q is taken by a different %s (%s differ); give a new id for a new %s, or set FirstWins to get the existing one",
		e.What, e.ID, e.What, strings.Join(e.Fields, ", "), e.What)
}

// Is makes errors.Is(err, ErrIDConflict) true.
func (e *IDConflictError) Is(target error) bool { return target == ErrIDConflict }

// checkJobConflicts returns the *IDConflictError of the first job of ps
// whose caller-given id found an existing job that differs, in rs.
func (c *engine) checkJobConflicts(ps []*errandstore.JobInsertParams, rs []errandstore.JobInsertResult) error {
	i, fields := errandstore.JobConflict(c.openedDuplicates(ps, rs))
	if i < 0 {
		return nil
	}
	err := &IDConflictError{What: "job", ID: ps[i].ID, Fields: fields}
	if len(ps) > 1 {
		return fmt.Errorf("job %d: %w", i, err)
	}
	return err
}

// openedDuplicates returns ps and rs with the args of each duplicate and
// of its params opened, so that sealed args, whose nonces differ, compare
// by what they hold. Without a codec, or without duplicates, they are ps
// and rs.
func (c *engine) openedDuplicates(ps []*errandstore.JobInsertParams, rs []errandstore.JobInsertResult) ([]*errandstore.JobInsertParams, []errandstore.JobInsertResult) {
	if c.codec == nil || !slices.ContainsFunc(rs, func(r errandstore.JobInsertResult) bool { return r.Duplicate }) {
		return ps, rs
	}
	ps, rs = slices.Clone(ps), slices.Clone(rs)
	for i := range rs {
		if !rs[i].Duplicate || rs[i].Job == nil {
			continue
		}
		p, j := *ps[i], *rs[i].Job
		// A value that does not open stays sealed, and differs.
		if a, err := c.open("args", p.Args); err == nil {
			p.Args = a
		}
		if a, err := c.open("args", j.Args); err == nil {
			j.Args = a
		}
		ps[i], rs[i].Job = &p, &j
	}
	return ps, rs
}
