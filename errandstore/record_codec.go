package errandstore

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/errandhq/errand/errandtype"
)

// TagsJSON is the tags column of a job inserted with p: a JSON array, []
// when p has no tags.
func (p *JobInsertParams) TagsJSON() (string, error) {
	return jsonArray(p.Tags)
}

// Columns validates p and returns the columns a store writes for it.
// Queues and kinds are [] when empty.
func (p *WorkerRegisterParams) Columns() (*errandtype.WorkerColumns, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	c := &errandtype.WorkerColumns{HeartbeatIntervalUS: p.HeartbeatInterval.Microseconds()}
	var err error
	if c.Queues, err = jsonArray(p.Queues); err != nil {
		return nil, fmt.Errorf("register worker %s: encode queues: %w", p.ID, err)
	}
	if c.Kinds, err = jsonArray(p.Kinds); err != nil {
		return nil, fmt.Errorf("register worker %s: encode kinds: %w", p.ID, err)
	}
	return c, nil
}

// jsonArray encodes s as a JSON array, [] when s is empty.
func jsonArray[T any](s []T) (string, error) {
	if len(s) == 0 {
		return "[]", nil // most jobs have no tags: no encoder per row
	}
	b, err := json.Marshal(s)
	return string(b), err
}

// FollowColumns are the columns a write with Follow returns beside each
// outcome's state (see [OutcomeResult]), as a store reads them.
type FollowColumns struct {
	Kind                string
	BatchID, WorkflowID *string
	AttemptedAt         time.Time // as the store decodes its own column; zero: NULL
	Output, LastError   *string   // NULL: none
}

// Followed fills r's Kind, BatchID, WorkflowID, AttemptedAt, Output and
// LastError from c.
func (r *OutcomeResult) Followed(c *FollowColumns) error {
	r.Kind, r.BatchID, r.WorkflowID, r.AttemptedAt = c.Kind, c.BatchID, c.WorkflowID, c.AttemptedAt
	if c.Output != nil {
		r.Output = json.RawMessage(*c.Output)
	}
	if c.LastError != nil {
		r.LastError = new(errandtype.LastError)
		if err := json.Unmarshal([]byte(*c.LastError), r.LastError); err != nil {
			return fmt.Errorf("decode last_error: %w", err)
		}
	}
	return nil
}
