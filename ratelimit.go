package errand

import (
	"context"
	"fmt"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
)

// Limits returns the cluster's rate limits and retry budgets as they stand
// now, ordered by name: every bucket a worker has taken from. A store that
// is not a [LimiterStore] has none, and returns an empty list.
func (c *Client[TTx]) Limits(ctx context.Context) ([]*errandtype.LimiterRecord, error) {
	ls := c.caps.limiter
	if ls == nil {
		return []*errandtype.LimiterRecord{}, nil
	}
	rs, err := ls.LimiterList(ctx, &errandstore.LimiterListParams{})
	if err != nil {
		return nil, fmt.Errorf("list limits: %w", err)
	}
	return rs, nil
}
