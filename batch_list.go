package errand

import (
	"context"
	"fmt"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
)

// BatchStates lists every batch state.
var BatchStates = []errandtype.BatchState{errandtype.BatchOpen, errandtype.BatchCompleted}

// ParseBatchState reads a batch state, open or completed; anything else is
// an *InputError.
func ParseBatchState(s string) (errandtype.BatchState, error) {
	st := errandtype.BatchState(s)
	if !st.Valid() {
		return "", &errandtype.InputError{Field: "state", Message: fmt.Sprintf("%q is not a batch state; use open or completed", s)}
	}
	return st, nil
}

// Batches lists batches, newest first, each with its members' current
// counts as [Client.Batch] returns it. The store must be a [BatchStore].
func (c *Client[TTx]) Batches(ctx context.Context, p *errandstore.BatchListParams) ([]*errandstore.Batch, error) {
	bs := c.caps.batches
	if bs == nil {
		return nil, fmt.Errorf("list batches: %w", errNoBatchStore)
	}
	if p == nil {
		p = &errandstore.BatchListParams{}
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	b, err := bs.BatchList(ctx, p)
	if err != nil {
		return nil, fmt.Errorf("list batches: %w", err)
	}
	return b, nil
}
