// Package batchjson is the JSON form of a batch to enqueue, which
// POST /api/v1/batches and errand batch enqueue --file both take:
//
//	{"id": "import-7", "jobs": [
//	  {"kind": "import_row", "args": {"row": 1}},
//	  {"kind": "import_row", "args": {"row": 2}, "queue": "imports", "max_attempts": 5}
//	], "callback": {"kind": "import_done", "args": {"import": 7}}}
//
// A member is a job object exactly as POST /api/v1/jobs takes it. The
// callback is a job object without id, run_at or unique fields: its id is
// "ID.callback" and it runs when the batch completes (delay after that,
// when set).
package batchjson

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
	"github.com/errandhq/errand/internal/jobjson"
)

// Request is a batch to enqueue.
type Request struct {
	// ID is the batch's id; empty means a new one. A duplicate id returns
	// the existing batch and enqueues nothing, unless the batch differs
	// from this one: that is an *errand.IDConflictError, unless FirstWins.
	ID string `json:"id"`
	// FirstWins returns the existing batch of a duplicate id even when it
	// differs (errand.BatchOpts.FirstWins).
	FirstWins bool  `json:"first_wins"`
	Jobs      []Job `json:"jobs"`
	// Callback is the job enqueued once every member has finished; null
	// for none.
	Callback *Callback `json:"callback"`
}

// Job is a member: the body of POST /api/v1/jobs, field for field. Its
// fields are errand.EnqueueOpts' (and the job's kind and args), under the
// job record's names; a test holds the two sets together.
type Job struct {
	ID string `json:"id"`
	// FirstWins returns the existing job of a duplicate id even when it
	// differs (errand.EnqueueOpts.FirstWins).
	FirstWins   bool                `json:"first_wins"`
	Kind        string              `json:"kind"`
	Args        json.RawMessage     `json:"args"`
	Queue       string              `json:"queue"`
	Priority    int                 `json:"priority"`
	RunAt       *jobjson.Time       `json:"run_at"`
	Delay       errandtype.Duration `json:"delay"`
	MaxAttempts int                 `json:"max_attempts"`
	BackoffBase errandtype.Duration `json:"backoff_base"`
	BackoffMax  errandtype.Duration `json:"backoff_max"`
	MaxAge      errandtype.Duration `json:"max_age"`
	UniqueKey   string              `json:"unique_key"`
	// UniqueScope names the states in which the job holds UniqueKey
	// ("always", the default; "until_finished"; "until_succeeded"; or a
	// comma-separated list of states), UniqueWindow its window ("1h").
	UniqueScope  errandtype.UniqueScope `json:"unique_scope"`
	UniqueWindow errandtype.Duration    `json:"unique_window"`
	OrderingKey  string                 `json:"ordering_key"`
	// OrderingOnDead is "hold" or "release" (default: the kind's choice).
	OrderingOnDead errand.OrderingOnDead `json:"ordering_on_dead"`
	FairnessKey    string                `json:"fairness_key"`
	Tags           []string              `json:"tags"`
}

// Callback is the batch's callback job: the job fields of
// POST /api/v1/jobs without id, run_at and the unique fields. Its args must
// be a JSON object (errand sets its field "batch"); null or absent means {}.
type Callback = jobjson.Job

// Batch returns the jobs and options of errand.Client.EnqueueBatch. A
// missing kind, run_at with delay, a negative duration or a callback whose
// args are not a JSON object is an *errandtype.InputError naming the field
// (jobs[3].kind, callback.args); the client checks the rest.
func (r *Request) Batch() ([]errand.EnqueueParams, *errand.BatchOpts, error) {
	if len(r.Jobs) == 0 {
		return nil, nil, &errandtype.InputError{Field: "jobs", Message: fmt.Sprintf("are missing; give 1 to %d jobs, each as POST /api/v1/jobs takes it, e.g. {\"kind\": \"import_row\", \"args\": {\"row\": 1}}", errandstore.MaxBatchJobs)}
	}
	if len(r.Jobs) > errandstore.MaxBatchJobs {
		return nil, nil, &errandtype.InputError{Field: "jobs", Message: fmt.Sprintf("%d jobs; a batch has 1 to %d, so split it into several batches", len(r.Jobs), errandstore.MaxBatchJobs)}
	}
	params := make([]errand.EnqueueParams, len(r.Jobs))
	for i := range r.Jobs {
		p, err := r.Jobs[i].Params(fmt.Sprintf("jobs[%d]", i))
		if err != nil {
			return nil, nil, err
		}
		params[i] = p
	}
	opts := &errand.BatchOpts{ID: r.ID, FirstWins: r.FirstWins}
	if cb := r.Callback; cb != nil {
		args, cbOpts, err := cb.Params("callback", "name the callback job's kind, e.g. \"import_done\"",
			"errand sets its field \"batch\" to the batch's final counts")
		if err != nil {
			return nil, nil, err
		}
		opts.Callback, opts.CallbackOpts = args, cbOpts
	}
	return params, opts, nil
}

// Params returns the job's enqueue parameters, checked as POST /api/v1/jobs
// checks them; field names the job in errors.
// A job of POST /api/v1/jobs, the body itself, has field "".
func (j *Job) Params(field string) (errand.EnqueueParams, error) {
	at := func(name string) string {
		if field == "" {
			return name
		}
		return field + "." + name
	}
	switch {
	case j.Kind == "":
		return errand.EnqueueParams{}, &errandtype.InputError{Field: at("kind"), Message: "is missing; name the job's kind, e.g. \"import_row\""}
	case j.RunAt != nil && j.Delay != 0:
		return errand.EnqueueParams{}, &errandtype.InputError{Field: at("run_at"), Message: "is set, and so is delay; give run_at or delay, not both"}
	case j.Delay < 0:
		return errand.EnqueueParams{}, &errandtype.InputError{Field: at("delay"), Message: "must not be negative"}
	case j.MaxAge < 0:
		return errand.EnqueueParams{}, &errandtype.InputError{Field: at("max_age"), Message: "must not be negative"}
	case j.UniqueKey == "" && (j.UniqueScope != 0 || j.UniqueWindow != 0):
		return errand.EnqueueParams{}, &errandtype.InputError{Field: at("unique_key"), Message: "is empty, but unique_scope or unique_window is set; give the key too"}
	}
	args := j.Args
	if t := bytes.TrimSpace(args); len(t) == 0 || string(t) == "null" {
		args = json.RawMessage("{}")
	}
	return errand.EnqueueParams{Args: errand.RawArgs{KindName: j.Kind, JSON: args}, Opts: j.Opts()}, nil
}

// Opts returns the job's enqueue options as they are, unchecked: unique
// scope or window make them errand.UniqueOpts, else the unique key stays a
// plain key.
func (j *Job) Opts() *errand.EnqueueOpts {
	opts := &errand.EnqueueOpts{
		ID: j.ID, FirstWins: j.FirstWins, Queue: j.Queue, Priority: j.Priority, Delay: time.Duration(j.Delay),
		MaxAttempts: j.MaxAttempts, BackoffBase: time.Duration(j.BackoffBase), BackoffMax: time.Duration(j.BackoffMax),
		MaxAge:    time.Duration(j.MaxAge),
		UniqueKey: j.UniqueKey, OrderingKey: j.OrderingKey, OrderingOnDead: j.OrderingOnDead,
		FairnessKey: j.FairnessKey, Tags: j.Tags,
	}
	if j.UniqueScope != 0 || j.UniqueWindow != 0 {
		opts.UniqueKey = ""
		opts.Unique = &errand.UniqueOpts{Key: j.UniqueKey, Scope: j.UniqueScope, Window: time.Duration(j.UniqueWindow)}
	}
	if j.RunAt != nil {
		opts.RunAt = j.RunAt.Time
	}
	return opts
}
