package errand

import (
	"context"
	"fmt"
	"time"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
)

// AuditOpts filter and page [Client.Audit]. Zero fields do not filter.
type AuditOpts struct {
	// JobID keeps the records of one job.
	JobID string
	// Action keeps the records of one action.
	Action errandtype.AuditAction
	// Since and Until keep records with Since <= at < Until.
	Since time.Time
	Until time.Time
	// BeforeID pages: pass the ID of the last record of a page to get the
	// next (older) one.
	BeforeID int64
	// Limit bounds the page: zero means DefaultAuditLimit; at most
	// MaxAuditLimit.
	Limit int
}

// Audit returns the audit, newest first: every replay, cancel, bulk replay
// and prune, with who did it, why and when. The old and new args of a
// replay with corrected args are opened as [Client.Get] opens a job's. A limit past MaxAuditLimit or
// an unknown action is an *InputError.
func (c *Client[TTx]) Audit(ctx context.Context, opts *AuditOpts) ([]errandtype.AuditRecord, error) {
	if opts == nil {
		opts = &AuditOpts{}
	}
	if opts.Action != "" && !opts.Action.Valid() {
		return nil, &errandtype.InputError{Field: "action", Message: fmt.Sprintf("unknown action %q: use one of %s", opts.Action, auditActionNames())}
	}
	if opts.Limit < 0 || opts.Limit > errandstore.MaxAuditLimit {
		return nil, &errandtype.InputError{Field: "limit", Message: fmt.Sprintf("%d is out of range; use 1 to %d (or 0 for %d)", opts.Limit, errandstore.MaxAuditLimit, errandstore.DefaultAuditLimit)}
	}
	if opts.BeforeID < 0 {
		return nil, &errandtype.InputError{Field: "before_id", Message: "must not be negative"}
	}
	if !opts.Since.IsZero() && !opts.Until.IsZero() && !opts.Until.After(opts.Since) {
		return nil, &errandtype.InputError{Field: "until", Message: "is not after since; give a time range that is not empty"}
	}
	p := &errandstore.AuditListParams{
		JobID: opts.JobID, Action: opts.Action, Since: opts.Since, Until: opts.Until,
		BeforeID: opts.BeforeID, Limit: opts.Limit,
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	rs, err := c.store.AuditList(ctx, p)
	if err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	c.openAuditForReader(rs)
	return rs, nil
}

func auditActionNames() string {
	b := []byte{}
	for i, a := range errandtype.AuditActions {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = append(b, a...)
	}
	return string(b)
}
