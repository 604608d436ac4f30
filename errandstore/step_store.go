package errandstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/errandhq/errand/errandtype"
)

// StepStore keeps the steps of durable handlers (errand.Step): per job, an
// ordered list that grows while an attempt holds the job's lease.
//
// Steps belong to one job record: a job deleted (pruned, or on success)
// takes its steps with it, and a later job with the same id starts with
// none. A replay that clears the job's progress ([JobReplayParams]) clears
// its steps too.
type StepStore interface {
	// JobStepRecordMany records the steps of many attempts in one
	// transaction, each appended to its job and fenced by its own lease
	// token; the store sets each step's Attempt and At. The result has one
	// entry per step, in order: nil, or the error that step alone met, with
	// nothing written for it: ErrLeaseLost when its lease is gone,
	// ErrStepRecorded when a step is recorded at its index already (the
	// recorded one stays), an *InputError. The steps name different jobs.
	// [RecordStep] records one.
	JobStepRecordMany(ctx context.Context, params []*JobStepRecordParams) ([]error, error)

	// JobSteps returns the job's recorded steps in order, none for a job
	// without them; ErrNotFound for an unknown job.
	JobSteps(ctx context.Context, params *JobStepsParams) ([]errandtype.Step, error)

	// JobSignal records a signal sent to the job (errand.WaitFor reads it),
	// and makes the job available now when it waits in its queue for a
	// signal of that name: its last recorded step is a wait ([WaitStepName])
	// for it. A finished job is a *StateError (see [CheckSignal]) and an
	// unknown one ErrNotFound, with nothing written.
	JobSignal(ctx context.Context, params *JobSignalParams) (*SignalResult, error)

	// JobSignals returns the signals of one name sent to the job, oldest
	// first; none for an unknown job.
	JobSignals(ctx context.Context, params *JobSignalsParams) ([]errandtype.Signal, error)

	// JobWake makes a job that waits in its queue (state queued) for a
	// later time available now, and reports whether it did; any other job
	// is left as it is.
	JobWake(ctx context.Context, params *JobWakeParams) (bool, error)

	// JobSetEvent publishes the value of an event of the job, replacing
	// any earlier value of its key, fenced by the lease token:
	// ErrLeaseLost, with nothing written, when the lease is gone.
	JobSetEvent(ctx context.Context, params *JobSetEventParams) error

	// JobEvent returns the event of a key the job published, ErrNotFound
	// when it has published none (or the job is unknown).
	JobEvent(ctx context.Context, params *JobEventParams) (*errandtype.Event, error)

	// JobStreamAppend appends a chunk to the job's output stream, fenced by
	// the lease token (ErrLeaseLost), and returns its index. A chunk that
	// would take the stream past MaxStreamChunks or MaxStreamBytes is an
	// *InputError, with nothing written.
	JobStreamAppend(ctx context.Context, params *JobStreamAppendParams) (int, error)

	// JobStream returns the chunks of the job's stream after index After
	// (all of them for -1), in order, at most Limit, and the job's state;
	// ErrNotFound for an unknown job.
	JobStream(ctx context.Context, params *JobStreamParams) (*StreamPage, error)
}

// Bounds of a job's output stream.
const (
	MaxStreamChunkBytes = 64 << 10
	MaxStreamBytes      = 1 << 20
	MaxStreamChunks     = 10_000
)

// JobStreamAppendParams appends a chunk.
type JobStreamAppendParams struct {
	JobLease
	Data string
}

// Validate checks the lease and a chunk of text every store keeps, from 1
// byte to MaxStreamChunkBytes.
func (p *JobStreamAppendParams) Validate() error {
	if err := CheckLeaseText(p.ID, p.LeaseToken); err != nil {
		return err
	}
	if p.Data == "" || len(p.Data) > MaxStreamChunkBytes {
		return &errandtype.InputError{Field: "stream chunk", Message: fmt.Sprintf("is %d bytes; write 1 to %d bytes at a time", len(p.Data), MaxStreamChunkBytes)}
	}
	return checkText("stream chunk", p.Data)
}

// CheckStreamRoom refuses a chunk of size bytes for a stream of chunks
// chunks and bytes bytes so far.
func CheckStreamRoom(chunks, bytes, size int) error {
	if chunks >= MaxStreamChunks || bytes+size > MaxStreamBytes {
		return &errandtype.InputError{Field: "stream", Message: fmt.Sprintf("holds %d chunks and %d bytes; a job's stream holds at most %d chunks and %d bytes (errandstore.MaxStreamChunks, MaxStreamBytes): put larger output elsewhere, keyed by the job", chunks, bytes, MaxStreamChunks, MaxStreamBytes)}
	}
	return nil
}

// JobStreamParams reads a stream.
type JobStreamParams struct {
	ID    string
	After int
	Limit int
}

// Size is how many chunks a read of p returns at most: Limit, and at
// least one.
func (p *JobStreamParams) Size() int { return max(p.Limit, 1) }

// StreamPage is part of a job's stream.
type StreamPage struct {
	Chunks []errandtype.Chunk
	State  errandtype.JobState // the job's, when read
}

// JobSetEventParams publishes an event.
type JobSetEventParams struct {
	JobLease
	Key   string
	Value json.RawMessage
}

// JobEventParams names an event of a job.
type JobEventParams struct {
	ID  string
	Key string
}

// Validate checks the lease, a key as a step's name, and a value as a
// signal's.
func (p *JobSetEventParams) Validate() error {
	if err := CheckLeaseText(p.ID, p.LeaseToken); err != nil {
		return err
	}
	if err := CheckJobStepName(p.Key); err != nil {
		var ie *errandtype.InputError
		if errors.As(err, &ie) {
			ie.Field = "event key"
		}
		return err
	}
	return checkValue("event value", p.Value)
}

// The steps errand records itself, and what the stores read of them. A
// wait's result is a JSON object whose "signal" names the signal it waits
// for.
const (
	SleepStepName  = "errand.sleep"
	WaitStepName   = "errand.wait"
	SignalStepName = "errand.signal"
	PatchStepName  = "errand.patch"
	AwaitStepName  = "errand.await"
)

// JobSignalParams sends a signal.
type JobSignalParams struct {
	ID    string
	Name  string
	Value json.RawMessage
}

// SignalResult is what sending a signal did.
type SignalResult struct {
	Queue string // the job's
	Woke  bool   // the job waited for the signal and is available now
}

// JobSignalsParams names a job's signals of one name.
type JobSignalsParams struct {
	ID   string
	Name string
}

// JobWakeParams names the job to wake.
type JobWakeParams struct {
	ID string
}

// Validate checks a signal: a name as a step's, and a value of valid JSON
// no larger than args may be.
func (p *JobSignalParams) Validate() error {
	if err := CheckJobStepName(p.Name); err != nil {
		var ie *errandtype.InputError
		if errors.As(err, &ie) {
			ie.Field = "signal name"
		}
		return err
	}
	return checkValue("signal value", p.Value)
}

// checkValue refuses a step's result or a signal's value that is not
// valid JSON, or larger than args may be.
func checkValue(field string, v json.RawMessage) error {
	if !json.Valid(v) {
		return &errandtype.InputError{Field: field, Message: "is not valid JSON"}
	}
	if len(v) > MaxArgsBytes {
		return &errandtype.InputError{Field: field, Message: fmt.Sprintf("is %d bytes; keep it under %d and put larger data elsewhere, keyed by the job", len(v), MaxArgsBytes)}
	}
	_, err := checkJSONText(field, v, MaxArgsBytes)
	return err
}

// CheckSignal refuses a signal to a job in state, which holds held signals
// already: a finished job never reads one, and a job holds at most
// MaxJobSignals.
func CheckSignal(id string, state errandtype.JobState, held int) error {
	if !slices.Contains(UnfinishedStates, state) {
		return &errandtype.StateError{Op: "signal", ID: id, State: state, Allowed: UnfinishedStates,
			Reason: "a finished job never reads a signal; replay it first if it should"}
	}
	if held >= MaxJobSignals {
		return &errandtype.InputError{Field: "signal", Message: fmt.Sprintf("job %s holds %d signals already (errandstore.MaxJobSignals); nothing was written", id, held)}
	}
	return nil
}

// ErrStepRecorded reports a step whose place in its job's order is taken.
var ErrStepRecorded = errors.New("a step is already recorded at this index")

// Limits of a durable handler's record.
const (
	// MaxJobStepNameBytes bounds the name of a step or a signal: room for
	// the signal a child sends, "errand.child:" and an id of MaxIDBytes.
	MaxJobStepNameBytes = 300
	// MaxJobSteps bounds the steps of one job: a handler that needs more
	// is a loop to split into child jobs.
	MaxJobSteps = 10_000
	// MaxJobSignals bounds the signals kept for one job.
	MaxJobSignals = 10_000
)

// JobStepRecordParams records one step.
type JobStepRecordParams struct {
	JobLease
	Step errandtype.Step
}

// JobStepsParams names the job whose steps to read.
type JobStepsParams struct {
	ID string
}

// Validate checks the lease, a name every store keeps, an index from 0,
// and either a result of valid JSON no larger than args may be or an
// error message.
func (p *JobStepRecordParams) Validate() error {
	if err := CheckLeaseText(p.ID, p.LeaseToken); err != nil {
		return err
	}
	s := &p.Step
	if s.Index < 0 || s.Index >= MaxJobSteps {
		return &errandtype.InputError{Field: "step index", Message: fmt.Sprintf("is %d; steps count from 0, and a job has at most %d (errandstore.MaxJobSteps): split the work into child jobs", s.Index, MaxJobSteps)}
	}
	if err := CheckJobStepName(s.Name); err != nil {
		return err
	}
	if s.Error != "" {
		if len(s.Result) != 0 {
			return &errandtype.InputError{Field: "step result", Message: "is set beside an error; a step records one or the other"}
		}
		if len(s.Error) > MaxMessageBytes {
			return &errandtype.InputError{Field: "step error", Message: fmt.Sprintf("is %d bytes; keep it under %d (errand.CleanText cuts it)", len(s.Error), MaxMessageBytes)}
		}
		return checkText("step error", s.Error)
	}
	return checkValue("step result", s.Result)
}

// CheckJobStepName refuses a step name that is empty, too long, or text a
// store cannot keep.
func CheckJobStepName(name string) error {
	if name == "" {
		return &errandtype.InputError{Field: "step name", Message: "is empty; name each step"}
	}
	if len(name) > MaxJobStepNameBytes {
		return &errandtype.InputError{Field: "step name", Message: fmt.Sprintf("is %d bytes; keep it under %d", len(name), MaxJobStepNameBytes)}
	}
	return checkText("step name", name)
}

// StepWritten is JobStepRecord's answer from what its write found: whether
// the lease's fence held, and whether the step was written.
func StepWritten(owned, written bool) error {
	switch {
	case !owned:
		return errandtype.ErrLeaseLost
	case !written:
		return ErrStepRecorded
	}
	return nil
}

// ReadSteps gathers a job's steps from the rows of the job joined to its
// steps in order, as both stores read them: next scans the next row into a
// step, ok false after the last; a row of the job without a step has Index
// -1. No row at all is an unknown job, ErrNotFound.
func ReadSteps(next func() (st errandtype.Step, ok bool, err error)) ([]errandtype.Step, error) {
	found, steps := false, []errandtype.Step{}
	for {
		st, ok, err := next()
		if err != nil {
			return nil, err
		}
		if !ok {
			break
		}
		found = true
		if st.Index >= 0 {
			steps = append(steps, st)
		}
	}
	if !found {
		return nil, errandtype.ErrNotFound
	}
	return steps, nil
}

// CheckChildName refuses a child job's name that is not a workflow step's:
// it ends the child's id (JOB.child.NAME) as a step's name ends its job's.
func CheckChildName(name string) error { return checkStepName("child name", name) }

// ReadStream gathers a page of a job's stream from the rows of the job
// joined to its chunks in order, as both stores read them: next scans the
// next row, ok false after the last; a row of the job without a chunk has
// Index -1. No row at all is an unknown job, ErrNotFound.
func ReadStream(next func() (c errandtype.Chunk, state errandtype.JobState, ok bool, err error)) (*StreamPage, error) {
	var page *StreamPage
	for {
		c, state, ok, err := next()
		if err != nil {
			return nil, err
		}
		if !ok {
			break
		}
		if page == nil {
			page = &StreamPage{State: state, Chunks: []errandtype.Chunk{}}
		}
		if c.Index >= 0 {
			page.Chunks = append(page.Chunks, c)
		}
	}
	if page == nil {
		return nil, errandtype.ErrNotFound
	}
	return page, nil
}

// RecordStep records one step with s.JobStepRecordMany, and returns what
// its write found for it.
func RecordStep(ctx context.Context, s StepStore, p *JobStepRecordParams) error {
	errs, err := s.JobStepRecordMany(ctx, []*JobStepRecordParams{p})
	if err != nil {
		return err
	}
	return errs[0]
}

// ValidSteps validates each step of a JobStepRecordMany: errs holds each
// one's error, nil for those to write, whose places valid lists in order.
func ValidSteps(ps []*JobStepRecordParams) (errs []error, valid []int) {
	errs = make([]error, len(ps))
	for i, p := range ps {
		if errs[i] = p.Validate(); errs[i] == nil {
			valid = append(valid, i)
		}
	}
	return errs, valid
}

// StepColumns returns a step's result and error as the stores keep them:
// the one it has, the other nil.
func StepColumns(st *errandtype.Step) (result, message *string) {
	if st.Error != "" {
		return nil, &st.Error
	}
	r := string(st.Result)
	return &r, nil
}
