package errandhttp

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	"github.com/errandhq/errand"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
)

// The request bodies below are the JSON API's enqueue forms. errand batch
// enqueue --file and errand workflow enqueue --file read the same forms, so
// a file that works with one works with the other.

// JobRequest is the body of POST /api/v1/jobs, and a member of a
// [BatchRequest], field for field. Its fields are errand.EnqueueOpts' (and
// the job's kind and args), under the job record's names; a test holds the
// two sets together.
type JobRequest struct {
	ID string `json:"id"`
	// FirstWins returns the existing job of a duplicate id even when it
	// differs (errand.EnqueueOpts.FirstWins).
	FirstWins   bool                `json:"first_wins"`
	Kind        string              `json:"kind"`
	Args        json.RawMessage     `json:"args"`
	Queue       string              `json:"queue"`
	Priority    int                 `json:"priority"`
	RunAt       *Time               `json:"run_at"`
	Delay       errandtype.Duration `json:"delay"`
	MaxAttempts int                 `json:"max_attempts"`
	BackoffBase errandtype.Duration `json:"backoff_base"`
	BackoffMax  errandtype.Duration `json:"backoff_max"`
	MaxAge      errandtype.Duration `json:"max_age"`
	// StartBy is the time by which the job must have started
	// (errand.EnqueueOpts.StartBy); null for none.
	StartBy   *Time  `json:"start_by"`
	UniqueKey string `json:"unique_key"`
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
	// Metadata is a JSON object kept with the job (errand.EnqueueOpts.Metadata).
	Metadata json.RawMessage `json:"metadata"`
	// DebounceKey folds enqueues of the key and kind into one job
	// (errand.EnqueueOpts.Debounce); DebounceMode is "last_wins" (the
	// default) or "first_wins", DebounceWindow ("5s") and DebounceMaxWait
	// its durations.
	DebounceKey     string                  `json:"debounce_key"`
	DebounceMode    errandtype.DebounceMode `json:"debounce_mode"`
	DebounceWindow  errandtype.Duration     `json:"debounce_window"`
	DebounceMaxWait errandtype.Duration     `json:"debounce_max_wait"`
	// Eager starts the job at once on the serving process's own worker
	// when it is idle (errand.EnqueueOpts.Eager); a batch's member may
	// not ask it.
	Eager bool `json:"eager"`
}

// params returns the job's enqueue parameters, checked as POST /api/v1/jobs
// checks them; field names the job in errors.
// A job of POST /api/v1/jobs, the body itself, has field "".
func (j *JobRequest) params(field string) (errand.EnqueueParams, error) {
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
	case j.DebounceKey == "" && (j.DebounceMode != 0 || j.DebounceWindow != 0 || j.DebounceMaxWait != 0):
		return errand.EnqueueParams{}, &errandtype.InputError{Field: at("debounce_key"), Message: "is empty, but debounce_mode, debounce_window or debounce_max_wait is set; give the key too"}
	}
	args := j.Args
	if t := bytes.TrimSpace(args); len(t) == 0 || string(t) == "null" {
		args = json.RawMessage("{}")
	}
	return errand.EnqueueParams{Args: errand.RawArgs{KindName: j.Kind, JSON: args}, Opts: j.opts()}, nil
}

// opts returns the job's enqueue options as they are, unchecked: unique
// scope or window make them errand.UniqueOpts, else the unique key stays a
// plain key.
func (j *JobRequest) opts() *errand.EnqueueOpts {
	opts := &errand.EnqueueOpts{
		ID: j.ID, FirstWins: j.FirstWins, Queue: j.Queue, Priority: j.Priority, Delay: time.Duration(j.Delay),
		MaxAttempts: j.MaxAttempts, BackoffBase: time.Duration(j.BackoffBase), BackoffMax: time.Duration(j.BackoffMax),
		MaxAge:    time.Duration(j.MaxAge),
		UniqueKey: j.UniqueKey, OrderingKey: j.OrderingKey, OrderingOnDead: j.OrderingOnDead,
		FairnessKey: j.FairnessKey, Tags: j.Tags, Metadata: j.Metadata, Eager: j.Eager,
	}
	if j.UniqueScope != 0 || j.UniqueWindow != 0 {
		opts.UniqueKey = ""
		opts.Unique = &errand.UniqueOpts{Key: j.UniqueKey, Scope: j.UniqueScope, Window: time.Duration(j.UniqueWindow)}
	}
	if j.DebounceKey != "" || j.DebounceMode != 0 || j.DebounceWindow != 0 || j.DebounceMaxWait != 0 {
		opts.Debounce = &errand.DebounceOpts{Key: j.DebounceKey, Mode: j.DebounceMode,
			Window: time.Duration(j.DebounceWindow), MaxWait: time.Duration(j.DebounceMaxWait)}
	}
	if j.RunAt != nil {
		opts.RunAt = j.RunAt.Time
	}
	if j.StartBy != nil {
		opts.StartBy = j.StartBy.Time
	}
	return opts
}

// LaterJob is a job errand enqueues later for the caller: a batch's
// callback or a workflow's step or compensation. Its fields are those of
// [JobRequest] without id, run_at and the unique fields, since errand gives
// such a job its id and enqueues it when the batch or the steps it waits
// for are done.
type LaterJob struct {
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
	Metadata       json.RawMessage       `json:"metadata"`
}

// params returns the job's args and options. A missing kind, a negative
// duration or args that are not a JSON object are an *errandtype.InputError
// naming field (field.kind, field.args); its message ends with kindHint
// ("name the job's kind, e.g. ...") or argsHint (what errand sets in the
// args).
func (j *LaterJob) params(field, kindHint, argsHint string) (errand.RawArgs, *errand.EnqueueOpts, error) {
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
		FairnessKey: j.FairnessKey, Tags: j.Tags, Metadata: j.Metadata,
	}, nil
}

// BatchRequest is the body of POST /api/v1/batches:
//
//	{"id": "import-7", "jobs": [
//	  {"kind": "import_row", "args": {"row": 1}},
//	  {"kind": "import_row", "args": {"row": 2}, "queue": "imports", "max_attempts": 5}
//	], "callback": {"kind": "import_done", "args": {"import": 7}}}
//
// A member is a [JobRequest]. The callback is a [LaterJob]: its id is
// "ID.callback" and it runs when the batch completes (delay after that,
// when set).
type BatchRequest struct {
	// ID is the batch's id; empty means a new one. A duplicate id returns
	// the existing batch and enqueues nothing, unless the batch differs
	// from this one: that is an *errand.IDConflictError, unless FirstWins.
	ID string `json:"id"`
	// FirstWins returns the existing batch of a duplicate id even when it
	// differs (errand.BatchOpts.FirstWins).
	FirstWins bool         `json:"first_wins"`
	Jobs      []JobRequest `json:"jobs"`
	// Callback is the job enqueued once every member has finished; null
	// for none. Its args must be a JSON object (errand sets its field
	// "batch"); null or absent means {}.
	Callback *LaterJob `json:"callback"`
}

// Batch returns the jobs and options of errand.Client.EnqueueBatch. A
// missing kind, run_at with delay, a negative duration or a callback whose
// args are not a JSON object is an *errandtype.InputError naming the field
// (jobs[3].kind, callback.args); the client checks the rest.
func (r *BatchRequest) Batch() ([]errand.EnqueueParams, *errand.BatchOpts, error) {
	if len(r.Jobs) == 0 {
		return nil, nil, &errandtype.InputError{Field: "jobs", Message: fmt.Sprintf("are missing; give 1 to %d jobs, each as POST /api/v1/jobs takes it, e.g. {\"kind\": \"import_row\", \"args\": {\"row\": 1}}", errandstore.MaxBatchJobs)}
	}
	if len(r.Jobs) > errandstore.MaxBatchJobs {
		return nil, nil, &errandtype.InputError{Field: "jobs", Message: fmt.Sprintf("%d jobs; a batch has 1 to %d, so split it into several batches", len(r.Jobs), errandstore.MaxBatchJobs)}
	}
	params := make([]errand.EnqueueParams, len(r.Jobs))
	for i := range r.Jobs {
		p, err := r.Jobs[i].params(fmt.Sprintf("jobs[%d]", i))
		if err != nil {
			return nil, nil, err
		}
		params[i] = p
	}
	opts := &errand.BatchOpts{ID: r.ID, FirstWins: r.FirstWins}
	if cb := r.Callback; cb != nil {
		args, cbOpts, err := cb.params("callback", "name the callback job's kind, e.g. \"import_done\"",
			"errand sets its field \"batch\" to the batch's final counts")
		if err != nil {
			return nil, nil, err
		}
		opts.Callback, opts.CallbackOpts = args, cbOpts
	}
	return params, opts, nil
}

// WorkflowRequest is the body of POST /api/v1/workflows:
//
//	{"id": "order-7", "name": "checkout", "steps": [
//	  {"name": "charge", "kind": "charge_card", "args": {"order": 7},
//	   "compensate": {"kind": "refund_card", "args": {"order": 7}}},
//	  {"name": "ship", "kind": "ship_order", "depends_on": ["charge"],
//	   "queue": "shipping", "max_attempts": 5}
//	]}
//
// A step's job, and its compensation, is a [LaterJob]: a workflow's jobs
// have fixed ids and run when their dependencies succeed.
type WorkflowRequest struct {
	// ID is the workflow's id; empty means a new one. A duplicate id
	// returns the existing workflow and enqueues nothing, unless the
	// workflow differs from this one: that is an
	// *errand.IDConflictError, unless FirstWins.
	ID string `json:"id"`
	// FirstWins returns the existing workflow of a duplicate id even when
	// it differs (errand.WorkflowOpts.FirstWins).
	FirstWins bool `json:"first_wins"`
	// Name is a label for operators; optional.
	Name  string                `json:"name"`
	Steps []WorkflowStepRequest `json:"steps"`
}

// WorkflowStepRequest is one step: its name, the steps it depends on, its
// job and the job that compensates it. The job's args must be a JSON
// object (errand sets its field "workflow"); null or absent means {}.
type WorkflowStepRequest struct {
	Name      string   `json:"name"`
	DependsOn []string `json:"depends_on"`
	LaterJob
	// Compensate is the job that undoes the step; null for none.
	Compensate *LaterJob `json:"compensate"`
}

// Workflow returns the steps and options of errand.Client.EnqueueWorkflow.
// A missing kind or args that are not a JSON object is an
// *errandtype.InputError naming the step; the client checks the rest.
func (r *WorkflowRequest) Workflow() ([]errand.WorkflowStep, *errand.WorkflowOpts, error) {
	if len(r.Steps) == 0 {
		return nil, nil, &errandtype.InputError{Field: "steps", Message: fmt.Sprintf("are missing; give 1 to %d steps, each {\"name\", \"kind\", \"args\", \"depends_on\", \"compensate\"}", errandstore.MaxWorkflowSteps)}
	}
	steps := make([]errand.WorkflowStep, len(r.Steps))
	for i := range r.Steps {
		s := &r.Steps[i]
		field := fmt.Sprintf("steps[%d]", i)
		if s.Name != "" {
			field = fmt.Sprintf("steps[%d] (%s)", i, s.Name)
		}
		args, opts, err := stepParams(&s.LaterJob, field)
		if err != nil {
			return nil, nil, err
		}
		steps[i] = errand.WorkflowStep{Name: s.Name, DependsOn: s.DependsOn, Args: args, Opts: opts}
		if s.Compensate != nil {
			if steps[i].Compensate, steps[i].CompensateOpts, err = stepParams(s.Compensate, field+".compensate"); err != nil {
				return nil, nil, err
			}
		}
	}
	return steps, &errand.WorkflowOpts{ID: r.ID, Name: r.Name, FirstWins: r.FirstWins}, nil
}

// stepParams returns the args and options of a step's job or
// compensation; field names it in errors.
func stepParams(j *LaterJob, field string) (errand.RawArgs, *errand.EnqueueOpts, error) {
	return j.params(field, "name the job's kind, e.g. \"charge_card\"", "errand sets its field \"workflow\"")
}

// Time is a time in a request body: RFC 3339 text, such as
// "2026-12-04T10:00:00Z". Its decoding errors are *json.UnmarshalTypeError,
// to which a decoder adds the field's name, where time.Time's name no
// field.
type Time struct{ time.Time }

// UnmarshalJSON reads RFC 3339 text; null leaves t as it is.
func (t *Time) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	v, err := errandtype.UnmarshalJSONString[Time](b, func(s string) (time.Time, error) {
		return time.Parse(time.RFC3339Nano, s)
	})
	if err != nil {
		return err
	}
	t.Time = v
	return nil
}
