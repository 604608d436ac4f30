package errand

import (
	"context"
	"fmt"
)

// BatchState selects batches by completion: open (a member is unfinished,
// or the completion is not yet recorded) or completed.
type BatchState string

const (
	// BatchOpen: the batch has not completed; its callback is not enqueued.
	BatchOpen BatchState = "open"
	// BatchCompleted: every member finished and the batch completed once,
	// with its final counts and callback job.
	BatchCompleted BatchState = "completed"
)

// BatchStates lists every batch state.
var BatchStates = []BatchState{BatchOpen, BatchCompleted}

// Valid reports whether s is a batch state.
func (s BatchState) Valid() bool { return s == BatchOpen || s == BatchCompleted }

// ParseBatchState reads a batch state, open or completed; anything else is
// an *InputError.
func ParseBatchState(s string) (BatchState, error) {
	st := BatchState(s)
	if !st.Valid() {
		return "", &InputError{Field: "state", Message: fmt.Sprintf("%q is not a batch state; use open or completed", s)}
	}
	return st, nil
}

// BatchListParams select batches to list, newest first.
type BatchListParams struct {
	// State, when set, keeps the open or the completed batches.
	State BatchState
	// Limit bounds the result; zero means 100.
	Limit int
	// Before pages: only batches listed after this position, the CreatedAt
	// and ID of the last batch of the previous page.
	Before *ListCursor
}

// Validate checks the parameters of BatchList.
func (p *BatchListParams) Validate() error {
	if err := p.Before.validate("before"); err != nil {
		return err
	}
	if p.State != "" && !p.State.Valid() {
		return &InputError{Field: "state", Message: fmt.Sprintf("%q is not a batch state; use open or completed", p.State)}
	}
	if p.Limit < 0 {
		return &InputError{Field: "limit", Message: fmt.Sprintf("%d is negative; give at least 1, or 0 for 100", p.Limit)}
	}
	return nil
}

// Batches lists batches, newest first, each with its members' current
// counts as [Client.Batch] returns it. The store must be a [BatchStore].
func (c *Client[TTx]) Batches(ctx context.Context, p *BatchListParams) ([]*Batch, error) {
	bs, ok := c.store.(BatchStore)
	if !ok {
		return nil, fmt.Errorf("list batches: %w", errNoBatchStore)
	}
	if p == nil {
		p = &BatchListParams{}
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
