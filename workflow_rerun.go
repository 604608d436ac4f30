package errand

import (
	"context"
	"fmt"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/internal/ids"
)

// What a replay of a workflow's step means. Until the workflow has enqueued
// a compensation, a dead or cancelled step is replayed to resume it: the
// step runs again and its dependants follow. Once a compensation has been
// enqueued, what the step would build on is being (or has been) undone, so
// a replay of any of its steps is refused, by every path, in the store's
// replay transaction ([CheckReplayInWorkflow]); the way forward is a rerun
// ([Client.RerunWorkflow]): a new workflow from the old one's definition,
// the old one kept as history. A dead compensation is replayed to go on
// compensating.

// WorkflowRerunOpts are the options of [Client.RerunWorkflow].
type WorkflowRerunOpts struct {
	// ID, when set, is the new workflow's id; otherwise one is generated.
	// A rerun retried with the id it was given returns the workflow it
	// started, with Duplicate set.
	ID string
}

// RerunWorkflow starts workflow id again as a new workflow, from the step
// definitions it was enqueued with: the way forward once a workflow has
// compensated, whose steps are no longer replayed (see
// [Client.EnqueueWorkflow]). The old workflow stays as history and records
// the new one's id (RerunAs), which records the old one's (RerunOf); its
// steps are no longer replayed. Corrected args given to a replay of an old
// step are not carried over: a step's args are those it was enqueued with.
//
// A workflow that is open (running or compensating), or was rerun as
// another, returns a *WorkflowStateError and nothing is written. The store
// must be a [WorkflowStore].
func (c *Client[TTx]) RerunWorkflow(ctx context.Context, id string, opts *WorkflowRerunOpts) (*errandstore.WorkflowInsertResult, error) {
	ws := c.caps.workflows
	if ws == nil {
		return nil, fmt.Errorf("rerun workflow: %w", errNoWorkflowStore)
	}
	p := &errandstore.WorkflowRerunParams{ID: id}
	if opts != nil {
		p.NewID = opts.ID
	}
	if p.NewID == "" {
		p.NewID = ids.NewJobID()
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	res, err := ws.WorkflowRerun(ctx, p)
	if err != nil {
		return nil, wrapStoreError("rerun workflow "+id, err)
	}
	c.afterWorkflowInsert(res)
	return res, nil
}
