package errand

import (
	"context"
	"fmt"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
)

// FairnessKeysOpts filters [Client.FairnessKeys].
type FairnessKeysOpts struct {
	// Queue, when set, restricts the answer to one queue.
	Queue string
	// Limit is the most keys per queue; zero means
	// DefaultFairnessKeysLimit.
	Limit int
}

// FairnessKeys returns, per queue, the fairness keys with the most waiting
// jobs, most first: who fills a queue. It is empty on a store without fair
// claims ([FairClaimer]).
func (c *Client[TTx]) FairnessKeys(ctx context.Context, opts *FairnessKeysOpts) ([]errandtype.FairnessKeyCount, error) {
	if opts == nil {
		opts = &FairnessKeysOpts{}
	}
	if opts.Limit < 0 {
		return nil, &errandtype.InputError{Field: "limit", Message: fmt.Sprintf("%d is negative; give a positive limit, or 0 for %d", opts.Limit, errandstore.DefaultFairnessKeysLimit)}
	}
	f := c.caps.fair
	if f == nil {
		return []errandtype.FairnessKeyCount{}, nil
	}
	keys, err := f.FairnessKeysWaiting(ctx, &errandstore.FairnessKeysParams{Queue: opts.Queue, Limit: opts.Limit})
	if err != nil {
		return nil, fmt.Errorf("fairness keys: %w", err)
	}
	return keys, nil
}
