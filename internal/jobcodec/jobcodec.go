// Package jobcodec decodes the JSON columns of a job row, the part of
// reading a job that every store does alike.
package jobcodec

import (
	"encoding/json"
	"fmt"

	"github.com/errandhq/errand"
)

// DecodeJSON fills j's LastError, Errors and Tags from their columns.
// lastError is nil for a job that never failed. Errors and Tags are never
// nil afterwards, so they marshal as [] when empty, as the storage contract
// requires.
func DecodeJSON(j *errand.Job, lastError *string, errs, tags string) error {
	if lastError != nil {
		j.LastError = new(errand.LastError)
		if err := json.Unmarshal([]byte(*lastError), j.LastError); err != nil {
			return fmt.Errorf("job %s: decode last_error: %w", j.ID, err)
		}
	}
	if err := json.Unmarshal([]byte(errs), &j.Errors); err != nil {
		return fmt.Errorf("job %s: decode errors: %w", j.ID, err)
	}
	if j.Errors == nil {
		j.Errors = []errand.AttemptError{}
	}
	if err := json.Unmarshal([]byte(tags), &j.Tags); err != nil {
		return fmt.Errorf("job %s: decode tags: %w", j.ID, err)
	}
	if j.Tags == nil {
		j.Tags = []string{}
	}
	return nil
}
