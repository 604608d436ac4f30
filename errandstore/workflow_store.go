package errandstore

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/errandhq/errand/errandtype"
)

// Workflows: a graph of steps, each an ordinary job (see
// [github.com/errandhq/errand.Client.EnqueueWorkflow]). The store keeps a workflow's definition in one
// row and enqueues each step's job, with a fixed id, once the steps it
// depends on have succeeded. Deciding what to enqueue next is one pure
// function, [PlanWorkflow], that both stores call inside the transaction
// that advances a workflow, with the workflow's row locked and its jobs read
// in that transaction.
//
// Exactly once: a step's job has the fixed id [WorkflowStepJobID] and a
// compensation's [WorkflowCompensationJobID], and the row records every job
// it ever enqueued, so a job is enqueued at most once per workflow even
// after retention deletes it. Retention deletes the row itself only once
// the workflow is finished and none of its jobs is left (see
// [github.com/errandhq/errand.Client.Prune]); its id may then be used again, as a pruned job's may.
// Detection is at-least-once and racy, as for batches:
//
//   - a worker that records a step's last outcome (succeeded or dead), or a
//     compensation's, advances the step's workflow at once;
//   - cancelling or replaying a step through the Client does the same;
//   - the leader advances every open workflow with a job that finished
//     since it was last looked at, which catches the paths no worker sees
//     (a lease swept to dead on the final attempt, a deadline passed) and a
//     worker that crashed between the outcome and the advance, while the
//     workflow's other steps still run. Once all its jobs are finished,
//     "since" has a margin, [WorkflowRecheckOverlap]: an outcome whose
//     transaction took its time before a concurrent advance read the jobs,
//     but committed after it, wrote a finish time before the workflow's
//     CheckedAt. (While other steps run, such an outcome's own worker
//     advances the workflow after it; if that worker dies too, the margin
//     catches it once the other steps end.)

// Limits of a workflow.
const (
	// MaxWorkflowSteps bounds the steps of one workflow.
	MaxWorkflowSteps = 100
	// MaxStepNameBytes bounds a step's name.
	MaxStepNameBytes = 64
	// MaxOutputBytes bounds a job's recorded output (see
	// [github.com/errandhq/errand.SetOutput]).
	MaxOutputBytes = 64 << 10
)

const (
	workflowStepInfix = ".step."
	workflowUndoInfix = ".undo."
)

// MaxWorkflowIDBytes bounds a workflow id, so that its jobs' ids (see
// [WorkflowStepJobID]) are valid job ids.
const MaxWorkflowIDBytes = MaxIDBytes - len(workflowStepInfix) - MaxStepNameBytes

// WorkflowRecheckOverlap is how far before an open workflow's CheckedAt the
// leader's pass (a [WorkflowAdvanceParams] without IDs) still counts a
// job's finish as news: a transaction that recorded an outcome may commit a
// while after the time it wrote into finished_at (PostgreSQL's now() is the
// transaction's start), after an advance that read the jobs without it. A
// workflow that stays open with all its jobs finished (a dead compensation
// holds it) is looked at again only until its last finish is that old.
const WorkflowRecheckOverlap = 5 * time.Minute

// WorkflowStepJobID is the id of the job of step step of workflow id:
// "ID.step.STEP".
func WorkflowStepJobID(id, step string) string { return id + workflowStepInfix + step }

// FailedStepJobIDSQL renders, as a SQL expression that both stores
// evaluate to the same text, the job id ([WorkflowStepJobID]) of the failed
// step of the workflows row aliased alias; NULL while no step failed.
func FailedStepJobIDSQL(alias string) string {
	return alias + ".id || '" + workflowStepInfix + "' || " + alias + ".failed_step"
}

// WorkflowCompensationJobID is the id of the job that compensates step step
// of workflow id: "ID.undo.STEP".
func WorkflowCompensationJobID(id, step string) string { return id + workflowUndoInfix + step }

// JobTemplate is a job to enqueue later, as its options were given: a
// batch's callback, a workflow's step or compensation.
type JobTemplate struct {
	Kind  string `json:"kind"`
	Queue string `json:"queue"`
	// Args are the job's args as enqueued, a JSON object; errand sets one
	// field of them when it enqueues the job ("batch" for a batch's
	// callback, "workflow" for a workflow's jobs).
	Args        json.RawMessage `json:"args"`
	ArgsVersion int             `json:"args_version"`
	Priority    int             `json:"priority"`
	MaxAttempts int             `json:"max_attempts"`
	// BackoffBaseUS, BackoffMaxUS, MaxAgeUS and DelayUS are the job's
	// options in microseconds, 0 when unset.
	BackoffBaseUS int64    `json:"backoff_base_us,omitempty"`
	BackoffMaxUS  int64    `json:"backoff_max_us,omitempty"`
	MaxAgeUS      int64    `json:"max_age_us,omitempty"`
	DelayUS       int64    `json:"delay_us,omitempty"`
	OrderingKey   string   `json:"ordering_key,omitempty"`
	OrderingHold  bool     `json:"ordering_hold,omitempty"`
	FairnessKey   string   `json:"fairness_key,omitempty"`
	Tags          []string `json:"tags,omitempty"`
	// Metadata is the job's metadata, a JSON object, or nil.
	Metadata json.RawMessage `json:"metadata,omitempty"`
}

// insertParams returns the template's job with id id, its args the
// template's with field set to v.
func (t *JobTemplate) insertParams(id, field string, v any) (*JobInsertParams, error) {
	args, err := SetArgsField(t.Args, field, v)
	if err != nil {
		return nil, err
	}
	return &JobInsertParams{
		ID:           id,
		Queue:        t.Queue,
		Kind:         t.Kind,
		Args:         args,
		ArgsVersion:  t.ArgsVersion,
		Priority:     t.Priority,
		MaxAttempts:  t.MaxAttempts,
		BackoffBase:  time.Duration(t.BackoffBaseUS) * time.Microsecond,
		BackoffMax:   time.Duration(t.BackoffMaxUS) * time.Microsecond,
		MaxAge:       time.Duration(t.MaxAgeUS) * time.Microsecond,
		Delay:        time.Duration(t.DelayUS) * time.Microsecond,
		OrderingKey:  t.OrderingKey,
		OrderingHold: t.OrderingHold,
		FairnessKey:  t.FairnessKey,
		Tags:         t.Tags,
		Metadata:     t.Metadata,
	}, nil
}

// setArgsField sets field of the JSON object args to v.
func SetArgsField(args json.RawMessage, field string, v any) (json.RawMessage, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(args, &m); err != nil || m == nil {
		return nil, &errandtype.InputError{Field: "args", Message: fmt.Sprintf("must be a JSON object; errand sets its field %q", field)}
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	m[field] = b
	return json.Marshal(m)
}

// WorkflowStepDef is a step as a store keeps it.
type WorkflowStepDef struct {
	Name string `json:"name"`
	// DependsOn names the steps, declared before this one, that must
	// succeed before it is enqueued.
	DependsOn []string `json:"depends_on,omitempty"`
	// Job is the step's job.
	Job *JobTemplate `json:"job"`
	// Compensation is the job that undoes the step, enqueued when a later
	// step fails; nil for a step with nothing to undo.
	Compensation *JobTemplate `json:"compensation,omitempty"`
}

// WorkflowContext is what errand sets in the field "workflow" of the args
// of a workflow's jobs: declare it in the args type of a step's kind to
// read its dependencies' outputs (see [github.com/errandhq/errand.StepOutput]):
//
//	type ReserveStock struct {
//		OrderID  int                    `json:"order_id"`
//		Workflow errand.WorkflowContext `json:"workflow"`
//	}
type WorkflowContext struct {
	// ID is the workflow's id.
	ID string `json:"id"`
	// Step is the step the job runs, or undoes when Compensating.
	Step string `json:"step"`
	// Compensating is set in the args of a compensation.
	Compensating bool `json:"compensating,omitempty"`
	// Outputs are recorded outputs (see
	// [github.com/errandhq/errand.SetOutput]) by step name: of the step's
	// dependencies for a step; of every step that succeeded for a
	// compensation. A step that recorded none is absent.
	Outputs map[string]json.RawMessage `json:"outputs,omitempty"`
}

// WorkflowRecord is a workflow's row, as a store keeps it.
type WorkflowRecord struct {
	ID    string
	Name  string
	State errandtype.WorkflowState
	// FailedStep is the step whose failure stopped the workflow, nil while
	// none has.
	FailedStep *string
	Steps      []WorkflowStepDef
	// Enqueued lists the id of every job the workflow enqueued, in order,
	// so that none is enqueued twice, even after retention deleted it.
	Enqueued  []string
	CreatedAt time.Time
	// UpdatedAt is when the state last changed or a job was enqueued.
	UpdatedAt time.Time
	// CheckedAt is when the workflow was last advanced, changed or not: the
	// leader looks again only at workflows with a job finished since.
	CheckedAt time.Time
	// FinishedAt is when it became succeeded or failed; nil while open.
	FinishedAt *time.Time
	// CompensationStartedAt is when the workflow enqueued its first
	// compensation, nil before: from then on its steps are not replayed
	// (see [CheckReplayInWorkflow]).
	CompensationStartedAt *time.Time
	// RerunOf is the workflow this one reruns, RerunAs the one that reruns
	// this one; nil for none (see [github.com/errandhq/errand.Client.RerunWorkflow]).
	RerunOf, RerunAs *string
}

// EncodeWorkflowSteps is the steps column of a workflow: its steps as JSON.
func EncodeWorkflowSteps(steps []WorkflowStepDef) (string, error) {
	b, err := json.Marshal(steps)
	if err != nil {
		return "", fmt.Errorf("encode workflow steps: %w", err)
	}
	return string(b), nil
}

// DecodeWorkflowSteps reads a workflow's steps column.
func DecodeWorkflowSteps(s string) ([]WorkflowStepDef, error) {
	var steps []WorkflowStepDef
	if err := json.Unmarshal([]byte(s), &steps); err != nil {
		return nil, fmt.Errorf("decode workflow steps: %w", err)
	}
	return steps, nil
}

// EncodeWorkflowEnqueued is the enqueued column of a workflow: job ids as a
// JSON array.
func EncodeWorkflowEnqueued(ids []string) string {
	if ids == nil {
		ids = []string{}
	}
	b, _ := json.Marshal(ids)
	return string(b)
}

// DecodeWorkflowEnqueued reads a workflow's enqueued column.
func DecodeWorkflowEnqueued(s string) ([]string, error) {
	var ids []string
	if err := json.Unmarshal([]byte(s), &ids); err != nil {
		return nil, fmt.Errorf("decode workflow enqueued jobs: %w", err)
	}
	return ids, nil
}

// WorkflowJob is what a store reads of one of a workflow's jobs (those with
// its workflow_id) to plan and show the workflow.
type WorkflowJob struct {
	ID          string
	State       errandtype.JobState
	Attempts    int
	MaxAttempts int
	// Output is the job's recorded output, nil for none.
	Output json.RawMessage
	// LastError is the job's last failure, nil for none.
	LastError *errandtype.LastError
}

// WorkflowPlan is what advancing a workflow does: the jobs to insert and
// the row's new values.
type WorkflowPlan struct {
	// Insert are the jobs to insert, under the duplicate-id rule, each
	// with workflow_id set to the workflow's id.
	Insert []*JobInsertParams
	// State, FailedStep and Enqueued are the row's new values.
	State      errandtype.WorkflowState
	FailedStep *string
	Enqueued   []string
	// Changed reports that the row's state, failed step or enqueued jobs
	// differ from before: the store sets updated_at (and finished_at when
	// State is final, clears it otherwise). Without it the store sets only
	// checked_at.
	Changed bool
	// Dead are jobs of Insert that the store makes dead in the transaction
	// that inserts them, unrun (attempt 0), with the error given: a job
	// whose args with the outputs of the steps before it would exceed the
	// bound of a job's args ([ClassArgsTooLarge]). Its args in Insert
	// leave the outputs out. State and FailedStep already count them dead.
	// Empty while no job of the workflow has an output.
	Dead []*WorkflowDeadJob
	// CompensationStarted reports that Enqueued holds a compensation: the
	// store sets the row's CompensationStartedAt when it is not yet set.
	CompensationStarted bool
}

// WorkflowDeadJob is a job a store inserts dead (see [WorkflowPlan]): its
// id, and the class and message of its error.
type WorkflowDeadJob struct {
	ID      string
	Class   string
	Message string
}

// PlanWorkflow decides what advancing workflow w does, given jobs, its
// jobs by id as read in the advancing transaction:
//
//   - while no step is dead or cancelled, it enqueues each step not yet
//     enqueued whose dependencies have all succeeded, with the field
//     "workflow" of its args set to a [WorkflowContext] holding their
//     outputs; once every step succeeded, the workflow succeeded;
//   - once a step is dead or cancelled, it enqueues no further step and,
//     when no step is in flight, enqueues the compensation of the
//     succeeded steps one at a time, latest declared first, each once its
//     predecessor succeeded; once all succeeded, the workflow failed;
//   - a replayed step is no longer dead, so a compensating or failed
//     workflow whose failed steps were all replayed runs again (a replay
//     is refused once a compensation was enqueued: see
//     [CheckReplayInWorkflow]).
//
// A job in Enqueued but missing from jobs (deleted by retention) is never
// enqueued again; the workflow waits on it.
//
// A job whose args, with the outputs set in them, would exceed the bound of
// a job's args is planned dead at once (see [WorkflowPlan].Dead): refused,
// it would fail every advance and hold the workflow running for ever. It
// stops the workflow as any dead step does, and the plan goes on as if it
// had been inserted dead.
func PlanWorkflow(w *WorkflowRecord, jobs map[string]*WorkflowJob) (*WorkflowPlan, error) {
	all, err := planWorkflowOnce(w, jobs)
	if err != nil || len(all.Dead) == 0 {
		return all, err
	}
	cur := *w
	seen := maps.Clone(jobs)
	if seen == nil {
		seen = make(map[string]*WorkflowJob)
	}
	for p := all; len(p.Dead) > 0; {
		dead := make(map[string]bool, len(p.Dead))
		for _, d := range p.Dead {
			dead[d.ID] = true
		}
		for _, ip := range p.Insert {
			st := errandtype.StateQueued
			if dead[ip.ID] {
				st = errandtype.StateDead
			}
			seen[ip.ID] = &WorkflowJob{ID: ip.ID, State: st, MaxAttempts: ip.MaxAttempts}
		}
		cur.State, cur.FailedStep, cur.Enqueued = p.State, p.FailedStep, p.Enqueued
		if p, err = planWorkflowOnce(&cur, seen); err != nil {
			return nil, err
		}
		all.Insert = append(all.Insert, p.Insert...)
		all.Dead = append(all.Dead, p.Dead...)
		all.State, all.FailedStep, all.Enqueued, all.CompensationStarted = p.State, p.FailedStep, p.Enqueued, p.CompensationStarted
	}
	all.Changed = all.State != w.State || len(all.Insert) > 0 || !equalPtr(all.FailedStep, w.FailedStep)
	return all, nil
}

// planWorkflowOnce is PlanWorkflow without planning again after the jobs it
// plans dead.
func planWorkflowOnce(w *WorkflowRecord, jobs map[string]*WorkflowJob) (*WorkflowPlan, error) {
	pl := newWorkflowPlanner(w, jobs)
	failed, inFlight := pl.failedStep()
	var err error
	switch {
	case failed == nil:
		err = pl.planSteps()
	case inFlight:
		// Compensation waits for every step in flight to finish.
		pl.p.State, pl.p.FailedStep = errandtype.WorkflowCompensating, failed
	default:
		pl.p.FailedStep = failed
		err = pl.planCompensation()
	}
	if err != nil {
		return nil, err
	}
	p := pl.p
	p.Changed = p.State != w.State || len(p.Insert) > 0 || !equalPtr(p.FailedStep, w.FailedStep)
	p.CompensationStarted = len(compensationsEnqueued(w.ID, p.Enqueued)) > 0
	return p, nil
}

// workflowPlanner builds the plan of one advance of workflow w, given its
// jobs by id; enqueued holds the jobs enqueued so far, the plan's included.
type workflowPlanner struct {
	w        *WorkflowRecord
	jobs     map[string]*WorkflowJob
	p        *WorkflowPlan
	enqueued map[string]bool
}

func newWorkflowPlanner(w *WorkflowRecord, jobs map[string]*WorkflowJob) *workflowPlanner {
	pl := &workflowPlanner{w: w, jobs: jobs, p: &WorkflowPlan{Enqueued: slices.Clone(w.Enqueued)},
		enqueued: make(map[string]bool, len(w.Enqueued))}
	for _, id := range w.Enqueued {
		pl.enqueued[id] = true
	}
	return pl
}

func (pl *workflowPlanner) step(name string) *WorkflowJob {
	return pl.jobs[WorkflowStepJobID(pl.w.ID, name)]
}

func (pl *workflowPlanner) succeeded(name string) bool {
	j := pl.step(name)
	return j != nil && j.State == errandtype.StateSucceeded
}

// stopsWorkflow reports that j stops the workflow: it is dead or cancelled.
func stopsWorkflow(j *WorkflowJob) bool {
	return j != nil && (j.State == errandtype.StateDead || j.State == errandtype.StateCancelled)
}

// failedStep returns the step that stopped the workflow (nil while none
// did) and whether any step's job is still in flight.
func (pl *workflowPlanner) failedStep() (failed *string, inFlight bool) {
	w := pl.w
	for i := range w.Steps {
		j := pl.step(w.Steps[i].Name)
		switch {
		case j == nil:
		case stopsWorkflow(j):
			if failed == nil {
				failed = &w.Steps[i].Name
			}
		case !j.State.Terminal():
			inFlight = true
		}
	}
	if failed != nil && w.FailedStep != nil && stopsWorkflow(pl.step(*w.FailedStep)) {
		// The step that stopped the workflow stays the one named, though
		// a step declared before it failed since.
		failed = w.FailedStep
	}
	return failed, inFlight
}

// planSteps plans a workflow no step stopped: each step not yet enqueued
// whose dependencies all succeeded is enqueued; once every step
// succeeded, the workflow succeeded.
func (pl *workflowPlanner) planSteps() error {
	w := pl.w
	pl.p.State = errandtype.WorkflowSucceeded
	for i := range w.Steps {
		s := &w.Steps[i]
		if pl.succeeded(s.Name) {
			continue
		}
		pl.p.State = errandtype.WorkflowRunning
		id := WorkflowStepJobID(w.ID, s.Name)
		if pl.enqueued[id] || !allOf(s.DependsOn, pl.succeeded) {
			continue
		}
		wc := &WorkflowContext{ID: w.ID, Step: s.Name, Outputs: outputsOf(w.ID, s.DependsOn, pl.jobs)}
		if err := pl.enqueue(id, s.Job, wc); err != nil {
			return err
		}
	}
	return nil
}

// planCompensation plans a stopped workflow with no step in flight: the
// compensations of the succeeded steps run one at a time, latest declared
// first, each once the one before it succeeded; once all succeeded, the
// workflow failed.
func (pl *workflowPlanner) planCompensation() error {
	w := pl.w
	pl.p.State = errandtype.WorkflowFailed
	for i := len(w.Steps) - 1; i >= 0; i-- {
		s := &w.Steps[i]
		if s.Compensation == nil || !pl.succeeded(s.Name) {
			continue
		}
		id := WorkflowCompensationJobID(w.ID, s.Name)
		if c := pl.jobs[id]; c != nil && c.State == errandtype.StateSucceeded {
			continue
		}
		pl.p.State = errandtype.WorkflowCompensating
		if pl.enqueued[id] {
			return nil // one at a time: the next waits for this one
		}
		wc := &WorkflowContext{ID: w.ID, Step: s.Name, Compensating: true, Outputs: outputsOf(w.ID, pl.succeededSteps(), pl.jobs)}
		return pl.enqueue(id, s.Compensation, wc)
	}
	return nil
}

// succeededSteps returns the steps that succeeded, in declaration order.
func (pl *workflowPlanner) succeededSteps() []string {
	var done []string
	for i := range pl.w.Steps {
		if pl.succeeded(pl.w.Steps[i].Name) {
			done = append(done, pl.w.Steps[i].Name)
		}
	}
	return done
}

// enqueue adds the job id of template t, with context wc, to the plan.
func (pl *workflowPlanner) enqueue(id string, t *JobTemplate, wc *WorkflowContext) error {
	ip, dead, err := workflowJobParams(id, t, wc)
	if err != nil {
		return fmt.Errorf("workflow %s: job %s: %w", pl.w.ID, id, err)
	}
	if dead != nil {
		pl.p.Dead = append(pl.p.Dead, dead)
	}
	pl.p.Insert = append(pl.p.Insert, ip)
	pl.p.Enqueued = append(pl.p.Enqueued, id)
	pl.enqueued[id] = true
	return nil
}

// workflowJobParams returns the job id of template t with the field
// "workflow" of its args set to wc. When the outputs in wc make the args
// too large to enqueue, it returns the job without them, and the error to
// insert it dead with.
func workflowJobParams(id string, t *JobTemplate, wc *WorkflowContext) (*JobInsertParams, *WorkflowDeadJob, error) {
	ip, err := t.insertParams(id, "workflow", wc)
	if err != nil || len(wc.Outputs) == 0 {
		return ip, nil, err
	}
	verr := ip.Validate()
	if verr == nil {
		ip.Checked = true // the store's insert need not scan the args again
		return ip, nil, nil
	}
	bare := *wc
	bare.Outputs = nil
	lean, err := t.insertParams(id, "workflow", &bare)
	if err != nil {
		return nil, nil, err
	}
	if lean.Validate() != nil {
		return ip, nil, nil // not the outputs' doing: the store refuses it as it is
	}
	steps := slices.Sorted(maps.Keys(wc.Outputs))
	size := fmt.Sprintf("would be %d bytes, over the bound of %d bytes of a job's args", len(ip.Args), MaxArgsBytes)
	if len(ip.Args) <= MaxArgsBytes {
		size = "would be refused (" + verr.Error() + ")"
	}
	return lean, &WorkflowDeadJob{ID: id, Class: ClassArgsTooLarge, Message: fmt.Sprintf(
		"not run: its args, with the outputs of steps %s set in their field \"workflow\", %s; "+
			"these args leave the outputs out. Keep step outputs small (store large results elsewhere and record their key in the output) "+
			"and, once the workflow has failed, rerun it: errand workflow rerun %s; or, while it has compensated nothing, "+
			"give the job the args it needs and replay it: errand replay %s --args '{...}'",
		strings.Join(steps, ", "), size, wc.ID, id)}, nil
}

func allOf(names []string, f func(string) bool) bool {
	for _, n := range names {
		if !f(n) {
			return false
		}
	}
	return true
}

// outputsOf returns the recorded outputs of steps by name, nil for none.
func outputsOf(id string, steps []string, jobs map[string]*WorkflowJob) map[string]json.RawMessage {
	var m map[string]json.RawMessage
	for _, name := range steps {
		if j := jobs[WorkflowStepJobID(id, name)]; j != nil && len(j.Output) > 0 {
			if m == nil {
				m = make(map[string]json.RawMessage)
			}
			m[name] = j.Output
		}
	}
	return m
}

func equalPtr[T comparable](a, b *T) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// ViewWorkflow builds the [errandtype.Workflow] of w from its jobs by id.
func ViewWorkflow(w *WorkflowRecord, jobs map[string]*WorkflowJob) *errandtype.Workflow {
	enqueued := make(map[string]bool, len(w.Enqueued))
	for _, id := range w.Enqueued {
		enqueued[id] = true
	}
	v := &errandtype.Workflow{ID: w.ID, Name: w.Name, State: w.State, FailedStep: w.FailedStep,
		CreatedAt: w.CreatedAt, UpdatedAt: w.UpdatedAt, FinishedAt: w.FinishedAt,
		CompensationStartedAt: w.CompensationStartedAt, RerunOf: w.RerunOf, RerunAs: w.RerunAs,
		Steps: make([]errandtype.WorkflowStepView, len(w.Steps))}
	for i := range w.Steps {
		s := &w.Steps[i]
		// Before its job exists, a step shows the attempt budget it will
		// be enqueued with.
		sv := errandtype.WorkflowStepView{Name: s.Name, DependsOn: s.DependsOn, Kind: s.Job.Kind, JobID: WorkflowStepJobID(w.ID, s.Name),
			MaxAttempts: s.Job.MaxAttempts}
		if sv.DependsOn == nil {
			sv.DependsOn = []string{}
		}
		sv.Enqueued = enqueued[sv.JobID]
		if j := jobs[sv.JobID]; j != nil {
			st := j.State
			sv.State, sv.Attempts, sv.MaxAttempts, sv.Output, sv.LastError = &st, j.Attempts, j.MaxAttempts, j.Output, j.LastError
		}
		if s.Compensation != nil {
			cv := &errandtype.WorkflowCompensationView{Kind: s.Compensation.Kind, JobID: WorkflowCompensationJobID(w.ID, s.Name)}
			cv.Enqueued = enqueued[cv.JobID]
			if j := jobs[cv.JobID]; j != nil {
				st := j.State
				cv.State, cv.Attempts, cv.LastError = &st, j.Attempts, j.LastError
			}
			sv.Compensation = cv
		}
		v.Steps[i] = sv
	}
	return v
}

// WorkflowInsertParams describe a workflow to insert (see [WorkflowStore]).
type WorkflowInsertParams struct {
	ID    string
	Name  string
	Steps []WorkflowStepDef
	// RerunOf, set by a rerun (see [PlanWorkflowRerun]), is the workflow
	// this one reruns.
	RerunOf string

	// jobs are the Client's params that each step's job and compensation
	// (nil for none) were made of.
	Jobs      [][2]*JobInsertParams
	FirstWins bool // WorkflowOpts.FirstWins
}

// Validate checks the parameters of WorkflowInsert: the id and name, 1 to
// MaxWorkflowSteps steps with unique names, each depending only on steps
// declared before it (so the graph has no cycle), and templates that make
// valid jobs.
func (p *WorkflowInsertParams) Validate() error {
	if err := p.checkNames(); err != nil {
		return err
	}
	if len(p.Steps) == 0 || len(p.Steps) > MaxWorkflowSteps {
		return &errandtype.InputError{Field: "workflow steps", Message: fmt.Sprintf("%d steps; a workflow has 1 to %d", len(p.Steps), MaxWorkflowSteps)}
	}
	seen := make(map[string]bool, len(p.Steps))
	for i := range p.Steps {
		s := &p.Steps[i]
		if err := checkStepDef(i, s, seen); err != nil {
			return err
		}
		seen[s.Name] = true
		if err := p.checkStepJobs(s); err != nil {
			return err
		}
	}
	return nil
}

// checkNames checks the workflow's id, name and the id it reruns.
func (p *WorkflowInsertParams) checkNames() error {
	if err := checkID("workflow id", p.ID, MaxWorkflowIDBytes); err != nil {
		return err
	}
	if p.Name != "" {
		if err := CheckIdentifier("workflow name", p.Name, errandtype.MaxNameBytes); err != nil {
			return err
		}
	}
	if p.RerunOf != "" {
		return checkID("rerun of", p.RerunOf, MaxWorkflowIDBytes)
	}
	return nil
}

// checkStepDef checks step i's name, unique among the steps seen before
// it, and its dependencies, each one of those steps, named once.
func checkStepDef(i int, s *WorkflowStepDef, seen map[string]bool) error {
	field := fmt.Sprintf("workflow step %d", i)
	if err := checkStepName(field+" name", s.Name); err != nil {
		return err
	}
	if seen[s.Name] {
		return &errandtype.InputError{Field: field + " name", Message: fmt.Sprintf("%q names two steps; give each step its own name", s.Name)}
	}
	deps := make(map[string]bool, len(s.DependsOn))
	for _, d := range s.DependsOn {
		switch {
		case d == s.Name:
			return &errandtype.InputError{Field: "workflow step " + s.Name, Message: "depends on itself; remove it from DependsOn"}
		case !seen[d]:
			return &errandtype.InputError{Field: "workflow step " + s.Name, Message: fmt.Sprintf("depends on %q, which is not a step declared before it; declare steps after the steps they depend on", d)}
		case deps[d]:
			return &errandtype.InputError{Field: "workflow step " + s.Name, Message: fmt.Sprintf("depends on %q twice; name it once", d)}
		}
		deps[d] = true
	}
	return nil
}

// checkStepJobs checks that step s's job and compensation make valid jobs.
func (p *WorkflowInsertParams) checkStepJobs(s *WorkflowStepDef) error {
	if s.Job == nil {
		return &errandtype.InputError{Field: "workflow step " + s.Name, Message: "has no job"}
	}
	if err := checkTemplate(s.Job, WorkflowStepJobID(p.ID, s.Name), &WorkflowContext{ID: p.ID, Step: s.Name}); err != nil {
		return fmt.Errorf("workflow step %s: %w", s.Name, err)
	}
	if s.Compensation == nil {
		return nil
	}
	if err := checkTemplate(s.Compensation, WorkflowCompensationJobID(p.ID, s.Name), &WorkflowContext{ID: p.ID, Step: s.Name, Compensating: true}); err != nil {
		return fmt.Errorf("workflow step %s: compensation: %w", s.Name, err)
	}
	return nil
}

// checkTemplate checks that t makes a valid job with id id and the field
// "workflow" of its args set to wc, the job's context without outputs:
// checked with an empty one, args near the bound would pass here and fail
// in every advance that enqueues the job.
func checkTemplate(t *JobTemplate, id string, wc *WorkflowContext) error {
	ip, err := t.insertParams(id, "workflow", wc)
	if err != nil {
		return err
	}
	return ip.Validate()
}

// WorkflowInsertResult is what inserting a workflow did.
type WorkflowInsertResult struct {
	// Workflow is the new workflow, or the existing one when Duplicate.
	Workflow *errandtype.Workflow
	// Jobs are the jobs inserted with it: its first steps, those without
	// dependencies. Nil when Duplicate.
	Jobs []*errandtype.Job
	// Duplicate reports that a workflow with the id existed: nothing was
	// inserted.
	Duplicate bool
}

// WorkflowGetParams name a workflow.
type WorkflowGetParams struct {
	ID string
}

// WorkflowListParams select workflows to list, newest first.
type WorkflowListParams struct {
	// States, when set, keeps the workflows in these states.
	States []errandtype.WorkflowState
	// Limit bounds the result; zero means 100.
	Limit int
	// Before pages: only workflows listed after this position, the
	// CreatedAt and ID of the last workflow of the previous page.
	Before *errandtype.ListCursor
}

// Validate checks the parameters of WorkflowList.
func (p *WorkflowListParams) Validate() error {
	for _, st := range p.States {
		if !st.Valid() {
			return &errandtype.InputError{Field: "states", Message: fmt.Sprintf("%q is not a workflow state; use running, compensating, succeeded or failed", st)}
		}
	}
	if p.Limit < 0 {
		return &errandtype.InputError{Field: "limit", Message: fmt.Sprintf("%d is negative; give at least 1, or 0 for 100", p.Limit)}
	}
	return p.Before.Validate("before")
}

// WorkflowAdvanceParams name the workflows to advance.
type WorkflowAdvanceParams struct {
	// IDs are the workflows to advance; empty means the open workflows
	// with a job that finished after the workflow's CheckedAt, or, when
	// all their jobs are finished, after CheckedAt less
	// [WorkflowRecheckOverlap]: at most Limit, oldest first.
	IDs   []string
	Limit int
}

// WorkflowAdvanceResult is what advancing one workflow did.
type WorkflowAdvanceResult struct {
	// Workflow is the workflow after the advance.
	Workflow *errandtype.Workflow
	// Jobs are the jobs the advance inserted.
	Jobs []*errandtype.Job
	// Changed reports that its state changed or it inserted jobs.
	Changed bool
}

// JobSetOutputParams describe a handler's output.
type JobSetOutputParams struct {
	ID         string
	LeaseToken string
	// Output is the output, raw JSON, at most MaxOutputBytes.
	Output json.RawMessage
}

// Validate checks the parameters of JobSetOutput.
func (p *JobSetOutputParams) Validate() error {
	_, err := p.Check()
	return err
}

// Check is Validate, reporting too whether the output holds a number
// plainJSON would rewrite.
func (p *JobSetOutputParams) Check() (rewrite bool, err error) {
	if err := CheckLeaseText(p.ID, p.LeaseToken); err != nil {
		return false, err
	}
	switch {
	case !json.Valid(p.Output):
		return false, &errandtype.InputError{Field: "output", Message: "is not valid JSON"}
	case len(p.Output) > MaxOutputBytes:
		return false, &errandtype.InputError{Field: "output", Message: fmt.Sprintf("is %d bytes; record at most %d, and keep large results elsewhere (a table, an object store) with their key in the output", len(p.Output), MaxOutputBytes)}
	case !errandtype.StorableText(string(p.Output)):
		return false, &errandtype.InputError{Field: "output", Message: "contains a NUL character or invalid UTF-8, which PostgreSQL cannot store; escape it in the JSON"}
	}
	// A later step's args hold the output, so it must be args every store
	// keeps: refused here, not when a worker's outcome enqueues that step.
	return checkJSONText("output", p.Output, MaxOutputBytes)
}

// WorkflowStore is an optional capability of a Store: workflows of jobs (see
// [github.com/errandhq/errand.Client.EnqueueWorkflow]), found by type
// assertion. errand/sqlite and errand/postgres implement it. Nothing on the
// claim path reads workflows: a step's job carries its workflow id, and only
// finishing it looks further.
type WorkflowStore interface {
	// WorkflowInsert inserts a workflow and the jobs of its first steps
	// (as [PlanWorkflow] plans them with no jobs yet) in one transaction
	// of its own. When a workflow with the ID exists nothing is inserted
	// and the result holds it with Duplicate set. A job whose id or unique
	// key is taken is an *InputError and nothing is inserted.
	WorkflowInsert(ctx context.Context, params *WorkflowInsertParams) (*WorkflowInsertResult, error)

	// WorkflowGet returns a workflow with its steps' current states, or
	// ErrNotFound.
	WorkflowGet(ctx context.Context, params *WorkflowGetParams) (*errandtype.Workflow, error)

	// WorkflowList returns workflows, newest first.
	WorkflowList(ctx context.Context, params *WorkflowListParams) ([]*errandtype.Workflow, error)

	// WorkflowAdvance advances the workflows IDs names (see
	// [WorkflowAdvanceParams]), each in one transaction: it locks the
	// workflow's row, reads its jobs, calls [PlanWorkflow], inserts the
	// planned jobs (with workflow_id set), makes those of the plan's Dead
	// dead, and writes the row (CompensationStartedAt once the plan's
	// CompensationStarted). Concurrent
	// advances of one workflow are serialised by the row lock, so a job is
	// never planned twice. A finished workflow whose failed step was
	// replayed is advanced too (it runs again). A missing id is skipped.
	// A workflow whose advance fails is left as it was and named in the
	// error; the others are advanced all the same, and their results
	// returned with the error.
	WorkflowAdvance(ctx context.Context, params *WorkflowAdvanceParams) ([]*WorkflowAdvanceResult, error)

	// JobSetOutput records a handler's output, fenced by the token as
	// JobSetProgress is: a lost lease is ErrLeaseLost and writes nothing.
	JobSetOutput(ctx context.Context, params *JobSetOutputParams) error

	// WorkflowCounts returns how many workflows are in each state, every
	// state of [errandtype.WorkflowStates] present (0 when none), in one grouped
	// count of errand_workflows that reads no job.
	WorkflowCounts(ctx context.Context) (map[errandtype.WorkflowState]int, error)

	// WorkflowRerun starts workflow ID again as workflow NewID, in one
	// transaction of its own: it locks ID's row (ErrNotFound when there is
	// none), asks [PlanWorkflowRerun], inserts the new workflow as
	// WorkflowInsert does, with RerunOf set, and sets the old row's
	// RerunAs. A retried rerun (again) returns the workflow NewID with
	// Duplicate set and writes nothing; a NewID another workflow has is
	// the *InputError of [RerunIDTakenError]. A refusal writes nothing.
	WorkflowRerun(ctx context.Context, params *WorkflowRerunParams) (*WorkflowInsertResult, error)
}

// NewWorkflowCounts returns counts with every workflow state at 0, for a
// store to add its counts to.
func NewWorkflowCounts() map[errandtype.WorkflowState]int {
	m := make(map[errandtype.WorkflowState]int, len(errandtype.WorkflowStates))
	for _, s := range errandtype.WorkflowStates {
		m[s] = 0
	}
	return m
}

// WorkflowTxStore is a WorkflowStore that inserts workflows in its caller's
// transactions, of type TTx, as [TxStore] inserts jobs.
type WorkflowTxStore[TTx any] interface {
	WorkflowStore

	// WorkflowInsertTx inserts a workflow as WorkflowInsert does, but
	// inside tx. After an error the caller rolls tx back.
	WorkflowInsertTx(ctx context.Context, tx TTx, params *WorkflowInsertParams) (*WorkflowInsertResult, error)
}
