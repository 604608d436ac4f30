// Package jobjson is the JSON form of a job errand enqueues later for the
// caller: a batch's callback (internal/batchjson), a workflow's step or
// compensation (internal/workflowjson). Its fields are those of
// POST /api/v1/jobs without id, run_at and the unique fields, since errand
// gives such a job its id and enqueues it when the batch or the steps it
// waits for are done.
package jobjson

import (
	"bytes"
	"encoding/json"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandtype"
)

// Job is a job errand enqueues later.
type Job struct {
	Kind string `json:"kind"`
	// Args must be a JSON object: errand sets one field in it (the batch's
	// final counts in "batch", the workflow's in "workflow"); null or
	// absent means {}.
	Args        json.RawMessage     `json:"args"`
	Queue       string              `json:"queue"`
	Priority    int                 `json:"priority"`
	Delay       errandtype.Duration `json:"delay"`
	MaxAttempts int                 `json:"max_attempts"`
	BackoffBase errandtype.Duration `json:"backoff_base"`
	BackoffMax  errandtype.Duration `json:"backoff_max"`
	MaxAge      errandtype.Duration `json:"max_age"`
	OrderingKey string              `json:"ordering_key"`
	// OrderingOnDead is "hold" or "release" (default: the kind's choice).
	OrderingOnDead errand.OrderingOnDead `json:"ordering_on_dead"`
	FairnessKey    string                `json:"fairness_key"`
	Tags           []string              `json:"tags"`
}

// Params returns the job's args and options. A missing kind, a negative
// duration or args that are not a JSON object are an *errandtype.InputError
// naming field (field.kind, field.args); its message ends with kindHint
// ("name the job's kind, e.g. ...") or argsHint (what errand sets in the
// args).
func (j *Job) Params(field, kindHint, argsHint string) (errand.RawArgs, *errand.EnqueueOpts, error) {
	if j.Kind == "" {
		return errand.RawArgs{}, nil, &errandtype.InputError{Field: field + ".kind", Message: "is missing; " + kindHint}
	}
	if j.Delay < 0 {
		return errand.RawArgs{}, nil, &errandtype.InputError{Field: field + ".delay", Message: "must not be negative"}
	}
	if j.MaxAge < 0 {
		return errand.RawArgs{}, nil, &errandtype.InputError{Field: field + ".max_age", Message: "must not be negative"}
	}
	args := j.Args
	if t := bytes.TrimSpace(args); len(t) == 0 || string(t) == "null" {
		args = json.RawMessage("{}")
	} else if t[0] != '{' {
		return errand.RawArgs{}, nil, &errandtype.InputError{Field: field + ".args", Message: "must be a JSON object; " + argsHint}
	}
	return errand.RawArgs{KindName: j.Kind, JSON: args}, &errand.EnqueueOpts{
		Queue: j.Queue, Priority: j.Priority, Delay: time.Duration(j.Delay), MaxAttempts: j.MaxAttempts,
		BackoffBase: time.Duration(j.BackoffBase), BackoffMax: time.Duration(j.BackoffMax), MaxAge: time.Duration(j.MaxAge), OrderingKey: j.OrderingKey, OrderingOnDead: j.OrderingOnDead,
		FairnessKey: j.FairnessKey, Tags: j.Tags,
	}, nil
}
