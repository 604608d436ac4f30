package errandtype

import (
	"encoding/json"
	"fmt"
	"time"
)

// The JSON columns of the job record and of the worker registry: how every
// store writes and reads them, so that a third-party store keeps records a
// reader cannot tell from errand's own. Times inside the history are RFC
// 3339 in UTC, at the microsecond precision of the other columns.

// JobColumns are the columns of a job row whose encoding errand defines,
// as a store reads them: text, microseconds and JSON. A store scans a row
// into them (with the other columns straight into the Job) and calls
// [Job.DecodeColumns].
type JobColumns struct {
	// Args is the args document, raw JSON.
	Args string
	// State is the job's state.
	State string
	// BackoffBaseUS and BackoffMaxUS are the job's backoff overrides in
	// microseconds, 0 when unset.
	BackoffBaseUS, BackoffMaxUS int64
	// Progress is the checkpoint document, nil when the column is NULL.
	Progress *string
	// LastError is the last_error document, nil for a job that never
	// failed.
	LastError *string
	// Errors is the error history, a JSON array of AttemptError.
	Errors string
	// Tags is a JSON array of strings.
	Tags string
	// Metadata is the metadata object, nil when the column is NULL.
	Metadata *string
}

// DecodeColumns fills j's Args, State, BackoffBase, BackoffMax, Progress,
// Metadata, LastError, Errors and Tags from c. Errors and Tags are never nil
// afterwards, so they marshal as [] when empty, as the storage contract
// requires.
func (j *Job) DecodeColumns(c *JobColumns) error {
	j.Args = json.RawMessage(c.Args)
	j.State = JobState(c.State)
	j.BackoffBase = Duration(time.Duration(c.BackoffBaseUS) * time.Microsecond)
	j.BackoffMax = Duration(time.Duration(c.BackoffMaxUS) * time.Microsecond)
	if c.Progress != nil {
		j.Progress = json.RawMessage(*c.Progress)
	}
	if c.Metadata != nil {
		j.Metadata = json.RawMessage(*c.Metadata)
	}
	if c.LastError != nil {
		j.LastError = new(LastError)
		if err := json.Unmarshal([]byte(*c.LastError), j.LastError); err != nil {
			return fmt.Errorf("job %s: decode last_error: %w", j.ID, err)
		}
	}
	// Most claimed jobs have no history and no tags: their empty arrays
	// skip the decoder, which a busy worker otherwise runs twice per job.
	if c.Errors == "[]" {
		j.Errors = []AttemptError{}
	} else if err := json.Unmarshal([]byte(c.Errors), &j.Errors); err != nil {
		return fmt.Errorf("job %s: decode errors: %w", j.ID, err)
	}
	if j.Errors == nil {
		j.Errors = []AttemptError{}
	}
	if c.Tags == "[]" {
		j.Tags = []string{}
	} else if err := json.Unmarshal([]byte(c.Tags), &j.Tags); err != nil {
		return fmt.Errorf("job %s: decode tags: %w", j.ID, err)
	}
	if j.Tags == nil {
		j.Tags = []string{}
	}
	return nil
}

// WorkerColumns are the columns of a worker registry row whose encoding
// errand defines: queues and kinds as JSON arrays, the heartbeat interval
// in microseconds.
type WorkerColumns struct {
	Queues, Kinds       string
	HeartbeatIntervalUS int64
}

// DecodeColumns fills w's Queues, Kinds and HeartbeatInterval from c.
// Neither Queues nor Kinds is nil afterwards.
func (w *WorkerRecord) DecodeColumns(c *WorkerColumns) error {
	if err := json.Unmarshal([]byte(c.Queues), &w.Queues); err != nil {
		return fmt.Errorf("worker %s: decode queues: %w", w.ID, err)
	}
	if w.Queues == nil {
		w.Queues = []WorkerQueue{}
	}
	if err := json.Unmarshal([]byte(c.Kinds), &w.Kinds); err != nil {
		return fmt.Errorf("worker %s: decode kinds: %w", w.ID, err)
	}
	if w.Kinds == nil {
		w.Kinds = []string{}
	}
	w.HeartbeatInterval = Duration(time.Duration(c.HeartbeatIntervalUS) * time.Microsecond)
	return nil
}
