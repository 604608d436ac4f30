package errandstore

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/errandhq/errand/errandtype"
)

// MaxBatchJobs bounds the members of one batch, as one enqueue call gives
// them: a larger fan-out is several batches, or a batch of jobs that each
// enqueue more.
const MaxBatchJobs = 10000

// batchCallbackSuffix makes a batch's callback job id from its batch id.
const BatchCallbackSuffix = ".callback"

// MaxBatchIDBytes bounds a batch id, so that its callback job id (see
// [BatchCallbackJobID]) is a valid job id.
const MaxBatchIDBytes = MaxIDBytes - len(BatchCallbackSuffix)

// BatchCallbackJobID is the id of the callback job of batch id: "ID.callback".
// The id is what makes the callback exactly-once: however many processes
// notice that a batch finished, only one job can have it.
func BatchCallbackJobID(batchID string) string { return batchID + BatchCallbackSuffix }

// DeadHookJobIDSQL renders DeadHookJobID of the jobs row aliased alias as a
// SQL expression that both stores evaluate to the same text.
func DeadHookJobIDSQL(alias string) string {
	return alias + ".id || '.dead.' || CAST(" + alias + ".replays AS TEXT)"
}

// Batch is a group of jobs enqueued together (see
// [github.com/errandhq/errand.Client.EnqueueBatch]), with the callback job
// enqueued once every member has finished.
type Batch struct {
	// ID identifies the batch; the caller may choose it.
	ID string `json:"id"`
	// Total is how many jobs the batch was enqueued with.
	Total int `json:"total"`
	// Counts are the members' states now, every state present (0 when no
	// member is in it). Members deleted by retention are not counted, so
	// the counts may add up to less than Total. A member replayed after
	// the batch completed is counted in its new state here, but not in
	// Final.
	Counts map[errandtype.JobState]int `json:"counts"`
	// Callback is the job enqueued when the batch completes; nil for a
	// batch without one.
	Callback *BatchCallback `json:"callback"`
	// CallbackJobID is the id of the callback job once it is enqueued
	// ([BatchCallbackJobID]), nil before.
	CallbackJobID *string   `json:"callback_job_id"`
	CreatedAt     time.Time `json:"created_at"`
	// CompletedAt is when the last member was found finished, nil while
	// the batch is open. A batch completes once.
	CompletedAt *time.Time `json:"completed_at"`
	// Final are the counts when the batch completed, nil while it is
	// open; they do not change afterwards.
	Final *BatchResult `json:"final"`
}

// Pending is how many members are not finished: queued, running or
// retrying.
func (b *Batch) Pending() int {
	n := 0
	for st, c := range b.Counts {
		if !st.Terminal() {
			n += c
		}
	}
	return n
}

// BatchResult is how a batch ended: what its callback job finds in the
// "batch" field of its args, and [Batch].Final.
type BatchResult struct {
	// ID is the batch's id.
	ID string `json:"id"`
	// Total is how many jobs the batch was enqueued with.
	Total int `json:"total"`
	// Succeeded, Dead and Cancelled count the members in each terminal
	// state when the batch completed.
	Succeeded int `json:"succeeded"`
	Dead      int `json:"dead"`
	Cancelled int `json:"cancelled"`
	// CompletedAt is when the batch completed.
	CompletedAt time.Time `json:"completed_at"`
}

// BatchCallback is the job a batch enqueues when it completes. Its args
// get the field "batch" set to the [BatchResult].
type BatchCallback = JobTemplate

// batchCallbackJSON is a batch's callback as a [Batch] reads in JSON: the
// job's options under the names a job record and an enqueue use, durations
// in Go syntax, unset ones null (tags []). The callback column keeps
// [JobTemplate]'s own encoding.
type batchCallbackJSON struct {
	Kind         string              `json:"kind"`
	Queue        string              `json:"queue"`
	Args         json.RawMessage     `json:"args"`
	ArgsVersion  int                 `json:"args_version"`
	Priority     int                 `json:"priority"`
	MaxAttempts  int                 `json:"max_attempts"`
	BackoffBase  errandtype.Duration `json:"backoff_base"`
	BackoffMax   errandtype.Duration `json:"backoff_max"`
	MaxAge       errandtype.Duration `json:"max_age"`
	Delay        errandtype.Duration `json:"delay"`
	OrderingKey  *string             `json:"ordering_key"`
	OrderingHold bool                `json:"ordering_hold"`
	FairnessKey  *string             `json:"fairness_key"`
	Tags         []string            `json:"tags"`
	Metadata     json.RawMessage     `json:"metadata"`
}

func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func callbackJSON(t *JobTemplate) *batchCallbackJSON {
	if t == nil {
		return nil
	}
	tags := t.Tags
	if tags == nil {
		tags = []string{}
	}
	return &batchCallbackJSON{
		Kind: t.Kind, Queue: t.Queue, Args: t.Args, ArgsVersion: t.ArgsVersion,
		Priority: t.Priority, MaxAttempts: t.MaxAttempts,
		BackoffBase: errandtype.Duration(time.Duration(t.BackoffBaseUS) * time.Microsecond),
		BackoffMax:  errandtype.Duration(time.Duration(t.BackoffMaxUS) * time.Microsecond),
		MaxAge:      errandtype.Duration(time.Duration(t.MaxAgeUS) * time.Microsecond),
		Delay:       errandtype.Duration(time.Duration(t.DelayUS) * time.Microsecond),
		OrderingKey: nonEmpty(t.OrderingKey), OrderingHold: t.OrderingHold,
		FairnessKey: nonEmpty(t.FairnessKey), Tags: tags, Metadata: t.Metadata,
	}
}

func (v *batchCallbackJSON) template() *JobTemplate {
	if v == nil {
		return nil
	}
	t := &JobTemplate{
		Kind: v.Kind, Queue: v.Queue, Args: v.Args, ArgsVersion: v.ArgsVersion,
		Priority: v.Priority, MaxAttempts: v.MaxAttempts,
		BackoffBaseUS: time.Duration(v.BackoffBase).Microseconds(),
		BackoffMaxUS:  time.Duration(v.BackoffMax).Microseconds(),
		MaxAgeUS:      time.Duration(v.MaxAge).Microseconds(),
		DelayUS:       time.Duration(v.Delay).Microseconds(),
		OrderingHold:  v.OrderingHold,
	}
	if v.OrderingKey != nil {
		t.OrderingKey = *v.OrderingKey
	}
	if v.FairnessKey != nil {
		t.FairnessKey = *v.FairnessKey
	}
	if len(v.Tags) > 0 {
		t.Tags = v.Tags
	}
	if len(v.Metadata) > 0 && string(v.Metadata) != "null" {
		t.Metadata = v.Metadata
	}
	return t
}

// MarshalJSON writes the callback as a job's options (see
// batchCallbackJSON).
func (b Batch) MarshalJSON() ([]byte, error) {
	type plain Batch
	return json.Marshal(struct {
		plain
		Callback *batchCallbackJSON `json:"callback"`
	}{plain(b), callbackJSON(b.Callback)})
}

// UnmarshalJSON reads what MarshalJSON writes.
func (b *Batch) UnmarshalJSON(data []byte) error {
	type plain Batch
	v := struct {
		*plain
		Callback *batchCallbackJSON `json:"callback"`
	}{plain: (*plain)(b)}
	if err := json.Unmarshal(data, &v); err != nil {
		return err
	}
	b.Callback = v.Callback.template()
	return nil
}

// EncodeBatchCallback is the callback column of a batch: cb as JSON, or
// nil for none. Stores keep it as text and give it back to
// [DecodeBatchCallback].
func EncodeBatchCallback(cb *BatchCallback) (*string, error) {
	if cb == nil {
		return nil, nil
	}
	b, err := json.Marshal(cb)
	if err != nil {
		return nil, fmt.Errorf("encode batch callback: %w", err)
	}
	s := string(b)
	return &s, nil
}

// DecodeBatchCallback reads a batch's callback column; nil stays nil.
func DecodeBatchCallback(s *string) (*BatchCallback, error) {
	if s == nil {
		return nil, nil
	}
	var cb BatchCallback
	if err := json.Unmarshal([]byte(*s), &cb); err != nil {
		return nil, fmt.Errorf("decode batch callback: %w", err)
	}
	return &cb, nil
}

// CallbackJob is the callback job of a completed batch b (one with Final
// set): its id is [BatchCallbackJobID], its args the callback's with the
// field "batch" set to b.Final. It returns nil for a batch without a
// callback. A store inserts it in the transaction that completes b.
func (b *Batch) CallbackJob() (*JobInsertParams, error) {
	cb := b.Callback
	if cb == nil {
		return nil, nil
	}
	final := b.Final
	if final == nil {
		final = &BatchResult{ID: b.ID, Total: b.Total}
	}
	ip, err := cb.insertParams(BatchCallbackJobID(b.ID), "batch", final)
	if err != nil {
		return nil, fmt.Errorf("callback: %w", err)
	}
	return ip, nil
}

// BatchInsertParams describe a batch to insert (see [BatchStore]).
type BatchInsertParams struct {
	ID   string
	Jobs []*JobInsertParams
	// Callback is the job to enqueue when every member has finished; nil
	// for none.
	Callback *BatchCallback

	ClientCallback *JobInsertParams // the Client's, that Callback was made of
	FirstWins      bool             // BatchOpts.FirstWins
}

// Validate checks the parameters of BatchInsert: the id, 1 to
// MaxBatchJobs jobs each valid, and a callback that makes a valid job.
func (p *BatchInsertParams) Validate() error {
	if err := checkBatchID(p.ID); err != nil {
		return err
	}
	if len(p.Jobs) == 0 || len(p.Jobs) > MaxBatchJobs {
		return &errandtype.InputError{Field: "batch jobs", Message: fmt.Sprintf("%d jobs; a batch has 1 to %d", len(p.Jobs), MaxBatchJobs)}
	}
	var given map[string]int // each id seen, and its job's index
	for i, j := range p.Jobs {
		if err := j.Validate(); err != nil {
			return fmt.Errorf("job %d: %w", i, err)
		}
		if first, ok := given[j.ID]; ok {
			return &errandtype.InputError{Field: "job " + strconv.Itoa(i), Message: fmt.Sprintf("has the id %q of job %d; give each job of a batch its own id", j.ID, first)}
		}
		if given == nil {
			given = make(map[string]int, len(p.Jobs))
		}
		given[j.ID] = i
	}
	// The callback's args get the batch's result when it completes: check
	// them with the longest result there can be, every count at Total and
	// a completion time to the nanosecond, so that no completion finds
	// them too large to enqueue.
	n := len(p.Jobs)
	b := &Batch{ID: p.ID, Total: n, Callback: p.Callback, Final: &BatchResult{ID: p.ID, Total: n,
		Succeeded: n, Dead: n, Cancelled: n, CompletedAt: time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC)}}
	cj, err := b.CallbackJob()
	if err != nil {
		return err
	}
	if cj != nil {
		if err := cj.Validate(); err != nil {
			return fmt.Errorf("callback, with the batch's result in its args: %w", err)
		}
	}
	return nil
}

// BatchInsertResult is what inserting a batch did.
type BatchInsertResult struct {
	// Batch is the new batch, or the existing one when Duplicate.
	Batch *Batch
	// Jobs are the inserted jobs, in the order given; nil when Duplicate.
	Jobs []*errandtype.Job
	// Duplicate reports that a batch with the id existed: nothing was
	// inserted.
	Duplicate bool
}

// BatchMemberTakenError is the *InputError of a batch whose job i, of id
// jobID, has an id or unique key taken by a job that exists already (or
// by an earlier job of the batch, for a unique key).
func BatchMemberTakenError(i int, jobID string) error {
	return &errandtype.InputError{Field: "job " + strconv.Itoa(i), Message: fmt.Sprintf("its id (%s) or its unique key is taken, by an existing job or an earlier job of this batch; a batch's jobs must be new, so give it another id or key, or leave it out", jobID)}
}

// BatchGetParams name a batch.
type BatchGetParams struct {
	ID string
}

// BatchCompleteParams name the batches to complete.
type BatchCompleteParams struct {
	// IDs are the batches to look at; empty means every open batch.
	IDs []string
	// Limit bounds how many open batches an empty IDs looks at, oldest
	// first; zero means 100.
	Limit int
}

// JobListDeadUnhookedParams ask for dead jobs without their on-dead job
// (see [DeadHookStore]).
type JobListDeadUnhookedParams struct {
	Kinds []string
	// Since bounds finished_at from below, on the store's clock.
	Since time.Time
	// Limit bounds the result; zero means 100.
	Limit int
}

// PageSize is p.Limit, or 100 when zero.
func (p *JobListDeadUnhookedParams) PageSize() int {
	if p.Limit <= 0 {
		return 100
	}
	return p.Limit
}

// DeadHookCursorsParams name the kinds whose cursors to read (see
// [DeadHookCursorStore]).
type DeadHookCursorsParams struct {
	Kinds []string
}

// DeadHookCursorAdvanceParams move the cursors of Kinds to To (see
// [DeadHookCursorStore]).
type DeadHookCursorAdvanceParams struct {
	Kinds []string
	To    time.Time
}

// Validate checks the parameters of DeadHookCursorAdvance.
func (p *DeadHookCursorAdvanceParams) Validate() error {
	for _, k := range p.Kinds {
		if err := CheckName("kinds", k); err != nil {
			return err
		}
	}
	if p.To.IsZero() {
		return &errandtype.InputError{Field: "to", Message: "is zero; give the finished_at up to which every dead job has its hook"}
	}
	return nil
}

// FairTurnPruneParams bound the turns to delete (see [FairTurnPruner]).
type FairTurnPruneParams struct {
	// IdleFor is how long, on the store's clock, a key must have gone
	// unserved; at least a second.
	IdleFor time.Duration
}

// Validate checks the parameters of FairTurnPrune.
func (p *FairTurnPruneParams) Validate() error {
	if p.IdleFor < time.Second {
		return &errandtype.InputError{Field: "idle_for", Message: fmt.Sprintf("%s is too short; give at least 1s", p.IdleFor)}
	}
	return nil
}

// ScheduleDeleteParams name the schedule to delete, and who deletes it and
// why, for the audit.
type ScheduleDeleteParams struct {
	Name     string
	Operator string
	Reason   string
}

// Validate checks the parameters of ScheduleDelete.
func (p *ScheduleDeleteParams) Validate() error {
	if err := CheckName("schedule name", p.Name); err != nil {
		return err
	}
	if err := checkText("operator", p.Operator); err != nil {
		return err
	}
	return checkText("reason", p.Reason)
}

// ScheduleDeleteDetails are the details of an [errandtype.AuditScheduleDelete] record:
// the schedule as it was.
func ScheduleDeleteDetails(r *errandtype.ScheduleRecord) json.RawMessage {
	b, _ := json.Marshal(struct {
		Name  string `json:"name"`
		Spec  string `json:"spec"`
		Kind  string `json:"kind"`
		Queue string `json:"queue"`
	}{r.Name, r.Spec, r.Kind, r.Queue})
	return b
}

// NewBatchCounts returns counts with every state at 0, for a store to add
// its members' counts to.
func NewBatchCounts() map[errandtype.JobState]int {
	m := make(map[errandtype.JobState]int, len(errandtype.JobStates))
	for _, s := range errandtype.JobStates {
		m[s] = 0
	}
	return m
}

// Finish marks b completed at at, its Final taken from Counts. A store
// calls it, in the transaction that completes b, with the counts read in
// that transaction, then writes CompletedAt and Final and inserts
// b.CallbackJob().
func (b *Batch) Finish(at time.Time) {
	b.CompletedAt = &at
	b.Final = &BatchResult{
		ID: b.ID, Total: b.Total,
		Succeeded: b.Counts[errandtype.StateSucceeded], Dead: b.Counts[errandtype.StateDead], Cancelled: b.Counts[errandtype.StateCancelled],
		CompletedAt: at,
	}
}
