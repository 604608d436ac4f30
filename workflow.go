package errand

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
	"github.com/errandhq/errand/internal/ids"
)

// WorkflowStep is one step of a workflow (see [Client.EnqueueWorkflow]).
type WorkflowStep struct {
	// Name names the step within its workflow: 1 to MaxStepNameBytes
	// bytes, no spaces and no dots. The step's job id is [WorkflowStepJobID].
	Name string
	// Args are the step's job. They must marshal to a JSON object: errand
	// sets its field "workflow" to a [WorkflowContext], so declare one in
	// the args type to read the dependencies' outputs.
	Args JobArgs
	// Opts are the job's options; nil for the defaults. ID, RunAt, StartBy,
	// Unique and UniqueKey must be empty: the step's id is fixed and it runs
	// when its dependencies succeed (Delay after that, when set).
	Opts *EnqueueOpts
	// DependsOn names the steps that must succeed before this one is
	// enqueued. Each must be declared before this step.
	DependsOn []string
	// Compensate, when set, is the job that undoes the step: should a later
	// step fail, it is enqueued once the step has succeeded and the
	// compensations of the steps declared after it have run. Its args get
	// the field "workflow" too, with Compensating set and the outputs of
	// every step that succeeded. Nil for a step with nothing to undo.
	Compensate JobArgs
	// CompensateOpts are the compensation's options, as Opts.
	CompensateOpts *EnqueueOpts
}

// WorkflowOpts are the options of a workflow. The zero value is a workflow
// with a generated id and no name.
type WorkflowOpts struct {
	// ID, when set, is the workflow's id: a duplicate returns the existing
	// workflow and enqueues nothing, so a retried request cannot start a
	// workflow twice. An existing workflow that differs from the one this
	// enqueue would have made is an *IDConflictError instead, unless
	// FirstWins. At most MaxWorkflowIDBytes.
	ID string
	// FirstWins makes a duplicate ID return the existing workflow even
	// when it differs (see [EnqueueOpts].FirstWins). It needs an ID.
	FirstWins bool
	// Name is a label for operators ("checkout", "onboarding"); optional.
	Name string
}

// EnqueueWorkflow enqueues a workflow in a transaction of its own: a graph
// of steps, each an ordinary job with retries, timeouts and a dead letter,
// enqueued once the steps it depends on have succeeded. A step reads its
// dependencies' outputs (see [SetOutput] and [StepOutput]) from the field
// "workflow" of its args.
//
// When a step ends dead (or is cancelled) the workflow stops: no further
// step starts and, once the steps in flight finish, the compensations of the
// steps that succeeded run one at a time, latest declared first, each a
// retried job; then the workflow is failed. Until a compensation has been
// enqueued (while steps are still in flight, or when no succeeded step has
// a Compensate), replaying the failed step resumes the workflow: it runs
// again from that step, and nothing is compensated. Once one has been
// enqueued, a replay of any step is refused with a
// *[WorkflowCompensatedError]: the steps it would build on are undone, so
// run the workflow again as a new one with [Client.RerunWorkflow] once it
// has failed. Replaying a dead compensation goes on compensating.
//
// The store must be a [WorkflowStore].
func (c *Client[TTx]) EnqueueWorkflow(ctx context.Context, steps []WorkflowStep, opts *WorkflowOpts) (*errandstore.WorkflowInsertResult, error) {
	ctx, span := c.startEnqueue(ctx, len(steps))
	res, err := c.enqueueWorkflow(ctx, steps, opts)
	if span != nil && res != nil {
		span.SetAttributes(attrWorkflowID.String(res.Workflow.ID))
	}
	endEnqueue(span, nil, err)
	return res, err
}

func (c *Client[TTx]) enqueueWorkflow(ctx context.Context, steps []WorkflowStep, opts *WorkflowOpts) (*errandstore.WorkflowInsertResult, error) {
	ws := c.caps.workflows
	if ws == nil {
		return nil, fmt.Errorf("enqueue workflow: %w", errNoWorkflowStore)
	}
	p, err := c.workflowParams(ctx, steps, opts)
	if err != nil {
		return nil, err
	}
	res, err := ws.WorkflowInsert(ctx, p)
	if err != nil {
		return nil, wrapStoreError("enqueue workflow", err)
	}
	if err := c.workflowDuplicate(ctx, res, p); err != nil {
		return nil, err
	}
	c.afterWorkflowInsert(res)
	return res, nil
}

// afterWorkflowInsert wakes the queues of the jobs a workflow's insert
// enqueued, in a transaction of its own, and reports them.
func (c *engine) afterWorkflowInsert(res *errandstore.WorkflowInsertResult) {
	if res.Duplicate {
		return
	}
	c.wakeQueues(queuesOfJobs(res.Jobs)...)
	if c.observer != nil && len(res.Jobs) > 0 {
		c.observer.JobsEnqueued(res.Jobs)
	}
}

// EnqueueWorkflowTx enqueues a workflow inside tx, the caller's
// transaction: the workflow exists if and only if tx commits. After an
// error, roll tx back. Inside [Client.InTx] workers are woken after the
// commit; otherwise call [Client.Wake] once tx commits.
func (c *Client[TTx]) EnqueueWorkflowTx(ctx context.Context, tx TTx, steps []WorkflowStep, opts *WorkflowOpts) (*errandstore.WorkflowInsertResult, error) {
	ctx, span := c.startEnqueue(ctx, len(steps))
	res, err := c.enqueueWorkflowTx(ctx, tx, steps, opts)
	if span != nil && res != nil {
		span.SetAttributes(attrWorkflowID.String(res.Workflow.ID))
	}
	endEnqueue(span, nil, err)
	return res, err
}

func (c *Client[TTx]) enqueueWorkflowTx(ctx context.Context, tx TTx, steps []WorkflowStep, opts *WorkflowOpts) (*errandstore.WorkflowInsertResult, error) {
	ws := c.txCaps.workflows
	if ws == nil {
		return nil, fmt.Errorf("enqueue workflow: %w", errNoWorkflowStore)
	}
	p, err := c.workflowParams(ctx, steps, opts)
	if err != nil {
		return nil, err
	}
	res, err := ws.WorkflowInsertTx(ctx, tx, p)
	if err != nil {
		return nil, fmt.Errorf("enqueue workflow: %w", err)
	}
	if err := c.workflowDuplicate(ctx, res, p); err != nil {
		return nil, err
	}
	if res.Duplicate || len(res.Jobs) == 0 {
		return res, nil
	}
	queues := queuesOfJobs(res.Jobs)
	if w, ok := ctx.Value(txWakesKey{}).(*txWakes); ok && w.c == c.engine {
		w.add(queues)
		if c.observer != nil {
			w.addJobs(res.Jobs)
		}
	} else {
		if c.notifier != nil {
			c.notifier.NoteTx(queues)
		}
		if c.observer != nil {
			c.observer.JobsEnqueued(res.Jobs)
		}
	}
	return res, nil
}

// Workflow returns a workflow with its steps' current states, or an error
// wrapping ErrNotFound.
func (c *Client[TTx]) Workflow(ctx context.Context, id string) (*errandtype.Workflow, error) {
	ws := c.caps.workflows
	if ws == nil {
		return nil, fmt.Errorf("get workflow: %w", errNoWorkflowStore)
	}
	w, err := ws.WorkflowGet(ctx, &errandstore.WorkflowGetParams{ID: id})
	if err != nil {
		return nil, fmt.Errorf("get workflow %s: %w", id, err)
	}
	c.openWorkflowForReader(w)
	return w, nil
}

// Workflows lists workflows, newest first.
func (c *Client[TTx]) Workflows(ctx context.Context, p *errandstore.WorkflowListParams) ([]*errandtype.Workflow, error) {
	ws := c.caps.workflows
	if ws == nil {
		return nil, fmt.Errorf("list workflows: %w", errNoWorkflowStore)
	}
	if p == nil {
		p = &errandstore.WorkflowListParams{}
	}
	for _, s := range p.States {
		if !s.Valid() {
			return nil, &errandtype.InputError{Field: "state", Message: fmt.Sprintf("%q is not a workflow state; use one of %v", s, errandtype.WorkflowStates)}
		}
	}
	w, err := ws.WorkflowList(ctx, p)
	if err != nil {
		return nil, fmt.Errorf("list workflows: %w", err)
	}
	c.openWorkflowForReader(w...)
	return w, nil
}

// WorkflowCounts returns how many workflows are in each state, every state
// present: one grouped count, cheap enough for metrics and dashboards.
func (c *Client[TTx]) WorkflowCounts(ctx context.Context) (map[errandtype.WorkflowState]int, error) {
	ws := c.caps.workflows
	if ws == nil {
		return nil, fmt.Errorf("count workflows: %w", errNoWorkflowStore)
	}
	m, err := ws.WorkflowCounts(ctx)
	if err != nil {
		return nil, fmt.Errorf("count workflows: %w", err)
	}
	return m, nil
}

var errNoWorkflowStore = &errandtype.InputError{Field: "store", Message: "does not keep workflows (it is not an errandstore.WorkflowStore); use errand/sqlite or errand/postgres"}

// workflowParams builds and checks a workflow's insert parameters.
func (c *engine) workflowParams(ctx context.Context, steps []WorkflowStep, opts *WorkflowOpts) (*errandstore.WorkflowInsertParams, error) {
	if opts == nil {
		opts = &WorkflowOpts{}
	}
	if err := errandstore.CheckFirstWins(opts.FirstWins, opts.ID, "workflow"); err != nil {
		return nil, err
	}
	p := &errandstore.WorkflowInsertParams{ID: opts.ID, Name: opts.Name, Steps: make([]errandstore.WorkflowStepDef, len(steps)),
		Jobs: make([][2]*errandstore.JobInsertParams, len(steps)), FirstWins: opts.FirstWins}
	if p.ID == "" {
		p.ID = ids.NewJobID()
	}
	for i := range steps {
		s := &steps[i]
		job, ip, err := c.workflowTemplate(ctx, s.Args, s.Opts)
		if err != nil {
			return nil, fmt.Errorf("workflow step %s: %w", s.Name, err)
		}
		p.Steps[i] = errandstore.WorkflowStepDef{Name: s.Name, DependsOn: s.DependsOn, Job: job}
		p.Jobs[i][0] = ip
		if s.Compensate != nil {
			if p.Steps[i].Compensation, p.Jobs[i][1], err = c.workflowTemplate(ctx, s.Compensate, s.CompensateOpts); err != nil {
				return nil, fmt.Errorf("workflow step %s: compensation: %w", s.Name, err)
			}
		} else if s.CompensateOpts != nil {
			return nil, &errandtype.InputError{Field: "workflow step " + s.Name, Message: "has CompensateOpts but no Compensate; set both or neither"}
		}
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return p, nil
}

// workflowTemplate checks a workflow job's args and options and returns its
// template and the params it was made of.
func (c *engine) workflowTemplate(ctx context.Context, args JobArgs, opts *EnqueueOpts) (*errandstore.JobTemplate, *errandstore.JobInsertParams, error) {
	o := EnqueueOpts{}
	if opts != nil {
		o = *opts
	}
	switch {
	case o.ID != "":
		return nil, nil, &errandtype.InputError{Field: "ID", Message: "must be empty: a workflow's jobs have fixed ids (ID.step.NAME, ID.undo.NAME)"}
	case !o.RunAt.IsZero():
		return nil, nil, &errandtype.InputError{Field: "RunAt", Message: "must be zero: a step runs when its dependencies succeed; use Delay to wait after that"}
	case !o.StartBy.IsZero():
		return nil, nil, &errandtype.InputError{Field: "StartBy", Message: "must be zero: a step is enqueued when its dependencies succeed, a time fixed now may pass before then; use MaxAge to bound it"}
	case o.UniqueKey != "" || o.Unique != nil:
		return nil, nil, &errandtype.InputError{Field: "Unique", Message: "must be empty: a workflow's jobs are unique by their fixed ids"}
	case o.Debounce != nil:
		return nil, nil, &errandtype.InputError{Field: "Debounce", Message: "must be empty: a workflow's jobs have fixed ids and cannot fold into other jobs"}
	}
	ip, err := c.insertParam(ctx, &EnqueueParams{Args: args, Opts: &o})
	if err != nil {
		return nil, nil, err
	}
	return templateOf(ip), ip, nil
}

// workflowDuplicate returns the *IDConflictError of res, when it is a
// duplicate of p's id that differs and p does not say FirstWins.
func (c *engine) workflowDuplicate(ctx context.Context, res *errandstore.WorkflowInsertResult, p *errandstore.WorkflowInsertParams) error {
	if !res.Duplicate || p.FirstWins {
		return nil
	}
	return c.workflowConflict(ctx, res.Workflow, p)
}

// SetOutput records v, marshalled to JSON, as the output of the job the
// handler's ctx runs: what the steps that depend on it in a workflow
// receive (see [WorkflowContext]), and what the job's page shows. The write
// is fenced by the job's lease, as [SetProgress] is; record the output
// before returning nil. At most MaxOutputBytes: keep large results
// elsewhere and record their key. The store must be a [WorkflowStore].
//
// An output stays until the next SetOutput replaces it, across attempts and
// replays: an attempt that found its work done by an earlier one (see
// [Once]) may leave the output that attempt recorded, and one whose
// result differs records it again.
func SetOutput(ctx context.Context, v any) error {
	a, ok := ctx.Value(attemptKey{}).(*attemptInfo)
	if !ok {
		return errors.New("set output: no errand job in this context")
	}
	if a.workflows == nil {
		return fmt.Errorf("set output: %w", errNoWorkflowStore)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("set output: %w", err)
	}
	return a.engine.setOutput(ctx, a.workflows, &errandstore.JobSetOutputParams{ID: a.job.ID, LeaseToken: *a.job.LeaseToken, Output: b})
}

// SetJobOutput records output as the output of job id, running under the
// lease token: what [SetOutput] does inside a handler, for a worker
// outside this process (see [Client.Claim]). It returns an error wrapping
// ErrLeaseLost when the job no longer runs under token. The store must be
// a [WorkflowStore].
func (c *Client[TTx]) SetJobOutput(ctx context.Context, id, token string, output json.RawMessage) error {
	if c.caps.workflows == nil {
		return fmt.Errorf("set output: %w", errNoWorkflowStore)
	}
	return c.setOutput(ctx, c.caps.workflows, &errandstore.JobSetOutputParams{ID: id, LeaseToken: token, Output: output})
}

// SupportsWorkflows reports whether the client's store keeps workflows (is
// a [WorkflowStore]): without it, the workflow methods and [SetOutput]
// return an error.
func (c *Client[TTx]) SupportsWorkflows() bool { return c.caps.workflows != nil }

// setOutput checks p, writes its output in plain form, seals it with the
// client's codec, if any, and records it.
func (c *engine) setOutput(ctx context.Context, ws errandstore.WorkflowStore, p *errandstore.JobSetOutputParams) error {
	rewrite, err := p.Check()
	if err != nil {
		return fmt.Errorf("set output: %w", err)
	}
	if rewrite {
		p.Output = plainJSON(p.Output)
	}
	if p.Output, err = c.seal("output", p.Output); err != nil {
		return fmt.Errorf("set output: %w", err)
	}
	if len(p.Output) > errandstore.MaxOutputBytes {
		return fmt.Errorf("set output: %w", &errandtype.InputError{Field: "output", Message: fmt.Sprintf("is %d bytes once sealed; record at most %d, and keep large results elsewhere with their key in the output", len(p.Output), errandstore.MaxOutputBytes)})
	}
	if err := ws.JobSetOutput(ctx, p); err != nil {
		return fmt.Errorf("set output: %w", err)
	}
	return nil
}

// advanceWorkflows asks the store to advance workflows ids (the open
// workflows with news when ids is empty), wakes the queues of the jobs it
// enqueued, and returns how many changed. A store without workflows
// advances none.
func (c *engine) advanceWorkflows(ctx context.Context, ids []string) (int, error) {
	ws := c.caps.workflows
	if ws == nil {
		return 0, nil
	}
	rs, err := ws.WorkflowAdvance(ctx, &errandstore.WorkflowAdvanceParams{IDs: ids})
	var jobs []*errandtype.Job
	changed := 0
	for _, r := range rs {
		if !r.Changed {
			continue
		}
		changed++
		jobs = append(jobs, r.Jobs...)
		attrs := []any{"workflow_id", r.Workflow.ID, "state", r.Workflow.State}
		for _, j := range r.Jobs {
			attrs = append(attrs, "enqueued", j.ID)
		}
		c.logger.Info("workflow advanced", attrs...)
	}
	c.wakeQueues(queuesOfJobs(jobs)...)
	if c.observer != nil && len(jobs) > 0 {
		c.observer.JobsEnqueued(jobs)
	}
	return changed, err
}

// afterWorkflowJob advances job's workflow when job, one of its steps or
// compensations, has just finished, been cancelled or replayed. A failure
// is logged: the leader's pass advances the workflow later.
func (c *engine) afterWorkflowJob(ctx context.Context, job *errandtype.Job) {
	if job == nil || job.WorkflowID == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), batchCompleteTimeout)
	defer cancel()
	if _, err := c.advanceWorkflows(ctx, []string{*job.WorkflowID}); err != nil {
		c.logger.Warn("advance workflow failed; the leader advances it on its next sweep",
			"workflow_id", *job.WorkflowID, "job_id", job.ID, "err", err)
	}
}

// queuesOfJobs lists, sorted, the queues of jobs.
func queuesOfJobs(jobs []*errandtype.Job) []string {
	set := make(map[string]struct{}, 1)
	for _, j := range jobs {
		set[j.Queue] = struct{}{}
	}
	return setNames(set)
}

// explainReplayRefusal adds to err, a replay of a step refused because its
// workflow is compensating, the dead compensation that holds the workflow,
// if any: the operator replays that first. The store decided the refusal
// in its transaction; this read only explains it.
func (c *engine) explainReplayRefusal(ctx context.Context, err error) {
	var ce *errandstore.WorkflowCompensatedError
	if !errors.As(err, &ce) || ce.RerunAs != "" || !ce.WorkflowState.Open() {
		return
	}
	if ws := c.caps.workflows; ws != nil {
		if w, werr := ws.WorkflowGet(ctx, &errandstore.WorkflowGetParams{ID: ce.WorkflowID}); werr == nil {
			ce.DeadCompensation = deadCompensation(w)
		}
	}
}

// deadCompensation returns the job id of a dead compensation of w, or "".
func deadCompensation(w *errandtype.Workflow) string {
	for _, s := range w.Steps {
		if c := s.Compensation; c != nil && c.State != nil && *c.State == errandtype.StateDead {
			return c.JobID
		}
	}
	return ""
}

// keepWorkflowField returns args, the corrected args of a replay of job,
// with the field "workflow" that errand set in job's args: a workflow's job
// keeps its workflow and its dependencies' outputs whatever the new args
// say.
func keepWorkflowField(job *errandtype.Job, args json.RawMessage) (json.RawMessage, error) {
	if job.WorkflowID == nil {
		return args, nil
	}
	var old map[string]json.RawMessage
	if json.Unmarshal(job.Args, &old) != nil {
		return args, nil // stored args that are not an object have no field to keep
	}
	wc, ok := old["workflow"]
	if !ok {
		return args, nil
	}
	return errandstore.SetArgsField(args, "workflow", wc)
}

// advanceWorkflowsOf advances the workflows of jobs, just replayed. A
// failure is logged: the leader's pass advances them later.
func (c *engine) advanceWorkflowsOf(ctx context.Context, jobs []*errandtype.Job) {
	set := make(map[string]struct{})
	for _, j := range jobs {
		if j.WorkflowID != nil {
			set[*j.WorkflowID] = struct{}{}
		}
	}
	if len(set) == 0 {
		return
	}
	ids := setNames(set)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), batchCompleteTimeout)
	defer cancel()
	if _, err := c.advanceWorkflows(ctx, ids); err != nil {
		c.logger.Warn("advance workflows failed; the leader advances them on its next sweep", "workflow_ids", ids, "err", err)
	}
}

// StepOutput decodes the output step recorded (see [SetOutput]); ok is false
// when it recorded none or is not among wc's outputs.
func StepOutput[T any](wc errandstore.WorkflowContext, step string) (v T, ok bool, err error) {
	raw, ok := wc.Outputs[step]
	if !ok || len(raw) == 0 || string(raw) == "null" {
		return v, false, nil
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		return v, false, fmt.Errorf("output of step %s: %w", step, err)
	}
	return v, true, nil
}

// workflowConflict returns the *IDConflictError of w, the workflow found
// under p's id, when it is not what p would have made (see
// [errandstore.WorkflowDifferences]).
func (c *engine) workflowConflict(ctx context.Context, w *errandtype.Workflow, p *errandstore.WorkflowInsertParams) error {
	fields, err := errandstore.WorkflowDifferences(ctx, c.store, w, p)
	if err != nil || len(fields) == 0 {
		return err
	}
	return &IDConflictError{What: "workflow", ID: w.ID, Fields: fields}
}
