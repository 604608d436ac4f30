package errandstore

import (
	"fmt"

	"github.com/errandhq/errand/errandtype"
)

// BatchListParams select batches to list, newest first.
type BatchListParams struct {
	// State, when set, keeps the open or the completed batches.
	State errandtype.BatchState
	// Limit bounds the result; zero means 100.
	Limit int
	// Before pages: only batches listed after this position, the CreatedAt
	// and ID of the last batch of the previous page.
	Before *errandtype.ListCursor
}

// Validate checks the parameters of BatchList.
func (p *BatchListParams) Validate() error {
	if err := p.Before.Validate("before"); err != nil {
		return err
	}
	if p.State != "" && !p.State.Valid() {
		return &errandtype.InputError{Field: "state", Message: fmt.Sprintf("%q is not a batch state; use open or completed", p.State)}
	}
	if p.Limit < 0 {
		return &errandtype.InputError{Field: "limit", Message: fmt.Sprintf("%d is negative; give at least 1, or 0 for 100", p.Limit)}
	}
	return nil
}
