package errand

import (
	"context"
	"fmt"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
)

// The fair-claim rule: a claim in a queue whose jobs carry fairness keys
// ([EnqueueOpts].FairnessKey) takes the keys in turn, so that one key's
// backlog does not delay another key's jobs. Within a priority, every key's
// first claimable job comes before any key's second, its second before any
// third, and so on. Among jobs of the same priority and rank, the key
// served longest ago goes first: each fair claim gives the keys it took
// jobs of the queue's next turn number, so keys alternate across claims
// too, and a worker claiming one job at a time serves them round-robin.
// Then the earlier available_at and the lower seq go first. Jobs without a
// key share one turn, as if they had one key of their own (stored as the
// key "", which no job can have). Priorities still come first, and the
// ordering-key rule ([OrderingFreeSQL]) still decides what is claimable.
//
// A key's rank is counted among its claimable jobs in claim order
// (priority, available_at, seq), so a key's first job at a lower priority
// is still its first: a tenant's urgent job goes before other tenants'
// ordinary ones, as priorities promise.
//
// Stores read each key's first Limit claimable jobs only (no claim takes
// more than Limit jobs of one key, so none further can be picked): the cost
// of a fair claim grows with the number of keys waiting in the queue and
// the limit, never with the size of one key's backlog.

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
