package errand

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtype"
)

// Durable steps of remote workers. A worker in another language keeps the
// protocol of Step, Sleep and WaitFor itself, through the JSON API: it
// reads the job's steps, records each new one fenced by its lease token
// (RecordStep), reads signals (Signals), and ends an attempt that must
// wait with Snooze. Waits are recorded as WaitFor records them (a step
// errand.wait whose result names the signal), so a signal wakes the job
// the same way.

// RecordStep records step for job id, fenced by token, as [Step] does
// for a local handler: ErrLeaseLost when the job is no longer running
// under token, errandstore.ErrStepRecorded when a step is recorded at
// its index already; the recorded one stays.
func (c *engine) RecordStep(ctx context.Context, id, token string, step errandtype.Step) error {
	if c.caps.steps == nil {
		return fmt.Errorf("record step of job %s: %w", id, ErrStepsUnsupported)
	}
	if err := checkLeaseRef(id, token); err != nil {
		return err
	}
	err := c.writeStep(&errandstore.JobStepRecordParams{JobLease: errandstore.JobLease{ID: id, LeaseToken: token}, Step: step})
	if err != nil {
		return wrapStoreError(fmt.Sprintf("record step %d of job %s", step.Index, id), err)
	}
	return nil
}

// Signals returns the signals of name sent to job id, oldest first.
func (c *engine) Signals(ctx context.Context, id, name string) ([]errandtype.Signal, error) {
	if c.caps.steps == nil {
		return nil, fmt.Errorf("signals of job %s: %w", id, ErrStepsUnsupported)
	}
	sigs, err := c.caps.steps.JobSignals(ctx, &errandstore.JobSignalsParams{ID: id, Name: name})
	if err != nil {
		return nil, fmt.Errorf("signals of job %s: %w", id, err)
	}
	return sigs, nil
}

// Snooze ends a remote worker's attempt of job id, fenced by token, by
// putting the job back in its queue for d without counting the attempt or
// recording a failure, as [Snooze] does: a remote sleep or wait. When the
// job's last step is a wait for a signal that has come meanwhile, the job
// is available at once.
func (c *Client[TTx]) Snooze(ctx context.Context, id, token string, d time.Duration) (errandstore.OutcomeResult, error) {
	if err := checkLeaseRef(id, token); err != nil {
		return errandstore.OutcomeResult{}, err
	}
	if d < 0 {
		return errandstore.OutcomeResult{}, &errandtype.InputError{Field: "delay", Message: "is negative; give a duration such as 30s"}
	}
	if err := errandstore.CheckDelay("delay", d); err != nil {
		return errandstore.OutcomeResult{}, err
	}
	job, err := c.runningJob(ctx, id, token)
	if err != nil {
		return errandstore.OutcomeResult{}, fmt.Errorf("snooze job %s: %w", id, err)
	}
	a := &attempt{job: job, err: Snooze(d)}
	r, err := c.recordObserved(ctx, "snooze", a, c.outcome(a))
	if err == nil && r.Err == nil {
		c.wakeIfWaitAnswered(ctx, job)
	}
	return r, err
}

// wakeIfWaitAnswered wakes job, just snoozed, when its last recorded step
// is a wait whose signal has come: sent while the attempt ran, it found no
// wait to wake.
func (c *engine) wakeIfWaitAnswered(ctx context.Context, job *errandtype.Job) {
	if c.caps.steps == nil {
		return
	}
	ctx = context.WithoutCancel(ctx)
	recorded, err := c.caps.steps.JobSteps(ctx, &errandstore.JobStepsParams{ID: job.ID})
	if err != nil || len(recorded) == 0 || recorded[len(recorded)-1].Name != errandstore.WaitStepName {
		return
	}
	var w waitResult
	if json.Unmarshal(recorded[len(recorded)-1].Result, &w) != nil {
		return
	}
	c.wakeIfSignalCame(ctx, job, w.Signal, (&steps{recorded: recorded}).signalsTaken(len(recorded), w.Signal))
}
