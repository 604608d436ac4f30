package errand

import (
	"encoding/json"
	"fmt"

	"github.com/errandhq/errand/errandstore"
)

// Workflows: a graph of steps, each an ordinary job (see
// [Client.EnqueueWorkflow]). The store keeps a workflow's definition in one
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
// [Client.Prune]); its id may then be used again, as a pruned job's may.
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

// templateOf returns the template of ip, a job's checked insert parameters.
func templateOf(ip *errandstore.JobInsertParams) *errandstore.JobTemplate {
	return &errandstore.JobTemplate{
		Kind: ip.Kind, Queue: ip.Queue, Args: ip.Args, ArgsVersion: ip.ArgsVersion,
		Priority: ip.Priority, MaxAttempts: ip.MaxAttempts,
		BackoffBaseUS: ip.BackoffBase.Microseconds(), BackoffMaxUS: ip.BackoffMax.Microseconds(),
		MaxAgeUS: ip.MaxAge.Microseconds(), DelayUS: ip.Delay.Microseconds(),
		OrderingKey: ip.OrderingKey, OrderingHold: ip.OrderingHold, FairnessKey: ip.FairnessKey, Tags: ip.Tags,
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
